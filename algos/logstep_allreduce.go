package algos

// Log-step all-reduce: recursive doubling and Rabenseifner (logstep.go has
// the hypercube and the exchange they are written in).
//
// Recursive doubling (small buffers): every rank of the hypercube swaps its
// whole vector with vrank ^ mask and reduces, for mask = 1, 2, ...,
// pof2/2; after log2(pof2) exchanges every rank holds the full reduction.
// It moves the whole vector at every step (n log2 n / (2(n-1)) times the
// ring's bytes) in log2 n steps instead of the ring's 2(n-1):
//
//	fold      (n not a power of two) even r < 2rem: send vector to r+1
//	                                 odd r < 2rem:  recvReduceCopy it
//	exchange  x log2 pof2: send Output, recvReduceCopy Output (last: postOp)
//	unfold    odd r < 2rem: send result to r-1; even r < 2rem: recv it
//
// Rabenseifner (medium buffers): the same fold, then a reduce-scatter by
// recursive halving (each step swaps half of the current range with the
// partner, keeps and reduces the other half; after log2 pof2 steps a rank
// holds 1/pof2 of the vector fully reduced) and an all-gather by recursive
// doubling (the same steps backwards, swapping the finished ranges), then
// the unfold: 2 log2 pof2 (+2) steps, the ring's bytes. A part of fewer
// elements than pof2 would leave ranks with empty ranges and pay twice
// recursive doubling's steps for nothing: it runs recursive doubling
// instead, over the same links (Open MPI does the same for count < pof2).

// RecDblAllReduce returns rank's schedule for the part p of a recursive
// doubling all-reduce: Input[Offset, +Count) of every rank is reduced into
// Output[Offset, +Count) of every rank, moved in chunks of p.Chunk. It
// panics if rank, nranks or p are invalid.
func RecDblAllReduce(rank, nranks int, p Part) []Op {
	mustCheck("recursive doubling all-reduce", checkRing(rank, nranks, 0, p))
	x := &exchanger{chunk: p.Chunk}
	all := []span{{p.Offset, p.Count}}
	if nranks == 1 {
		x.copyAll(all[0])
		return x.ops
	}
	x.recDbl(rank, nranks, Input, all)
	return x.ops
}

// recDbl is recursive doubling among nranks from src (Input, or Output
// holding a partial result): the fold, the exchanges with each partner of
// the hypercube, the unfold. The last exchange applies the post-operation.
func (x *exchanger) recDbl(rank, nranks int, src Buf, all []span) {
	src, v, ok := x.fold(rank, nranks, src, all)
	if ok {
		for mask := 1; mask < Pof2Below(nranks); mask <<= 1 {
			peer := CubeRank(v^mask, nranks)
			x.exchange(peer, peer, src, all, all, true, 2*mask == Pof2Below(nranks))
			src = Output
		}
	}
	x.unfold(rank, nranks, all)
}

// RabenseifnerAllReduce returns rank's schedule for the part p of a
// Rabenseifner all-reduce, with the same contract as RecDblAllReduce.
// Ranges are halved at alignUp(half, p.Align) so that pieces keep NCCL's
// 16-byte alignment where the part allows.
func RabenseifnerAllReduce(rank, nranks int, p Part) []Op {
	mustCheck("rabenseifner all-reduce", checkRing(rank, nranks, 0, p))
	pof2 := Pof2Below(nranks)
	if nranks == 1 || p.Count < int64(pof2) {
		return RecDblAllReduce(rank, nranks, p)
	}
	x := &exchanger{chunk: p.Chunk}
	all := []span{{p.Offset, p.Count}}
	src, v, ok := x.fold(rank, nranks, Input, all)
	if ok {
		// Reduce-scatter by recursive halving: keep one half of the
		// current range, send the other, reduce the partner's copy of
		// the kept half into Output. The last step's halves are final.
		cur := all[0]
		var kept []span // cur at each step, for the way back
		for mask := pof2 / 2; mask >= 1; mask /= 2 {
			peer := CubeRank(v^mask, nranks)
			keep, give := halve(cur, v&mask != 0, p.Align)
			x.exchange(peer, peer, src, []span{give}, []span{keep}, true, mask == 1)
			kept = append(kept, cur)
			cur, src = keep, Output
		}
		// All-gather by recursive doubling: the same partners backwards,
		// each sending what it holds and receiving the other half.
		for mask := 1; mask < pof2; mask *= 2 {
			peer := CubeRank(v^mask, nranks)
			whole := kept[len(kept)-1]
			kept = kept[:len(kept)-1]
			_, give := halve(whole, v&mask != 0, p.Align)
			x.exchange(peer, peer, Output, []span{cur}, []span{give}, false, false)
			cur = whole
		}
	}
	x.unfold(rank, nranks, all)
	return x.ops
}

// halve splits s at alignUp(half, align) (clamped to s): the upper half is
// kept when upper is set (the vrank with the mask's bit), the lower
// otherwise; the other half is given away.
func halve(s span, upper bool, align int64) (keep, give span) {
	mid := min(alignUp(divUp(s.n, 2), align), s.n)
	lo, hi := span{s.off, mid}, span{s.off + mid, s.n - mid}
	if upper {
		return hi, lo
	}
	return lo, hi
}

// fold is the first step for n not a power of two: an even rank below
// 2rem sends its vector (from) to its partner and is out (ok false); the
// odd one reduces it with its own into Output, from which it goes on (src
// Output). The other ranks go on from `from`. v is the rank's vrank.
func (x *exchanger) fold(rank, nranks int, from Buf, all []span) (src Buf, v int, ok bool) {
	v = CubeVRank(rank, nranks)
	peer := FoldPartner(rank, nranks)
	switch {
	case peer == NoPeer:
		return from, v, true
	case v == NoPeer:
		x.exchange(peer, NoPeer, from, all, nil, false, false)
		return from, v, false
	}
	x.exchange(NoPeer, peer, from, nil, all, true, false)
	return Output, v, true
}

// unfold is the last step for n not a power of two: the odd rank below
// 2rem sends the result to the even one, which receives it.
func (x *exchanger) unfold(rank, nranks int, all []span) {
	peer := FoldPartner(rank, nranks)
	switch {
	case peer == NoPeer:
	case CubeVRank(rank, nranks) == NoPeer:
		x.exchange(NoPeer, peer, Output, nil, all, false, false)
	default:
		x.exchange(peer, NoPeer, Output, all, nil, false, false)
	}
}
