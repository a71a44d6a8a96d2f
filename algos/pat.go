package algos

import (
	"fmt"
	"math/bits"
	"strings"

	"github.com/seed-760dd1f1/cc/protocols"
)

// PAT: NCCL's Parallel Aggregated Trees reduce-scatter and all-gather
// (seed 001), written from its documented semantics.
//
// Ranks talk along the dimensions of a hypercube: dimension d links rank r
// to r+2^d (mod n) for every 2^d < n. In reduce-scatter a rank sends on
// dimension d to r+2^d and receives from r-2^d; all-gather is the mirror.
//
// Reduce-scatter. The contribution of rank x to the block of rank x+s (the
// distance s, 1 <= s < n) travels along the set bits of s, lowest first:
// every rank on the way adds its own input for that block, so the partial
// sums form a binomial tree towards each block's owner, and each piece
// reaches its destination in at most ceil(log2 n) hops. A rank holds one
// outgoing piece per remaining distance u (the block of rank x+u, sent on
// dimension tz(u)); the piece is complete once every child piece (distance
// u+2^d for d < tz(u), u+2^d < n) has arrived, and u = 0 is the rank's own
// Output. A step receives one child piece and adds it to the outgoing piece
// it belongs to; the first step that touches a piece also adds the rank's
// input (leaf pieces, whose children are all out of range, send the input
// alone). Non-powers of two: pieces at distances >= n do not exist; the
// generator walks the power-of-two pattern and leaves them out.
//
// Aggregation. The distances are grouped so that one FIFO slot carries
// several pieces and few messages cross each dimension: with P the next
// power of two, aggregation factor A and D = P/A, the pieces whose distance
// is u mod D = g (g != 0) form a low group of A pieces sent on dimension
// tz(g); the multiples of D form one high group per dimension >= log2 D.
// F pieces are packed into one slot (NCCL's postFreq) and a group's
// A/F slots are written ahead of their posts (NCCL's stepOffset, at most
// NCCL_STEPS). A and F follow NCCL's constructor: F doubles while a chunk
// holds at least twice F pieces of the channel's share, A continues to
// double while the FIFO depth allows, and neither exceeds n/2. The order of
// the steps is NCCL's: low groups by decreasing residue (send the leaf
// groups, receive a group into the pieces it feeds), then the high groups
// by increasing scale (the last dimension-0 contributions, then the high
// dimensions), and last the dimension-0 contribution to the rank's Output.
// Inside a group the pieces are in bit-reversed order of decreasing index,
// so that pieces bound for the same high group are contiguous.
//
// All-gather is the same program run backwards: every receive of
// reduce-scatter becomes a send and every send a receive, the slots of each
// connection are numbered from the other end, so all-gather reads ahead
// where reduce-scatter writes ahead. The first step that receives a piece
// also copies it to Output.
//
// The generator is pure: PatSteps gives the rank-independent steps of one
// chunk (what the trace tables in the tests describe) and PatSchedule turns
// them into one rank's SlotOps for a channel part, what the engine and the
// simulator execute.

// PatStep is one step of PAT's program for one chunk, the same on every
// rank. Positions and sizes count pieces (one piece = the chunk's elements
// of one block); dimensions are -1 when absent.
type PatStep struct {
	// S is the distance that names the step (NCCL's s): the piece received
	// was S away from its destination at the rank that sent it; for a step
	// that receives nothing, the piece it sends.
	S int
	// Data is the block the step moves, relative to the rank: block
	// (rank+Data) mod n.
	Data int

	RecvDim   int // dimension received from, or -1
	RecvAhead int // slot: the oldest unreleased one + RecvAhead
	RecvPos   int // piece position in that slot
	RecvSize  int // pieces the slot was posted with
	SendDim   int // dimension sent on, or -1
	SendAhead int // slot: the oldest unposted one + SendAhead
	SendPos   int // piece position in that slot

	// Input: the local operand is the rank's Input (its block Data for
	// reduce-scatter, its own block for all-gather). Acc (reduce-scatter):
	// the local operand is the destination itself, the piece accumulated so
	// far. Out: the value is written to Output (reduce-scatter: the rank's
	// own block, when SendDim is -1; all-gather: block Data, the first time
	// the piece arrives).
	Input, Acc, Out bool

	PostSend int  // > 0: post the oldest unposted slot with this many pieces
	Release  int  // release this many of the oldest unreleased slots after the step
	Final    bool // reduce-scatter: the last write of Output (the post-op, e.g. avg's divide)
}

func (s PatStep) String() string {
	var f []string
	slot := func(dim, ahead, pos int) string {
		if ahead != 0 {
			return fmt.Sprintf("d%d+%d@%d", dim, ahead, pos)
		}
		return fmt.Sprintf("d%d@%d", dim, pos)
	}
	if s.RecvDim >= 0 {
		f = append(f, "recv "+slot(s.RecvDim, s.RecvAhead, s.RecvPos))
	}
	switch {
	case s.Input:
		f = append(f, fmt.Sprintf("in[%d]", s.Data))
	case s.Acc:
		f = append(f, "acc")
	}
	if s.SendDim >= 0 {
		f = append(f, "send "+slot(s.SendDim, s.SendAhead, s.SendPos))
	}
	if s.Out {
		f = append(f, fmt.Sprintf("out[%d]", s.Data))
	}
	if s.PostSend > 0 {
		f = append(f, fmt.Sprintf("post %d", s.PostSend))
	}
	switch {
	case s.Release == 1:
		f = append(f, "release")
	case s.Release > 1:
		f = append(f, fmt.Sprintf("release %d", s.Release))
	}
	if s.Final {
		f = append(f, "final")
	}
	return strings.Join(f, " ")
}

// PatGeom is the shape of PAT's program: ranks, aggregation and packing.
type PatGeom struct {
	N int // ranks, >= 2
	// Agg is the aggregation factor (NCCL's aggFactor): pieces per group,
	// a power of two.
	Agg int
	// Pack is the pieces per slot (NCCL's postFreq): a power of two that
	// divides Agg, with Agg/Pack <= NCCL_STEPS.
	Pack int
}

// PatGeometry is NCCL's choice of aggregation for n ranks, a chunk of
// chunk elements and a channel share of part elements per rank: pack
// pieces while a chunk holds twice the packed share, then aggregate through
// the FIFO's depth, never beyond n/2.
func PatGeometry(n int, chunk, part int64) PatGeom {
	if n < 2 {
		panic(fmt.Sprintf("algos: PAT with %d ranks", n))
	}
	agg := 1
	for part > 0 && chunk/(part*int64(agg)) >= 2 && agg < n/2 {
		agg *= 2
	}
	pack := agg
	for d := protocols.NSteps; d > 1 && agg < n/2; d /= 2 {
		agg *= 2
	}
	return PatGeom{N: n, Agg: agg, Pack: pack}
}

// pow2 returns the smallest power of two >= n.
func pow2(n int) int { return 1 << bits.Len(uint(n-1)) }

// tz is the index of the lowest set bit.
func tz(u int) int { return bits.TrailingZeros(uint(u)) }

// log2 of a power of two.
func log2(p int) int { return tz(p) }

// bitrev reverses the low nbits bits of i.
func bitrev(i, nbits int) int {
	if nbits == 0 {
		return 0
	}
	return int(bits.Reverse(uint(i)) >> (bits.UintSize - nbits))
}

// patGroups places pieces in groups and slots.
type patGroups struct {
	PatGeom
	p, d, l int // next power of two, aggregation delta P/Agg, log2 d
}

func newPatGroups(g PatGeom) *patGroups {
	if g.N < 2 || g.Agg < 1 || g.Pack < 1 || g.Agg%g.Pack != 0 || g.Agg/g.Pack > protocols.NSteps ||
		g.Agg&(g.Agg-1) != 0 || g.Pack&(g.Pack-1) != 0 || g.Agg >= pow2(g.N) {
		panic(fmt.Sprintf("algos: bad PAT geometry %+v", g))
	}
	p := pow2(g.N)
	d := p / g.Agg
	return &patGroups{PatGeom: g, p: p, d: d, l: log2(d)}
}

// lowMember is the multiple of D at position a of a low group.
func (g *patGroups) lowMember(a int) int { return bitrev(g.Agg-1-a, log2(g.Agg)) }

// highMember is the odd factor index i at position a of a high group of
// cnt members: the piece (2i+1)*scale*D.
func (g *patGroups) highMember(a, cnt int) int { return bitrev(cnt-1-a, log2(cnt)) }

// slotKey names one slot of one group on one dimension, the same on every
// rank: the sender's outgoing slot and the receiver's incoming one.
type slotKey struct{ dim, group, slot int }

// place returns where piece u (1 <= u < P) travels: its dimension's slot
// and its position in it.
func (g *patGroups) place(u int) (slotKey, int) {
	var group, pos int
	if r := u % g.d; r != 0 {
		group = r
		pos = g.Agg - 1 - bitrev(u/g.d, log2(g.Agg))
	} else {
		m := u / g.d
		h := tz(m)
		cnt := g.Agg >> (h + 1)
		group = g.d + h
		pos = cnt - 1 - bitrev(m>>(h+1), log2(cnt))
	}
	return slotKey{dim: tz(u), group: group, slot: pos / g.Pack}, pos % g.Pack
}

// patMove is one step before slots are numbered: receive the piece at
// distance s (when recv) and add it to the outgoing piece u (0: Output),
// or send the input of leaf piece u (when !recv).
type patMove struct {
	s, u int
	recv bool
}

// rsMoves lists reduce-scatter's moves for one chunk in NCCL's order,
// including those whose pieces are out of range (filtered later).
func (g *patGroups) rsMoves() []patMove {
	var mv []patMove
	for as := g.d - 1; as >= 1; as-- {
		if as%2 == 1 {
			for a := range g.Agg {
				s := g.lowMember(a)*g.d + as
				mv = append(mv, patMove{s: s, u: s})
			}
		}
		if as == 1 {
			break
		}
		for a := range g.Agg {
			s := g.lowMember(a)*g.d + as
			mv = append(mv, patMove{s: s, u: s - (as & -as), recv: true})
		}
	}
	for scale := 1; scale < g.Agg; scale *= 2 {
		cnt := g.Agg / (2 * scale)
		for a := range cnt {
			s := (2*g.highMember(a, cnt)+1)*scale*g.d + 1
			mv = append(mv, patMove{s: s, u: s - 1, recv: true})
		}
		for a := range cnt {
			s := (2*g.highMember(a, cnt) + 1) * scale * g.d
			mv = append(mv, patMove{s: s, u: s - scale*g.d, recv: true})
		}
	}
	return append(mv, patMove{s: 1, u: 0, recv: true})
}

// PatSteps returns the steps of one chunk of PAT reduce-scatter (rs) or
// all-gather, the same on every rank.
func PatSteps(geom PatGeom, rs bool) []PatStep {
	g := newPatGroups(geom)
	n := g.N
	type raw struct {
		PatStep
		recvKey, sendKey slotKey
	}
	var steps []raw
	for _, m := range g.rsMoves() {
		if m.u >= n || (!m.recv && m.s >= n) {
			continue // the piece does not exist
		}
		st := raw{PatStep: PatStep{S: m.s, Data: m.u, RecvDim: -1, SendDim: -1}}
		if m.recv && m.s < n { // a child beyond n is absent: the step only sends
			st.recvKey, st.RecvPos = g.place(m.s)
			st.RecvDim = st.recvKey.dim
		}
		if m.u != 0 {
			st.sendKey, st.SendPos = g.place(m.u)
			st.SendDim = st.sendKey.dim
		}
		steps = append(steps, st)
	}
	if !rs {
		// Run the program backwards: receives become sends and sends
		// receives; a step's piece is the one it now receives (u) and it
		// forwards it to the child it used to receive from.
		rev := make([]raw, 0, len(steps))
		for i := len(steps) - 1; i >= 0; i-- {
			st := steps[i]
			st.RecvDim, st.SendDim = st.SendDim, st.RecvDim
			st.RecvPos, st.SendPos = st.SendPos, st.RecvPos
			st.recvKey, st.sendKey = st.sendKey, st.recvKey
			rev = append(rev, st)
		}
		steps = rev
	}

	// Local operands and Output, in time order.
	touched := map[int]bool{} // outgoing pieces (rs) or received pieces (ag) seen
	kept := steps[:0]
	for _, st := range steps {
		first := !touched[st.Data]
		touched[st.Data] = true
		if rs {
			st.Input, st.Acc = first, !first
			st.Out = st.SendDim < 0
			if st.RecvDim < 0 && st.Acc && st.SendDim >= 0 {
				// Nothing to add: the step only carries the slot's post
				// (NCCL's send-only steps whose child is out of range).
				st.Acc = false
			}
		} else {
			st.Input = st.RecvDim < 0
			st.Out = first
			if st.SendDim < 0 && !st.Out {
				continue // a piece already in Output, sent nowhere
			}
		}
		kept = append(kept, st)
	}
	steps = kept

	// Number each dimension's slots in the order the sender posts them: the
	// last write of a slot posts it. Slot sizes are the pieces up to the
	// last one written.
	lastWrite := map[slotKey]int{}
	size := map[slotKey]int{}
	for i, st := range steps {
		if st.SendDim >= 0 {
			lastWrite[st.sendKey] = i
			size[st.sendKey] = max(size[st.sendKey], st.SendPos+1)
		}
	}
	seq := map[slotKey]int{}
	posted := map[int]int{} // per dimension
	for i := range steps {
		st := &steps[i]
		if st.SendDim >= 0 && lastWrite[st.sendKey] == i {
			seq[st.sendKey] = posted[st.SendDim]
			posted[st.SendDim]++
		}
	}
	lastRead := map[slotKey]int{}
	for i, st := range steps {
		if st.RecvDim >= 0 {
			lastRead[st.recvKey] = i
		}
	}
	posted = map[int]int{}
	released := map[int]int{}
	done := map[[2]int]bool{} // (dim, slot) read for the last time
	for i := range steps {
		st := &steps[i]
		if st.RecvDim >= 0 {
			k, ok := seq[st.recvKey]
			if !ok {
				panic(fmt.Sprintf("algos: PAT %+v step %d receives slot %+v that is never sent", geom, i, st.recvKey))
			}
			st.RecvAhead = k - released[st.RecvDim]
			st.RecvSize = size[st.recvKey]
			if lastRead[st.recvKey] == i {
				// Release in FIFO order: a slot read for the last time
				// before an older one waits for it.
				done[[2]int{st.RecvDim, k}] = true
				for done[[2]int{st.RecvDim, released[st.RecvDim]}] {
					released[st.RecvDim]++
					st.Release++
				}
			}
		}
		if st.SendDim >= 0 {
			k := seq[st.sendKey]
			st.SendAhead = k - posted[st.SendDim]
			if lastWrite[st.sendKey] == i {
				if st.SendAhead != 0 {
					panic(fmt.Sprintf("algos: PAT %+v step %d posts slot %d of dim %d out of order", geom, i, k, st.SendDim))
				}
				st.PostSend = size[st.sendKey]
				posted[st.SendDim]++
			}
		}
		if st.RecvAhead < 0 || st.RecvAhead >= protocols.NSteps || st.SendAhead < 0 || st.SendAhead >= protocols.NSteps {
			panic(fmt.Sprintf("algos: PAT %+v step %d: ahead %d/%d beyond the FIFO", geom, i, st.RecvAhead, st.SendAhead))
		}
	}
	out := make([]PatStep, len(steps))
	lastOut := -1
	for i, st := range steps {
		out[i] = st.PatStep
		if rs && st.Out {
			lastOut = i
		}
	}
	if lastOut >= 0 {
		out[lastOut].Final = true
	}
	return out
}
