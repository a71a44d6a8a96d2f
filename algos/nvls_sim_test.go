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

// NVLS is checked like the tree (tree_sim_test.go): every rank's schedule,
// from the algorithm table, runs in the simulator with integer data, and
// every element of every buffer is compared with the collective computed
// directly from the inputs, with no arithmetic shared with the generator.

// nvlsCase is one simulated NVLS collective.
type nvlsCase struct {
	algo     algos.Algo
	coll     algos.Coll
	topo     *algos.Topo
	count    int64 // of the buffer (all-reduce) or of one rank's block
	chunk    int64
	align    int64
	elemSize int // sets the all-reduce's last-loop alignment: 16384/elemSize elements
	red      reduction
	channels int
	inPlace  bool
	slots    int
	direct   bool // registered buffers (algos.Args.Direct)
	// inOrder runs every rank's lanes one after the other, lane 0 first,
	// as the engine runs a schedule marked InOrder (see serialized); a
	// schedule the engine would not run so fails the case.
	inOrder bool
}

func (c nvlsCase) String() string {
	place := "out of place"
	if c.inPlace {
		place = "in place"
	}
	return fmt.Sprintf("%s %s hosts=%dx%d count=%d chunk=%d align=%d esize=%d %s channels=%d %s slots=%d direct=%v inorder=%v",
		c.algo, c.coll, c.topo.NHosts(), c.topo.MaxPerHost(), c.count, c.chunk, c.align, c.elemSize, c.red.name, c.channels, place, c.slots, c.direct, c.inOrder)
}

// runNvls simulates c and checks every element of every buffer, that
// Output is written once, that FIFOs stay within their slots and that
// every link a schedule uses is among the row's peers.
func runNvls(c nvlsCase) (sim.Stats, error) {
	row := algos.Lookup(c.algo, c.coll)
	n := c.topo.NRanks
	red := c.red.make(n)
	if c.coll == algos.AllGather {
		red = sim.Reduction{}
	}
	inLen, outLen := c.count, c.count
	switch c.coll {
	case algos.ReduceScatter:
		inLen = int64(n) * c.count
	case algos.AllGather:
		outLen = int64(n) * c.count
	}
	ranks := make([]sim.Rank, n)
	ins := make([][]int64, n)
	for r := range n {
		in := make([]int64, inLen)
		for i := range in {
			in[i] = treeIn(r, int64(i))
		}
		ins[r] = slices.Clone(in)
		out := make([]int64, outLen)
		for i := range out {
			out[i] = sentinel(r, int64(i))
		}
		if c.inPlace {
			switch c.coll {
			case algos.ReduceScatter:
				out = in[int64(r)*c.count : int64(r+1)*c.count]
			case algos.AllGather:
				copy(out[int64(r)*c.count:], in)
				in = out[int64(r)*c.count : int64(r+1)*c.count]
			default:
				out = in
			}
		}
		ranks[r] = sim.Rank{In: in, Out: out}
	}
	o := &oracle{n: n, red: red, in: ins}

	var errs []error
	channels := make([][]algos.Schedule, c.channels)
	for ch := range c.channels {
		off, cnt := nvlsPart(c.count, c.channels, c.align, ch)
		p := algos.Part{Offset: off, Count: cnt, Chunk: c.chunk, Align: c.align}
		for r := range n {
			a := &algos.Args{Rank: r, Topo: c.topo, Count: c.count, Part: p, ElemSize: c.elemSize, Direct: c.direct}
			s := row.Gen(a)
			errs = append(errs, linksAmong(ch, r, s, row.Peers(a)))
			if c.inOrder {
				var err error
				if s, err = serialized(s, c.slots); err != nil {
					return sim.Stats{}, fmt.Errorf("channel %d rank %d: %w", ch, r, err)
				}
			}
			channels[ch] = append(channels[ch], s)
		}
	}
	stats, err := sim.RunSchedules(ranks, channels, red, c.slots)
	if err != nil {
		return stats, errors.Join(append(errs, err)...)
	}
	for r := range n {
		want := make([]int64, outLen)
		for e := range want {
			switch c.coll {
			case algos.ReduceScatter:
				want[e] = o.reduced(int64(r)*c.count + int64(e))
			case algos.AllGather:
				want[e] = ins[e/int(c.count)][int64(e)%c.count]
			default:
				want[e] = o.reduced(int64(e))
			}
		}
		errs = append(errs, diffBuf(r, "Out", ranks[r].Out, want))
		if !c.inPlace {
			errs = append(errs, diffBuf(r, "In", ranks[r].In, ins[r]))
		}
	}
	errs = append(errs, onceWithinSlots(stats, c.slots))
	return stats, errors.Join(errs...)
}

// nvlsPart is channel ch's share of count elements over nc channels, in
// multiples of align (as the runtime's partition).
func nvlsPart(count int64, nc int, align int64, ch int) (off, n int64) {
	per := (count + int64(nc) - 1) / int64(nc)
	per = (per + align - 1) / align * align
	off = min(per*int64(ch), count)
	return off, min(per, count-off)
}

// nvlsCases rotates reductions, chunks, alignment, element sizes,
// channels, in place and FIFO slots over counts that are empty, odd,
// smaller than the ranks and several loops long.
func nvlsCases(algo algos.Algo, coll algos.Coll, topo *algos.Topo, seed int) []nvlsCase {
	n := int64(topo.MaxPerHost())
	var cases []nvlsCase
	for i, count := range []int64{0, 1, 2*n + 1, 3*n*4 + 5} {
		k := seed + i
		cases = append(cases, nvlsCase{
			algo: algo, coll: coll, topo: topo, count: count, chunk: []int64{1, 3, 4, 16}[k%4],
			align: []int64{1, 4}[k%2], elemSize: []int{16384, 4096, 8}[k%3],
			red: treeReductions[k%len(treeReductions)], channels: 1 + k%2,
			inPlace: k%3 == 1, slots: []int{8, 1, 2}[k%3],
		})
	}
	return cases
}

func runNvlsCases(t *testing.T, cases []nvlsCase) {
	t.Helper()
	runAll(t, cases, func(c nvlsCase) error { _, err := runNvls(c); return err })
}

// TestNvlsSingleHost: reduce-scatter, all-reduce and all-gather at 1..64
// ranks of one host, exact.
func TestNvlsSingleHost(t *testing.T) {
	for _, coll := range []algos.Coll{algos.ReduceScatter, algos.AllReduce, algos.AllGather} {
		t.Run(coll.String(), func(t *testing.T) {
			var cases []nvlsCase
			for n := 1; n <= 64; n++ {
				if n > 16 && n%8 != 0 && n != 63 && n != 17 {
					continue // the sizes between behave as their neighbours; keep the run short
				}
				cases = append(cases, nvlsCases(algos.NVLS, coll, algos.BlockTopo(1, n), n)...)
			}
			runNvlsCases(t, cases)
		})
	}
}

// TestNvlsEveryRankCount: every n in 1..64 once, all-reduce with a short
// last loop, the case with the most shapes.
func TestNvlsEveryRankCount(t *testing.T) {
	if raceDetector {
		t.Skip("the simulator is single-threaded; scripts/test.sh runs this without the race detector")
	}
	var cases []nvlsCase
	for n := 1; n <= 64; n++ {
		for _, coll := range []algos.Coll{algos.ReduceScatter, algos.AllReduce, algos.AllGather} {
			cases = append(cases, nvlsCase{algo: algos.NVLS, coll: coll, topo: algos.BlockTopo(1, n), count: int64(5*n + 3),
				chunk: 2, align: 1, elemSize: 8192, red: treeReductions[n%len(treeReductions)], channels: 1, slots: 2})
		}
	}
	runNvlsCases(t, cases)
}

// TestNvlsTree: NVLS_TREE all-reduce for hosts x ranks up to 8 x 8.
func TestNvlsTree(t *testing.T) {
	var cases []nvlsCase
	for hosts := 1; hosts <= 8; hosts++ {
		for ppn := 1; ppn <= 8; ppn++ {
			cases = append(cases, nvlsCases(algos.NVLSTree, algos.AllReduce, algos.BlockTopo(hosts, ppn), hosts*8+ppn)...)
		}
	}
	runNvlsCases(t, cases)
}

// TestNvlsTreeSpot: 32 hosts x 32 ranks, one shape.
func TestNvlsTreeSpot(t *testing.T) {
	if testing.Short() || raceDetector {
		t.Skip("1024 ranks: without -short and the race detector")
	}
	runNvlsCases(t, []nvlsCase{{algo: algos.NVLSTree, coll: algos.AllReduce, topo: algos.BlockTopo(32, 32), count: 32*3 + 7,
		chunk: 2, align: 1, elemSize: 8192, red: treeReductions[5], channels: 1, slots: 2}})
}

// TestNvlsRoundsConstant: one chunk per head takes as many simulator
// rounds at 64 ranks as at 2 (the scatter, the load-reduce, the multicast
// store and the gather are one Op each), and so does a run of several
// loops; the ring's grow with the ranks.
func TestNvlsRoundsConstant(t *testing.T) {
	const chunk = 4
	for _, coll := range []algos.Coll{algos.ReduceScatter, algos.AllReduce} {
		for _, loops := range []int64{1, 5} {
			rounds := map[int]int{}
			for _, n := range []int{2, 64} {
				count := loops * chunk // of a block
				if coll == algos.AllReduce {
					count *= int64(n) // every head a full chunk per loop
				}
				stats, err := runNvls(nvlsCase{algo: algos.NVLS, coll: coll, topo: algos.BlockTopo(1, n), count: count,
					chunk: chunk, align: 1, elemSize: 1 << 20, red: treeReductions[0], channels: 1, slots: 8})
				if err != nil {
					t.Fatalf("%s n=%d: %v", coll, n, err)
				}
				rounds[n] = stats.Rounds
			}
			if rounds[2] != rounds[64] {
				t.Errorf("%s, %d loops: %d rounds at n=2, %d at n=64: want the same", coll, loops, rounds[2], rounds[64])
			}
		}
	}
}

// TestNvlsMcastIsOneWrite: every multicast store is one write, seen by
// every other rank of the host, and nothing else crosses ConnMcast.
func TestNvlsMcastIsOneWrite(t *testing.T) {
	n := 8
	count := int64(n * 4 * 3)
	stats, err := runNvls(nvlsCase{algo: algos.NVLS, coll: algos.AllReduce, topo: algos.BlockTopo(1, n), count: count,
		chunk: 4, align: 1, elemSize: 1 << 20, red: treeReductions[0], channels: 1, slots: 8})
	if err != nil {
		t.Fatal(err)
	}
	// 3 loops of one chunk per head: 3 stores per head, each read by the 7 others.
	if want := int64(3 * n); stats.McastWrites != want {
		t.Errorf("multicast writes: got %d, want %d", stats.McastWrites, want)
	}
	for l, tr := range stats.Links {
		if l.Conn == sim.ConnMcast && tr.Messages != 3 {
			t.Errorf("link %+v: %d messages, want 3", l, tr.Messages)
		}
	}
}

// TestNvlsSmallAllReduceOnHead0: an all-reduce part of at most 16 KiB in
// its last loop goes entirely to head 0 (NCCL's last-loop chunk,
// alignUp(divUp(rem, heads), 16 KiB)); above it the heads' shares follow
// the same formula.
func TestNvlsSmallAllReduceOnHead0(t *testing.T) {
	const esize, n = 4, 4
	for _, c := range []struct {
		count, chunk int64
		shares       [n]int64 // elements each head reduces
	}{
		{1000, 32768, [n]int64{1000, 0, 0, 0}},
		{4096, 32768, [n]int64{4096, 0, 0, 0}},
		{4097, 32768, [n]int64{4096, 1, 0, 0}},
		{3*4096 + 5, 8192, [n]int64{4096, 4096, 4096, 5}},
		{4*8192 + 100, 8192, [n]int64{8192 + 100, 8192, 8192, 8192}},
	} {
		stats, err := runNvls(nvlsCase{algo: algos.NVLS, coll: algos.AllReduce, topo: algos.BlockTopo(1, n), count: c.count,
			chunk: c.chunk, align: 4, elemSize: esize, red: treeReductions[0], channels: 1, slots: 8})
		if err != nil {
			t.Fatalf("count %d: %v", c.count, err)
		}
		for h := range n {
			for src := range n {
				if src == h {
					continue
				}
				got := stats.Links[sim.Link{Src: src, Dst: h, Conn: 1}].Elements
				if got != c.shares[h] {
					t.Errorf("count %d chunk %d: rank %d sent head %d %d elements, want %d", c.count, c.chunk, src, h, got, c.shares[h])
				}
				if got := stats.Links[sim.Link{Src: h, Dst: src, Conn: sim.ConnMcast}].Elements; got != c.shares[h] {
					t.Errorf("count %d chunk %d: rank %d read %d elements of head %d, want %d", c.count, c.chunk, src, got, h, c.shares[h])
				}
			}
		}
	}
}

// TestNvlsUnavailable: where NVLS and NVLS_TREE cannot run, and why.
func TestNvlsUnavailable(t *testing.T) {
	mixed := algos.NewTopo([]int{0, 0, 1, 1, 1})
	for _, c := range []struct {
		topo *algos.Topo
		tree bool
		want string
	}{
		{algos.BlockTopo(1, 2), false, ""},
		{algos.BlockTopo(1, 64), false, ""},
		{algos.BlockTopo(1, 1), false, "at least 2 ranks"},
		{algos.BlockTopo(1, 65), false, "at most 64"},
		{algos.BlockTopo(2, 2), false, "spans 2 hosts"},
		{algos.BlockTopo(2, 2), true, ""},
		{algos.BlockTopo(1, 4), true, "one host"},
		{algos.BlockTopo(4, 1), true, "at least 2 ranks"},
		{algos.BlockTopo(2, 64), true, "at most 63"},
		{mixed, true, "same number of ranks"},
	} {
		got := algos.NvlsUnavailable(c.topo, c.tree)
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%dx%d tree=%v: got %q, want %q", c.topo.NHosts(), c.topo.MaxPerHost(), c.tree, got, c.want)
		}
	}
}

// serialized returns s with its lanes run one after the other, lane 0
// first, as one lane without waits: what the engine does with a schedule
// marked InOrder (runtime/engine/inorder.go) when every wait names a lower
// lane and no lane posts more messages on one link than its FIFO's slots.
// It fails where the engine would run the lanes concurrently instead.
func serialized(s algos.Schedule, slots int) (algos.Schedule, error) {
	if len(s.Lanes) == 1 && len(s.Lanes[0].Waits) == 0 {
		return s, nil // one lane runs in order anyway
	}
	if !s.InOrder {
		return s, errors.New("the schedule is not marked InOrder")
	}
	var ops []algos.Op
	for l, lane := range s.Lanes {
		for _, w := range lane.Waits {
			if w.Lane >= l {
				return s, fmt.Errorf("lane %d waits for lane %d, not a lower one", l, w.Lane)
			}
		}
		sent := map[algos.Link]int{}
		for i := range lane.Ops {
			op := &lane.Ops[i]
			for k := range op.NumSends() {
				link := algos.Link{Peer: op.SendPeer(k), Conn: op.Conn, Send: true}
				if sent[link]++; sent[link] > slots {
					return s, fmt.Errorf("lane %d posts more than %d messages on %v", l, slots, link)
				}
			}
		}
		ops = append(ops, lane.Ops...)
	}
	return algos.Schedule{Lanes: []algos.Lane{{Ops: ops}}}, nil
}

// TestNvlsInOrder: single-host NVLS's lanes, marked InOrder, give exact
// data when every rank runs them one after the other (the engine's short
// calls), staged and registered (direct), with FIFOs of 8 slots (protocols.NSteps) and of 2: no rank's
// lower lane waits for a higher lane of another rank, so in-order ranks
// cannot wait on each other in a cycle. Counts are small enough that every
// lane fits its FIFOs, as the engine requires.
func TestNvlsInOrder(t *testing.T) {
	var cases []nvlsCase
	for _, n := range []int{2, 3, 4, 5, 8, 17, 64} {
		for _, coll := range []algos.Coll{algos.ReduceScatter, algos.AllReduce, algos.AllGather} {
			for i, count := range []int64{1, int64(n) + 1, 4 * int64(n)} {
				cases = append(cases, nvlsCase{algo: algos.NVLS, coll: coll, topo: algos.BlockTopo(1, n), count: count,
					chunk: 16384, align: 1, elemSize: 8, red: treeReductions[(n+i)%len(treeReductions)], channels: 1,
					inPlace: i == 1, slots: []int{8, 2}[i%2], inOrder: true})
				// Registered buffers (the direct path), every count on every n.
				cases = append(cases, nvlsCase{algo: algos.NVLS, coll: coll, topo: algos.BlockTopo(1, n), count: count,
					chunk: 16384, align: 1, elemSize: 8, red: treeReductions[(n+i+1)%len(treeReductions)], channels: 1,
					inPlace: i != 1, slots: []int{2, 8}[i%2], direct: true, inOrder: true})
			}
		}
	}
	runNvlsCases(t, cases)
}
