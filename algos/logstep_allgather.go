package algos

// Log-step all-gather: recursive doubling for a power of two ranks, Bruck
// otherwise; ceil(log2 n) steps instead of the ring's n-1, and the ring's
// bytes ((n-1)/n of Output per rank).
//
// Recursive doubling: at step k (d = 2^k) a rank holds the blocks of its
// group of d ranks (r - r mod d ...) and swaps them with the group of r ^ d:
//
//	n = 4     step 0 (d=1)      step 1 (d=2)
//	rank 0    [0] <-> [1]       [0 1] <-> [2 3]
//	rank 2    [2] <-> [3]       [2 3] <-> [0 1]
//
// Bruck (any n): at step k a rank holds the blocks r, r+1, ..., r+d-1
// (mod n); it sends the first min(d, n-d) of them to r-d and receives as
// many, starting at block r+d, from r+d. Received blocks go straight to
// their place in Output, so the final rotation of the textbook version is
// not needed.
//
//	n = 3     step 0 (d=1)             step 1 (d=2, 1 block)
//	rank 0    sends [0] to 2           sends [0] to 1
//	          gets [1] from 1          gets [2] from 2
//
// The first send of either reads the rank's own block from Input and
// copies it to Output as it goes. A block is Part [Offset, +Count) of one
// rank's Count elements; with a part that covers whole blocks, neighbouring
// blocks are one contiguous span and travel as one message per chunk.

// RecDblAllGather returns rank's schedule for the part p of a log-step
// all-gather of blocks of blockCount elements: Input[Offset, +Count) of
// rank b lands in Output[b*blockCount+Offset, +Count) of every rank. It
// panics if rank, nranks, blockCount or p are invalid.
func RecDblAllGather(rank, nranks int, blockCount int64, p Part) []Op {
	mustCheck("recursive doubling all-gather", checkBlocks(rank, nranks, blockCount, p))
	x := &exchanger{chunk: p.Chunk}
	own := int64(rank) * blockCount
	if nranks == 1 {
		x.exchangeCopy(NoPeer, NoPeer, Input, []span{{own + p.Offset, p.Count}}, nil, false, false, own)
		return x.ops
	}
	b := blocks{n: nranks, size: blockCount, p: p}
	pof2 := Pof2Below(nranks) == nranks
	for d := 1; d < nranks; d *= 2 {
		// Send blocks [mine, +cnt) to `to`, receive [theirs, +cnt) from `from`.
		var to, from, mine, theirs, cnt int
		if pof2 {
			to, from = rank^d, rank^d
			mine, theirs, cnt = rank-rank%d, from-from%d, d
		} else {
			to, from = (rank-d+nranks)%nranks, (rank+d)%nranks
			mine, theirs, cnt = rank, from, min(d, nranks-d)
		}
		shift := int64(-1)
		if d == 1 {
			shift = own // the own block, from Input
		}
		x.exchangeCopy(to, from, Output, b.spans(mine, cnt), b.spans(theirs, cnt), false, false, shift)
	}
	return x.ops
}

// blocks is the layout of an all-gather's Output: n blocks of size
// elements, of which the part p of each is moved.
type blocks struct {
	n    int
	size int64
	p    Part
}

// spans returns the part of blocks first, first+1, ..., first+cnt-1 (mod
// n) as spans of Output, merging neighbours when the part is whole blocks.
func (b blocks) spans(first, cnt int) []span {
	whole := b.p.Offset == 0 && b.p.Count == b.size
	var out []span
	for i := range cnt {
		blk := (first + i) % b.n
		s := span{int64(blk)*b.size + b.p.Offset, b.p.Count}
		if last := len(out) - 1; whole && last >= 0 && out[last].off+out[last].n == s.off {
			out[last].n += s.n
			continue
		}
		out = append(out, s)
	}
	return out
}

// recDblAllGatherPeers are the links of RecDblAllGather: both ways to
// rank ^ d (a power of two ranks), or to rank - d and from rank + d (Bruck).
func recDblAllGatherPeers(rank, nranks int) []Link {
	var out []Link
	for d := 1; d < nranks; d *= 2 {
		if Pof2Below(nranks) == nranks {
			out = append(out, Link{Peer: rank ^ d, Send: true}, Link{Peer: rank ^ d})
			continue
		}
		to, from := (rank-d+nranks)%nranks, (rank+d)%nranks
		out = append(out, Link{Peer: to, Send: true}, Link{Peer: from})
	}
	return out
}
