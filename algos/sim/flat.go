package sim

// Flat rows (algos.Flat: the one-shot collectives) have no schedule: every
// rank copies into its own slot, all synchronize once, and every rank reads
// the slots. RunFlat executes their plans piece by piece with exact data.

import (
	"fmt"

	"github.com/seed-760dd1f1/cc/algos"
)

// FlatStats is what RunFlat counted.
type FlatStats struct {
	Syncs     int   // synchronizations: one per piece
	SlotReads int64 // elements read from other ranks' slots, over all ranks
}

// RunFlat runs plans[r][i], rank r's plan of piece i, for every rank: in
// piece i every rank does its Puts into its slot (slotElems elements),
// then, after the synchronization, its Gets. It fails if a plan reaches
// outside a buffer or a slot, or reads slot elements their rank did not
// put in that piece (stale data from an earlier call), or reads another
// rank's slot elements that rank put for itself alone (FlatPut.Own: a
// runner may leave them out).
func RunFlat(ranks []Rank, plans [][]algos.FlatPlan, red Reduction, slotElems int64) (FlatStats, error) {
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
				if err := st.get(ranks, slots, fresh, own, r, g, red); err != nil {
					return st, fmt.Errorf("rank %d piece %d get: %w", r, i, err)
				}
			}
		}
	}
	return st, nil
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
