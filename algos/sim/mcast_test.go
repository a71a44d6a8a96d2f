package sim_test

import (
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/algos/sim"
)

// TestMcastOneWriteManyReaders: rank 0 stores once into its multicast
// region and ranks 1 and 2 each read it; the store waits for a free slot
// at every reader.
func TestMcastOneWriteManyReaders(t *testing.T) {
	const n = 3
	none := algos.NoPeer
	store := algos.Op{RecvFrom: none, SendTo: algos.McastPeer(n, 0), Src: algos.Input, Count: 2}
	read := algos.Op{RecvFrom: algos.McastPeer(n, 0), SendTo: none, Dst: algos.Output, Count: 2}
	ranks := newRanks(n, 2)
	stats, err := sim.Run(ranks, [][]algos.Op{{store, store}, {read, read}, {read, read}}, sim.Reduction{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if stats.McastWrites != 2 {
		t.Errorf("multicast writes: got %d, want 2", stats.McastWrites)
	}
	for _, r := range []int{1, 2} {
		if tr := stats.Links[sim.Link{Src: 0, Dst: r, Conn: sim.ConnMcast}]; tr.Messages != 2 || tr.MaxDepth != 1 {
			t.Errorf("link 0 -> %d: %+v, want 2 messages, depth 1", r, tr)
		}
		if !slicesEqual(ranks[r].Out, ranks[0].In) {
			t.Errorf("rank %d Out = %v, want %v", r, ranks[r].Out, ranks[0].In)
		}
	}
}

// TestScatterGather: a scatter sends each peer its own range; a gather
// writes each message to its own range.
func TestScatterGather(t *testing.T) {
	none := algos.NoPeer
	scatter := algos.Op{RecvFrom: none, SendTo: 1, Fan: &algos.Fan{Send: []int{2}, SendOff: []int64{2, 4}}, Src: algos.Input, Count: 2}
	gather := func(from int) algos.Op {
		return algos.Op{RecvFrom: 0, SendTo: none, Fan: &algos.Fan{RecvOff: []int64{2 * int64(from)}}, Dst: algos.Output, Count: 2}
	}
	ranks := newRanks(3, 6)
	if _, err := sim.Run(ranks, [][]algos.Op{{scatter}, {gather(1)}, {gather(2)}}, sim.Reduction{}, 1); err != nil {
		t.Fatal(err)
	}
	for r := 1; r <= 2; r++ {
		got, want := ranks[r].Out[2*r:2*r+2], ranks[0].In[2*r:2*r+2]
		if !slicesEqual(got, want) {
			t.Errorf("rank %d Out[%d:%d] = %v, want %v", r, 2*r, 2*r+2, got, want)
		}
	}
}

// TestMcastAndFanRules: what the simulator refuses of multicast, scatter
// and gather Ops.
func TestMcastAndFanRules(t *testing.T) {
	const n = 2
	none := algos.NoPeer
	for _, c := range []struct {
		name   string
		scheds [][]algos.Op
		want   string
	}{
		{"store into another's region", [][]algos.Op{{{RecvFrom: none, SendTo: algos.McastPeer(n, 1), Src: algos.Input, Count: 1}}, {}},
			"a rank stores only into its own"},
		{"read own region", [][]algos.Op{{{RecvFrom: algos.McastPeer(n, 0), SendTo: none, Dst: algos.Output, Count: 1}}, {}},
			"reads its own multicast region"},
		{"scatter offsets", [][]algos.Op{{{RecvFrom: none, SendTo: 1, Fan: &algos.Fan{SendOff: []int64{0, 1}}, Src: algos.Input, Count: 1}}, {}},
			"2 offsets for 1 peers"},
		{"scatter range", [][]algos.Op{{{RecvFrom: none, SendTo: 1, Fan: &algos.Fan{SendOff: []int64{4}}, Src: algos.Input, Count: 1}}, {}},
			"src in[4, 5): outside"},
		{"gather reads", [][]algos.Op{{}, {{RecvFrom: 0, SendTo: none, Fan: &algos.Fan{RecvOff: []int64{0}}, Src: algos.Input, Dst: algos.Output, Count: 1}}},
			"reading, reducing and sending nothing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := sim.Run(newRanks(n, 4), c.scheds, sim.Reduction{Op: add}, 1)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Run = %v, want an error containing %q", err, c.want)
			}
		})
	}
}
