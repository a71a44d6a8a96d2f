package algos

import (
	"math"

	"github.com/seed-760dd1f1/cc/protocols"
)

// CMA: the single-copy all-gather of one host. Through the one-shot slots
// (or a ring's FIFO) every byte of an all-gather is copied three times: by
// its owner into its own output and into shared memory, and by each reader
// out of it. Here every rank publishes where its send buffer is and every
// other rank reads it straight into its output with cross-memory attach
// (Linux's process_vm_readv, as Open MPI's shared-memory transport does
// for large messages), starting after its own rank so that the ranks do
// not all read rank 0 first:
//
//	all-gather     block r of out = rank r's Input   (own block a local copy)
//
// The whole call is one piece: no slot bounds it. A second
// synchronization (Flat.Hold) keeps every rank in the call until every
// other rank has read its input. Whether the system call is allowed
// between the ranks is known only at run time (the runtime probes it at
// Init on every pair of ranks); the row's availability here is the
// topology's alone.

// cmaRow is the row of a single-copy collective: one protocol entry,
// Simple, as the one-shot rows.
func cmaRow(c Coll) Algorithm {
	r := Algorithm{Algo: CMA, Coll: c, Flat: &Flat{Plan: cmaPlan, Piece: wholeCall, Unavailable: CMAUnavailable, Hold: true}}
	r.Geometry[protocols.Simple] = Geometry{ChunkSteps: 1, SliceSteps: 1}
	return r
}

// CMAUnavailable says why the single-copy rows cannot run on topo: as the
// one-shot rows, they need every rank on one host and at most
// OneShotMaxRanks of them (the synchronizations are the one-shot area's).
func CMAUnavailable(topo *Topo) string { return oneHostUnavailable(CMA, topo) }

// wholeCall: no slot bounds a piece; a call is one piece.
func wholeCall(int64, int) int64 { return math.MaxInt64 }

// cmaPlan is the single-copy all-gather's plan: the own block copied
// locally, then every other rank's input read from that rank.
func cmaPlan(a *FlatArgs) FlatPlan {
	n, me, off, m := a.NRanks, a.Rank, a.Part.Offset, a.Part.Count
	gets := make([]FlatGet, 0, n)
	gets = append(gets, FlatGet{Rank: me, With: NoPeer, InOff: off, OutOff: int64(me)*a.Count + off, Count: m, Local: true})
	for i := 1; i < n; i++ {
		r := (me + i) % n
		gets = append(gets, FlatGet{Rank: r, With: NoPeer, InOff: off, OutOff: int64(r)*a.Count + off, Count: m, Peer: true})
	}
	return FlatPlan{Gets: gets}
}
