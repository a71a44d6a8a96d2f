package comm

import (
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
)

// TestPollingLanes: the lanes that may poll shared memory, for the
// algorithms of issue 13 beside the ring and PAT, on one host of 2 ranks
// (every peer and multicast region local but the CollNet server, peer 2),
// with slices of 1024 elements.
func TestPollingLanes(t *testing.T) {
	one := algos.NewTopo([]string{"a", "a"})
	local := func(peer int) bool { return peer != algos.CollNetPeer(2) }
	slices := func(op *algos.Op) int { return int((op.Count + 1023) / 1024) }
	p := algos.Part{Count: 1 << 12, Chunk: 1 << 10, Align: 4}
	big := algos.Part{Count: 1 << 14, Chunk: 1 << 10, Align: 4} // 16 slices per lane: senders wait for credit
	small := algos.Part{Count: 2, Chunk: 1 << 10, Align: 4}     // 8 B of float: head 0's piece only
	for _, c := range []struct {
		name string
		s    algos.Schedule
		want int
	}{
		{"ring all-reduce", algos.Single(algos.RingAllReduce(0, 2, p)), 1},
		{"pat reduce-scatter", algos.Schedule{Slots: algos.PatReduceScatter(0, 2, p.Count, p)}, 1},
		{"nvls reduce-scatter", algos.NvlsReduceScatter(0, one, p.Count, p), 1},                // load-reduce
		{"nvls reduce-scatter, 16 slices", algos.NvlsReduceScatter(0, one, big.Count, big), 2}, // and scatter
		{"nvls all-gather, 16 slices", algos.NvlsAllGather(0, one, big.Count, big), 2},         // multicast store, gather
		{"collnet all-reduce, rank 0", algos.CollNetAllReduce(0, one, 2, p), 2},                // reduce, gather
		{"collnet all-reduce of 8 B, rank 0", algos.CollNetAllReduce(0, one, 2, small), 1},     // reduce
		{"collnet all-reduce of 8 B, rank 1", algos.CollNetAllReduce(1, one, 2, small), 1},     // gather
		{"empty", algos.Schedule{}, 0},
	} {
		if got := pollingLanes(c.s, local, slices); got != c.want {
			t.Errorf("%s: %d polling lanes, want %d", c.name, got, c.want)
		}
	}
}

// TestYieldWaits: CollNet Direct's and NVLS's waits yield when their
// polling lanes on the host outnumber the cores; the ring's keep polling.
func TestYieldWaits(t *testing.T) {
	collnet := &algos.Algorithm{Algo: algos.CollNetDirect}
	nvls := &algos.Algorithm{Algo: algos.NVLS}
	ring := &algos.Algorithm{Algo: algos.Ring}
	c := &Comm{localIndex: map[int]int{0: 0, 1: 1}}
	for _, tc := range []struct {
		name  string
		ks    []*coll
		cores int
		want  bool
	}{
		{"collnet, 2 polling lanes", []*coll{{algo: collnet, plan: &plan{polls: 2}}}, 2, true},
		{"collnet, 1 polling lane", []*coll{{algo: collnet, plan: &plan{polls: 1}}}, 2, false},
		{"collnet, 8 cores", []*coll{{algo: collnet, plan: &plan{polls: 2}}}, 8, false},
		{"nvls, 2 polling lanes", []*coll{{algo: nvls, plan: &plan{polls: 2}}}, 2, true},
		{"nvls, 1 polling lane", []*coll{{algo: nvls, plan: &plan{polls: 1}}}, 2, false},
		{"ring, 2 polling lanes", []*coll{{algo: ring, plan: &plan{polls: 2}}}, 2, false},
		{"group with collnet", []*coll{{algo: ring, plan: &plan{polls: 1}}, {algo: collnet, plan: &plan{polls: 2}}}, 2, true},
	} {
		c.cores = tc.cores
		if got := c.yieldWaits(tc.ks); got != tc.want {
			t.Errorf("%s, %d cores: yield %v, want %v", tc.name, tc.cores, got, tc.want)
		}
	}
}
