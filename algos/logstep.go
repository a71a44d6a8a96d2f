package algos

// The log-step family between hosts: recursive doubling, recursive halving
// and Bruck (shared/reference/small-message-algorithms.md §5 R2, R3; Open
// MPI's ompi_coll_base_allreduce_intra_recursivedoubling and
// _intra_redscat_allgather, ompi_coll_base_allgather_intra_bruck; MPICH's
// cost formulas in allreduce_intra_recursive_doubling.c). Where the ring
// pays 2(n-1) (all-reduce) or n-1 sequential hops, these pay ceil(log2 n)
// or 2 log2 n: what matters when every hop is a TCP round trip.
//
// This file holds the hypercube the schedules walk and the exchange
// primitive they share; each schedule has its own file (logstep_*.go).

import "math/bits"

// The hypercube of a log-step schedule, with the ranks beyond the largest
// power of two folded into a partner first (Open MPI's scheme): of the
// first 2*rem ranks (rem = n - pof2), each even one hands its vector to the
// odd one after it and sits out; the remaining pof2 ranks get virtual
// ranks 0..pof2-1 and exchange with vrank ^ mask, mask = 1, 2, ...,
// pof2/2 (recursive doubling; halving walks the masks downwards). At the
// end each odd one hands the result back.
//
//	n = 6, pof2 = 4, rem = 2
//	rank     0    1    2    3    4    5
//	vrank    -    0    -    1    2    3
//	fold     0 ─► 1    2 ─► 3
//	mask 1        0 ◄─────► 1    2 ◄► 3
//	mask 2        0 ◄──────────► 2
//	                   1 ◄──────────► 3
//
// With n a power of two, no rank folds and vrank = rank.

// Pof2Below is the largest power of two not above n (n >= 1).
func Pof2Below(n int) int { return 1 << (bits.Len(uint(n)) - 1) }

// CubeVRank is rank's virtual rank in the hypercube of nranks, or NoPeer
// for a rank that folds into FoldPartner and sits the exchanges out.
func CubeVRank(rank, nranks int) int {
	rem := nranks - Pof2Below(nranks)
	switch {
	case rank >= 2*rem:
		return rank - rem
	case rank%2 == 1:
		return rank / 2
	}
	return NoPeer
}

// CubeRank is the rank of virtual rank v in the hypercube of nranks: the
// inverse of CubeVRank.
func CubeRank(v, nranks int) int {
	if rem := nranks - Pof2Below(nranks); v < rem {
		return 2*v + 1
	}
	return v + nranks - Pof2Below(nranks)
}

// FoldPartner is the rank that rank hands its vector to (an even rank
// below 2*rem) or receives one from (an odd rank below 2*rem), or NoPeer.
func FoldPartner(rank, nranks int) int {
	rem := nranks - Pof2Below(nranks)
	switch {
	case rank >= 2*rem:
		return NoPeer
	case rank%2 == 0:
		return rank + 1
	}
	return rank - 1
}

// cubeLinks are the links of a rank of the hypercube of nranks: both ways
// to its fold partner, and both ways to each vrank ^ mask.
func cubeLinks(rank, nranks int) []Link {
	var out []Link
	both := func(p int) { out = append(out, Link{Peer: p, Send: true}, Link{Peer: p}) }
	if p := FoldPartner(rank, nranks); p != NoPeer {
		both(p)
	}
	if v := CubeVRank(rank, nranks); v != NoPeer {
		for mask := 1; mask < Pof2Below(nranks); mask <<= 1 {
			both(CubeRank(v^mask, nranks))
		}
	}
	return out
}

// span is a range of elements of a rank's buffer.
type span struct{ off, n int64 }

// pieces cuts spans into chunks (tree_allreduce.go), in order.
func pieces(spans []span, chunk int64) []span {
	var out []span
	for _, s := range spans {
		for o, n := range chunks(s.off, s.n, chunk) {
			out = append(out, span{o, n})
		}
	}
	return out
}

// exchanger builds one rank's log-step schedule. Every step is an
// exchange: the rank sends pieces to one peer and receives as many from
// (usually) the same one, one chunk each way in turn, send first. So no
// rank waits on a receive before its own send of that chunk has been
// posted, at most two chunks per link are in flight (they fit the FIFO),
// and a send reads its chunk before the receive of the same chunk
// overwrites it: the in-place hazard of recursive doubling, where both
// are the same elements of Output.
type exchanger struct {
	chunk int64
	ops   []Op
}

func (x *exchanger) add(o Op) {
	if o.Count > 0 {
		x.ops = append(x.ops, o)
	}
}

// exchange sends src[send pieces] to `to` and receives from `from` into
// Output's recv pieces, reducing with src (reduce) or not; every received
// value gets the post-operation when post is set (it is final).
func (x *exchanger) exchange(to, from int, src Buf, send, recv []span, reduce, post bool) {
	x.exchangeCopy(to, from, src, send, recv, reduce, post, -1)
}

// exchangeCopy is exchange whose sends, when inShift >= 0, read Input at
// off-inShift and also write their value to Output at off: all-gather's
// own block, copied out as it is sent.
func (x *exchanger) exchangeCopy(to, from int, src Buf, send, recv []span, reduce, post bool, inShift int64) {
	sc, rc := pieces(send, x.chunk), pieces(recv, x.chunk)
	if len(sc) == 2 && len(rc) <= 2 && total(sc) <= x.chunk && total(rc) <= x.chunk {
		// One chunk cut in two (Bruck's blocks wrapping past the last
		// rank): both sends go before the first receive, or the second
		// would wait a hop for it. The two messages fit the FIFO (each
		// is at most a chunk's slices); the row needs 2 message slots.
		for _, c := range sc {
			x.send(to, src, c, inShift)
		}
		for _, c := range rc {
			x.recv(from, src, c, reduce, post)
		}
		return
	}
	for i := range max(len(sc), len(rc)) {
		if i < len(sc) {
			x.send(to, src, sc[i], inShift)
		}
		if i < len(rc) {
			x.recv(from, src, rc[i], reduce, post)
		}
	}
}

// send sends src[c] to peer (see exchangeCopy for inShift).
func (x *exchanger) send(peer int, src Buf, c span, inShift int64) {
	o := Op{RecvFrom: NoPeer, SendTo: peer, Src: src, SrcOff: c.off, Count: c.n}
	if inShift >= 0 {
		o.Src, o.SrcOff, o.Dst, o.DstOff = Input, c.off-inShift, Output, c.off
	}
	x.add(o)
}

// recv receives Output[c] from peer, reduced with src[c] when reduce is
// set.
func (x *exchanger) recv(peer int, src Buf, c span, reduce, post bool) {
	o := Op{RecvFrom: peer, SendTo: NoPeer, Dst: Output, DstOff: c.off, Count: c.n, PostOp: post}
	if reduce {
		o.Src, o.SrcOff, o.Reduce = src, c.off, true
	}
	x.add(o)
}

// total is the elements of spans.
func total(spans []span) int64 {
	var n int64
	for _, s := range spans {
		n += s.n
	}
	return n
}

// copyAll is a one-rank collective: Input to Output with the
// post-operation.
func (x *exchanger) copyAll(s span) {
	for _, c := range pieces([]span{s}, x.chunk) {
		x.add(Op{RecvFrom: NoPeer, SendTo: NoPeer, Src: Input, SrcOff: c.off, Dst: Output, DstOff: c.off, Count: c.n, PostOp: true})
	}
}

// logStepRow is the row of a log-step collective: the ring's FIFO geometry
// (Simple chunks of half the FIFO, so that the two chunks an exchange may
// have in flight on a link fit; LL and LL128 one slot), any topology.
func logStepRow(a Algo, c Coll, gen func(a *Args) []Op, peers func(rank, nranks int) []Link, once bool) Algorithm {
	r := ringRow(c, gen)
	r.Algo, r.WritesOutputOnce = a, once
	r.Peers = func(a *Args) []Link { return peers(a.Rank, a.NRanks()) }
	return r
}

// LogStepHops is the number of message hops on the critical path of one
// chunk of a log-step row (a RecDbl or Rabenseifner row) of nranks: what
// the tuner charges a step's latency for. All-gather takes ceil(log2 n).
// All-reduce plays the hypercube's exchanges on each vrank's hop count
// (a rank that folded starts one hop late; an exchange leaves both at one
// more than the later sender, or where the receiver already was); the
// unfold adds one for the ranks that folded. That is log2 n for a power
// of two and between floor(log2 n)+1 and floor(log2 n)+2 otherwise
// (MPICH's cost model charges +2: the fold's hop overlaps the exchanges
// of the ranks that did not fold). Rabenseifner plays the exchanges twice
// (halving, then doubling back). A part too small for Rabenseifner's
// halving runs recursive doubling's schedule, which this does not count.
func LogStepHops(a Algo, c Coll, nranks int) int {
	if nranks <= 1 {
		return 0
	}
	if c == AllGather {
		return bits.Len(uint(nranks - 1))
	}
	pof2 := Pof2Below(nranks)
	hops := make([]int, pof2)
	for v := range hops {
		if FoldPartner(CubeRank(v, nranks), nranks) != NoPeer {
			hops[v] = 1
		}
	}
	var masks []int
	if a == Rabenseifner {
		for m := pof2 / 2; m >= 1; m /= 2 {
			masks = append(masks, m)
		}
	}
	for m := 1; m < pof2; m *= 2 {
		masks = append(masks, m)
	}
	for _, m := range masks {
		next := make([]int, pof2)
		for v := range hops {
			next[v] = max(hops[v], hops[v^m]+1)
		}
		hops = next
	}
	deepest := 0
	for v, h := range hops {
		if FoldPartner(CubeRank(v, nranks), nranks) != NoPeer {
			h++
		}
		deepest = max(deepest, h)
	}
	return deepest
}
