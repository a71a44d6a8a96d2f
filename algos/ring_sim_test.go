package algos_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/algos/sim"
)

// The ring generators are checked by running every rank's schedule in the
// simulator with integer data and comparing every element of every Output
// with the collective's definition, computed directly: no schedule arithmetic
// is shared between the check and the generators.

// collective describes one ring collective to the checker.
type collective struct {
	name      string
	reduces   bool
	rooted    bool
	inBlocks  func(n int) int // Input holds inBlocks blocks, Output outBlocks
	outBlocks func(n int) int
	gen       func(rank, n, root int, block int64, p algos.Part) []algos.Op
	steps     func(rank, n, root int, p algos.Part) algos.Steps
	hops      func(n int) int64 // links each element of the part crosses, all ranks together
	want      func(c *oracle, e int64)
}

func one(int) int   { return 1 }
func all(n int) int { return n }

var collectives = []*collective{
	{
		name: "allreduce", reduces: true, inBlocks: one, outBlocks: one,
		gen:   func(r, n, _ int, _ int64, p algos.Part) []algos.Op { return algos.RingAllReduce(r, n, p) },
		steps: func(r, n, _ int, p algos.Part) algos.Steps { return algos.RingAllReduceSteps(r, n, p) },
		hops:  func(n int) int64 { return 2 * int64(n-1) },
		want: func(c *oracle, e int64) {
			for r := range c.n {
				c.out[r][e] = c.reduced(e)
			}
		},
	},
	{
		name: "reducescatter", reduces: true, inBlocks: all, outBlocks: one,
		gen:   func(r, n, _ int, b int64, p algos.Part) []algos.Op { return algos.RingReduceScatter(r, n, b, p) },
		steps: func(r, n, _ int, p algos.Part) algos.Steps { return algos.RingReduceScatterSteps(r, n, p) },
		hops:  func(n int) int64 { return int64(n * (n - 1)) },
		want: func(c *oracle, e int64) {
			for r := range c.n {
				c.out[r][e] = c.reduced(int64(r)*c.block + e)
			}
		},
	},
	{
		name: "allgather", inBlocks: one, outBlocks: all,
		gen:   func(r, n, _ int, b int64, p algos.Part) []algos.Op { return algos.RingAllGather(r, n, b, p) },
		steps: func(r, n, _ int, p algos.Part) algos.Steps { return algos.RingAllGatherSteps(r, n, p) },
		hops:  func(n int) int64 { return int64(n * (n - 1)) },
		want: func(c *oracle, e int64) {
			for r := range c.n {
				for b := range c.n {
					c.out[r][int64(b)*c.block+e] = c.in[b][e]
				}
			}
		},
	},
	{
		name: "broadcast", rooted: true, inBlocks: one, outBlocks: one,
		gen:   func(r, n, root int, _ int64, p algos.Part) []algos.Op { return algos.RingBroadcast(r, n, root, p) },
		steps: func(r, n, root int, p algos.Part) algos.Steps { return algos.RingBroadcastSteps(r, n, root, p) },
		hops:  func(n int) int64 { return int64(n - 1) },
		want: func(c *oracle, e int64) {
			for r := range c.n {
				c.out[r][e] = c.in[c.root][e]
			}
		},
	},
	{
		name: "reduce", reduces: true, rooted: true, inBlocks: one, outBlocks: one,
		gen:   func(r, n, root int, _ int64, p algos.Part) []algos.Op { return algos.RingReduce(r, n, root, p) },
		steps: func(r, n, root int, p algos.Part) algos.Steps { return algos.RingReduceSteps(r, n, root, p) },
		hops:  func(n int) int64 { return int64(n - 1) },
		want: func(c *oracle, e int64) {
			c.out[c.root][e] = c.reduced(e)
		},
	},
}

// reduction is a named sim.Reduction for nranks n.
type reduction struct {
	name string
	make func(n int) sim.Reduction
}

var (
	add = func(a, b int64) int64 { return a + b }
	// copyOnly is the arithmetic of the collectives that do not reduce.
	copyOnly = reduction{"copy", func(int) sim.Reduction { return sim.Reduction{} }}
	// reductions: plain sum and max; NCCL's premulsum with a divide after
	// it; and a Pre and an injective Post that expose any element whose
	// Input is read other than once or whose result is post-op'd other than
	// once (a divide alone could round a doubled Pre away).
	reductions = []reduction{
		{"sum", func(int) sim.Reduction { return sim.Reduction{Op: add} }},
		{"max", func(int) sim.Reduction { return sim.Reduction{Op: func(a, b int64) int64 { return max(a, b) }} }},
		{"premulsum/3", func(int) sim.Reduction {
			return sim.Reduction{Op: add, Pre: func(r int, x int64) int64 { return x * int64(r+2) }, Post: func(x int64) int64 { return x / 3 }}
		}},
		{"pre+2x+1", func(int) sim.Reduction {
			return sim.Reduction{Op: add, Pre: func(r int, x int64) int64 { return x*int64(r+2) + 1 }, Post: func(x int64) int64 { return 2*x + 1 }}
		}},
	}
)

// ringCase is one simulated run of a ring collective.
type ringCase struct {
	coll                *collective
	n, root             int
	count, chunk, align int64
	red                 reduction
	split               bool // two channels split the buffer; else one channel at offset 2, with untouched margins
	slots               int
}

func (c ringCase) String() string {
	layout := "offset 2"
	if c.split {
		layout = "2 channels"
	}
	return fmt.Sprintf("%s n=%d root=%d count=%d chunk=%d align=%d %s %s slots=%d",
		c.coll.name, c.n, c.root, c.count, c.chunk, c.align, c.red.name, layout, c.slots)
}

// parts returns the channel parts of the case and the size of a block (or
// of the whole buffer, for collectives without blocks).
func (c ringCase) parts() ([]algos.Part, int64) {
	p := algos.Part{Chunk: c.chunk, Align: c.align}
	if !c.split {
		p.Offset, p.Count = 2, c.count
		return []algos.Part{p}, c.count + 3
	}
	lo, hi := p, p
	lo.Count = c.count / 2
	hi.Offset, hi.Count = lo.Count, c.count-lo.Count
	return []algos.Part{lo, hi}, c.count
}

// oracle holds the inputs and computes the expected outputs from the
// collective's definition.
type oracle struct {
	n, root int
	block   int64
	red     sim.Reduction
	in, out [][]int64
}

// reduced is Post(Pre(0, in_0[i]) ⊕ ... ⊕ Pre(n-1, in_{n-1}[i])).
func (c *oracle) reduced(i int64) int64 {
	pre := func(r int) int64 {
		if c.red.Pre == nil {
			return c.in[r][i]
		}
		return c.red.Pre(r, c.in[r][i])
	}
	acc := pre(0)
	for r := 1; r < c.n; r++ {
		acc = c.red.Op(acc, pre(r))
	}
	if c.red.Post != nil {
		acc = c.red.Post(acc)
	}
	return acc
}

func inValue(r int, i int64) int64  { return int64(r*37+int(i%1009)*11)%997 + 1 }
func sentinel(r int, i int64) int64 { return -1_000_000*int64(r+1) - i }

// runRing simulates the case and checks every element of every buffer, the
// per-peer message counts against the generator's Steps, and the traffic.
func runRing(c ringCase) error {
	parts, block := c.parts()
	red := c.red.make(c.n)
	ranks := make([]sim.Rank, c.n)
	o := &oracle{n: c.n, root: c.root, block: block, red: red}
	for r := range ranks {
		in := make([]int64, int64(c.coll.inBlocks(c.n))*block)
		out := make([]int64, int64(c.coll.outBlocks(c.n))*block)
		for i := range in {
			in[i] = inValue(r, int64(i))
		}
		for i := range out {
			out[i] = sentinel(r, int64(i))
		}
		ranks[r] = sim.Rank{In: in, Out: out}
		o.in = append(o.in, slices.Clone(in))
		o.out = append(o.out, slices.Clone(out))
	}
	for _, p := range parts {
		for e := p.Offset; e < p.Offset+p.Count; e++ {
			c.coll.want(o, e)
		}
	}

	channels := make([][][]algos.Op, len(parts))
	var want []algos.Steps
	for ch, p := range parts {
		for r := range c.n {
			channels[ch] = append(channels[ch], c.coll.gen(r, c.n, c.root, block, p))
			want = append(want, c.coll.steps(r, c.n, c.root, p))
		}
	}
	stats, err := sim.RunChannels(ranks, channels, red, c.slots)
	if err != nil {
		return err
	}

	var errs []error
	for r := range c.n {
		errs = append(errs, diffBuf(r, "Out", ranks[r].Out, o.out[r]))
		errs = append(errs, diffBuf(r, "In", ranks[r].In, o.in[r]))
	}
	var elements int64
	for l, tr := range stats.Links {
		if l.Dst != algos.RingNext(l.Src, c.n) {
			errs = append(errs, fmt.Errorf("link %+v carried %d messages: not a ring link", l, tr.Messages))
		}
		if tr.MaxDepth > c.slots {
			errs = append(errs, fmt.Errorf("link %+v: max depth %d, want at most %d", l, tr.MaxDepth, c.slots))
		}
		elements += tr.Elements
		w := want[l.Channel*c.n+l.Src].Send
		if got := want[l.Channel*c.n+l.Dst].Recv; got != w {
			errs = append(errs, fmt.Errorf("link %+v: Steps say rank %d sends %d, rank %d receives %d", l, l.Src, w, l.Dst, got))
		}
		if tr.Messages != w {
			errs = append(errs, fmt.Errorf("link %+v: %d messages, Steps say %d", l, tr.Messages, w))
		}
	}
	for i, s := range want {
		l := sim.Link{Channel: i / c.n, Src: i % c.n, Dst: algos.RingNext(i%c.n, c.n)}
		if _, ok := stats.Links[l]; !ok && s.Send != 0 {
			errs = append(errs, fmt.Errorf("link %+v: no messages, Steps say %d", l, s.Send))
		}
	}
	if w := c.coll.hops(c.n) * c.count; elements != w {
		errs = append(errs, fmt.Errorf("%d elements crossed links, want %d", elements, w))
	}
	return errors.Join(errs...)
}

// diffBuf reports the first few elements where rank's buffer got differs
// from want.
func diffBuf(rank int, name string, got, want []int64) error {
	var bad []string
	for i := range want {
		if got[i] != want[i] {
			bad = append(bad, fmt.Sprintf("[%d] = %d, want %d", i, got[i], want[i]))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("rank %d %s: %d elements wrong: %s", rank, name, len(bad), strings.Join(bad[:min(len(bad), 4)], "; "))
}

// ringCases enumerates the matrix: every collective, nranks 1..maxN, counts
// {0, 1, n-1, n, 97, chunk*n+1, chunk-1}, chunks {1, 2, 3, 16}, Align
// {1, 4} where it matters (all-reduce), every root. Collectives that reduce
// run every reduction, half of them in each layout (one channel at offset 2,
// two channels); all-gather runs both layouts; rooted collectives rotate
// reduction and layout with the root. FIFO slots alternate between 1 and 8.
func ringCases(maxN int) []ringCase {
	var cases []ringCase
	for _, coll := range collectives {
		for n := 1; n <= maxN; n++ {
			for _, chunk := range []int64{1, 2, 3, 16} {
				counts := []int64{0, 1, int64(n - 1), int64(n), 97, chunk*int64(n) + 1, chunk - 1}
				slices.Sort(counts)
				for _, count := range slices.Compact(counts) {
					aligns := []int64{1}
					if coll.name == "allreduce" {
						aligns = []int64{1, 4}
					}
					for _, align := range aligns {
						cases = append(cases, variants(coll, n, count, chunk, align)...)
					}
				}
			}
		}
	}
	for i := range cases {
		cases[i].slots = []int{1, 8}[i%2]
	}
	return cases
}

func variants(coll *collective, n int, count, chunk, align int64) []ringCase {
	reds := []reduction{copyOnly}
	if coll.reduces {
		reds = reductions
	}
	base := ringCase{coll: coll, n: n, count: count, chunk: chunk, align: align}
	var cases []ringCase
	if coll.rooted {
		for root := range n {
			c := base
			c.root, c.red, c.split = root, reds[root%len(reds)], (root/len(reds))%2 == 1
			cases = append(cases, c)
		}
		return cases
	}
	for i, red := range reds {
		for _, split := range []bool{false, true} {
			if len(reds) > 1 && split != (i%2 == 1) {
				continue
			}
			c := base
			c.red, c.split = red, split
			cases = append(cases, c)
		}
	}
	return cases
}

func TestRingCollectives(t *testing.T) {
	cases := ringCases(16)
	failed := 0
	for _, c := range cases {
		if err := runRing(c); err != nil {
			t.Errorf("%v:\n%v", c, err)
			if failed++; failed == 10 {
				t.Fatal("too many failures")
			}
		}
	}
	t.Logf("%d runs", len(cases))
}

// TestRingAllReduceAtScale spot-checks large rings with small counts.
func TestRingAllReduceAtScale(t *testing.T) {
	allreduce := collectives[0]
	for _, c := range []ringCase{
		{coll: allreduce, n: 64, count: 64*2 + 1, chunk: 2, align: 4, red: reductions[3], slots: 1},
		{coll: allreduce, n: 256, count: 97, chunk: 1, align: 1, red: reductions[2], split: true, slots: 8},
		{coll: allreduce, n: 1024, count: 37, chunk: 4, align: 4, red: reductions[0], slots: 2},
	} {
		if err := runRing(c); err != nil {
			t.Errorf("%v:\n%v", c, err)
		}
	}
}

// TestRingStepFormulas checks the simulator's message counts against the
// textbook: with whole loops, ring all-reduce sends 2(n-1) messages per loop
// from every rank to its next, reduce-scatter and all-gather n-1 per chunk,
// and the broadcast and reduce chains one per chunk from every rank but the
// end of the chain.
func TestRingStepFormulas(t *testing.T) {
	const chunk, nloops = 3, 4
	for n := 2; n <= 9; n++ {
		for _, coll := range collectives {
			count := int64(nloops * chunk)
			if coll.name == "allreduce" {
				count *= int64(n)
			}
			root := n / 2
			part := algos.Part{Count: count, Chunk: chunk}
			ranks := make([]sim.Rank, n)
			scheds := make([][]algos.Op, n)
			for r := range n {
				size := int64(n) * count
				ranks[r] = sim.Rank{In: make([]int64, size), Out: make([]int64, size)}
				scheds[r] = coll.gen(r, n, root, count, part)
			}
			stats, err := sim.Run(ranks, scheds, sim.Reduction{Op: add}, 8)
			if err != nil {
				t.Fatalf("%s n=%d: %v", coll.name, n, err)
			}
			for r := range n {
				next := algos.RingNext(r, n)
				var want int64
				switch {
				case coll.name == "allreduce":
					want = 2 * int64(n-1) * nloops
				case !coll.rooted:
					want = int64(n-1) * nloops
				case coll.name == "broadcast" && next == root, coll.name == "reduce" && r == root:
					want = 0
				default:
					want = nloops
				}
				if got := stats.Between(r, next).Messages; got != want {
					t.Errorf("%s n=%d root=%d: rank %d sent %d messages to %d, want %d", coll.name, n, root, r, got, next, want)
				}
			}
		}
	}
}

// FuzzRingCollectives runs random cases of the same check, with any Align
// and any FIFO depth.
func FuzzRingCollectives(f *testing.F) {
	f.Add(uint8(0), uint8(4), uint16(97), uint8(3), uint8(4), uint8(0), uint8(1), false, uint8(3))
	f.Add(uint8(1), uint8(7), uint16(15), uint8(2), uint8(0), uint8(0), uint8(8), true, uint8(2))
	f.Add(uint8(4), uint8(5), uint16(11), uint8(1), uint8(1), uint8(3), uint8(2), true, uint8(1))
	f.Fuzz(func(t *testing.T, coll, n uint8, count uint16, chunk, align, root, slots uint8, split bool, red uint8) {
		c := ringCase{
			coll:  collectives[int(coll)%len(collectives)],
			n:     1 + int(n)%12,
			count: int64(count % 400),
			chunk: 1 + int64(chunk%24),
			align: int64(align % 9),
			split: split,
			slots: 1 + int(slots%8),
			red:   copyOnly,
		}
		c.root = int(root) % c.n
		if c.coll.reduces {
			c.red = reductions[int(red)%len(reductions)]
		}
		if err := runRing(c); err != nil {
			t.Errorf("%v:\n%v", c, err)
		}
	})
}
