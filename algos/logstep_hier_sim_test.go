package algos_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/algos/sim"
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

// TestHierRecDblStagedCollectives runs the staged form of HierRecDbl
// (HierRecDblUp, HierRecDblAcross, HierRecDblDown) with exact data on
// every layout of hierLayouts, as the runtime runs it: every host of
// several ranks through its one-shot slots (sim.RunFlat, slots of 1, 5
// and 64 elements so that calls run in one piece and in many), a host of
// one rank on the FIFO form's schedule, the leaders' exchanges in the
// FIFO simulator. Every reduction, in and out of place, counts that are
// empty, odd and several chunks.
func TestHierRecDblStagedCollectives(t *testing.T) {
	var cases []hierStagedCase
	for li, topo := range hierLayouts() {
		for i, count := range []int64{0, 1, 7, int64(topo.NRanks) + 2, 97} {
			for j, red := range treeReductions {
				k := li + i + j
				cases = append(cases, hierStagedCase{topo: topo, count: count, red: red,
					chunk: []int64{1, 3, 16}[k%3], slot: []int64{1, 5, 64}[(k/2)%3], inPlace: (k/3)%2 == 1, slots: []int{1, 8}[(k/5)%2]})
			}
		}
	}
	runAll(t, cases, runHierStaged)
	t.Logf("%d runs", len(cases))
}

// hierStagedCase is one simulated staged HierRecDbl all-reduce.
type hierStagedCase struct {
	topo         *algos.Topo
	count, chunk int64
	slot         int64 // staging slot, in elements
	red          reduction
	inPlace      bool
	slots        int // FIFO depth between the leaders
}

func (c hierStagedCase) String() string {
	return fmt.Sprintf("staged HierRecDbl hosts %v count=%d chunk=%d slot=%d %s in place %v slots=%d",
		c.topo.Hosts, c.count, c.chunk, c.slot, c.red.name, c.inPlace, c.slots)
}

// runHierStaged simulates the case and checks every element of every
// rank's buffers (a sentinel before and after the call's elements), and
// that every host synchronizes twice per piece.
func runHierStaged(c hierStagedCase) error {
	topo, n := c.topo, c.topo.NRanks
	red := c.red.make(n)
	const base = 2
	size := c.count + 3
	o := &oracle{n: n, red: red, block: size}
	ranks := make([]sim.Rank, n)
	for r := range ranks {
		out := make([]int64, size)
		for i := range out {
			out[i] = sentinel(r, int64(i))
		}
		in := make([]int64, size)
		if c.inPlace {
			in = out
		}
		for i := range in {
			in[i] = treeIn(r, int64(i))
		}
		ranks[r] = sim.Rank{In: in, Out: out}
		o.in = append(o.in, slices.Clone(in))
		o.out = append(o.out, slices.Clone(out))
	}
	for r := range n { // once every input is in
		for e := int64(base); e < base+c.count; e++ {
			o.out[r][e] = o.reduced(e)
		}
	}
	window := func(b []int64) []int64 { return b[base : base+c.count] }
	// flat runs one phase on every host of several ranks; plans gives a
	// local rank's plans, and in the buffer a rank reads.
	flat := func(phase string, plans func(local, nlocal int) []algos.FlatPlan, in func(r int) []int64) error {
		for h, locals := range topo.Hosts {
			if len(locals) == 1 {
				continue
			}
			hr := make([]sim.Rank, len(locals))
			ps := make([][]algos.FlatPlan, len(locals))
			for l, r := range locals {
				hr[l] = sim.Rank{In: window(in(r)), Out: window(ranks[r].Out)}
				ps[l] = plans(l, len(locals))
			}
			hred := red
			if red.Pre != nil {
				hred.Pre = func(l int, x int64) int64 { return red.Pre(locals[l], x) }
			}
			st, err := sim.RunFlat(hr, ps, hred, c.slot, false)
			if err != nil {
				return fmt.Errorf("host %d %s: %w", h, phase, err)
			}
			if pieces := (c.count + c.slot - 1) / c.slot; int64(st.Syncs) != pieces {
				return fmt.Errorf("host %d %s: %d synchronizations, want one per piece, %d", h, phase, st.Syncs, pieces)
			}
		}
		return nil
	}
	across := topo.NHosts() > 1
	if err := flat("up", func(l, nl int) []algos.FlatPlan { return algos.HierRecDblUp(l, nl, across, c.count, c.slot) },
		func(r int) []int64 { return ranks[r].In }); err != nil {
		return err
	}
	var scheds []algos.Schedule
	p := algos.Part{Offset: base, Count: c.count, Chunk: c.chunk, Align: 1}
	for r := range n {
		h, _ := topo.Host(r)
		var ops []algos.Op
		if len(topo.Hosts[h]) == 1 {
			ops = algos.HierRecDblAllReduce(r, topo, p) // no staging area: the FIFO form
		} else {
			ops = algos.HierRecDblAcross(r, topo, p)
		}
		scheds = append(scheds, algos.Single(ops))
	}
	stats, err := sim.RunSchedules(ranks, [][]algos.Schedule{scheds}, red, c.slots)
	if err != nil {
		return fmt.Errorf("across: %w", err)
	}
	if err := flat("down", func(l, nl int) []algos.FlatPlan { return algos.HierRecDblDown(l, nl, c.count, c.slot) },
		func(r int) []int64 { return ranks[r].Out }); err != nil {
		return err
	}
	var errs []error
	for r := range ranks {
		errs = append(errs, diffBuf(r, "Out", ranks[r].Out, o.out[r]))
		if !c.inPlace {
			errs = append(errs, diffBuf(r, "In", ranks[r].In, o.in[r]))
		}
	}
	errs = append(errs, withinSlots(stats, c.slots))
	return errors.Join(errs...)
}
