package algos

// Ring all-gather (NVIDIA/nccl src/device/all_gather.h runRing): the second
// half of the ring all-reduce.
//
// Every rank's Input holds one block and every rank's Output gets nranks
// blocks, block b from rank b. For every chunk of the part, rank r's block
// starts at r and walks the whole ring; every rank it passes keeps a copy:
//
//	copySend             block(0) = mine       Input to Output[mine], send
//	recvCopySend     x (n-2): block(-j), j = 1..n-2
//	recv                 block(1) = next's     it has come n-1 hops
//
// where block(j) is the Output block of rank (rank + j) mod nranks.

import "math"

// RingAllGather returns rank's schedule for the part p of a ring all-gather:
// Input has one block of blockCount elements, Output has nranks, and for
// every element e of [Offset, Offset+Count), every rank's
// Output[b*blockCount + e] becomes rank b's Input[e]. One rank is a single
// local copy. It panics if the arguments are invalid or the part does not fit
// in a block.
func RingAllGather(rank, nranks int, blockCount int64, p Part) []Op {
	mustCheck("ring all-gather", checkBlocks(rank, nranks, blockCount, p))
	pr := newPrims(rank, nranks, loops(p), int64(nranks), math.MaxInt64)
	if nranks == 1 {
		pr.copy(p.Offset, p.Offset, p.Count, false)
		return pr.ops
	}
	for elemOffset := int64(0); elemOffset < p.Count; elemOffset += p.Chunk {
		nelem := min(p.Chunk, p.Count-elemOffset)
		dataOffset := p.Offset + elemOffset
		block := func(j int) int64 { return int64((rank+j+nranks)%nranks)*blockCount + dataOffset }

		// Step 0: put my Input in place in my Output and send it on.
		pr.copySend(dataOffset, block(0), nelem)

		// Steps 1..n-2: keep the block of rank-j and pass it on.
		for j := 1; j < nranks-1; j++ {
			pr.recvCopySend(block(-j), nelem)
		}

		// Step n-1: next's block has reached its last stop.
		pr.recv(block(1), nelem)
	}
	return pr.ops
}

// RingAllGatherSteps returns the messages rank exchanges with its ring
// neighbours in RingAllGather: nranks-1 each way per chunk of the part.
func RingAllGatherSteps(rank, nranks int, p Part) Steps {
	mustCheck("ring all-gather steps", checkRing(rank, nranks, 0, p))
	s := loops(p) * int64(nranks-1)
	return Steps{Send: s, Recv: s}
}
