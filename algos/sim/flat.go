package sim

// Flat rows (algos.Flat: the one-shot collectives) have no schedule: every
// rank copies into its own slot, all synchronize once, and every rank reads
// the slots. RunFlat executes their plans piece by piece with exact data.

import (
	"fmt"
	"unsafe"

	"github.com/seed-760dd1f1/cc/algos"
)

// FlatStats is what RunFlat counted.
type FlatStats struct {
	Syncs     int   // synchronizations: one per piece, two with hold
	SlotReads int64 // elements read from other ranks' slots, over all ranks
	PeerReads int64 // elements read from other ranks' inputs, over all ranks
}

// RunFlat runs plans[r][i], rank r's plan of piece i, for every rank: in
// piece i every rank does its Puts into its slot (slotElems elements),
// then, after the synchronization, its Gets. It fails if a plan reaches
// outside a buffer or a slot, or reads slot elements their rank did not
// put in that piece (stale data from an earlier call), or reads another
// rank's slot elements that rank put for itself alone (FlatPut.Own: a
// runner may leave them out).
//
// A FlatGet.Peer reads another rank's input as it is when the rank reads
// it; it needs hold, the row's second synchronization (algos.Flat.Hold),
// which RunFlat counts, and it may not read input elements its own rank
// overwrites in the same piece (in place).
func RunFlat(ranks []Rank, plans [][]algos.FlatPlan, red Reduction, slotElems int64, hold bool) (FlatStats, error) {
	n := len(ranks)
	var st FlatStats
	if n == 0 {
		return st, nil
	}
	pieces := len(plans[0])
	for r := range plans {
		if len(plans[r]) != pieces {
			return st, fmt.Errorf("rank %d has %d pieces, rank 0 has %d: every rank must synchronize as often", r, len(plans[r]), pieces)
		}
	}
	slots := make([][]int64, n)
	fresh, own := make([][]bool, n), make([][]bool, n)
	for r := range slots {
		slots[r] = make([]int64, slotElems)
		fresh[r], own[r] = make([]bool, slotElems), make([]bool, slotElems)
	}
	for i := range pieces {
		for r := range n {
			clear(fresh[r])
			clear(own[r])
			for _, p := range plans[r][i].Puts {
				if err := inRange("input", len(ranks[r].In), p.InOff, p.Count); err != nil {
					return st, fmt.Errorf("rank %d piece %d put: %w", r, i, err)
				}
				if err := inRange("slot", len(slots[r]), p.SlotOff, p.Count); err != nil {
					return st, fmt.Errorf("rank %d piece %d put: %w", r, i, err)
				}
				for e := range p.Count {
					x := ranks[r].In[p.InOff+e]
					if p.Pre && red.Pre != nil {
						x = red.Pre(r, x)
					}
					slots[r][p.SlotOff+e] = x
					fresh[r][p.SlotOff+e] = true
					own[r][p.SlotOff+e] = p.Own
				}
			}
		}
		st.Syncs++
		for r := range n {
			for _, g := range plans[r][i].Gets {
				if g.Peer && !hold {
					return st, fmt.Errorf("rank %d piece %d reads rank %d's input without the second synchronization: that rank may have returned and changed it", r, i, g.Rank)
				}
				if err := st.get(ranks, slots, fresh, own, r, g, red); err != nil {
					return st, fmt.Errorf("rank %d piece %d get: %w", r, i, err)
				}
			}
		}
		if hold {
			st.Syncs++
		}
		if err := peerInputsIntact(ranks, plans, i); err != nil {
			return st, err
		}
	}
	return st, nil
}

// peerInputsIntact fails when a rank's gets of piece i write output
// elements that are input elements another rank reads from it (Peer) in
// that piece: the reader could see them before or after the write. A
// local copy of an element onto itself (in place) changes nothing.
func peerInputsIntact(ranks []Rank, plans [][]algos.FlatPlan, i int) error {
	for r := range plans {
		for _, g := range plans[r][i].Gets {
			if !g.Peer || g.Count == 0 {
				continue
			}
			src := ranks[g.Rank]
			d, ok := inputShift(src)
			if !ok {
				continue // input and output apart
			}
			lo, hi := g.InOff+d, g.InOff+d+g.Count // the read, as output elements
			for _, w := range plans[g.Rank][i].Gets {
				if w.Local && w.InOff+d == w.OutOff {
					continue
				}
				if w.OutOff < hi && lo < w.OutOff+w.Count {
					return fmt.Errorf("rank %d piece %d reads input elements [%d, %d) of rank %d, which that rank's gets overwrite", r, i, g.InOff, g.InOff+g.Count, g.Rank)
				}
			}
		}
	}
	return nil
}

// inputShift returns d such that r.In[x] is r.Out[x+d], when In lies in Out.
func inputShift(r Rank) (int64, bool) {
	if len(r.In) == 0 || len(r.Out) == 0 {
		return 0, false
	}
	in, out := uintptr(unsafe.Pointer(&r.In[0])), uintptr(unsafe.Pointer(&r.Out[0]))
	if in < out || in >= out+uintptr(len(r.Out))*8 {
		return 0, false
	}
	return int64(in-out) / 8, true
}

// get does one FlatGet of rank r.
func (st *FlatStats) get(ranks []Rank, slots [][]int64, fresh, own [][]bool, r int, g algos.FlatGet, red Reduction) error {
	n := len(ranks)
	out := ranks[r].Out
	if err := inRange("output", len(out), g.OutOff, g.Count); err != nil {
		return err
	}
	read := func(src int) ([]int64, error) {
		if src < 0 || src >= n {
			return nil, fmt.Errorf("slot of rank %d: want 0..%d", src, n-1)
		}
		if err := inRange("slot", len(slots[src]), g.SlotOff, g.Count); err != nil {
			return nil, err
		}
		for e := range g.Count {
			if !fresh[src][g.SlotOff+e] {
				return nil, fmt.Errorf("slot of rank %d element %d was not put in this piece", src, g.SlotOff+e)
			}
			if src != r && own[src][g.SlotOff+e] {
				return nil, fmt.Errorf("slot of rank %d element %d was put for that rank alone (Own)", src, g.SlotOff+e)
			}
		}
		if src != r {
			st.SlotReads += g.Count
		}
		return slots[src][g.SlotOff : g.SlotOff+g.Count], nil
	}
	var val []int64
	switch {
	case g.Peer:
		if g.Rank < 0 || g.Rank >= n || g.Rank == r {
			return fmt.Errorf("peer read of rank %d: want another rank of 0..%d", g.Rank, n-1)
		}
		if err := inRange("input of rank "+fmt.Sprint(g.Rank), len(ranks[g.Rank].In), g.InOff, g.Count); err != nil {
			return err
		}
		val = append(val, ranks[g.Rank].In[g.InOff:g.InOff+g.Count]...)
		st.PeerReads += g.Count
	case g.Local:
		if err := inRange("input", len(ranks[r].In), g.InOff, g.Count); err != nil {
			return err
		}
		val = append(val, ranks[r].In[g.InOff:g.InOff+g.Count]...)
	case g.With != algos.NoPeer:
		a, err := read(g.Rank)
		if err != nil {
			return err
		}
		b, err := read(g.With)
		if err != nil {
			return err
		}
		if red.Op == nil {
			return fmt.Errorf("reduces with a reduction that has no Op")
		}
		for e := range a {
			val = append(val, red.Op(a[e], b[e]))
		}
	default:
		a, err := read(g.Rank)
		if err != nil {
			return err
		}
		val = append(val, a...)
		if g.Reduce {
			if red.Op == nil {
				return fmt.Errorf("reduces with a reduction that has no Op")
			}
			for e := range val {
				val[e] = red.Op(out[g.OutOff+int64(e)], val[e])
			}
		}
	}
	for e, x := range val {
		if g.Post && red.Post != nil {
			x = red.Post(x)
		}
		out[g.OutOff+int64(e)] = x
	}
	return nil
}

func inRange(what string, n int, off, count int64) error {
	if off < 0 || count < 0 || off+count > int64(n) {
		return fmt.Errorf("%s [%d, %d) is outside its %d elements", what, off, off+count, n)
	}
	return nil
}
