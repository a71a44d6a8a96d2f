package bench

import (
	"fmt"

	"github.com/seed-760dd1f1/cc/algos"
)

// Coll describes one nccl-tests benchmark (src/<name>.cu): how a swept size
// becomes per-rank counts, how time becomes bandwidth, and what the op and
// root columns say. Collectives lists them all.
type Coll struct {
	Name string // subcommand name, e.g. "all_reduce"; the binary is Name+"_perf"
	// TestName is nccl-tests' name of the test (struct testColl), which
	// rccl-tests' result files print: "AllReduce", "AlltoAllv".
	TestName string

	// Reduces: the benchmark loops over -o ops and prints the op.
	Reduces bool
	// PrintsOp: the redop column shows the op even though nothing is
	// reduced (sendrecv's quirk: it loops over -o ops as well).
	PrintsOp bool
	// Rooted: the benchmark takes -r and loops over every root with -r -1.
	Rooted bool
	// Pow2: the rank count must be a power of two (hypercube).
	Pow2 bool
	// InPlaceChecked is false where nccl-tests never checks the in-place
	// half and prints N/A (alltoall, sendrecv).
	InPlaceChecked bool
	// NoneOp is the redop column of collectives that do not print an op:
	// "none", or "" for hypercube.
	NoneOp string

	counts func(count, elt, n int64) Counts
	// algBytes is the byte count algbw divides by: algbw = algBytes / 1e9 /
	// seconds (nccl-tests' *GetBw).
	algBytes func(c Counts, elt, n int64) int64
	// busFactor turns algbw into busbw.
	busFactor func(n int64) float64

	kind collKind
	// fn is the runtime collective every call is, when tuned is set; the
	// other benchmarks are made of point-to-point calls.
	fn    algos.Coll
	tuned bool
}

// Counts are the element counts of one call on one rank, nccl-tests'
// GetCollByteCount: the send and receive buffer lengths, the count argument
// of the call, and where the in-place send and receive buffers start inside
// the receive buffer, in units of rank (element offset = offset x rank).
type Counts struct {
	Send, Recv, Param                    int64
	SendInPlaceOffset, RecvInPlaceOffset int64
}

// Bytes is the size a row prints: the larger of one rank's send and receive
// bytes.
func (c Counts) Bytes(elt int64) int64 { return max(c.Send, c.Recv) * elt }

type collKind int

const (
	kindAllReduce collKind = iota
	kindReduceScatter
	kindAllGather
	kindBroadcast
	kindReduce
	kindAllToAll
	kindAllToAllV
	kindSendRecv
	kindGather
	kindScatter
	kindHyperCube
)

// perRank is nccl-tests' per-rank block of the collectives that split the
// buffer: count/nranks rounded down to a multiple of 16 bytes, so that every
// block is 16-byte aligned. For example 1000 floats over 3 ranks: 333 -> 332
// (elt 4 rounds to multiples of 4 elements); 8 bytes of int8 over 2 ranks: 0.
func perRank(count, elt, n int64) int64 {
	base := count / n
	if elt <= 16 {
		base &^= 16/elt - 1
	}
	return base
}

func whole(count, elt, n int64) Counts { return Counts{Send: count, Recv: count, Param: count} }

// perCall is the algbw bytes of the collectives whose formula scales the
// call's count: Param x elt x factor(n).
func perCall(factor func(n int64) int64) func(c Counts, elt, n int64) int64 {
	return func(c Counts, elt, n int64) int64 { return c.Param * elt * factor(n) }
}

func one(int64) int64         { return 1 }
func all(n int64) int64       { return n }
func allButOne(n int64) int64 { return n - 1 }
func unit(int64) float64      { return 1 }

// largerSide is alltoallv's algbw bytes: the most any rank sends or
// receives, the row's size (the matrix is uneven, the call's count says
// little).
func largerSide(c Counts, elt, _ int64) int64 { return c.Bytes(elt) }

// ringFactor is (n-1)/n: each rank moves all but its own share.
func ringFactor(n int64) float64 { return float64(n-1) / float64(n) }

// Collectives is every benchmark, in nccl-tests' Makefile order.
var Collectives = []*Coll{
	{
		Name: "all_reduce", TestName: "AllReduce", kind: kindAllReduce, fn: algos.AllReduce, tuned: true, Reduces: true, InPlaceChecked: true,
		counts: whole, algBytes: perCall(one),
		// 2(n-1)/n: a reduce-scatter then an all-gather, each moving (n-1)/n.
		busFactor: func(n int64) float64 { return float64(2*(n-1)) / float64(n) },
	},
	{
		Name: "all_gather", TestName: "AllGather", kind: kindAllGather, fn: algos.AllGather, tuned: true, InPlaceChecked: true, NoneOp: "none",
		counts: func(count, elt, n int64) Counts {
			b := perRank(count, elt, n)
			return Counts{Send: b, Recv: b * n, Param: b, SendInPlaceOffset: b}
		},
		algBytes: perCall(all), busFactor: ringFactor,
	},
	{
		Name: "broadcast", TestName: "Broadcast", kind: kindBroadcast, fn: algos.Broadcast, tuned: true, Rooted: true, InPlaceChecked: true, NoneOp: "none",
		counts: whole, algBytes: perCall(one), busFactor: unit,
	},
	{
		Name: "reduce_scatter", TestName: "ReduceScatter", kind: kindReduceScatter, fn: algos.ReduceScatter, tuned: true, Reduces: true, InPlaceChecked: true,
		counts: func(count, elt, n int64) Counts {
			b := perRank(count, elt, n)
			return Counts{Send: b * n, Recv: b, Param: b, RecvInPlaceOffset: b}
		},
		algBytes: perCall(all), busFactor: ringFactor,
	},
	{
		Name: "reduce", TestName: "Reduce", kind: kindReduce, fn: algos.Reduce, tuned: true, Reduces: true, Rooted: true, InPlaceChecked: true,
		counts: whole, algBytes: perCall(one), busFactor: unit,
	},
	{
		Name: "alltoall", TestName: "AlltoAll", kind: kindAllToAll, NoneOp: "none",
		counts: func(count, elt, n int64) Counts {
			b := perRank(count, elt, n)
			return Counts{Send: b * n, Recv: b * n, Param: b}
		},
		algBytes: perCall(all), busFactor: ringFactor,
	},
	{
		// The counts of nccl-tests' default matrix; a run's own matrix is
		// Options.Traffic's (alltoallv.go).
		Name: "alltoallv", TestName: "AlltoAllv", kind: kindAllToAllV, NoneOp: "none",
		counts:   func(count, elt, n int64) Counts { return DefaultTraffic.Counts(count, elt, int(n)) },
		algBytes: largerSide, busFactor: ringFactor,
	},
	{
		Name: "scatter", TestName: "Scatter", kind: kindScatter, Rooted: true, InPlaceChecked: true, NoneOp: "none",
		counts: func(count, elt, n int64) Counts {
			b := perRank(count, elt, n)
			return Counts{Send: b * n, Recv: b, Param: b, RecvInPlaceOffset: b}
		},
		algBytes: perCall(all), busFactor: ringFactor,
	},
	{
		Name: "gather", TestName: "Gather", kind: kindGather, Rooted: true, InPlaceChecked: true, NoneOp: "none",
		counts: func(count, elt, n int64) Counts {
			b := perRank(count, elt, n)
			return Counts{Send: b, Recv: b * n, Param: b, SendInPlaceOffset: b}
		},
		algBytes: perCall(all), busFactor: ringFactor,
	},
	{
		Name: "sendrecv", TestName: "SendRecv", kind: kindSendRecv, PrintsOp: true,
		counts: whole, algBytes: perCall(one), busFactor: unit,
	},
	{
		Name: "hypercube", TestName: "HyperCube", kind: kindHyperCube, Pow2: true, InPlaceChecked: true, NoneOp: "",
		counts: func(count, elt, n int64) Counts {
			b := perRank(count, elt, n)
			return Counts{Send: b, Recv: b * n, Param: b, SendInPlaceOffset: b}
		},
		// Each rank receives the n-1 other blocks; no further factor.
		algBytes: perCall(allButOne), busFactor: unit,
	},
}

// Lookup finds a collective by name ("all_reduce") or binary name
// ("all_reduce_perf").
func Lookup(name string) (*Coll, bool) {
	for _, c := range Collectives {
		if name == c.Name || name == c.Name+"_perf" {
			return c, true
		}
	}
	return nil, false
}

// Counts returns the counts of one call when the sweep is at count elements
// of elt bytes over n ranks.
func (c *Coll) Counts(count, elt int64, n int) Counts { return c.counts(count, elt, int64(n)) }

// AlgBytes is the byte count algbw divides by for a call with counts cn.
func (c *Coll) AlgBytes(cn Counts, elt int64, n int) float64 {
	return float64(c.algBytes(cn, elt, int64(n)))
}

// BusFactor is busbw / algbw for n ranks: nccl-tests v2.19.6's factor for
// the collective (src/<name>.cu, *GetBw), whatever algorithm ran. (The
// (n-1)/(n+1) NVLS factor of nccl-tests pull request #239 was never merged.)
func (c *Coll) BusFactor(n int) float64 { return c.busFactor(int64(n)) }

// Bandwidth returns algbw and busbw in GB/s for a call with counts cn
// that took sec seconds. busbw does not depend on the algorithm that ran
// (BusFactor).
func (c *Coll) Bandwidth(cn Counts, elt int64, n int, sec float64) (algBW, busBW float64) {
	algBW = c.AlgBytes(cn, elt, n) / 1e9 / sec
	return algBW, algBW * c.BusFactor(n)
}

// Func returns the runtime collective the benchmark's calls are, whose
// algorithm, protocol and channels the runtime's tuner chooses; false for
// the benchmarks made of point-to-point calls (alltoall, alltoallv, scatter,
// gather, sendrecv, hypercube).
func (c *Coll) Func() (algos.Coll, bool) { return c.fn, c.tuned }

// OpColumn is what the redop column prints when the benchmark runs op.
func (c *Coll) OpColumn(op string) string {
	if c.Reduces || c.PrintsOp {
		return op
	}
	return c.NoneOp
}

// stages reports whether the in-place calls send from a staging copy of the
// receive buffer (stageInPlace): the collectives the runtime has no in-place
// form of.
func (c *Coll) stages() bool {
	return c.kind == kindAllToAll || c.kind == kindAllToAllV || c.kind == kindSendRecv
}

// LoopsOps reports whether the benchmark runs once per -o op.
func (c *Coll) LoopsOps() bool { return c.Reduces || c.PrintsOp }

// CheckRanks returns an error when n ranks cannot run c.
func (c *Coll) CheckRanks(n int) error {
	if c.Pow2 && (n < 1 || n&(n-1) != 0) {
		return fmt.Errorf("%s needs a power-of-two number of ranks, got %d", c.Name, n)
	}
	return nil
}

// Sizes calls f for every size of the sweep from min to max: multiplied by
// factor when factor > 1, else increased by step. It stops early when f
// returns false. The caller guarantees progress: step > 0 when factor <= 1,
// and min > 0 when factor > 1.
func Sizes(min, max, step, factor int64, f func(size int64) bool) {
	for size := min; size <= max; {
		if !f(size) {
			return
		}
		next := size + step
		if factor > 1 {
			next = size * factor
		}
		if next <= size { // overflow or no progress
			return
		}
		size = next
	}
}

// WarmupSizes calls f for every warmup size: min, doubling up to max, as
// nccl-tests warms every size class once before measuring (a zero min is
// followed by 1).
func WarmupSizes(min, max int64, f func(size int64)) {
	for size := min; size <= max; {
		f(size)
		next := size * 2
		if next <= size {
			next = size + 1
		}
		size = next
	}
}
