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

// PAT is checked three ways. Step traces: the steps of one chunk, derived
// by hand from the algorithm's rules (seed 001, and NCCL's own trace for
// n = 4 in the design study, appendix A), for n = 4, 5 and 8, packed and
// not. Counts: posts per dimension and steps per chunk, which the design
// study measured with NCCL's generator. Data: every rank's program runs in
// the slot simulator with integer data, compared element by element with
// the collective's definition.

// patTraces are the steps at any rank for one chunk: "recv dD@P" reads
// piece position P of the oldest unreleased slot from dimension D (dD+A@P:
// A slots ahead), "in[k]" adds the input block of rank+k, "acc" adds to
// what the destination holds, "send dD@P" writes position P of the oldest
// unposted slot to dimension D, "out[k]" writes Output's block of rank+k,
// "post N" posts the oldest slot with N pieces, "release" frees the oldest
// received slot, "final" is the last write of Output (avg's divide).
var patTraces = []struct {
	geom algos.PatGeom
	rs   bool
	want []string
}{
	// Reduce-scatter, n = 4 packed: NCCL's trace. Two leaves share one dim-0
	// slot; the dim-0 piece for the rank itself is added last.
	{algos.PatGeom{N: 4, Agg: 2, Pack: 2}, true, []string{
		"in[3] send d0@0",
		"in[1] send d0@1 post 2",
		"recv d0@0 in[2] send d1@0 post 1",
		"recv d1@0 in[0] out[0] release",
		"recv d0@1 acc out[0] release final",
	}},
	{algos.PatGeom{N: 4, Agg: 2, Pack: 1}, true, []string{
		"in[3] send d0@0 post 1",
		"in[1] send d0@0 post 1",
		"recv d0@0 in[2] send d1@0 post 1 release",
		"recv d1@0 in[0] out[0] release",
		"recv d0@0 acc out[0] release final",
	}},
	// All-gather is reduce-scatter backwards: the own block goes out first,
	// the last dim-0 slot is read ahead of its release.
	{algos.PatGeom{N: 4, Agg: 2, Pack: 2}, false, []string{
		"in[0] send d0@1 out[0]",
		"in[0] send d1@0 post 1",
		"recv d1@0 send d0@0 out[2] post 2 release",
		"recv d0@1 out[1]",
		"recv d0@0 out[3] release",
	}},
	{algos.PatGeom{N: 4, Agg: 2, Pack: 1}, false, []string{
		"in[0] send d0@0 out[0] post 1",
		"in[0] send d1@0 post 1",
		"recv d1@0 send d0@0 out[2] post 1 release",
		"recv d0@0 out[1] release",
		"recv d0@0 out[3] release",
	}},
	// n = 5 (P = 8, Agg 2, D = 4): distances 5, 6 and 7 do not exist. Piece
	// 4 has no child, so its first step (s = 6) sends the input alone and the
	// second (s = 5) only posts: NCCL's 8 steps. Slot positions of absent
	// pieces stay empty (a dim-0 slot holds piece 3 at position 1).
	{algos.PatGeom{N: 5, Agg: 2, Pack: 2}, true, []string{
		"in[3] send d0@1 post 2",
		"recv d0@1 in[2] send d1@1 post 2 release",
		"in[4] send d2@0",
		"recv d1@1 in[0] out[0] release",
		"in[1] send d0@1 post 2",
		"send d2@0 post 1",
		"recv d2@0 acc out[0] release",
		"recv d0@1 acc out[0] release final",
	}},
	{algos.PatGeom{N: 5, Agg: 2, Pack: 1}, true, []string{
		"in[3] send d0@0 post 1",
		"recv d0@0 in[2] send d1@0 post 1 release",
		"in[4] send d2@0",
		"recv d1@0 in[0] out[0] release",
		"in[1] send d0@0 post 1",
		"send d2@0 post 1",
		"recv d2@0 acc out[0] release",
		"recv d0@0 acc out[0] release final",
	}},
	// Backwards, the post-only step is dropped and piece 4's only receive
	// copies it out: NCCL's 7 steps.
	{algos.PatGeom{N: 5, Agg: 2, Pack: 2}, false, []string{
		"in[0] send d0@1 out[0] post 2",
		"in[0] send d2@0 post 1",
		"recv d2@0 out[4] release",
		"recv d0@1 out[1] release",
		"in[0] send d1@1 post 2",
		"recv d1@1 send d0@1 out[2] post 2 release",
		"recv d0@1 out[3] release",
	}},
	{algos.PatGeom{N: 5, Agg: 2, Pack: 1}, false, []string{
		"in[0] send d0@0 out[0] post 1",
		"in[0] send d2@0 post 1",
		"recv d2@0 out[4] release",
		"recv d0@0 out[1] release",
		"in[0] send d1@0 post 1",
		"recv d1@0 send d0@0 out[2] post 1 release",
		"recv d0@0 out[3] release",
	}},
	// n = 8 packed: one message per dimension. The dim-0 group is 7, 3, 5,
	// 1 (bit-reversed), so that 7 and 3, bound for dim 1, come first.
	{algos.PatGeom{N: 8, Agg: 4, Pack: 4}, true, []string{
		"in[7] send d0@0",
		"in[3] send d0@1",
		"in[5] send d0@2",
		"in[1] send d0@3 post 4",
		"recv d0@0 in[6] send d1@0",
		"recv d0@1 in[2] send d1@1 post 2",
		"recv d1@0 in[4] send d2@0",
		"recv d1@1 in[0] out[0] release",
		"recv d0@2 acc send d2@0 post 1",
		"recv d2@0 acc out[0] release",
		"recv d0@3 acc out[0] release final",
	}},
	{algos.PatGeom{N: 8, Agg: 4, Pack: 1}, true, []string{
		"in[7] send d0@0 post 1",
		"in[3] send d0@0 post 1",
		"in[5] send d0@0 post 1",
		"in[1] send d0@0 post 1",
		"recv d0@0 in[6] send d1@0 post 1 release",
		"recv d0@0 in[2] send d1@0 post 1 release",
		"recv d1@0 in[4] send d2@0 release",
		"recv d1@0 in[0] out[0] release",
		"recv d0@0 acc send d2@0 post 1 release",
		"recv d2@0 acc out[0] release",
		"recv d0@0 acc out[0] release final",
	}},
	{algos.PatGeom{N: 8, Agg: 4, Pack: 4}, false, []string{
		"in[0] send d0@3 out[0]",
		"in[0] send d2@0 post 1",
		"recv d2@0 send d0@2 out[4]",
		"in[0] send d1@1",
		"recv d2@0 send d1@0 post 2 release",
		"recv d1@1 send d0@1 out[2]",
		"recv d1@0 send d0@0 out[6] post 4 release",
		"recv d0@3 out[1]",
		"recv d0@2 out[5]",
		"recv d0@1 out[3]",
		"recv d0@0 out[7] release",
	}},
	{algos.PatGeom{N: 8, Agg: 4, Pack: 1}, false, []string{
		"in[0] send d0@0 out[0] post 1",
		"in[0] send d2@0 post 1",
		"recv d2@0 send d0@0 out[4] post 1",
		"in[0] send d1@0 post 1",
		"recv d2@0 send d1@0 post 1 release",
		"recv d1@0 send d0@0 out[2] post 1 release",
		"recv d1@0 send d0@0 out[6] post 1 release",
		"recv d0@0 out[1] release",
		"recv d0@0 out[5] release",
		"recv d0@0 out[3] release",
		"recv d0@0 out[7] release",
	}},
}

func TestPatTraces(t *testing.T) {
	for _, c := range patTraces {
		var got []string
		for _, s := range algos.PatSteps(c.geom, c.rs) {
			got = append(got, s.String())
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%+v rs=%t:\ngot\n\t%s\nwant\n\t%s", c.geom, c.rs, strings.Join(got, "\n\t"), strings.Join(c.want, "\n\t"))
		}
	}
}

// TestPatGeometry: NCCL's constructor for the shapes the design study ran
// through NCCL's generator.
func TestPatGeometry(t *testing.T) {
	for _, c := range []struct {
		n           int
		chunk, part int64
		want        algos.PatGeom
	}{
		{4, 65536, 8, algos.PatGeom{N: 4, Agg: 2, Pack: 2}},
		{8, 65536, 8, algos.PatGeom{N: 8, Agg: 4, Pack: 4}},
		{5, 65536, 8, algos.PatGeom{N: 5, Agg: 2, Pack: 2}},
		{17, 65536, 8, algos.PatGeom{N: 17, Agg: 8, Pack: 8}},
		{100, 65536, 8, algos.PatGeom{N: 100, Agg: 64, Pack: 64}},
		{1024, 512, 8, algos.PatGeom{N: 1024, Agg: 512, Pack: 64}},
		{1024, 64, 640, algos.PatGeom{N: 1024, Agg: 8, Pack: 1}},
		{2, 65536, 8, algos.PatGeom{N: 2, Agg: 1, Pack: 1}},
		{3, 65536, 8, algos.PatGeom{N: 3, Agg: 1, Pack: 1}},
	} {
		if got := algos.PatGeometry(c.n, c.chunk, c.part); got != c.want {
			t.Errorf("PatGeometry(%d, chunk %d, part %d) = %+v, want %+v", c.n, c.chunk, c.part, got, c.want)
		}
	}
}

// patCounts runs one chunk of every rank in the simulator (sum) and
// returns rank 0's posts on each dimension, the steps of one chunk, and
// the simulator's stats.
func patCounts(t *testing.T, n int, rs bool, count, chunk, step int64) ([]int64, int, sim.Stats) {
	t.Helper()
	c := patCase{n: n, rs: rs, count: count, chunk: chunk, step: step, red: reductions[0]}
	stats, err := runPat(c)
	if err != nil {
		t.Fatalf("%v: %v", c, err)
	}
	var posts []int64
	for d := 0; 1<<d < n; d++ {
		to := (1 << d) % n
		if !rs {
			to = ((-(1 << d))%n + n) % n
		}
		posts = append(posts, stats.Links[sim.Link{Src: 0, Dst: to}].Messages)
	}
	return posts, len(algos.PatSteps(algos.PatGeometry(n, chunk, count), rs)), stats
}

// TestPatCounts: with full aggregation, one message per dimension for
// powers of two and n = 100; two on dimension 0 for n = 5 and 17, where
// aggregation stops at n/2; 8 4 2 1 ... when 64 pieces fill a slot; the
// ring's n-1 pieces per chunk without packing. Steps per chunk are NCCL's.
func TestPatCounts(t *testing.T) {
	ones := func(k int) []int64 { return slices.Repeat([]int64{1}, k) }
	for _, c := range []struct {
		n                  int
		count, chunk, step int64
		posts              []int64
		rsSteps, agSteps   int
	}{
		{8, 8, 65536, 65536, ones(3), 11, 11},
		{64, 8, 65536, 65536, ones(6), 95, 95},
		{100, 8, 65536, 65536, ones(7), 152, 149},
		{128, 8, 65536, 65536, ones(7), 191, 191},
		{5, 8, 65536, 65536, []int64{2, 1, 1}, 8, 7},
		{17, 8, 65536, 65536, []int64{2, 1, 1, 1, 1}, 28, 25},
		{4, 8, 65536, 65536, ones(2), 5, 5},
		{16, 8, 65536, 65536, ones(4), 23, 23},
	} {
		for _, rs := range []bool{true, false} {
			posts, steps, _ := patCounts(t, c.n, rs, c.count, c.chunk, c.step)
			want := c.agSteps
			if rs {
				want = c.rsSteps
			}
			if !slices.Equal(posts, c.posts) || steps != want {
				t.Errorf("n=%d rs=%t count=%d chunk=%d: posts per dimension %v, want %v; %d steps per chunk, want %d",
					c.n, rs, c.count, c.chunk, posts, c.posts, steps, want)
			}
		}
	}
	if !raceDetector {
		for _, rs := range []bool{true, false} {
			want := []int64{8, 4, 2, 1, 1, 1, 1, 1, 1, 1}
			if posts, steps, _ := patCounts(t, 1024, rs, 8, 512, 512); !slices.Equal(posts, want) || steps != 1535 {
				t.Errorf("n=1024 rs=%t count=8 chunk=512: posts per dimension %v, want %v; %d steps, want 1535", rs, posts, want, steps)
			}
		}
	}
	// Without packing: n/2, n/4, ..., 1 per chunk for powers of two (6 3 2
	// 1 for 13), and every rank sends n-1 pieces per chunk, the ring's
	// volume, to exactly ceil(log2 n) peers and from as many.
	for _, c := range []struct {
		n     int
		posts []int64
	}{{8, []int64{4, 2, 1}}, {16, []int64{8, 4, 2, 1}}, {13, []int64{6, 3, 2, 1}}, {5, []int64{2, 1, 1}}} {
		for _, rs := range []bool{true, false} {
			const count, chunk = 640, 64
			posts, _, stats := patCounts(t, c.n, rs, count, chunk, chunk)
			for i := range posts {
				posts[i] /= count / chunk
			}
			if !slices.Equal(posts, c.posts) {
				t.Errorf("n=%d rs=%t unpacked: posts per dimension per chunk %v, want %v", c.n, rs, posts, c.posts)
			}
			logn := 0
			for 1<<logn < c.n {
				logn++
			}
			for r := range c.n {
				var out, in int
				var elems int64
				for l, tr := range stats.Links {
					if l.Src == r {
						out++
						elems += tr.Elements
					}
					if l.Dst == r {
						in++
					}
				}
				if out != logn || in != logn || elems != int64(c.n-1)*count {
					t.Errorf("n=%d rs=%t rank %d: sends to %d peers, receives from %d (want %d each); sends %d elements, want %d",
						c.n, rs, r, out, in, logn, elems, int64(c.n-1)*count)
				}
			}
		}
	}
}

// patCase is one simulated PAT collective.
type patCase struct {
	n                  int
	rs                 bool
	count, chunk, step int64 // per-rank elements, chunk, slot size in elements
	red                reduction
	layout             ctringLayout // atOffset (offset 2), twoChannels or inPlace
}

func (c patCase) String() string {
	coll := "allgather"
	if c.rs {
		coll = "reducescatter"
	}
	return fmt.Sprintf("%s n=%d count=%d chunk=%d step=%d %s %s", coll, c.n, c.count, c.chunk, c.step, c.red.name, c.layout)
}

// runPat simulates the case and checks every buffer, that the links are
// the row's Peers, and (all-gather) that Output is written once.
func runPat(c patCase) (sim.Stats, error) {
	block := c.count + 3
	parts := []algos.Part{{Offset: 2, Count: c.count, Chunk: c.chunk}}
	switch c.layout {
	case twoChannels:
		block = c.count
		lo := algos.Part{Count: c.count / 2, Chunk: c.chunk}
		parts = []algos.Part{lo, {Offset: lo.Count, Count: c.count - lo.Count, Chunk: c.chunk}}
	case inPlace:
		block = c.count + 1
		parts = []algos.Part{{Offset: 1, Count: c.count, Chunk: c.chunk}}
	}
	red := c.red.make(c.n)
	o := &oracle{n: c.n, red: red}
	ranks := make([]sim.Rank, c.n)
	inBlocks, outBlocks := int64(c.n), int64(1)
	if !c.rs {
		inBlocks, outBlocks = 1, int64(c.n)
	}
	for r := range ranks {
		in := make([]int64, inBlocks*block)
		for i := range in {
			in[i] = inValue(r, int64(i))
		}
		out := make([]int64, outBlocks*block)
		for i := range out {
			out[i] = sentinel(r, int64(i))
		}
		if c.layout == inPlace { // NCCL: the rank's block of the bigger buffer
			if c.rs {
				out = in[int64(r)*block : int64(r+1)*block]
			} else {
				copy(out[int64(r)*block:], in)
				in = out[int64(r)*block : int64(r+1)*block]
			}
		}
		ranks[r] = sim.Rank{In: in, Out: out}
		o.in = append(o.in, slices.Clone(in))
		o.out = append(o.out, slices.Clone(out))
	}
	for _, p := range parts {
		for e := p.Offset; e < p.Offset+p.Count; e++ {
			for r := range c.n {
				if c.rs {
					o.out[r][e] = o.reduced(int64(r)*block + e)
				} else {
					for k := range c.n {
						o.out[r][int64(k)*block+e] = o.in[k][e]
					}
				}
			}
		}
	}
	channels := make([][]algos.Schedule, len(parts))
	row := algos.Lookup(algos.PAT, algos.AllGather)
	if c.rs {
		row = algos.Lookup(algos.PAT, algos.ReduceScatter)
	}
	topo := algos.FlatTopo(c.n)
	for ch, p := range parts {
		for r := range c.n {
			channels[ch] = append(channels[ch], row.Gen(&algos.Args{Rank: r, Topo: topo, Count: block, Part: p}))
		}
	}
	stats, err := sim.RunSlots(ranks, channels, red, c.step)
	if err != nil {
		return stats, err
	}
	var errs []error
	for r := range c.n {
		errs = append(errs, diffBuf(r, "Out", ranks[r].Out, o.out[r]))
		if c.layout != inPlace && c.rs {
			errs = append(errs, diffBuf(r, "In", ranks[r].In, o.in[r]))
		}
	}
	if row.WritesOutputOnce && stats.Rewrites != 0 {
		errs = append(errs, fmt.Errorf("%d output elements written more than once", stats.Rewrites))
	}
	peers := func(r int) []algos.Link { return row.Peers(&algos.Args{Rank: r, Topo: topo}) }
	for l := range stats.Links {
		if !slices.Contains(peers(l.Src), algos.Link{Peer: l.Dst, Send: true}) ||
			!slices.Contains(peers(l.Dst), algos.Link{Peer: l.Src}) {
			errs = append(errs, fmt.Errorf("link %+v is not among the Peers of its ends", l))
		}
	}
	return stats, errors.Join(errs...)
}

// patShapes are (count, chunk, slot) shapes: fully packed, several chunks
// of a small slot, chunk = slot, and few elements in a big slot.
var patShapes = [][3]int64{{8, 4096, 4096}, {37, 16, 64}, {100, 32, 32}, {5, 64, 64}}

// TestPatSim: every n from 2 to 64 with every shape, both directions, the
// strictest reduction (an injective Pre and Post: an Input element read
// twice or a result post-op'd twice shows) and parts at an offset; every op
// and layout for a few n; the big n of the acceptance with the shapes whose
// chunks pack and whose parts span several chunks.
func TestPatSim(t *testing.T) {
	strict := ctringReductions[6]
	var cases []patCase
	add := func(n int, shapes [][3]int64, reds []reduction, layouts []ctringLayout) {
		for _, sh := range shapes {
			for _, rs := range []bool{true, false} {
				rr := reds
				if !rs {
					rr = []reduction{copyOnly}
				}
				for _, red := range rr {
					for _, l := range layouts {
						cases = append(cases, patCase{n: n, rs: rs, count: sh[0], chunk: sh[1], step: sh[2], red: red, layout: l})
					}
				}
			}
		}
	}
	for n := 2; n <= 64; n++ {
		add(n, patShapes, []reduction{strict}, []ctringLayout{twoChannels})
	}
	for _, n := range []int{2, 3, 4, 5, 7, 8, 13, 16} {
		add(n, patShapes[1:2], ctringReductions, []ctringLayout{atOffset, twoChannels, inPlace})
		add(n, patShapes[3:], ctringReductions, []ctringLayout{inPlace})
	}
	for _, n := range []int{100, 127, 128} {
		add(n, patShapes[:2], []reduction{strict}, []ctringLayout{twoChannels})
	}
	if raceDetector {
		t.Log("n = 255, 256, 1000 and 1024 skip under the race detector; scripts/test.sh runs them without it")
	} else {
		for _, n := range []int{255, 256} {
			add(n, patShapes[:2], []reduction{strict}, []ctringLayout{twoChannels})
		}
		for _, n := range []int{1000, 1024} {
			add(n, patShapes[:1], []reduction{strict}, []ctringLayout{atOffset})
		}
	}
	failures := 0
	for _, c := range cases {
		if _, err := runPat(c); err != nil {
			t.Errorf("%v: %v", c, err)
			if failures++; failures == 10 {
				t.Fatal("stopping after 10 failures")
			}
		}
	}
}
