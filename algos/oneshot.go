package algos

import (
	"fmt"

	"github.com/seed-760dd1f1/cc/protocols"
)

// ONESHOT: the flat shared-memory collectives of one host
// (shared/reference/small-message-algorithms.md §5 R1; DeepSpeed's and
// vLLM's CPU all-reduce). Every rank has a slot in a staging area all
// ranks map; for call k a rank copies its input into its slot k&1,
// publishes k, waits until every rank has published k, and reads what it
// needs straight from the slots:
//
//	all-reduce     out = slot[0] ⊕ slot[1] ⊕ ... ⊕ slot[n-1]     (every rank, the same order)
//	reduce         the same, on the root only
//	reduce-scatter out = block rank of slot[0] ⊕ ... ⊕ slot[n-1]
//	all-gather     block r of out = slot[r]                      (own block from Input)
//	broadcast      out = slot[root]                              (only the root writes a slot)
//
// One synchronization and no schedule: such a row has no generator but a
// Flat description, which the runtime runs on its own fast path and
// algos/sim checks with exact data. Two slots alternate so that no second
// barrier is needed: a rank writes slot k&1 at call k only after every
// rank published k-1, that is, finished reading slot k&1 at call k-2.

// OneShotMaxRanks is the most ranks the one-shot rows take: every rank
// reads every other rank's slot, (n-1) x the data per call, and a wait
// polls n-1 lines; beyond a few L3 neighbours a two-level form would be
// needed (reference §7 "Hierarchy beyond ~16 ranks").
const OneShotMaxRanks = 16

// Flat is how a row without a schedule runs: one synchronization over a
// staging area of one slot per rank.
type Flat struct {
	// Plan returns what one rank does for one piece of a call: the part
	// of every block (or of the buffer) that fits a slot.
	Plan func(a *FlatArgs) FlatPlan
	// Piece returns the elements of one piece when a slot holds slotElems
	// elements: what a call moves per synchronization.
	Piece func(slotElems int64, nranks int) int64
	// Unavailable says why the row cannot run on topo, or "".
	Unavailable func(topo *Topo) string
	// Hold: after its Gets a rank synchronizes once more, so that no rank
	// returns (and lets its caller change its input) while another may
	// still read that input (FlatGet.Peer).
	Hold bool
}

// FlatArgs are what a Flat plan is given.
type FlatArgs struct {
	Coll               Coll
	Rank, NRanks, Root int
	// Count is the collective's count (of one block for reduce-scatter
	// and all-gather).
	Count int64
	// Part is the piece: Offset and Count elements of the buffer, or of
	// every block.
	Part Part
}

// FlatPlan is one rank's work on one piece: copy Puts into its slot,
// publish, wait for every rank, then do Gets in order.
type FlatPlan struct {
	Puts []FlatPut
	Gets []FlatGet
}

// FlatPut copies Count elements of Input at InOff into the rank's own
// slot at SlotOff, applying the reduction's pre-op when Pre is set. Own
// says that no other rank reads those slot elements: a runner may skip the
// copy where its gets read the rank's own elements from Input instead
// (engine.CompileFlat does when Output does not overlap Input and the
// reduction has no pre-op).
type FlatPut struct {
	InOff, SlotOff, Count int64
	Pre, Own              bool
}

// FlatGet writes Count elements of Output at OutOff:
//
//	Local:          a copy of Input at InOff (the rank's own data)
//	Peer:           a copy of rank Rank's Input at InOff, read straight
//	                from that rank's buffer (cross-memory attach, CMA);
//	                only in a Flat with Hold
//	With >= 0:      slot[Rank] ⊕ slot[With], both at SlotOff
//	Reduce:         Output ⊕ slot[Rank]
//	otherwise:      a copy of slot[Rank]
//
// Post applies the reduction's post-op to the result.
type FlatGet struct {
	Rank, With             int
	InOff, SlotOff, OutOff int64
	Count                  int64
	Local, Reduce, Post    bool
	Peer                   bool
}

// oneShotRow is the row of a one-shot collective. It has one protocol
// entry, Simple, so that the tuner times it once (the data moves through
// plain memory, whatever the protocol).
func oneShotRow(c Coll) Algorithm {
	r := Algorithm{Algo: OneShot, Coll: c, Flat: &Flat{Plan: oneShotPlan, Piece: oneShotPiece(c), Unavailable: OneShotUnavailable}}
	r.Geometry[protocols.Simple] = Geometry{ChunkSteps: 1, SliceSteps: 1}
	return r
}

// OneShotUnavailable says why the one-shot rows cannot run on topo: they
// need every rank on one host (shared memory) and at most
// OneShotMaxRanks of them.
func OneShotUnavailable(topo *Topo) string { return oneHostUnavailable(OneShot, topo) }

// oneHostUnavailable says why flat row a, which needs every rank on one
// host and at most OneShotMaxRanks of them, cannot run on topo, or "".
func oneHostUnavailable(a Algo, topo *Topo) string {
	switch {
	case topo.NHosts() > 1:
		return fmt.Sprintf("%s runs only when every rank is on one host, and the ranks are on %d hosts", a, topo.NHosts())
	case topo.NRanks > OneShotMaxRanks:
		return fmt.Sprintf("%s runs with at most %d ranks, and there are %d", a, OneShotMaxRanks, topo.NRanks)
	}
	return ""
}

// oneShotPiece: reduce-scatter stages every block's piece, the others one
// piece of the buffer.
func oneShotPiece(c Coll) func(slotElems int64, nranks int) int64 {
	return func(slotElems int64, nranks int) int64 {
		if c == ReduceScatter {
			return slotElems / int64(nranks)
		}
		return slotElems
	}
}

// oneShotPlan is every one-shot collective's plan for one piece.
func oneShotPlan(a *FlatArgs) FlatPlan {
	n, me, off, m := a.NRanks, a.Rank, a.Part.Offset, a.Part.Count
	var pl FlatPlan
	switch c := a.Coll; c {
	case AllReduce, Reduce:
		// A reduce's root is the only reader of its own slot.
		pl.Puts = []FlatPut{{InOff: off, Count: m, Pre: true, Own: c == Reduce && me == a.Root}}
		if c == Reduce && me != a.Root {
			return pl
		}
		pl.Gets = reduceSlots(n, 0, off, m)
	case ReduceScatter:
		for b := range n {
			// Block me is reduced by this rank alone.
			pl.Puts = append(pl.Puts, FlatPut{InOff: int64(b)*a.Count + off, SlotOff: int64(b) * m, Count: m, Pre: true, Own: b == me})
		}
		pl.Gets = reduceSlots(n, int64(me)*m, off, m)
	case AllGather:
		pl.Puts = []FlatPut{{InOff: off, Count: m}}
		for r := range n {
			g := FlatGet{Rank: r, With: NoPeer, OutOff: int64(r)*a.Count + off, Count: m}
			if r == me {
				g.Local, g.InOff = true, off
			}
			pl.Gets = append(pl.Gets, g)
		}
	case Broadcast:
		g := FlatGet{Rank: a.Root, With: NoPeer, OutOff: off, Count: m}
		if me == a.Root {
			pl.Puts = []FlatPut{{InOff: off, Count: m}}
			g.Local, g.InOff = true, off
		}
		pl.Gets = []FlatGet{g}
	}
	return pl
}

// reduceSlots reduces every rank's slot at slotOff into Output at outOff,
// in rank order 0..n-1, so that every rank computes the same bits.
func reduceSlots(n int, slotOff, outOff, m int64) []FlatGet {
	if n == 1 {
		return []FlatGet{{Rank: 0, With: NoPeer, SlotOff: slotOff, OutOff: outOff, Count: m, Post: true}}
	}
	gets := []FlatGet{{Rank: 0, With: 1, SlotOff: slotOff, OutOff: outOff, Count: m}}
	for r := 2; r < n; r++ {
		gets = append(gets, FlatGet{Rank: r, With: NoPeer, SlotOff: slotOff, OutOff: outOff, Count: m, Reduce: true})
	}
	gets[len(gets)-1].Post = true
	return gets
}

// Plans returns one rank's plans of a whole call of a (Part is ignored):
// one per piece of at most Piece(slotElems) elements, in order; none for
// a count of 0. Every rank of a call gets as many.
func (f *Flat) Plans(a FlatArgs, slotElems int64) []FlatPlan {
	piece := f.Piece(slotElems, a.NRanks)
	if piece < 1 {
		panic(fmt.Sprintf("algos: a slot of %d elements holds no piece of %d ranks", slotElems, a.NRanks))
	}
	var out []FlatPlan
	for off := int64(0); off < a.Count; off += piece {
		a.Part = Part{Offset: off, Count: min(piece, a.Count-off)}
		out = append(out, f.Plan(&a))
	}
	return out
}
