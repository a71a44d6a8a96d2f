package algos_test

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/algos/sim"
)

// The log-step rows (recursive doubling, Rabenseifner, Bruck) are checked
// as the ring and the tree are: every rank's schedule, taken from the
// table, runs in the simulator with exact integer data, and every element
// of every buffer is compared with the collective computed directly from
// the inputs. Besides: every link is among the row's peers, no FIFO holds
// more than its slots, all-gather writes each output element once, and
// the message hops on the critical path are the ones runtime/tune
// assumes (logStepHops, computed here from the textbook).

// logCase is one simulated log-step collective.
type logCase struct {
	algo                algos.Algo
	coll                algos.Coll
	n                   int
	count, chunk, align int64
	red                 reduction
	channels            int
	inPlace             bool
	slots               int
	topo                *algos.Topo // nil: every rank on its own host
}

func (c logCase) String() string {
	place := "out of place"
	if c.inPlace {
		place = "in place"
	}
	hosts := ""
	if c.topo != nil {
		for _, h := range c.topo.Hosts {
			hosts += fmt.Sprintf(" %d", len(h))
		}
		hosts = " hosts of" + hosts
	}
	return fmt.Sprintf("%s %s n=%d%s count=%d chunk=%d align=%d %s channels=%d %s slots=%d",
		c.algo, c.coll, c.n, hosts, c.count, c.chunk, c.align, c.red.name, c.channels, place, c.slots)
}

// parts cuts the count into channel parts; all-reduce's buffer has an
// untouched element before and after, all-gather's blocks are the count.
func (c logCase) parts() ([]algos.Part, int64) {
	base, size := int64(2), c.count+3
	if c.coll == algos.AllGather {
		base, size = 0, c.count
	}
	var parts []algos.Part
	off := base
	for ch := range c.channels {
		n := c.count / int64(c.channels)
		if ch == c.channels-1 {
			n = c.count - (off - base)
		}
		parts = append(parts, algos.Part{Offset: off, Count: n, Chunk: c.chunk, Align: c.align})
		off += n
	}
	return parts, size
}

// runLog simulates the case and checks it; it returns the schedules of
// channel 0 for the step checks.
func runLog(c logCase) ([]algos.Schedule, error) {
	row := algos.Lookup(c.algo, c.coll)
	if row == nil {
		return nil, fmt.Errorf("no row")
	}
	n := c.n
	parts, size := c.parts()
	red := c.red.make(n)
	o := &oracle{n: n, red: red, block: size}
	ranks := make([]sim.Rank, n)
	outSize := size
	if c.coll == algos.AllGather {
		outSize = int64(n) * size
	}
	for r := range ranks {
		out := make([]int64, outSize)
		for i := range out {
			out[i] = sentinel(r, int64(i))
		}
		in := make([]int64, size)
		if c.inPlace {
			in = out[:size]
			if c.coll == algos.AllGather {
				in = out[int64(r)*size : int64(r+1)*size]
			}
		}
		for i := range in {
			in[i] = treeIn(r, int64(i))
		}
		ranks[r] = sim.Rank{In: in, Out: out}
		o.in = append(o.in, slices.Clone(in))
		o.out = append(o.out, slices.Clone(out))
	}
	for _, p := range parts {
		for e := p.Offset; e < p.Offset+p.Count; e++ {
			for r := range n {
				if c.coll == algos.AllGather {
					for b := range n {
						o.out[r][int64(b)*size+e] = o.in[b][e]
					}
				} else {
					o.out[r][e] = o.reduced(e)
				}
			}
		}
	}
	var errs []error
	channels := make([][]algos.Schedule, len(parts))
	topo := c.topo
	if topo == nil {
		topo = algos.FlatTopo(n)
	}
	for ch, p := range parts {
		for r := range n {
			a := &algos.Args{Rank: r, Topo: topo, Count: size, Part: p, ElemSize: 8}
			s := row.Gen(a)
			errs = append(errs, linksAmong(ch, r, s, row.Peers(a)))
			channels[ch] = append(channels[ch], s)
		}
	}
	stats, err := sim.RunSchedules(ranks, channels, red, c.slots)
	if err != nil {
		return nil, errors.Join(append(errs, err)...)
	}
	for r := range ranks {
		errs = append(errs, diffBuf(r, "Out", ranks[r].Out, o.out[r]))
		if !c.inPlace {
			errs = append(errs, diffBuf(r, "In", ranks[r].In, o.in[r]))
		}
	}
	if row.WritesOutputOnce && stats.Rewrites != 0 {
		errs = append(errs, fmt.Errorf("%d output elements written more than once", stats.Rewrites))
	}
	errs = append(errs, withinSlots(stats, c.slots))
	return channels[0], errors.Join(errs...)
}

// logRows are the log-step rows.
var logRows = []struct {
	algo algos.Algo
	coll algos.Coll
}{{algos.RecDbl, algos.AllReduce}, {algos.Rabenseifner, algos.AllReduce}, {algos.RecDbl, algos.AllGather}}

// logCases rotates reductions, chunks (1, 3, 16), Align (1, 4), channels
// (1, 2), in place and slots (1, 8) over counts (one chunk of 3 or
// 16 each above 16 ranks) that are empty, odd, below
// and around the ranks and the power of two below them, and several
// chunks per rank.
func logCases(n int) []logCase {
	var cases []logCase
	pof2 := int64(algos.Pof2Below(n))
	for ri, rw := range logRows {
		counts := []int64{0, 1, pof2 - 1, pof2, int64(n) + 2, 2*int64(n) + 1, 97}
		slices.Sort(counts)
		for i, count := range slices.Compact(counts) {
			for j, chunk := range []int64{1, 3, 16} {
				if n > 16 && (chunk == 1 || (n+i)%2 != j%2) {
					continue // above 16 ranks, one chunk of 3 or 16 per count
				}
				k := n + ri + 3*i + j
				red := copyOnly
				if rw.coll == algos.AllReduce {
					red = treeReductions[k%len(treeReductions)]
				}
				cases = append(cases, logCase{algo: rw.algo, coll: rw.coll, n: n, count: count, chunk: chunk,
					align: []int64{1, 4}[k%2], red: red, channels: 1 + (k/2)%2, inPlace: (k/3)%2 == 1, slots: logSlots(rw.coll, k)})
			}
		}
	}
	return cases
}

// logSlots alternates FIFO depths: 1 and 8 messages, 2 and 8 for
// all-gather, whose Bruck steps may put two messages at once on a link.
func logSlots(coll algos.Coll, k int) int {
	if (k/5)%2 == 0 {
		return 8
	}
	if coll == algos.AllGather {
		return 2
	}
	return 1
}

// TestLogStepCollectives: n = 1..64, every row (with the race detector,
// which slows the simulator eightfold, n = 1..16 and the powers of two
// above with their neighbours; scripts/test.sh runs all without it).
func TestLogStepCollectives(t *testing.T) {
	var cases []logCase
	for n := 1; n <= 64; n++ {
		if raceDetector && n > 16 && !slices.Contains([]int{17, 31, 32, 33, 63, 64}, n) {
			continue
		}
		cases = append(cases, logCases(n)...)
	}
	runAll(t, cases, func(c logCase) error { _, err := runLog(c); return err })
	t.Logf("%d runs", len(cases))
}

// TestLogStepEveryReduction runs every reduction in and out of place on
// rank counts that fold (3, 5, 6, 7) and that do not (2, 4, 8).
func TestLogStepEveryReduction(t *testing.T) {
	var cases []logCase
	for _, n := range []int{2, 3, 4, 5, 6, 7, 8} {
		for _, algo := range []algos.Algo{algos.RecDbl, algos.Rabenseifner} {
			for _, red := range treeReductions {
				for _, inPlace := range []bool{false, true} {
					cases = append(cases, logCase{algo: algo, coll: algos.AllReduce, n: n, count: 41, chunk: 4, align: 4,
						red: red, channels: 1, inPlace: inPlace, slots: 1})
				}
			}
		}
	}
	runAll(t, cases, func(c logCase) error { _, err := runLog(c); return err })
}

// msgDepth is the longest chain of messages through the single-lane
// schedules of one channel: an Op's depth is the larger of its
// predecessor's and, for each message it receives, one more than the
// depth of the Op that sent it (the k-th message on a link is the k-th
// the sender sent on it).
func msgDepth(scheds []algos.Schedule) int {
	type link struct{ src, dst int }
	sent := map[link][]int{} // depths of the sends on a link, in order
	got := map[link]int{}
	pc := make([]int, len(scheds))
	depth := make([]int, len(scheds))
	deepest := 0
	for progress := true; progress; {
		progress = false
		for r, s := range scheds {
			for pc[r] < len(s.Lanes[0].Ops) {
				op := s.Lanes[0].Ops[pc[r]]
				d := depth[r]
				if op.RecvFrom != algos.NoPeer {
					l := link{op.RecvFrom, r}
					if got[l] >= len(sent[l]) {
						break
					}
					d = max(d, sent[l][got[l]]+1)
					got[l]++
				}
				if op.SendTo != algos.NoPeer {
					l := link{r, op.SendTo}
					sent[l] = append(sent[l], d)
				}
				depth[r], deepest = d, max(deepest, d)
				pc[r]++
				progress = true
			}
		}
	}
	return deepest
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestLogStepHops checks the critical path of one chunk against the
// formula the tuner uses, for n = 1..64, and that it beats the ring's.
func TestLogStepHops(t *testing.T) {
	for n := 1; n <= 64; n++ {
		for _, rw := range logRows {
			count := int64(algos.Pof2Below(n)) // enough for Rabenseifner to halve
			c := logCase{algo: rw.algo, coll: rw.coll, n: n, count: count, chunk: 1 << 20, align: 1,
				red: copyOnly, channels: 1, slots: 2}
			if rw.coll == algos.AllReduce {
				c.red = treeReductions[0]
			}
			scheds, err := runLog(c)
			if err != nil {
				t.Fatalf("%v: %v", c, err)
			}
			got, want := msgDepth(scheds), algos.LogStepHops(rw.algo, rw.coll, n)
			if got != want {
				t.Errorf("%v: %d hops on the critical path, want %d", c, got, want)
			}
			// The textbook's bounds: ceil(log2 n) for all-gather; log2 n
			// exchanges (twice for Rabenseifner) and at most the fold
			// and the unfold for all-reduce.
			lg, ceil := bits.Len(uint(n))-1, bits.Len(uint(n-1))
			lo, hi := ceil, ceil
			if rw.coll == algos.AllReduce {
				k := 1 + btoi(rw.algo == algos.Rabenseifner)
				lo, hi = k*lg+btoi(ceil != lg), k*lg+2*btoi(ceil != lg)
			}
			if want < lo || want > hi {
				t.Errorf("%v: LogStepHops %d, want within [%d, %d]", c, want, lo, hi)
			}
		}
	}
}

// TestLogStepBytes checks the elements each rank sends against the
// textbook: recursive doubling all-reduce the whole vector per exchange,
// Rabenseifner and all-gather the ring's (n-1)/n per half.
func TestLogStepBytes(t *testing.T) {
	for _, n := range []int{2, 4, 8, 16} {
		const count = 64
		for _, rw := range logRows {
			row := algos.Lookup(rw.algo, rw.coll)
			for r := range n {
				a := &algos.Args{Rank: r, Topo: algos.FlatTopo(n), Count: count, Part: algos.Part{Count: count, Chunk: 7}, ElemSize: 8}
				var sent int64
				for _, op := range row.Gen(a).Lanes[0].Ops {
					if op.SendTo != algos.NoPeer {
						sent += op.Count
					}
				}
				lg := int64(bits.Len(uint(n)) - 1)
				want := lg * count
				switch {
				case rw.algo == algos.Rabenseifner:
					want = 2 * count * int64(n-1) / int64(n)
				case rw.coll == algos.AllGather:
					want = count * int64(n-1)
				}
				if sent != want {
					t.Errorf("%s %s n=%d rank %d: sends %d elements, want %d", rw.algo, rw.coll, n, r, sent, want)
				}
			}
		}
	}
}

// TestHypercube checks the topology helpers for n = 1..64: vranks are a
// bijection onto 0..pof2-1, fold partners pair up, and every exchange
// partner's partner is the rank.
func TestHypercube(t *testing.T) {
	for n := 1; n <= 64; n++ {
		pof2 := algos.Pof2Below(n)
		if pof2 > n || 2*pof2 <= n || pof2&(pof2-1) != 0 {
			t.Fatalf("n=%d: Pof2Below %d", n, pof2)
		}
		seen := map[int]bool{}
		for r := range n {
			v := algos.CubeVRank(r, n)
			p := algos.FoldPartner(r, n)
			switch {
			case v == algos.NoPeer && (p == algos.NoPeer || algos.CubeVRank(p, n) == algos.NoPeer):
				t.Errorf("n=%d rank %d folds into %d, which is not in the cube", n, r, p)
			case p != algos.NoPeer && algos.FoldPartner(p, n) != r:
				t.Errorf("n=%d rank %d folds with %d, whose partner is %d", n, r, p, algos.FoldPartner(p, n))
			case v != algos.NoPeer && (v < 0 || v >= pof2 || seen[v] || algos.CubeRank(v, n) != r):
				t.Errorf("n=%d rank %d: vrank %d (seen %v, back to %d)", n, r, v, seen[v], algos.CubeRank(v, n))
			}
			if v != algos.NoPeer {
				seen[v] = true
			}
		}
		if len(seen) != pof2 {
			t.Errorf("n=%d: %d distinct vranks, want %d", n, len(seen), pof2)
		}
	}
}
