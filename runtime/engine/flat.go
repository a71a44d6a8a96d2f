package engine

import (
	"fmt"
	"unsafe"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// FlatArea is the staging area a flat row (algos.Flat) runs over: a slot
// per rank that every rank maps, and one synchronization per call. The
// shared-memory transport's one-shot area satisfies it.
type FlatArea interface {
	// Stages returns every rank's staging bytes for call k, by rank: their
	// InlineBytes, which a call whose pieces fit uses instead of its slot
	// (they travel with the sequence number Post publishes, one cache
	// line), or their slots.
	Stages(k uint64, inline bool) [][]byte
	// InlineBytes is the size of the inline staging bytes.
	InlineBytes() int
	// Post publishes this rank's slot of call k.
	Post(k uint64)
	// Await waits until every rank has posted call k; it returns an error
	// when the communicator has failed or a rank is gone.
	Await(k uint64) error
}

// FlatFits reports whether every piece of plans, of elements of es bytes,
// fits in bytes of a staging area, as this rank writes it and reads the
// others': what a call may stage in a FlatArea's inline bytes. Every rank
// of a call gets the same answer (a rank that writes no slot, as
// broadcast's non-roots, reads the root's).
func FlatFits(plans []algos.FlatPlan, es int64, bytes int) bool {
	for i := range plans {
		for _, p := range plans[i].Puts {
			if (p.SlotOff+p.Count)*es > int64(bytes) {
				return false
			}
		}
		for _, g := range plans[i].Gets {
			if !g.Local && (g.SlotOff+g.Count)*es > int64(bytes) {
				return false
			}
		}
	}
	return true
}

// FlatCall is how a flat row's call treats its buffers, which decides
// which copies its plans need: CompileFlat makes a program for one.
type FlatCall struct {
	Rank   int   // this rank's index in the area
	Elem   int64 // element size in bytes
	Inline bool  // every piece fits the area's inline bytes (FlatFits)
	// Pre: the reduction has a pre-op, so a slot does not hold a plain
	// copy of Input.
	Pre bool
	// Overlap: Output overlaps Input (in place), so a get may overwrite
	// Input that a later get would read.
	Overlap bool
}

// FlatProgram is a flat row's plans compiled for one rank and one kind of
// call (FlatCall): byte offsets, and every source resolved to Input,
// Output or a rank's staging bytes, so that a call (Run) only copies,
// posts, waits and reduces. A communicator compiles a plan once per kind
// of call and keeps it with the plan. An 8 B all-reduce of 2 ranks, the
// peer's data in place and nothing to wait for (BenchmarkFlat8B): 53-62 ns
// when the plans were walked at every call, 23-28 ns compiled; the
// exchange itself takes 70 ns (shm's BenchmarkOneShotFloor).
type FlatProgram struct {
	pieces []flatPiece
	rank   int
	inline bool
}

type flatPiece struct {
	puts []flatPut
	gets []flatGet
}

// flatPut copies n bytes of Input at in into this rank's staging bytes
// at stage, with the pre-op when pre is set.
type flatPut struct {
	in, stage, n int64
	pre          bool
}

// flatGet writes n bytes of Output at out: a copy of a, or a ⊕ b; post
// applies the post-op after.
type flatGet struct {
	out, n int64
	a, b   flatSrc
	reduce bool
	post   bool
}

// flatSrc is a get's source: bytes at off of Input (rank srcIn), Output
// (srcOut) or rank's staging bytes.
type flatSrc struct {
	rank int
	off  int64
}

const (
	srcIn  = -1
	srcOut = -2
)

// CompileFlat compiles plans for calls like c. It returns an error for a
// plan that reduces where the call has no reduction (reduces false).
func CompileFlat(plans []algos.FlatPlan, c FlatCall, reduces bool) (*FlatProgram, error) {
	es := c.Elem
	// ownFromInput: every get reads this rank's own slot elements from
	// Input (a put copied them there without a pre-op, and no get
	// overwrites Input); the puts only this rank reads (FlatPut.Own) are
	// then skipped: a 2-rank reduce-scatter copies half its input into
	// its slot rather than all of it.
	ownFromInput := !c.Pre && !c.Overlap
	p := &FlatProgram{pieces: make([]flatPiece, len(plans)), rank: c.Rank, inline: c.Inline}
	for i := range plans {
		pl, pc := &plans[i], &p.pieces[i]
		for _, put := range pl.Puts {
			if put.Own && ownFromInput {
				continue
			}
			pc.puts = append(pc.puts, flatPut{in: put.InOff * es, stage: put.SlotOff * es, n: put.Count * es, pre: put.Pre && c.Pre})
		}
		for j, g := range pl.Gets {
			if g.Peer {
				return nil, fmt.Errorf("a get reads rank %d's input in its process (cross-memory attach), which a flat program cannot: the runtime runs such rows itself", g.Rank)
			}
			// A source that is this rank's own slot is read from Input
			// where the slot holds a plain copy of it and no earlier get
			// has overwritten it (j is 0, or Output does not overlap
			// Input): the same bits, without loading the line this rank
			// has just stored to, whose load waits until the store has
			// taken the line back from the readers (an 8 B all-reduce of
			// 2 ranks: 0.38-0.39 us against 0.45-0.46 us, chrt -f 10, 12
			// interleaved runs, a loaded machine).
			inOK := j == 0 && !c.Pre || ownFromInput
			slot := func(r int) flatSrc {
				if r == c.Rank && inOK {
					if off, ok := ownInput(pl, g.SlotOff, g.Count); ok {
						return flatSrc{rank: srcIn, off: off * es}
					}
				}
				return flatSrc{rank: r, off: g.SlotOff * es}
			}
			fg := flatGet{out: g.OutOff * es, n: g.Count * es, post: g.Post}
			switch {
			case g.Local:
				fg.a = flatSrc{rank: srcIn, off: g.InOff * es}
			case g.With != algos.NoPeer:
				fg.a, fg.b, fg.reduce = slot(g.Rank), slot(g.With), true
			case g.Reduce:
				fg.a, fg.b, fg.reduce = flatSrc{rank: srcOut, off: fg.out}, slot(g.Rank), true
			default:
				fg.a = slot(g.Rank)
			}
			if fg.reduce && !reduces {
				return nil, fmt.Errorf("flat plan reduces rank %d without a reduction", g.Rank)
			}
			pc.gets = append(pc.gets, fg)
		}
	}
	return p, nil
}

// Run runs one call of p over area, from in to out (which may be the same
// memory, as the FlatCall p was compiled for says), reducing with fn (nil
// for collectives that do not reduce). seq is the area's last call number
// on this rank: each piece is the next call. Nothing is allocated, and no
// goroutine is involved: the whole call runs on the caller's.
func (p *FlatProgram) Run(area FlatArea, seq *uint64, in, out []byte, fn *reduce.Func) error {
	post := fn != nil && fn.HasPost()
	for i := range p.pieces {
		pc := &p.pieces[i]
		*seq++
		k := *seq
		stages := area.Stages(k, p.inline)
		for _, put := range pc.puts {
			dst, src := stages[p.rank][put.stage:put.stage+put.n], in[put.in:put.in+put.n]
			if put.pre {
				fn.Pre(dst, src)
			} else {
				copy(dst, src)
			}
		}
		area.Post(k)
		if err := area.Await(k); err != nil {
			return err
		}
		for j := range pc.gets {
			g := &pc.gets[j]
			dst := out[g.out : g.out+g.n]
			a := source(g.a, g.n, in, out, stages)
			switch {
			case g.reduce:
				fn.Reduce(dst, a, source(g.b, g.n, in, out, stages))
			case unsafe.SliceData(a) != unsafe.SliceData(dst):
				copy(dst, a)
			}
			if g.post && post {
				fn.Post(dst, dst)
			}
		}
	}
	return nil
}

// source is the n bytes src names.
func source(src flatSrc, n int64, in, out []byte, stages [][]byte) []byte {
	switch src.rank {
	case srcIn:
		return in[src.off : src.off+n]
	case srcOut:
		return out[src.off : src.off+n]
	}
	return stages[src.rank][src.off : src.off+n]
}

// ownInput returns the Input offset of the count elements pl's puts copy
// into this rank's slot at slotOff, if one put holds them all.
func ownInput(pl *algos.FlatPlan, slotOff, count int64) (int64, bool) {
	for _, p := range pl.Puts {
		if p.SlotOff <= slotOff && slotOff+count <= p.SlotOff+p.Count {
			return p.InOff + slotOff - p.SlotOff, true
		}
	}
	return 0, false
}
