package algos

// Ring all-reduce (NVIDIA/nccl src/device/all_reduce.h runRing; seed 004,
// "Case Study: AllReduce + RING + SIMPLE").
//
// Each loop covers nranks chunks of the part. In the first nranks-1 steps
// (the reduce-scatter half) every chunk travels once around the ring and
// collects one contribution per hop, so that after the step where a rank
// holds chunk(0) = its own chunk, that chunk is fully reduced. In the last
// nranks-1 steps (the all-gather half) the finished chunks travel around once
// more and every rank keeps a copy. Per loop every rank sends 2(nranks-1)
// messages to next:
//
//	send                      chunk(1)             Input read, first contribution
//	recvReduceSend        x (n-2): chunk(2..n-1)   add mine, pass on
//	recvReduceCopySend        chunk(0)             now complete: postOp, keep, pass on
//	recvCopySend          x (n-2): chunk(1..n-2)   keep a finished chunk, pass on
//	recv                      chunk(n-1)           the last finished chunk stops here
//
// where chunk(k) = (rank + nranks - k) mod nranks.

import "math"

// RingAllReduce returns rank's schedule for the part p of a ring all-reduce
// of a buffer: Input[Offset, Offset+Count) of every rank is reduced into
// Output[Offset, Offset+Count) of every rank. The fully reduced value of an
// element appears once, at the rank whose own chunk it is; PostOp applies
// there and the post-op'd value is what the other ranks receive. Ops move at
// most p.Chunk elements, except in a short last loop, where the chunk is
// rounded up to p.Align and may exceed p.Chunk if p.Chunk is not a multiple
// of it. One rank is a single local copy. It panics if rank, nranks or p are
// invalid.
func RingAllReduce(rank, nranks int, p Part) []Op {
	mustCheck("ring all-reduce", checkRing(rank, nranks, 0, p))
	// 2n-1 Ops per loop, but only chunks with elements make Ops: at most two
	// per element.
	pr := newPrims(rank, nranks, divUp(p.Count, int64(nranks)*p.Chunk), int64(2*nranks-1), min(p.Count, math.MaxInt64/2)*2)
	if nranks == 1 {
		pr.copy(p.Offset, p.Offset, p.Count, true)
		return pr.ops
	}
	n := int64(nranks)
	chunkCount := p.Chunk
	loopCount := n * chunkCount
	for elemOffset := int64(0); elemOffset < p.Count; elemOffset += loopCount {
		rem := p.Count - elemOffset
		if rem < loopCount {
			// Last, short loop: spread rem over the nranks chunks.
			chunkCount = alignUp(divUp(rem, n), p.Align)
		}
		chunk := func(k int) (off, nelem int64) {
			c := int64((rank + nranks - k) % nranks)
			return p.Offset + elemOffset + c*chunkCount, min(chunkCount, rem-c*chunkCount)
		}

		// Step 0: send chunk(1), read from my Input, to next.
		off, nelem := chunk(1)
		pr.send(off, nelem)

		// Steps 1..n-2: receive a partial result, add my Input, pass it on.
		for k := 2; k < nranks; k++ {
			off, nelem := chunk(k)
			pr.recvReduceSend(off, nelem)
		}

		// Step n-1: chunk(0) is my own chunk and this adds its last
		// contribution: apply the postOp, keep it, and start its all-gather.
		off, nelem = chunk(0)
		pr.recvReduceCopySend(off, off, nelem, true)

		// Steps n..2n-3: receive a finished chunk, keep it, pass it on.
		for k := 1; k < nranks-1; k++ {
			off, nelem := chunk(k)
			pr.recvCopySend(off, nelem)
		}

		// Step 2n-2: chunk(n-1), next's own chunk, has gone all the way round.
		off, nelem = chunk(nranks - 1)
		pr.recv(off, nelem)
	}
	return pr.ops
}

// RingAllReduceSteps returns the messages rank exchanges with its ring
// neighbours in RingAllReduce(rank, nranks, p): 2(nranks-1) each way per full
// loop; in a short last loop only the chunks that hold elements travel, which
// depends on where rank sits relative to them. It panics like RingAllReduce.
func RingAllReduceSteps(rank, nranks int, p Part) Steps {
	mustCheck("ring all-reduce steps", checkRing(rank, nranks, 0, p))
	if nranks == 1 {
		return Steps{}
	}
	n := int64(nranks)
	loopCount := n * p.Chunk
	full := p.Count / loopCount * 2 * (n - 1)
	s := Steps{Send: full, Recv: full}
	if rem := p.Count % loopCount; rem > 0 {
		chunkCount := alignUp(divUp(rem, n), p.Align)
		m := divUp(rem, chunkCount) // chunks 0..m-1 hold elements
		has := func(c int) int64 {
			if int64(c) < m {
				return 1
			}
			return 0
		}
		// Sent: every chunk in the first half, and all but chunk(0) = rank
		// and chunk(n-1) = next in the second. Received: all but chunk(1) =
		// prev in the first half, all but chunk(0) = rank in the second.
		s.Send += 2*m - has(rank) - has(RingNext(rank, nranks))
		s.Recv += 2*m - has(RingPrev(rank, nranks)) - has(rank)
	}
	return s
}
