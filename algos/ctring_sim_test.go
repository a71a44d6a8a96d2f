package algos_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/algos/sim"
)

// CTRING all-reduce is checked like the ring: every rank's schedule runs in
// the simulator with integer data, and every element of every buffer is
// compared with the reduction computed directly from the inputs. The check
// shares no partition, shard or round arithmetic with the generator. The
// schedule needs one FIFO slot whatever the rounds of a shard
// (TestCTRingOneSlot); cases run with 1, 2 or 8.

// ctringReductions are every NCCL op in integer form: sum, prod, min, max;
// avg as a sum with a divide after it; premulsum as a per-rank scale before
// it; and the injective Pre and Post of the ring tests, which expose an
// Input read other than once or a result post-op'd other than once.
var ctringReductions = []reduction{
	reductions[0], // sum
	{"prod", func(int) sim.Reduction { return sim.Reduction{Op: func(a, b int64) int64 { return a * b }} }},
	{"min", func(int) sim.Reduction { return sim.Reduction{Op: func(a, b int64) int64 { return min(a, b) }} }},
	reductions[1], // max
	{"avg", func(n int) sim.Reduction {
		return sim.Reduction{Op: add, Post: func(x int64) int64 { return x / int64(n) }}
	}},
	{"premulsum", func(int) sim.Reduction {
		return sim.Reduction{Op: add, Pre: func(r int, x int64) int64 { return x * int64(r+2) }}
	}},
	reductions[3], // pre+2x+1
}

// ctringLayout is where the parts lie in the buffers.
type ctringLayout int

const (
	atOffset    ctringLayout = iota // one channel at offset 2, with untouched margins
	twoChannels                     // two channels split the buffer
	inPlace                         // one channel at offset 1; In and Out are one slice
)

func (l ctringLayout) String() string { return [...]string{"offset 2", "2 channels", "in place"}[l] }

// ctringCase is one simulated CTRING all-reduce.
type ctringCase struct {
	n      int
	count  int64
	cfg    algos.CTRingConfig
	red    reduction
	layout ctringLayout
	slots  int // FIFO slots (0: 1)
}

func (c ctringCase) String() string {
	return fmt.Sprintf("n=%d count=%d chunk=%d numChunks=%d minShard=%d bidir=%t %s %s slots=%d",
		c.n, c.count, c.cfg.ChunkElems, c.cfg.NumChunks, c.cfg.MinShardElems, c.cfg.Bidir, c.red.name, c.layout, c.slots)
}

// parts returns the channels' parts and the buffer size.
func (c ctringCase) parts() ([]algos.Part, int64) {
	switch c.layout {
	case twoChannels:
		lo := algos.Part{Count: c.count / 2}
		return []algos.Part{lo, {Offset: lo.Count, Count: c.count - lo.Count}}, c.count
	case inPlace:
		return []algos.Part{{Offset: 1, Count: c.count}}, c.count + 2
	}
	return []algos.Part{{Offset: 2, Count: c.count}}, c.count + 3
}

// runCTRing simulates the case and checks every buffer, that Output is
// written once, that every link is among the row's Peers, and the elements
// that crossed links: 2(n-1) hops per element, bidirectional or not.
func runCTRing(c ctringCase) (sim.Stats, error) {
	parts, size := c.parts()
	red := c.red.make(c.n)
	ranks := make([]sim.Rank, c.n)
	o := &oracle{n: c.n, red: red}
	for r := range ranks {
		in := make([]int64, size)
		for i := range in {
			in[i] = inValue(r, int64(i))
		}
		out := in
		if c.layout != inPlace {
			out = make([]int64, size)
			for i := range out {
				out[i] = sentinel(r, int64(i))
			}
		}
		ranks[r] = sim.Rank{In: in, Out: out}
		o.in = append(o.in, slices.Clone(in))
		o.out = append(o.out, slices.Clone(out))
	}
	for _, p := range parts {
		for e := p.Offset; e < p.Offset+p.Count; e++ {
			v := o.reduced(e)
			for r := range c.n {
				o.out[r][e] = v
			}
		}
	}

	channels := make([][]algos.Schedule, len(parts))
	for ch, p := range parts {
		for r := range c.n {
			channels[ch] = append(channels[ch], algos.CTRingAllReduce(r, c.n, p, c.cfg))
		}
	}
	stats, err := sim.RunSchedules(ranks, channels, red, max(c.slots, 1))
	if err != nil {
		return stats, err
	}

	var errs []error
	for r := range c.n {
		errs = append(errs, diffBuf(r, "Out", ranks[r].Out, o.out[r]))
		if c.layout != inPlace {
			errs = append(errs, diffBuf(r, "In", ranks[r].In, o.in[r]))
		}
	}
	if stats.Rewrites != 0 {
		errs = append(errs, fmt.Errorf("%d output elements written more than once", stats.Rewrites))
	}
	errs = append(errs, linksInPeers(c.n, stats))
	var elements int64
	for _, tr := range stats.Links {
		elements += tr.Elements
	}
	if w := 2 * int64(c.n-1) * c.count; elements != w {
		errs = append(errs, fmt.Errorf("%d elements crossed links, want %d", elements, w))
	}
	return stats, errors.Join(errs...)
}

// linksInPeers checks that every link that carried a message is among the
// CTRING row's Peers of both ends.
func linksInPeers(n int, stats sim.Stats) error {
	row := algos.Lookup(algos.CTRing, algos.AllReduce)
	topo := algos.FlatTopo(n)
	peers := func(r int) []algos.Link { return row.Peers(&algos.Args{Rank: r, Topo: topo}) }
	var errs []error
	for l := range stats.Links {
		if !slices.Contains(peers(l.Src), algos.Link{Peer: l.Dst, Conn: l.Conn, Send: true}) ||
			!slices.Contains(peers(l.Dst), algos.Link{Peer: l.Src, Conn: l.Conn}) {
			errs = append(errs, fmt.Errorf("link %+v is not among the Peers of its ends", l))
		}
	}
	return errors.Join(errs...)
}

// ctringConfigs are the shapes of the matrix: chunk, numChunks, minimum
// shard. Tiny chunks of 1 and 3 elements; with and without the tail rule.
var ctringConfigs = []algos.CTRingConfig{
	{ChunkElems: 1, NumChunks: 1, MinShardElems: 1},
	{ChunkElems: 1, NumChunks: 3, MinShardElems: 2},
	{ChunkElems: 3, NumChunks: 2, MinShardElems: 4},
	{ChunkElems: 2, NumChunks: 2, MinShardElems: 0},
	{ChunkElems: 16, NumChunks: 1, MinShardElems: 16},
}

// ctringCounts are the sizes that matter for a config on n ranks: around a
// shard and a partition, around the tail rule's boundaries (a remainder of
// a full partition plus less than, exactly, and more than the minimum
// partition), several partitions, and odd counts.
func ctringCounts(n int, cfg algos.CTRingConfig) []int64 {
	total := cfg.ChunkElems * cfg.NumChunks * int64(n)
	minPart := cfg.MinShardElems * int64(n)
	counts := []int64{1, int64(n) - 1, int64(n) + 1, 97, total - 1, total, total + 1,
		total + minPart - 1, total + minPart, total + minPart + 1, 2*total + minPart - 1, 3*total + 7}
	slices.Sort(counts)
	return slices.DeleteFunc(slices.Compact(counts), func(c int64) bool { return c < 1 })
}

// ctringCases is the matrix for n = 1..maxN: every config, count and
// direction for n <= 8, and beyond a rotating share of them that shrinks as
// the runs grow (1 in 12 up to 16 ranks, 1 in 36 up to 40, 1 in 72 beyond;
// every combination still runs for some n in each stretch of that length),
// plus count 0. Reductions, layouts and FIFO depth rotate with the case.
func ctringCases(maxN int) []ctringCase {
	var cases []ctringCase
	for n := 1; n <= maxN; n++ {
		stride := 1
		switch {
		case n > 40:
			stride = 72
		case n > 16:
			stride = 36
		case n > 8:
			stride = 12
		}
		cases = append(cases, ctringCase{n: n, cfg: ctringConfigs[n%len(ctringConfigs)]})
		i := 0
		for _, cfg := range ctringConfigs {
			for _, count := range ctringCounts(n, cfg) {
				for _, bidir := range []bool{false, true} {
					if i++; i%stride != n%stride {
						continue
					}
					cfg.Bidir = bidir
					cases = append(cases, ctringCase{n: n, count: count, cfg: cfg})
				}
			}
		}
	}
	for i := range cases {
		cases[i].red = ctringReductions[i%len(ctringReductions)]
		cases[i].layout = ctringLayout(i / len(ctringReductions) % 3)
		cases[i].slots = []int{1, 2, 8}[i%3]
	}
	return cases
}

func TestCTRingAllReduce(t *testing.T) {
	cases := ctringCases(64)
	failed := 0
	for _, c := range cases {
		if _, err := runCTRing(c); err != nil {
			t.Errorf("%v:\n%v", c, err)
			if failed++; failed == 10 {
				t.Fatal("too many failures")
			}
		}
	}
	t.Logf("%d runs", len(cases))
}

// TestCTRingAllReduceAtScale spot-checks large rings with small counts:
// several partitions and the tail rule at 128 ranks, a partition of 3
// elements (empty shards but the last) and a last one of single elements
// at 256, only the last shard holding elements at 512 and 1024. The last
// two skip under -short.
func TestCTRingAllReduceAtScale(t *testing.T) {
	one := algos.CTRingConfig{ChunkElems: 1, NumChunks: 1, MinShardElems: 1, Bidir: true}
	for _, c := range []ctringCase{
		{n: 128, count: 3*2*128 + 128 - 1, cfg: algos.CTRingConfig{ChunkElems: 2, NumChunks: 1, MinShardElems: 1, Bidir: true}, red: ctringReductions[6], layout: twoChannels},
		{n: 128, count: 2*128 + 5, cfg: algos.CTRingConfig{ChunkElems: 1, NumChunks: 2, MinShardElems: 2}, red: ctringReductions[4]},
		{n: 256, count: 256 + 3, cfg: one, red: ctringReductions[5], layout: inPlace},
		{n: 512, count: 97, cfg: one, red: ctringReductions[1]},
		{n: 1024, count: 37, cfg: algos.CTRingConfig{ChunkElems: 4, NumChunks: 1, MinShardElems: 1}, red: ctringReductions[6]},
	} {
		if testing.Short() && c.n > 256 {
			continue
		}
		if _, err := runCTRing(c); err != nil {
			t.Errorf("%v:\n%v", c, err)
		}
	}
}

// oneRoundPerShard is a part of n shards of 2 elements with rounds of 2 and
// room for the whole part in one partition.
func oneRoundPerShard(n int, bidir bool) (int64, algos.CTRingConfig) {
	return 2 * int64(n), algos.CTRingConfig{ChunkElems: 2, NumChunks: 1, MinShardElems: 1, Bidir: bidir}
}

// ctringRingSizes are the sizes of the step-count checks: 2..32 and 64.
var ctringRingSizes = append(seq(2, 32), 64)

func seq(lo, hi int) []int {
	var s []int
	for n := lo; n <= hi; n++ {
		s = append(s, n)
	}
	return s
}

// TestCTRingStepCounts checks the messages every rank sends each way with
// one round per shard and one partition: (n-1) + ceil((n-1)/2) to the right
// and floor((n-1)/2) to the left with the bidirectional all-gather, 2(n-1)
// and 0 without; and the design study's Appendix A table as written.
func TestCTRingStepCounts(t *testing.T) {
	appendixA := map[int][2]int64{2: {2, 0}, 3: {3, 1}, 4: {5, 1}, 5: {6, 2}, 8: {11, 3}, 16: {23, 7}}
	for _, n := range ctringRingSizes {
		for _, bidir := range []bool{false, true} {
			count, cfg := oneRoundPerShard(n, bidir)
			stats, err := runCTRing(ctringCase{n: n, count: count, cfg: cfg, red: ctringReductions[0]})
			if err != nil {
				t.Fatalf("n=%d bidir=%t: %v", n, bidir, err)
			}
			m := int64(n - 1)
			right, left := 2*m, int64(0)
			if bidir {
				right, left = m+(m+1)/2, m/2
			}
			if w, ok := appendixA[n]; ok && bidir && (w[0] != right || w[1] != left) {
				t.Errorf("n=%d: formulas give (%d, %d), Appendix A (%d, %d)", n, right, left, w[0], w[1])
			}
			for r := range n {
				next, prev := algos.RingNext(r, n), algos.RingPrev(r, n)
				if n == 2 { // one peer, both ways
					if got := stats.Between(r, next).Messages; got != right+left {
						t.Errorf("n=2 bidir=%t rank %d: %d messages, want %d", bidir, r, got, right+left)
					}
					continue
				}
				gotRight, gotLeft := stats.Between(r, next).Messages, stats.Between(r, prev).Messages
				if gotRight != right || gotLeft != left {
					t.Errorf("n=%d bidir=%t rank %d: messages (right, left) = (%d, %d), want (%d, %d)",
						n, bidir, r, gotRight, gotLeft, right, left)
				}
			}
		}
	}
}

// TestCTRingBidirIsFaster: with one round per shard the bidirectional
// all-gather finishes in fewer simulator rounds than the forward-only one
// from 4 ranks on; with 2 ranks the schedules are the same. The rounds for
// n = 2..8 are logged.
func TestCTRingBidirIsFaster(t *testing.T) {
	for _, slots := range []int{1, 8} {
		for _, n := range ctringRingSizes {
			var rounds [2]int
			for i, bidir := range []bool{false, true} {
				count, cfg := oneRoundPerShard(n, bidir)
				stats, err := runCTRing(ctringCase{n: n, count: count, cfg: cfg, red: ctringReductions[0], slots: slots})
				if err != nil {
					t.Fatalf("n=%d bidir=%t: %v", n, bidir, err)
				}
				rounds[i] = stats.Rounds
			}
			if n <= 8 {
				t.Logf("slots=%d n=%d: rounds %d forward only, %d bidirectional", slots, n, rounds[0], rounds[1])
			}
			switch {
			case n == 2 && rounds[1] != rounds[0]:
				t.Errorf("slots=%d n=2: %d rounds bidirectional, %d forward only: want the same", slots, rounds[1], rounds[0])
			case n >= 4 && rounds[1] >= rounds[0]:
				t.Errorf("slots=%d n=%d: %d rounds bidirectional, want fewer than %d forward only", slots, n, rounds[1], rounds[0])
			}
		}
	}
}

// TestCTRingOneSlot: with NumChunks rounds in every shard, the schedule
// still completes with FIFOs of one slot, because it takes the rounds
// round-major (round j of every step, then round j+1). Step-major order
// would make every rank send all NumChunks rounds of its first shard before
// receiving anything and deadlock with fewer than NumChunks slots; the
// test shows that by reordering the generated Ops step-major.
func TestCTRingOneSlot(t *testing.T) {
	for _, n := range []int{2, 3, 5, 8} {
		for _, bidir := range []bool{false, true} {
			cfg := algos.CTRingConfig{ChunkElems: 2, NumChunks: 3, MinShardElems: 1, Bidir: bidir}
			count := 2 * 3 * int64(n) * 2 // two full partitions, 3 rounds a shard
			c := ctringCase{n: n, count: count, cfg: cfg, red: ctringReductions[0], slots: 1}
			if _, err := runCTRing(c); err != nil {
				t.Errorf("%v: %v", c, err)
			}
		}
	}
	// The same schedule with lane 0's Ops reordered step-major (stable sort
	// of each partition's Ops by the shard they start... here simply: all
	// sends of the first step first) deadlocks with one slot.
	const n = 3
	cfg := algos.CTRingConfig{ChunkElems: 2, NumChunks: 3, MinShardElems: 1}
	count := int64(2 * 3 * n)
	scheds := make([]algos.Schedule, n)
	ranks := make([]sim.Rank, n)
	for r := range n {
		ranks[r] = sim.Rank{In: make([]int64, count), Out: make([]int64, count)}
		s := algos.CTRingAllReduce(r, n, algos.Part{Count: count}, cfg)
		ops := s.Lanes[0].Ops
		var sends, rest []algos.Op
		for _, o := range ops {
			if o.RecvFrom == algos.NoPeer {
				sends = append(sends, o)
			} else {
				rest = append(rest, o)
			}
		}
		s.Lanes[0].Ops = append(sends, rest...)
		scheds[r] = s
	}
	var dl *sim.DeadlockError
	if _, err := sim.RunSchedules(ranks, [][]algos.Schedule{scheds}, sim.Reduction{Op: add}, 1); !errors.As(err, &dl) {
		t.Errorf("step-major first step with one slot: err = %v, want a deadlock", err)
	}
}

// TestCTRingReleaseWaitMatters: without the reverse lane's Wait, lane 1
// sends the rank's shard from Output before the reduce-scatter has written
// it, and the data check fails.
func TestCTRingReleaseWaitMatters(t *testing.T) {
	const n = 4
	count, cfg := oneRoundPerShard(n, true)
	ranks := make([]sim.Rank, n)
	scheds := make([]algos.Schedule, n)
	for r := range n {
		ranks[r] = sim.Rank{In: make([]int64, count), Out: make([]int64, count)}
		for i := range ranks[r].In {
			ranks[r].In[i] = 1
		}
		scheds[r] = algos.CTRingAllReduce(r, n, algos.Part{Count: count}, cfg)
		if len(scheds[r].Lanes[1].Waits) != 1 {
			t.Fatalf("rank %d lane 1 waits = %v, want one", r, scheds[r].Lanes[1].Waits)
		}
		scheds[r].Lanes[1].Waits = nil
	}
	if _, err := sim.RunSchedules(ranks, [][]algos.Schedule{scheds}, sim.Reduction{Op: add}, 1); err != nil {
		t.Fatal(err)
	}
	stale := false
	for r := range n {
		stale = stale || slices.Contains(ranks[r].Out, 0)
	}
	if !stale {
		t.Error("without the wait every output is still right: the data check could not catch a missing release")
	}
}

// TestCTRingRowInSim runs the row's Gen the way the runtime would, with
// the default knobs and with knobs that force small rounds and no reverse
// lane, and checks the sum, that Output is written once (the row claims
// WritesOutputOnce) and that every link is among the row's Peers. The
// FIFOs hold one message: the engine's FIFO holds two rounds of a chunk,
// and an Op that receives and sends keeps one while it waits to send,
// where the simulator's Op has already freed it. The row's config must fit
// that; CTRAN's 8 or more rounds a shard would deadlock.
func TestCTRingRowInSim(t *testing.T) {
	row := algos.Lookup(algos.CTRing, algos.AllReduce)
	forward := algos.DefaultCTRingKnobs()
	forward.BidirAGMaxSize, forward.TmpbufChunkSize = 0, 8
	for _, knobs := range []*algos.CTRingKnobs{nil, &forward} {
		for _, n := range []int{1, 2, 3, 4, 7} {
			for _, count := range []int64{0, 1, 61, 1000, 5000} {
				if err := runRow(row, n, count, knobs); err != nil {
					t.Errorf("knobs %+v n=%d count=%d: %v", knobs, n, count, err)
				}
			}
		}
	}
}

// runRow runs the row's Gen for every rank on two channels of 4-byte
// elements with chunks of 64 and checks the result, and that the reverse
// lane is there exactly when the knobs allow it (at these sizes, unless
// BIDIR_AG_MAX_SIZE is 0) and the ring is large enough.
func runRow(row *algos.Algorithm, n int, count int64, knobs *algos.CTRingKnobs) error {
	topo := algos.FlatTopo(n)
	parts := []algos.Part{{Count: count / 2, Chunk: 64}, {Offset: count / 2, Count: count - count/2, Chunk: 64}}
	ranks := make([]sim.Rank, n)
	for r := range ranks {
		ranks[r] = sim.Rank{In: make([]int64, count), Out: make([]int64, count)}
		for i := range ranks[r].In {
			ranks[r].In[i] = inValue(r, int64(i))
		}
	}
	lanes := 1
	if n >= 3 && (knobs == nil || knobs.BidirAGMaxSize != 0) {
		lanes = 2
	}
	channels := make([][]algos.Schedule, len(parts))
	for ch, p := range parts {
		for r := range n {
			s := row.Gen(&algos.Args{Rank: r, Topo: topo, Count: count, Part: p, ElemSize: 4, CTRing: knobs})
			if len(s.Lanes) != lanes {
				return fmt.Errorf("rank %d: %d lanes, want %d", r, len(s.Lanes), lanes)
			}
			channels[ch] = append(channels[ch], s)
		}
	}
	stats, err := sim.RunSchedules(ranks, channels, sim.Reduction{Op: add}, 1)
	if err != nil {
		return err
	}
	for i := range count {
		var want int64
		for r := range n {
			want += inValue(r, i)
		}
		for r := range n {
			if got := ranks[r].Out[i]; got != want {
				return fmt.Errorf("rank %d Out[%d] = %d, want %d", r, i, got, want)
			}
		}
	}
	if stats.Rewrites != 0 {
		return fmt.Errorf("%d output elements written more than once", stats.Rewrites)
	}
	return linksInPeers(n, stats)
}
