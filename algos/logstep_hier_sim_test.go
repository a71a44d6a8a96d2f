package algos_test

import (
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
)

// hierLayouts are host layouts for HierRecDbl: every count of hosts 1..6
// and 8 with 1..4 ranks each, and hosts of unequal sizes (the leader of
// each is its lowest rank, wherever the ranks are).
func hierLayouts() []*algos.Topo {
	var out []*algos.Topo
	for _, nh := range []int{1, 2, 3, 4, 5, 6, 8} {
		for ppn := 1; ppn <= 4; ppn++ {
			out = append(out, algos.BlockTopo(nh, ppn))
		}
	}
	for _, hostOf := range [][]int{
		{0, 0, 0, 1},          // 3 + 1
		{0, 1, 1, 1, 2},       // 1 + 3 + 1
		{0, 1, 0, 1, 2, 2, 2}, // interleaved: 2 + 2 + 3
		{5, 3, 5, 3, 5, 9},    // host names out of order
	} {
		out = append(out, algos.NewTopo(hostOf))
	}
	return out
}

// TestHierRecDblCollectives runs the hierarchical all-reduce with exact
// data on every layout of hierLayouts: every reduction, in and out of
// place, counts that are empty, odd and several chunks, one and two
// channels, FIFOs of 1 and 8 messages. runLog checks every element of
// every rank's buffers (so every rank holds the same result), that every
// link is among the row's peers, and the FIFO depth.
func TestHierRecDblCollectives(t *testing.T) {
	var cases []logCase
	for li, topo := range hierLayouts() {
		n := topo.NRanks
		for i, count := range []int64{0, 1, 7, int64(n) + 2, 97} {
			for j, red := range treeReductions {
				k := li + i + j
				cases = append(cases, logCase{algo: algos.HierRecDbl, coll: algos.AllReduce, n: n, count: count,
					chunk: []int64{1, 3, 16}[k%3], align: []int64{1, 4}[k%2], red: red, channels: 1 + (k/2)%2,
					inPlace: (k/3)%2 == 1, slots: []int{1, 8}[(k/5)%2], topo: topo})
			}
		}
	}
	runAll(t, cases, func(c logCase) error { _, err := runLog(c); return err })
	t.Logf("%d runs", len(cases))
}

// TestHierRecDblCrossesHostsOnlyBetweenLeaders: the links between hosts
// are the leaders' (the first rank of each host), and a rank that is not
// a leader talks to its leader only.
func TestHierRecDblCrossesHostsOnlyBetweenLeaders(t *testing.T) {
	row := algos.Lookup(algos.HierRecDbl, algos.AllReduce)
	for _, topo := range hierLayouts() {
		for r := range topo.NRanks {
			h, local := topo.Host(r)
			a := &algos.Args{Rank: r, Topo: topo, Count: 8, Part: algos.Part{Count: 8, Chunk: 4, Align: 1}, ElemSize: 4}
			for _, l := range row.Peers(a) {
				hp, lp := topo.Host(l.Peer)
				switch {
				case local != 0 && l.Peer != topo.Hosts[h][0]:
					t.Errorf("%v rank %d (host %d, not its leader) links to %d", topo.Hosts, r, h, l.Peer)
				case hp != h && (local != 0 || lp != 0):
					t.Errorf("%v rank %d links to rank %d on host %d, not between leaders", topo.Hosts, r, l.Peer, hp)
				}
			}
		}
	}
}
