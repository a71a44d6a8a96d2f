package timed

import (
	"math/rand/v2"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
)

// TestWaitRuns requires the runs build makes of a lane's Waits to hold
// exactly the Ops the Waits hold, as try consults them (waited only when
// waitAt is not past the Op): lanes waiting at every Op for one sibling
// (one run, the tree's down lane), with gaps, with two Waits on one Op,
// and at random, the siblings' Ops done about the Waits' Done.
func TestWaitRuns(t *testing.T) {
	tree := make([]algos.Wait, 40)
	for i := range tree {
		tree[i] = algos.Wait{At: i, Lane: 1, Done: i + 1}
	}
	if runs := waitRuns(tree, 10); len(runs) != 1 || runs[0] != (waitRun{at: 0, end: 40, sib: 11, done: 1}) {
		t.Fatalf("the tree's Waits: runs %v, want one run of 40 on actor 11", runs)
	}
	cases := [][]algos.Wait{
		tree,
		{{At: 0, Lane: 1, Done: 1}, {At: 1, Lane: 1, Done: 2}, {At: 3, Lane: 1, Done: 4}, {At: 4, Lane: 2, Done: 5}, {At: 5, Lane: 2, Done: 9}},
		{{At: 2, Lane: 1, Done: 3}, {At: 2, Lane: 2, Done: 1}, {At: 3, Lane: 1, Done: 4}, {At: 4, Lane: 1, Done: 5}},
		{{At: 6, Lane: 2, Done: 2}},
		nil,
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var ws []algos.Wait
		at := 0
		for range rng.IntN(12) {
			at += rng.IntN(3) // 0: two Waits on one Op
			lane := 1 + rng.IntN(2)
			done := at + rng.IntN(3)
			if rng.IntN(2) == 0 && len(ws) > 0 && ws[len(ws)-1].At == at-1 {
				lane, done = ws[len(ws)-1].Lane, ws[len(ws)-1].Done+1 // a run
			}
			ws = append(ws, algos.Wait{At: at, Lane: lane, Done: done})
		}
		cases = append(cases, ws)
	}
	for _, ws := range cases {
		const first, nops = 0, 45
		s := &Sim{lanes: make([]laneState, 3)}
		a := &actor{runs: waitRuns(ws, first), nops: nops}
		for op := range nops {
			a.op = op
			for range 6 {
				for l := 1; l < 3; l++ {
					s.lanes[l].done = max(0, op-2+rng.IntN(6)) // about the Done of a Wait at op
				}
				met := true
				for _, w := range ws {
					if w.At == op && s.lanes[first+w.Lane].done < w.Done {
						met = false
					}
				}
				held := a.waitAt <= a.op && !s.waited(a)
				if held == met {
					t.Fatalf("waits %v, Op %d, done %d %d: held %v, want %v (runs %v)", ws, op, s.lanes[1].done, s.lanes[2].done, held, !met, a.runs)
				}
			}
		}
	}
}
