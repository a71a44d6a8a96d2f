package algos

// Ring broadcast and reduce (NVIDIA/nccl src/device/broadcast.h and
// reduce.h, runRing): a chain along the ring, pipelined chunk by chunk.
//
// Broadcast starts at the root and ends at prev(root):
//
//	root          copySend      Input to Output, send
//	others        recvCopySend  keep a copy, pass it on
//	prev(root)    recv          the end of the chain
//
// Reduce starts at next(root) and ends at the root:
//
//	next(root)    send            first contribution
//	others        recvReduceSend  add mine, pass it on
//	root          recvReduceCopy  complete: postOp, write Output
//
// Every rank does one primitive per chunk, so a chunk reaches the end of the
// chain nranks-1 steps after it left, while the chunks behind it follow.

import "math"

// RingBroadcast returns rank's schedule for the part p of a ring broadcast:
// root's Input[Offset, Offset+Count) is copied to the same range of every
// rank's Output, root's included. One rank is a single local copy. It panics
// if the arguments are invalid.
func RingBroadcast(rank, nranks, root int, p Part) []Op {
	mustCheck("ring broadcast", checkRing(rank, nranks, root, p))
	pr := newPrims(rank, nranks, loops(p), 1, math.MaxInt64)
	if nranks == 1 {
		pr.copy(p.Offset, p.Offset, p.Count, false)
		return pr.ops
	}
	for elemOffset := int64(0); elemOffset < p.Count; elemOffset += p.Chunk {
		off, nelem := p.Offset+elemOffset, min(p.Chunk, p.Count-elemOffset)
		switch {
		case rank == root:
			// The chain starts: my Input to my Output and to next.
			pr.copySend(off, off, nelem)
		case pr.next == root:
			// The chain ends here.
			pr.recv(off, nelem)
		default:
			// Keep a copy and pass it on.
			pr.recvCopySend(off, nelem)
		}
	}
	return pr.ops
}

// RingBroadcastSteps returns the messages rank exchanges with its ring
// neighbours in RingBroadcast: one per chunk, except that prev(root) sends
// nothing and the root receives nothing.
func RingBroadcastSteps(rank, nranks, root int, p Part) Steps {
	mustCheck("ring broadcast steps", checkRing(rank, nranks, root, p))
	var s Steps
	if nranks == 1 {
		return s
	}
	if RingNext(rank, nranks) != root {
		s.Send = loops(p)
	}
	if rank != root {
		s.Recv = loops(p)
	}
	return s
}

// RingReduce returns rank's schedule for the part p of a ring reduce: the
// reduction over all ranks of Input[Offset, Offset+Count) is written to the
// same range of root's Output, with PostOp; other ranks' Outputs are not
// touched. One rank is a single local copy. It panics if the arguments are
// invalid.
func RingReduce(rank, nranks, root int, p Part) []Op {
	mustCheck("ring reduce", checkRing(rank, nranks, root, p))
	pr := newPrims(rank, nranks, loops(p), 1, math.MaxInt64)
	if nranks == 1 {
		pr.copy(p.Offset, p.Offset, p.Count, true)
		return pr.ops
	}
	for elemOffset := int64(0); elemOffset < p.Count; elemOffset += p.Chunk {
		off, nelem := p.Offset+elemOffset, min(p.Chunk, p.Count-elemOffset)
		switch {
		case pr.prev == root:
			// The chain starts after the root: send my Input.
			pr.send(off, nelem)
		case rank == root:
			// The last contribution: complete, postOp, write my Output.
			pr.recvReduceCopy(off, off, nelem, true)
		default:
			// Add mine and pass it on.
			pr.recvReduceSend(off, nelem)
		}
	}
	return pr.ops
}

// RingReduceSteps returns the messages rank exchanges with its ring
// neighbours in RingReduce: one per chunk, except that the root sends nothing
// and next(root) receives nothing.
func RingReduceSteps(rank, nranks, root int, p Part) Steps {
	mustCheck("ring reduce steps", checkRing(rank, nranks, root, p))
	var s Steps
	if nranks == 1 {
		return s
	}
	if rank != root {
		s.Send = loops(p)
	}
	if RingPrev(rank, nranks) != root {
		s.Recv = loops(p)
	}
	return s
}
