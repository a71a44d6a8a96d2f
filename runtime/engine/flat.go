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
	// Slot returns rank's slot for call k.
	Slot(rank int, k uint64) []byte
	// Inline returns rank's InlineBytes for call k, which a call whose
	// pieces fit uses instead of its slot: they travel with the sequence
	// number Post publishes (one cache line).
	Inline(rank int, k uint64) []byte
	// InlineBytes is the size of Inline's bytes.
	InlineBytes() int
	// Post publishes this rank's slot of call k.
	Post(k uint64)
	// Await waits until every rank has posted call k; it returns an error
	// when the communicator has failed or a rank is gone.
	Await(k uint64) error
}

// FlatTask is one call of a flat row: its plans, one per piece (each one
// synchronization), and the buffers.
type FlatTask struct {
	Plans []algos.FlatPlan
	Rank  int    // this rank's index in the area
	In    []byte // the Input buffer
	Out   []byte // the Output buffer (may be the same memory as In)
	Type  reduce.DataType
	Fn    *reduce.Func // the reduction; nil for collectives that do not reduce
	// Inline runs the call in the area's inline bytes rather than its
	// slots: every plan fits them (FlatFits).
	Inline bool
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

// stage returns rank's staging bytes of call k for t: its slot or its
// inline bytes.
func (t *FlatTask) stage(area FlatArea, rank int, k uint64) []byte {
	if t.Inline {
		return area.Inline(rank, k)
	}
	return area.Slot(rank, k)
}

// RunFlat runs t over area. seq is the area's last call number on this
// rank: each piece is the next call. Nothing is allocated, and no
// goroutine is involved: the whole call runs on the caller's.
func RunFlat(area FlatArea, seq *uint64, t *FlatTask) error {
	es := int64(t.Type.Size())
	for i := range t.Plans {
		pl := &t.Plans[i]
		*seq++
		k := *seq
		mine := t.stage(area, t.Rank, k)
		for _, p := range pl.Puts {
			if p.Own && t.ownFromInput() {
				continue // get reads these elements from Input
			}
			dst, src := mine[p.SlotOff*es:(p.SlotOff+p.Count)*es], t.In[p.InOff*es:(p.InOff+p.Count)*es]
			if p.Pre && !t.noPre() {
				t.Fn.Pre(dst, src)
			} else {
				copy(dst, src)
			}
		}
		area.Post(k)
		if err := area.Await(k); err != nil {
			return err
		}
		for j := range pl.Gets {
			if err := t.get(area, k, pl, j, es); err != nil {
				return err
			}
		}
	}
	return nil
}

// get does get j of pl. A source that is this rank's own slot is read
// from Input instead where the slot holds a plain copy of it (no pre-op)
// and no earlier get of pl has overwritten it (j is 0, or Output does not
// overlap Input): the same bits, without loading the line this rank has
// just stored to, whose load waits until the store has taken the line
// back from the readers (an 8 B all-reduce of 2 ranks: 0.38-0.39 µs
// against 0.45-0.46 µs, chrt -f 10, 12 interleaved runs, a loaded
// machine).
func (t *FlatTask) get(area FlatArea, k uint64, pl *algos.FlatPlan, j int, es int64) error {
	g := &pl.Gets[j]
	dst := t.Out[g.OutOff*es : (g.OutOff+g.Count)*es]
	inOK := j == 0 && t.noPre() || t.ownFromInput()
	slot := func(r int) []byte {
		if r == t.Rank && inOK {
			if off, ok := ownInput(pl, g.SlotOff, g.Count); ok {
				return t.In[off*es : (off+g.Count)*es]
			}
		}
		return t.stage(area, r, k)[g.SlotOff*es : (g.SlotOff+g.Count)*es]
	}
	switch {
	case g.Local:
		src := t.In[g.InOff*es : (g.InOff+g.Count)*es]
		if len(src) > 0 && unsafe.SliceData(src) != unsafe.SliceData(dst) {
			copy(dst, src)
		}
	case g.With != algos.NoPeer:
		if t.Fn == nil {
			return fmt.Errorf("flat plan reduces ranks %d and %d without a reduction", g.Rank, g.With)
		}
		t.Fn.Reduce(dst, slot(g.Rank), slot(g.With))
	case g.Reduce:
		if t.Fn == nil {
			return fmt.Errorf("flat plan reduces rank %d without a reduction", g.Rank)
		}
		t.Fn.Reduce(dst, dst, slot(g.Rank))
	default:
		copy(dst, slot(g.Rank))
	}
	if g.Post && t.Fn != nil && t.Fn.HasPost() {
		t.Fn.Post(dst, dst)
	}
	return nil
}

// ownFromInput reports whether every get reads this rank's own slot
// elements from Input (where a put copied them without a pre-op): Output
// does not overlap Input, so no get has overwritten them, and the
// reduction has no pre-op. RunFlat then skips the puts only this rank
// reads (FlatPut.Own): a 2-rank reduce-scatter copies half its input into
// its slot rather than all of it.
func (t *FlatTask) ownFromInput() bool {
	return t.noPre() && !overlaps(t.In, t.Out)
}

// noPre reports whether the reduction has no pre-op: a slot then holds a
// plain copy of what was put.
func (t *FlatTask) noPre() bool { return t.Fn == nil || !t.Fn.HasPre() }

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

// overlaps reports whether a and b share memory.
func overlaps(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0, b0 := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	return a0 < b0+uintptr(len(b)) && b0 < a0+uintptr(len(a))
}
