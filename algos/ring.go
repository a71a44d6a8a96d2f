package algos

// Ring algorithms (NVIDIA/nccl src/device/{all_reduce,reduce_scatter,
// all_gather,broadcast,reduce}.h, runRing; seeds 000 and 004).
//
// The ranks form a ring and every rank talks only to its two neighbours: it
// receives from prev and sends to next. A buffer is cut into chunks and every
// chunk walks around the ring, either picking up one rank's contribution per
// hop (reduce-scatter, reduce) or leaving a copy at every rank it passes
// (all-gather, broadcast). All-reduce is a reduce-scatter followed by an
// all-gather of the reduced chunks. Each link carries every byte at most once
// per half, which makes the ring bandwidth-optimal for large buffers.
//
// This file holds the ring order, the primitives the schedules are written
// in, and the chunk arithmetic they share; each collective has its own file.

import (
	"fmt"
	"math"
)

// The ring of a channel: position i holds rank i, data flows left to right
// and the last rank wraps around to the first.
//
//	      prev(r)       r       next(r)
//	┌──► 0 ──► ... ──► r-1 ──► r ──► r+1 ──► ... ──► n-1 ──┐
//	└──────────────────────────────────────────────────────┘
//
// With one rank, prev and next are the rank itself; with two, they are the
// same peer.

// RingNext returns the rank that rank sends to: (rank+1) mod nranks.
func RingNext(rank, nranks int) int { return (rank + 1) % nranks }

// RingPrev returns the rank that rank receives from: (rank-1) mod nranks.
func RingPrev(rank, nranks int) int { return (rank - 1 + nranks) % nranks }

// Steps counts the messages that one rank exchanges on one channel of a ring
// schedule: Send to RingNext, Recv from RingPrev. A message is the Count
// elements of one Op on one connection (the engine may cut it into several
// FIFO slices); a chunk with no elements carries no message (NCCL's proxy,
// which counts steps per peer the same way, also moves the empty chunks of a
// short last loop). The simulator's message counts must equal these.
type Steps struct {
	Send int64 // messages sent to next
	Recv int64 // messages received from prev
}

// prims builds one rank's ring schedule in NCCL's primitive vocabulary: every
// primitive receives from prev and/or sends to next, reads Input and writes
// Output. A primitive of zero or fewer elements (a chunk beyond the end of a
// short last loop) is left out; sender and receiver compute the same count
// for the same chunk, so they leave out the same message.
type prims struct {
	prev, next int
	ops        []Op
}

// newPrims starts a schedule with room for its Ops: loops times perLoop, but
// no more than maxOps, and at most 1<<16 up front.
func newPrims(rank, nranks int, loops, perLoop, maxOps int64) *prims {
	n := min(int64(1<<16), maxOps)
	if nranks == 1 {
		n = 1
	} else if loops < n/perLoop {
		n = loops * perLoop
	}
	return &prims{prev: RingPrev(rank, nranks), next: RingNext(rank, nranks), ops: make([]Op, 0, n)}
}

func (p *prims) add(o Op) {
	if o.Count > 0 {
		p.ops = append(p.ops, o)
	}
}

// send reads Input at src and sends it to next.
func (p *prims) send(src, n int64) {
	p.add(Op{RecvFrom: NoPeer, SendTo: p.next, Src: Input, SrcOff: src, Count: n})
}

// copySend reads Input at src, writes it to Output at dst and sends it to next.
func (p *prims) copySend(src, dst, n int64) {
	p.add(Op{RecvFrom: NoPeer, SendTo: p.next, Src: Input, SrcOff: src, Dst: Output, DstOff: dst, Count: n})
}

// recvReduceSend receives from prev, reduces with Input at src and sends the
// partial result to next.
func (p *prims) recvReduceSend(src, n int64) {
	p.add(Op{RecvFrom: p.prev, SendTo: p.next, Src: Input, SrcOff: src, Count: n, Reduce: true})
}

// recvReduceCopySend receives from prev, reduces with Input at src, writes
// the result to Output at dst and sends it to next.
func (p *prims) recvReduceCopySend(src, dst, n int64, postOp bool) {
	p.add(Op{RecvFrom: p.prev, SendTo: p.next, Src: Input, SrcOff: src, Dst: Output, DstOff: dst,
		Count: n, Reduce: true, PostOp: postOp})
}

// recvReduceCopy receives from prev, reduces with Input at src and writes the
// result to Output at dst.
func (p *prims) recvReduceCopy(src, dst, n int64, postOp bool) {
	p.add(Op{RecvFrom: p.prev, SendTo: NoPeer, Src: Input, SrcOff: src, Dst: Output, DstOff: dst,
		Count: n, Reduce: true, PostOp: postOp})
}

// recvCopySend receives from prev, writes it to Output at dst and forwards it
// to next.
func (p *prims) recvCopySend(dst, n int64) {
	p.add(Op{RecvFrom: p.prev, SendTo: p.next, Dst: Output, DstOff: dst, Count: n})
}

// recv receives from prev and writes it to Output at dst.
func (p *prims) recv(dst, n int64) {
	p.add(Op{RecvFrom: p.prev, SendTo: NoPeer, Dst: Output, DstOff: dst, Count: n})
}

// copy is the whole collective of a one-rank ring: Input at src to Output at
// dst, with the reduction's post-operation if the collective reduces.
func (p *prims) copy(src, dst, n int64, postOp bool) {
	p.add(Op{RecvFrom: NoPeer, SendTo: NoPeer, Src: Input, SrcOff: src, Dst: Output, DstOff: dst,
		Count: n, PostOp: postOp})
}

// divUp is x/y rounded up, for x >= 0 and y > 0.
func divUp(x, y int64) int64 { return (x + y - 1) / y }

// alignUp rounds x up to a multiple of align; align 0 or 1 leaves x alone.
// Example: alignUp(5, 4) = 8, the element count NCCL gives each chunk of a
// 17-element last loop on 4 ranks with 16-byte alignment of int32.
func alignUp(x, align int64) int64 {
	if align <= 1 {
		return x
	}
	return divUp(x, align) * align
}

// loops is the number of chunk-sized loops over a part: NCCL's
// "for elemOffset in [0, channelCount) step chunkCount".
func loops(p Part) int64 { return divUp(p.Count, p.Chunk) }

// checkRing validates the arguments every ring generator takes. Generators
// panic with its error: a bad rank or part is a bug in the caller, not a
// condition it can handle.
func checkRing(rank, nranks, root int, p Part) error {
	if err := checkRankPart(rank, nranks, p); err != nil {
		return err
	}
	switch {
	case root < 0 || root >= nranks:
		return fmt.Errorf("root %d: must be in [0, %d)", root, nranks)
	case p.Chunk < 1:
		return fmt.Errorf("part chunk %d: must be at least 1", p.Chunk)
	case p.Align < 0:
		return fmt.Errorf("part align %d: must be at least 0", p.Align)
	case p.Chunk > math.MaxInt64/int64(nranks)-p.Align:
		return fmt.Errorf("part chunk %d + align %d: %d ranks of it overflow int64", p.Chunk, p.Align, nranks)
	}
	return nil
}

// checkRankPart validates what every generator takes: a rank among
// nranks, and a part with a non-negative offset and count whose end fits
// in int64. Each generator checks its own further arguments after it.
func checkRankPart(rank, nranks int, p Part) error {
	switch {
	case nranks < 1:
		return fmt.Errorf("nranks %d: must be at least 1", nranks)
	case rank < 0 || rank >= nranks:
		return fmt.Errorf("rank %d: must be in [0, %d)", rank, nranks)
	case p.Offset < 0:
		return fmt.Errorf("part offset %d: must be at least 0", p.Offset)
	case p.Count < 0:
		return fmt.Errorf("part count %d: must be at least 0", p.Count)
	case p.Offset > math.MaxInt64-p.Count:
		return fmt.Errorf("part [%d, +%d): end overflows int64", p.Offset, p.Count)
	}
	return nil
}

// checkBlocks also checks that a part fits inside the blocks of reduce-scatter
// and all-gather.
func checkBlocks(rank, nranks int, blockCount int64, p Part) error {
	if err := checkRing(rank, nranks, 0, p); err != nil {
		return err
	}
	if blockCount < 0 || p.Offset+p.Count > blockCount || blockCount > math.MaxInt64/int64(nranks) {
		return fmt.Errorf("part [%d, %d) with %d ranks: must fit in a block of %d elements",
			p.Offset, p.Offset+p.Count, nranks, blockCount)
	}
	return nil
}

func mustCheck(coll string, err error) {
	if err != nil {
		panic("algos: " + coll + ": " + err.Error())
	}
}
