package algos

// Ring reduce-scatter (NVIDIA/nccl src/device/reduce_scatter.h runRing;
// seed 000, whose mathematical definition is the contract: rank r ends with
// block r reduced over all ranks).
//
// Every rank's Input holds nranks blocks of blockCount elements; block b is
// destined for rank b. For every chunk of the part, the copy of block b
// starts at rank b+1, which sends its own contribution, and walks the ring
// towards rank b, each rank on the way adding its contribution. Rank b adds
// the last one and writes the result to its Output:
//
//	send                 block(n-1) = prev's   first contribution
//	recvReduceSend   x (n-2): block(n-j), j = 2..n-1
//	recvReduceCopy       block(0) = mine       complete: postOp, write Output
//
// where block(j) is the block of rank (rank + j) mod nranks, NCCL's
// ringRanks[j].

import "math"

// RingReduceScatter returns rank's schedule for the part p of a ring
// reduce-scatter: Input has nranks blocks of blockCount elements, Output has
// one, and for every element e of [Offset, Offset+Count), rank r's Output[e]
// becomes the reduction over all ranks of their Input[r*blockCount + e].
// One rank is a single local copy. It panics if the arguments are invalid or
// the part does not fit in a block.
func RingReduceScatter(rank, nranks int, blockCount int64, p Part) []Op {
	mustCheck("ring reduce-scatter", checkBlocks(rank, nranks, blockCount, p))
	pr := newPrims(rank, nranks, loops(p), int64(nranks), math.MaxInt64)
	if nranks == 1 {
		pr.copy(p.Offset, p.Offset, p.Count, true)
		return pr.ops
	}
	for elemOffset := int64(0); elemOffset < p.Count; elemOffset += p.Chunk {
		nelem := min(p.Chunk, p.Count-elemOffset)
		dataOffset := p.Offset + elemOffset
		block := func(j int) int64 { return int64((rank+j)%nranks)*blockCount + dataOffset }

		// Step 0: start prev's block, the one farthest from its owner.
		pr.send(block(nranks-1), nelem)

		// Steps 1..n-2: add my contribution to the block of rank-j, pass it on.
		for j := 2; j < nranks; j++ {
			pr.recvReduceSend(block(nranks-j), nelem)
		}

		// Step n-1: my own block arrives with every other contribution.
		pr.recvReduceCopy(block(0), dataOffset, nelem, true)
	}
	return pr.ops
}

// RingReduceScatterSteps returns the messages rank exchanges with its ring
// neighbours in RingReduceScatter: nranks-1 each way per chunk of the part.
// Only the part matters, not the block size.
func RingReduceScatterSteps(rank, nranks int, p Part) Steps {
	mustCheck("ring reduce-scatter steps", checkRing(rank, nranks, 0, p))
	s := loops(p) * int64(nranks-1)
	return Steps{Send: s, Recv: s}
}
