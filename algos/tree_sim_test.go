package algos_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/algos/sim"
)

// Tree all-reduce is checked like the ring (ring_sim_test.go): every rank's
// schedule, taken from the algorithm table, runs in the simulator with
// integer data, and every element of every buffer is compared with the
// all-reduce computed directly from the inputs. The checks share no
// arithmetic with the generator: not the halves, not the chunks, not the
// trees.

// treeReductions are NCCL's operations as exact integer arithmetic: sum,
// prod, min, max, avg (a sum and a divide after it), premulsum (a scale
// before it), and a Pre and an injective Post that expose an element whose
// Input is read other than once or whose result is post-op'd other than
// once.
var treeReductions = []reduction{
	{"sum", func(int) sim.Reduction { return sim.Reduction{Op: add} }},
	{"prod", func(int) sim.Reduction { return sim.Reduction{Op: func(a, b int64) int64 { return a * b }} }},
	{"min", func(int) sim.Reduction { return sim.Reduction{Op: func(a, b int64) int64 { return min(a, b) }} }},
	{"max", func(int) sim.Reduction { return sim.Reduction{Op: func(a, b int64) int64 { return max(a, b) }} }},
	{"avg", func(n int) sim.Reduction {
		return sim.Reduction{Op: add, Post: func(x int64) int64 { return x / int64(n) }}
	}},
	{"premulsum", func(int) sim.Reduction {
		return sim.Reduction{Op: add, Pre: func(r int, x int64) int64 { return x * int64(r%7+2) }}
	}},
	{"pre+2x+1", func(int) sim.Reduction {
		return sim.Reduction{Op: add, Pre: func(r int, x int64) int64 { return x*int64(r+2) + 1 }, Post: func(x int64) int64 { return 2*x + 1 }}
	}},
}

// treeIn is rank r's input element i: odd, so that products never vanish.
func treeIn(r int, i int64) int64 { return 2*(int64(r*37+int(i%1009)*11)%997) + 1 }

// treeCase is one simulated tree all-reduce.
type treeCase struct {
	topo                *algos.Topo
	count, chunk, align int64
	red                 reduction
	channels            int  // parts of the buffer, from offset 2, each on its own channel
	inPlace             bool // In and Out of a rank are one slice
	slots               int

	// For the checks' own tests: change the schedules or the row's peers.
	mutate func(rank int, s *algos.Schedule)
	peers  func(a *algos.Args) []algos.Link
}

func (c treeCase) String() string {
	place := "out of place"
	if c.inPlace {
		place = "in place"
	}
	return fmt.Sprintf("tree hosts=%dx%d n=%d count=%d chunk=%d align=%d %s channels=%d %s slots=%d",
		c.topo.NHosts(), c.topo.MaxPerHost(), c.topo.NRanks, c.count, c.chunk, c.align, c.red.name, c.channels, place, c.slots)
}

// parts cuts [2, 2+count) into c.channels parts; the buffers have one
// untouched element before and after.
func (c treeCase) parts() ([]algos.Part, int64) {
	var parts []algos.Part
	off := int64(2)
	for ch := range c.channels {
		n := c.count / int64(c.channels)
		if ch == c.channels-1 {
			n = c.count - (off - 2)
		}
		parts = append(parts, algos.Part{Offset: off, Count: n, Chunk: c.chunk, Align: c.align})
		off += n
	}
	return parts, c.count + 3
}

// runTree simulates the case and checks every element of every buffer, that
// Output is written once, and that every link a schedule uses is among the
// row's peers.
func runTree(c treeCase) (sim.Stats, error) {
	row := algos.Lookup(algos.Tree, algos.AllReduce)
	peers := row.Peers
	if c.peers != nil {
		peers = c.peers
	}
	n := c.topo.NRanks
	parts, size := c.parts()
	red := c.red.make(n)
	o := &oracle{n: n, red: red}
	ranks := make([]sim.Rank, n)
	for r := range ranks {
		in := make([]int64, size)
		for i := range in {
			in[i] = treeIn(r, int64(i))
		}
		o.in = append(o.in, slices.Clone(in))
		out := in
		if !c.inPlace {
			out = make([]int64, size)
			for i := range out {
				out[i] = sentinel(r, int64(i))
			}
		}
		ranks[r] = sim.Rank{In: in, Out: out}
		o.out = append(o.out, slices.Clone(out))
	}
	for e := int64(2); e < 2+c.count; e++ {
		want := o.reduced(e)
		for r := range n {
			o.out[r][e] = want
		}
	}

	var errs []error
	channels := make([][]algos.Schedule, len(parts))
	for ch, p := range parts {
		for r := range n {
			a := &algos.Args{Rank: r, Topo: c.topo, Count: c.count, Part: p, ElemSize: 8}
			s := row.Gen(a)
			if c.mutate != nil {
				c.mutate(r, &s)
			}
			errs = append(errs, linksAmong(ch, r, s, peers(a)))
			channels[ch] = append(channels[ch], s)
		}
	}
	stats, err := sim.RunSchedules(ranks, channels, red, c.slots)
	if err != nil {
		return stats, errors.Join(append(errs, err)...)
	}
	errs = append(errs, checkFinal(ranks[:n], o, c.inPlace, stats)...)
	errs = append(errs, withinSlots(stats, c.slots))
	return stats, errors.Join(errs...)
}

// linksAmong checks that every link rank's schedule s on channel ch uses
// is among allowed (its row's peers).
func linksAmong(ch, rank int, s algos.Schedule, allowed []algos.Link) error {
	var errs []error
	for _, l := range s.Links() {
		if !slices.Contains(allowed, l) {
			errs = append(errs, fmt.Errorf("channel %d rank %d uses link %v, not among its peers %v", ch, rank, l, allowed))
		}
	}
	return errors.Join(errs...)
}

// onceWithinSlots checks that a run wrote every output element at most
// once and never queued more than slots messages on a link.
func onceWithinSlots(stats sim.Stats, slots int) error {
	var errs []error
	if stats.Rewrites != 0 {
		errs = append(errs, fmt.Errorf("%d output elements written more than once", stats.Rewrites))
	}
	return errors.Join(append(errs, withinSlots(stats, slots))...)
}

// withinSlots checks that a run never queued more than slots messages on
// a link.
func withinSlots(stats sim.Stats, slots int) error {
	var errs []error
	for l, tr := range stats.Links {
		if tr.MaxDepth > slots {
			errs = append(errs, fmt.Errorf("link %+v: depth %d, want at most %d", l, tr.MaxDepth, slots))
		}
	}
	return errors.Join(errs...)
}

// checkFinal compares every rank's Out (and In, out of place) with the
// oracle's, and checks that no output element was written twice.
func checkFinal(ranks []sim.Rank, o *oracle, inPlace bool, stats sim.Stats) []error {
	var errs []error
	for r := range ranks {
		errs = append(errs, diffBuf(r, "Out", ranks[r].Out, o.out[r]))
		if !inPlace {
			errs = append(errs, diffBuf(r, "In", ranks[r].In, o.in[r]))
		}
	}
	if stats.Rewrites != 0 {
		errs = append(errs, fmt.Errorf("%d output elements written more than once", stats.Rewrites))
	}
	return errs
}

// treeCases rotates reductions, chunks (1, 3, 16), Align (1, 4), channels
// (1..3), in place and FIFO slots (1, 8) over counts that are empty, odd,
// smaller than the ranks, and several chunks per rank. With all set, every
// count meets every chunk; otherwise seed picks one chunk per count.
func treeCases(topo *algos.Topo, seed int, all bool) []treeCase {
	n := int64(topo.NRanks)
	var cases []treeCase
	for i, count := range []int64{0, 1, 2*n + 1, 97} {
		for j, chunk := range []int64{1, 3, 16} {
			if !all && (seed+i)%3 != j {
				continue
			}
			k := seed + 3*i + j
			cases = append(cases, treeCase{
				topo: topo, count: count, chunk: chunk, align: []int64{1, 4}[k%2],
				red: treeReductions[k%len(treeReductions)], channels: 1 + k%3,
				inPlace: k%4 == 1, slots: []int{8, 1}[(k/2)%2],
			})
		}
	}
	return cases
}

func runTreeCases(t *testing.T, cases []treeCase) {
	t.Helper()
	runAll(t, cases, func(c treeCase) error { _, err := runTree(c); return err })
}

// runAll runs every case, reporting each failure with the case, and stops
// after 10 failures.
func runAll[C fmt.Stringer](t *testing.T, cases []C, run func(C) error) {
	t.Helper()
	failed := 0
	for _, c := range cases {
		if err := run(c); err != nil {
			t.Errorf("%v:\n%v", c, err)
			if failed++; failed == 10 {
				t.Fatal("too many failures")
			}
		}
	}
}

// TestTreeAllReduceOneRankPerHost: n = 1..64, every reduction.
func TestTreeAllReduceOneRankPerHost(t *testing.T) {
	var cases []treeCase
	for n := 1; n <= 64; n++ {
		cases = append(cases, treeCases(algos.FlatTopo(n), n, false)...)
	}
	runTreeCases(t, cases)
	t.Logf("%d runs", len(cases))
}

// TestTreeAllReduceHosts: chains inside hosts, every reduction on every
// shape, and a topology whose hosts interleave their ranks.
func TestTreeAllReduceHosts(t *testing.T) {
	topos := []*algos.Topo{
		algos.BlockTopo(2, 2), algos.BlockTopo(3, 4), algos.BlockTopo(4, 3), algos.BlockTopo(8, 8), algos.BlockTopo(5, 1),
		algos.NewTopo([]int{0, 1, 2, 0, 1, 2, 0}),
	}
	var cases []treeCase
	for i, topo := range topos {
		cases = append(cases, treeCases(topo, i, true)...)
		for k, red := range treeReductions {
			cases = append(cases, treeCase{topo: topo, count: 61, chunk: 4, align: 4, red: red, channels: 2, inPlace: k%2 == 0, slots: 2})
		}
	}
	runTreeCases(t, cases)
	t.Logf("%d runs", len(cases))
}

// TestTreeAllReduceAtScale spot-checks large trees with small counts.
func TestTreeAllReduceAtScale(t *testing.T) {
	cases := []treeCase{
		{topo: algos.FlatTopo(128), count: 131, chunk: 3, align: 4, red: treeReductions[6], channels: 2, slots: 1},
		{topo: algos.FlatTopo(256), count: 37, chunk: 1, align: 1, red: treeReductions[4], channels: 1, inPlace: true, slots: 8},
		{topo: algos.BlockTopo(32, 8), count: 50, chunk: 16, align: 4, red: treeReductions[1], channels: 1, slots: 2},
	}
	if !testing.Short() {
		cases = append(cases, treeCase{topo: algos.FlatTopo(1024), count: 37, chunk: 4, align: 4, red: treeReductions[5], channels: 1, slots: 8})
	}
	runTreeCases(t, cases)
}

// TestTreeChecksCatch: the data, rewrite and peer checks fail for
// schedules that break what they check.
func TestTreeChecksCatch(t *testing.T) {
	base := treeCase{topo: algos.BlockTopo(3, 2), count: 20, chunk: 3, align: 1, red: treeReductions[6], channels: 1, slots: 8}
	row := algos.Lookup(algos.Tree, algos.AllReduce)
	for _, tc := range []struct {
		name   string
		mutate func(rank int, s *algos.Schedule)
		peers  func(a *algos.Args) []algos.Link
	}{
		{"postOp below the root too", func(_ int, s *algos.Schedule) {
			for _, l := range s.Lanes {
				for i := range l.Ops {
					if l.Ops[i].Dst == algos.Output {
						l.Ops[i].PostOp = true
					}
				}
			}
		}, nil},
		{"up lanes write partial results", func(_ int, s *algos.Schedule) {
			for _, l := range s.Lanes {
				for i := range l.Ops {
					if op := &l.Ops[i]; op.Reduce && op.Dst == algos.None {
						op.Dst, op.DstOff = algos.Output, op.SrcOff
					}
				}
			}
		}, nil},
		{"a peer missing", nil, func(a *algos.Args) []algos.Link {
			p := row.Peers(a)
			if a.Rank == 4 {
				p = p[1:]
			}
			return p
		}},
	} {
		c := base
		c.mutate, c.peers = tc.mutate, tc.peers
		if _, err := runTree(c); err == nil {
			t.Errorf("%s: no error", tc.name)
		} else {
			t.Logf("%s: %.200v", tc.name, err)
		}
	}
	if _, err := runTree(base); err != nil {
		t.Errorf("unchanged: %v", err)
	}
}

// treeEdges are tree tr's links as (child, parent) pairs.
func treeEdges(topo *algos.Topo, tr int) [][2]int {
	var edges [][2]int
	for r := range topo.NRanks {
		if up := algos.DoubleTree(topo, r)[tr].Up; up != algos.NoPeer {
			edges = append(edges, [2]int{r, up})
		}
	}
	return edges
}

// checkEdgeCounts checks that on one channel every edge of tree tr carried
// exactly chunks[tr] messages each way on connection index tr, and that no
// other link carried anything: the root sends nothing up and leaves send
// nothing down.
func checkEdgeCounts(topo *algos.Topo, stats sim.Stats, chunks [2]int64) error {
	var errs []error
	want := map[sim.Link]int64{}
	for tr := range 2 {
		if chunks[tr] == 0 {
			continue
		}
		for _, e := range treeEdges(topo, tr) {
			want[sim.Link{Src: e[0], Dst: e[1], Conn: uint8(tr)}] = chunks[tr]
			want[sim.Link{Src: e[1], Dst: e[0], Conn: uint8(tr)}] = chunks[tr]
		}
	}
	for l, w := range want {
		if got := stats.Links[l].Messages; got != w {
			errs = append(errs, fmt.Errorf("%d -> %d conn %d: %d messages, want %d", l.Src, l.Dst, l.Conn, got, w))
		}
	}
	for l, tr := range stats.Links {
		if _, ok := want[l]; !ok {
			errs = append(errs, fmt.Errorf("%d -> %d conn %d: %d messages on a link of no tree", l.Src, l.Dst, l.Conn, tr.Messages))
		}
	}
	return errors.Join(errs...)
}

// TestTreeStepCounts: L chunks are L messages per tree edge and direction.
func TestTreeStepCounts(t *testing.T) {
	topos := []*algos.Topo{algos.BlockTopo(2, 2), algos.BlockTopo(3, 4), algos.BlockTopo(8, 8), algos.BlockTopo(5, 1)}
	for n := 2; n <= 20; n++ {
		topos = append(topos, algos.FlatTopo(n))
	}
	for _, topo := range topos {
		// Halves of 5·3 = 15 and 4·3 + 1 = 13 elements: 5 chunks each.
		for _, count := range []int64{30, 28} {
			c := treeCase{topo: topo, count: count, chunk: 3, align: 1, red: treeReductions[0], channels: 1, slots: 2}
			stats, err := runTree(c)
			if err != nil {
				t.Fatalf("%v: %v", c, err)
			}
			if err := checkEdgeCounts(topo, stats, [2]int64{5, 5}); err != nil {
				t.Errorf("%v:\n%v", c, err)
			}
		}
	}
	// Align 4 puts 8 of 9 elements on tree 0: 3 chunks and 1.
	c := treeCase{topo: algos.FlatTopo(6), count: 9, chunk: 3, align: 4, red: treeReductions[0], channels: 1, slots: 2}
	stats, err := runTree(c)
	if err == nil {
		err = checkEdgeCounts(c.topo, stats, [2]int64{3, 1})
	}
	if err != nil {
		t.Errorf("%v:\n%v", c, err)
	}
	// The check fails for the counts of other trees.
	if err := checkEdgeCounts(algos.BlockTopo(3, 2), stats, [2]int64{3, 1}); err == nil {
		t.Error("the counts of 6 ranks on one host each pass as those of 3 hosts of 2")
	}
}

// simRounds runs an all-reduce of count elements (two halves, one per
// tree) in chunks of chunk on one channel with 8 FIFO slots, the
// schedules optionally rewritten by reshape, and returns the rounds.
func simRounds(t *testing.T, topo *algos.Topo, count, chunk int64, reshape func(r int, s algos.Schedule) algos.Schedule) int {
	t.Helper()
	n := topo.NRanks
	ranks := make([]sim.Rank, n)
	scheds := make([]algos.Schedule, n)
	for r := range n {
		ranks[r] = sim.Rank{In: make([]int64, count), Out: make([]int64, count)}
		for i := range count {
			ranks[r].In[i] = treeIn(r, i)
		}
		scheds[r] = algos.TreeAllReduce(r, topo, algos.Part{Count: count, Chunk: chunk})
		if reshape != nil {
			scheds[r] = reshape(r, scheds[r])
		}
	}
	stats, err := sim.RunSchedules(ranks, [][]algos.Schedule{scheds}, sim.Reduction{Op: add}, 8)
	if err != nil {
		t.Fatalf("hosts %dx%d: %v", topo.NHosts(), topo.MaxPerHost(), err)
	}
	for i := range count {
		var want int64
		for r := range n {
			want += treeIn(r, i)
		}
		for r := range n {
			if got := ranks[r].Out[i]; got != want {
				t.Fatalf("hosts %dx%d: rank %d Out[%d] = %d, want %d", topo.NHosts(), topo.MaxPerHost(), r, i, got, want)
			}
		}
	}
	return stats.Rounds
}

// depthOf is the deeper of the two trees, measured by a walk over the links.
func depthOf(t *testing.T, topo *algos.Topo) int {
	t.Helper()
	shapes, err := doubleTree(topo, 2)
	if err != nil {
		t.Fatal(err)
	}
	return max(shapes[0].depth, shapes[1].depth)
}

// TestTreeLatency: one chunk per tree climbs depth links and comes back
// down: at most 2·depth + 2 rounds.
func TestTreeLatency(t *testing.T) {
	topos := []*algos.Topo{algos.BlockTopo(2, 2), algos.BlockTopo(3, 4), algos.BlockTopo(4, 3), algos.BlockTopo(8, 8), algos.BlockTopo(5, 1), algos.FlatTopo(256)}
	for n := 2; n <= 64; n++ {
		topos = append(topos, algos.FlatTopo(n))
	}
	for _, topo := range topos {
		depth := depthOf(t, topo)
		rounds := simRounds(t, topo, 2, 1, nil)
		if rounds > 2*depth+2 {
			t.Errorf("hosts %dx%d n=%d depth %d: %d rounds, want at most %d", topo.NHosts(), topo.MaxPerHost(), topo.NRanks, depth, rounds, 2*depth+2)
		}
		if topo.NRanks == 64 || topo.NRanks == 256 || topo.MaxPerHost() == 8 {
			t.Logf("hosts %dx%d depth %d: %d rounds (bound %d)", topo.NHosts(), topo.MaxPerHost(), depth, rounds, 2*depth+2)
		}
	}
}

// TestTreePipelining: with 64 chunks per tree and depth 6 (64 ranks), the
// split up and down lanes overlap the chunks: fewer than 1.5·64 rounds.
// The same Ops as one lane per rank and tree, all of the way up before any
// of the way down (NCCL's runTreeUpDown), take about twice as long and
// fail the bound.
func TestTreePipelining(t *testing.T) {
	const L = 64
	topo := algos.FlatTopo(64)
	if d := depthOf(t, topo); d != 6 {
		t.Fatalf("depth %d, want 6", d)
	}
	bound := 3 * L / 2
	split := simRounds(t, topo, 2*L, 1, nil)
	upDown := simRounds(t, topo, 2*L, 1, func(r int, s algos.Schedule) algos.Schedule {
		return upThenDown(algos.DoubleTree(topo, r), s)
	})
	t.Logf("L=%d depth 6: split lanes %d rounds, up-then-down %d rounds (bound < %d)", L, split, upDown, bound)
	if split >= bound {
		t.Errorf("split lanes: %d rounds, want fewer than %d", split, bound)
	}
	if upDown < bound {
		t.Errorf("up-then-down: %d rounds, want at least %d: the bound cannot tell it from the split lanes", upDown, bound)
	}
}

// upThenDown rewrites a tree schedule into NCCL's runTreeUpDown shape: one
// lane per tree, every chunk up before any chunk down. A non-root's up and
// down lanes are concatenated; the root's combined Op becomes a
// recvReduceCopy per chunk followed by a send of the result per chunk.
func upThenDown(nodes [2]algos.TreeNode, s algos.Schedule) algos.Schedule {
	var out algos.Schedule
	lanes := s.Lanes
	for _, nd := range nodes {
		if nd.Up != algos.NoPeer {
			out.Lanes = append(out.Lanes, algos.Lane{Ops: slices.Concat(lanes[0].Ops, lanes[1].Ops)})
			lanes = lanes[2:]
			continue
		}
		var up, down []algos.Op
		var upFan, downFan *algos.Fan
		if len(nd.Down) > 1 {
			upFan, downFan = &algos.Fan{Recv: nd.Down[1:]}, &algos.Fan{Send: nd.Down[1:]}
		}
		for _, op := range lanes[0].Ops {
			u := op
			u.SendTo, u.Fan = algos.NoPeer, upFan
			up = append(up, u)
			down = append(down, algos.Op{RecvFrom: algos.NoPeer, SendTo: op.SendTo, Fan: downFan, Conn: op.Conn,
				Src: algos.Output, SrcOff: op.DstOff, Count: op.Count})
		}
		out.Lanes = append(out.Lanes, algos.Lane{Ops: slices.Concat(up, down)})
		lanes = lanes[1:]
	}
	return out
}
