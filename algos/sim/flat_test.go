package sim_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/algos/sim"
)

// flatReductions are the reductions the one-shot rows are checked with:
// a non-commutative Op (a*31+b wraps, so any other order or a missing or
// repeated operand changes the result), and ones with a pre-op
// (premulsum) and a post-op (integer avg), as reduce.Func has.
var flatReductions = map[string]sim.Reduction{
	"ordered":   {Op: func(a, b int64) int64 { return a*31 + b }},
	"premulsum": {Op: func(a, b int64) int64 { return a + b }, Pre: func(r int, x int64) int64 { return x * int64(r+2) }},
	"avg":       {Op: func(a, b int64) int64 { return a + b }, Post: func(x int64) int64 { return x / 7 }},
}

// flatWant is what rank r's Out holds after coll: computed directly from
// the inputs, folding ranks in order 0..n-1.
func flatWant(coll algos.Coll, red sim.Reduction, in [][]int64, r, root int, count int64) []int64 {
	n := len(in)
	pre := func(q int, x int64) int64 {
		if red.Pre != nil {
			return red.Pre(q, x)
		}
		return x
	}
	post := func(x int64) int64 {
		if red.Post != nil {
			return red.Post(x)
		}
		return x
	}
	fold := func(off int64) int64 {
		acc := pre(0, in[0][off])
		for q := 1; q < n; q++ {
			acc = red.Op(acc, pre(q, in[q][off]))
		}
		return post(acc)
	}
	var out []int64
	switch coll {
	case algos.AllReduce, algos.Reduce:
		for e := range count {
			out = append(out, fold(e))
		}
	case algos.ReduceScatter:
		for e := range count {
			out = append(out, fold(int64(r)*count+e))
		}
	case algos.AllGather:
		for q := range n {
			out = append(out, in[q][:count]...)
		}
	case algos.Broadcast:
		out = append(out, in[root][:count]...)
	}
	return out
}

// TestOneShotExact runs every one-shot row with exact data for 1..64
// ranks, counts around the slot size, every root, in and out of place,
// and checks every rank's output element by element, and that a call
// synchronizes once per piece.
func TestOneShotExact(t *testing.T) {
	ns := []int{1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 64}
	for _, row := range algos.Algorithms {
		if row.Flat == nil {
			continue
		}
		for _, n := range ns {
			for _, slotElems := range []int64{64, 192} { // 512 B and 1.5 KiB of 8-byte elements
				if row.Algo == algos.CMA && slotElems != 64 {
					continue // no slot bounds its pieces
				}
				for _, count := range []int64{0, 1, 3, 5, 63, 64, 65, 129, 1001} {
					if row.Coll == algos.ReduceScatter && slotElems < int64(n) {
						continue
					}
					for _, inPlace := range []bool{false, true} {
						for name, red := range flatReductions {
							if row.Coll == algos.AllGather || row.Coll == algos.Broadcast {
								if name != "ordered" {
									continue
								}
								red = sim.Reduction{}
							}
							root := int(count) % n
							t.Run(fmt.Sprintf("%s/n%d/slot%d/count%d/inplace=%v/%s", row.Coll, n, slotElems, count, inPlace, name), func(t *testing.T) {
								checkFlat(t, &row, n, root, count, slotElems, inPlace, red)
							})
						}
					}
				}
			}
		}
	}
}

func checkFlat(t *testing.T, row *algos.Algorithm, n, root int, count, slotElems int64, inPlace bool, red sim.Reduction) {
	t.Helper()
	inLen, outLen := count, count
	switch row.Coll {
	case algos.ReduceScatter:
		inLen = int64(n) * count
	case algos.AllGather:
		outLen = int64(n) * count
	}
	ranks := make([]sim.Rank, n)
	in := make([][]int64, n)
	plans := make([][]algos.FlatPlan, n)
	for r := range n {
		in[r] = make([]int64, inLen)
		for e := range in[r] {
			in[r][e] = int64(r+1)*1_000_003 + int64(e)*7 + 1
		}
		ranks[r] = sim.Rank{In: append([]int64(nil), in[r]...), Out: make([]int64, outLen)}
		if inPlace {
			switch row.Coll {
			case algos.ReduceScatter: // recv is send's block r
				ranks[r].Out = ranks[r].In[int64(r)*count : int64(r+1)*count]
			case algos.AllGather: // send is recv's block r
				copy(ranks[r].Out[int64(r)*count:], ranks[r].In)
				ranks[r].In = ranks[r].Out[int64(r)*count : int64(r+1)*count]
			default:
				ranks[r].Out = ranks[r].In
			}
		}
		plans[r] = row.Flat.Plans(algos.FlatArgs{Coll: row.Coll, Rank: r, NRanks: n, Root: root, Count: count}, slotElems)
	}
	st, err := sim.RunFlat(ranks, plans, red, slotElems, row.Flat.Hold)
	if err != nil {
		t.Fatal(err)
	}
	piece := row.Flat.Piece(slotElems, n)
	want := int(count / piece)
	if count%piece != 0 {
		want++
	}
	if row.Flat.Hold {
		want *= 2
	}
	if st.Syncs != want {
		t.Errorf("%d synchronizations, want %d (one per piece of %d, two with Hold)", st.Syncs, want, piece)
	}
	if row.Algo == algos.CMA && st.SlotReads != 0 {
		t.Errorf("CMA read %d slot elements: it reads inputs only", st.SlotReads)
	}
	for r := range n {
		if row.Coll == algos.Reduce && r != root {
			continue
		}
		want := flatWant(row.Coll, red, in, r, root, count)
		got := ranks[r].Out
		for e := range want {
			if got[e] != want[e] {
				t.Fatalf("rank %d element %d: got %d, want %d", r, e, got[e], want[e])
			}
		}
	}
}

// TestRunFlatOwnIsPrivate: a put marked Own is for its rank alone (a
// runner may skip it), so another rank's get of those elements fails, and
// the same plan without the mark runs.
func TestRunFlatOwnIsPrivate(t *testing.T) {
	red := sim.Reduction{Op: func(a, b int64) int64 { return a + b }}
	for _, own := range []bool{false, true} {
		ranks := []sim.Rank{{In: []int64{1}, Out: make([]int64, 1)}, {In: []int64{2}, Out: make([]int64, 1)}}
		plans := make([][]algos.FlatPlan, 2)
		for r := range plans {
			plans[r] = []algos.FlatPlan{{
				Puts: []algos.FlatPut{{Count: 1, Own: own}},
				Gets: []algos.FlatGet{{Rank: 0, With: 1, Count: 1}},
			}}
		}
		_, err := sim.RunFlat(ranks, plans, red, 1, false)
		if own && err == nil {
			t.Errorf("Own puts read by the other rank: no error")
		}
		if !own && (err != nil || ranks[0].Out[0] != 3 || ranks[1].Out[0] != 3) {
			t.Errorf("plain puts: err %v, outputs %d %d, want 3 3", err, ranks[0].Out[0], ranks[1].Out[0])
		}
	}
}

// TestRunFlatPeerReads: a get of another rank's input (Peer) needs the
// row's second synchronization, and may not read input elements that
// rank's own gets overwrite (in place); the same plan with the hold and
// apart buffers runs and counts its reads.
func TestRunFlatPeerReads(t *testing.T) {
	plan := func(outOff int64) [][]algos.FlatPlan {
		plans := make([][]algos.FlatPlan, 2)
		for r := range plans {
			plans[r] = []algos.FlatPlan{{Gets: []algos.FlatGet{
				{Rank: r, With: algos.NoPeer, OutOff: outOff, Count: 1, Local: true},
				{Rank: 1 - r, With: algos.NoPeer, OutOff: 1 - outOff, Count: 1, Peer: true},
			}}}
		}
		return plans
	}
	apart := func() []sim.Rank {
		return []sim.Rank{{In: []int64{10}, Out: make([]int64, 2)}, {In: []int64{20}, Out: make([]int64, 2)}}
	}
	if _, err := sim.RunFlat(apart(), plan(0), sim.Reduction{}, 1, false); err == nil || !strings.Contains(err.Error(), "without the second synchronization") {
		t.Errorf("peer read without hold: %v", err)
	}
	ranks := apart()
	st, err := sim.RunFlat(ranks, plan(0), sim.Reduction{}, 1, true)
	if err != nil || st.Syncs != 2 || st.PeerReads != 2 || ranks[0].Out[1] != 20 || ranks[1].Out[1] != 10 {
		t.Errorf("apart with hold: %v, %+v, outputs %v %v", err, st, ranks[0].Out, ranks[1].Out)
	}
	// In place, each rank's input is element 0 of its output, and its own
	// copy writes its input onto element 1: the input the other reads
	// stays, but a local copy to element 0 from elsewhere would not.
	inPlace := func() []sim.Rank {
		rs := []sim.Rank{{Out: []int64{10, 0}}, {Out: []int64{20, 0}}}
		for r := range rs {
			rs[r].In = rs[r].Out[:1]
		}
		return rs
	}
	bad := plan(0)
	for r := range bad {
		bad[r][0].Gets[1].OutOff = 0 // the peer's block over the own input
	}
	if _, err := sim.RunFlat(inPlace(), bad, sim.Reduction{}, 1, true); err == nil || !strings.Contains(err.Error(), "overwrite") {
		t.Errorf("peer read of an input its rank overwrites: %v", err)
	}
	if _, err := sim.RunFlat(inPlace(), plan(0), sim.Reduction{}, 1, true); err != nil {
		t.Errorf("in place, own block copied onto itself: %v", err)
	}
}
