package sim_test

import (
	"math"
	"slices"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/algos/sim"
	"github.com/seed-760dd1f1/cc/runtime/tune"
)

// The tuner's model (runtime/tune) prices a row by its steps (StepsOf) and
// its bytes relative to the ring's (Traffic). TestModelMatchesSimulator
// runs every row of the table for every collective it serves on n = 1..64
// ranks and checks both against what the simulator counts.

// layouts are the topologies every row is run on: all ranks on one host,
// each rank alone, hosts of two and of three ranks.
var layouts = []struct {
	name string
	topo func(n int) *algos.Topo // nil when the layout has no n ranks
}{
	{"onehost", func(n int) *algos.Topo { return algos.NewTopo(make([]int, n)) }},
	{"alone", algos.FlatTopo},
	{"pairs", func(n int) *algos.Topo { return blocks(n, 2) }},
	{"threes", func(n int) *algos.Topo { return blocks(n, 3) }},
}

func blocks(n, ppn int) *algos.Topo {
	if n%ppn != 0 {
		return nil
	}
	return algos.BlockTopo(n/ppn, ppn)
}

// runs says whether row runs on topo.
func runs(row *algos.Algorithm, topo *algos.Topo) bool {
	switch {
	case row.Flat != nil:
		return row.Flat.Unavailable(topo) == ""
	case row.Algo == algos.CollNetDirect:
		return algos.CollNetRuns(row.Coll, topo) == nil
	case row.Algo == algos.NVLS || row.Algo == algos.NVLSTree:
		return algos.NvlsUnavailable(topo, row.Algo == algos.NVLSTree) == ""
	}
	return true
}

// measured is what one run of a row counted.
type measured struct {
	rounds int   // simulator rounds (flat rows: synchronizations + 1, the copy in)
	bytes  int64 // elements through the busiest rank's links, one direction (flat rows: copied)
}

// sizes returns the input and output elements of a rank for count.
func sizes(c algos.Coll, n int, count int64) (in, out int64) {
	switch c {
	case algos.ReduceScatter:
		return int64(n) * count, count
	case algos.AllGather:
		return count, int64(n) * count
	}
	return count, count
}

// simulate runs one chunk of count elements of row on topo.
func simulate(t *testing.T, row *algos.Algorithm, topo *algos.Topo, count int64) measured {
	t.Helper()
	n := topo.NRanks
	in, out := sizes(row.Coll, n, count)
	ranks := make([]sim.Rank, n)
	for r := range ranks {
		ranks[r] = sim.Rank{In: make([]int64, in), Out: make([]int64, out)}
		for e := range ranks[r].In {
			ranks[r].In[e] = int64(r*1000) + int64(e)
		}
	}
	red := sim.Reduction{Op: func(a, b int64) int64 { return a + b }}
	if row.Flat != nil {
		// One piece: the copy into the slot, then one synchronization.
		// Bytes: a rank's puts (but those for itself alone, which a
		// runner reads from its input out of place) and its reads of
		// other ranks' slots.
		slot := int64(n) * count
		plans := make([][]algos.FlatPlan, n)
		var most int64
		for r := range n {
			plans[r] = row.Flat.Plans(algos.FlatArgs{Coll: row.Coll, Rank: r, NRanks: n, Count: count}, slot)
			var copied int64
			for _, pl := range plans[r] {
				for _, p := range pl.Puts {
					if !p.Own {
						copied += p.Count
					}
				}
				for _, g := range pl.Gets {
					copied += g.Count * int64(btoi(!g.Local && g.Rank != r)+btoi(g.With != algos.NoPeer && g.With != r))
				}
			}
			most = max(most, copied)
		}
		st, err := sim.RunFlat(ranks, plans, red, slot, row.Flat.Hold)
		if err != nil {
			t.Fatalf("%s/%s on %d ranks: %v", row.Algo, row.Coll, n, err)
		}
		return measured{rounds: st.Syncs + 1, bytes: most}
	}
	part := algos.Part{Count: count, Chunk: 1 << 20, Align: 1}
	scheds := make([]algos.Schedule, n)
	for r := range n {
		scheds[r] = row.Gen(&algos.Args{Rank: r, Topo: topo, Count: count, Part: part, ElemSize: 4})
	}
	if row.Algo == algos.CollNetDirect { // the aggregation server runs beside the ranks
		ranks = append(ranks, sim.Rank{In: make([]int64, in), Out: make([]int64, out)})
		scheds = append(scheds, algos.CollNetServerAll(row.Coll, topo, 0, count, part))
	}
	var st sim.Stats
	var err error
	if len(scheds[0].Slots) > 0 {
		st, err = sim.RunSlots(ranks, [][]algos.Schedule{scheds}, red, 1<<20)
	} else {
		st, err = sim.RunSchedules(ranks, [][]algos.Schedule{scheds}, red, 8)
	}
	if err != nil {
		t.Fatalf("%s/%s on %d ranks: %v", row.Algo, row.Coll, n, err)
	}
	// A multicast store is one write, whatever the number of readers.
	sent, recv, mcast := make([]int64, n), make([]int64, n), make([]int64, n)
	for l, tr := range st.Links {
		switch {
		case l.Src >= n || l.Dst >= n: // the CollNet server's links
			if l.Src < n {
				sent[l.Src] += tr.Elements
			} else if l.Dst < n {
				recv[l.Dst] += tr.Elements
			}
		case l.Conn == sim.ConnMcast:
			mcast[l.Src] = max(mcast[l.Src], tr.Elements)
			recv[l.Dst] += tr.Elements
		default:
			sent[l.Src] += tr.Elements
			recv[l.Dst] += tr.Elements
		}
	}
	var most int64
	for r := range n {
		most = max(most, sent[r]+mcast[r], recv[r])
	}
	return measured{rounds: st.Rounds, bytes: most}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ringBytes are the elements through a rank's links, one direction, for
// the ring: 2(n-1)/n of the buffer for all-reduce, (n-1)/n of all blocks
// for reduce-scatter and all-gather, the buffer for broadcast and reduce.
func ringBytes(c algos.Coll, n int, count int64) float64 {
	switch c {
	case algos.AllReduce:
		return 2 * float64(n-1) * float64(count) / float64(n)
	case algos.ReduceScatter, algos.AllGather:
		return float64(n-1) * float64(count)
	}
	return float64(count)
}

// TestModelMatchesSimulator checks, for every row and n = 1..64 on every
// layout (with the race detector n = 1..9 and a few above), that the model's steps (tune.StepsOf) are the simulator's
// critical path (rounds - 1; for PAT, whose program's steps run in order,
// its Ops; the log-step rows count hops, algos.LogStepHops, which algos'
// TestLogStepHops checks against their schedules), and that tune.Traffic
// is the busiest rank's bytes over the ring's. OneShot's bytes are the
// copies a rank makes, relative to its all-gather's (whose efficiency is
// the fitted constant, Traffic 1). Rows whose bytes depend on the layout of
// ranks on hosts (effFitted) must keep Traffic 1.
func TestModelMatchesSimulator(t *testing.T) {
	for i := range algos.Algorithms {
		row := &algos.Algorithms[i]
		for _, lay := range layouts {
			for n := 1; n <= 64; n++ {
				if raceDetector && n > 9 && !slices.Contains([]int{12, 16, 17, 32, 33, 64}, n) {
					continue
				}
				topo := lay.topo(n)
				if topo == nil || !runs(row, topo) {
					continue
				}
				// Steps: one element per rank, so that every row moves
				// one chunk and rows that cut a call (CTRING) do not.
				steps := tune.StepsOf(row.Coll, row.Algo, topo)
				m := simulate(t, row, topo, int64(n))
				if row.Algo == algos.HierRecDbl && n > 1 {
					checkHierSteps(t, lay.name, topo, steps, m)
					m.rounds = steps.Total() + 1 // checked
				}
				checkSteps(t, row, lay.name, n, steps, m)
				if n == 1 {
					continue
				}
				if effFitted(row) {
					if f := tune.Traffic(row.Coll, row.Algo, n); f != 1 {
						t.Errorf("%s/%s n=%d: tune.Traffic %v; its efficiency is fitted on the ring's bytes (1)", row.Algo, row.Coll, n, f)
					}
					continue
				}
				// Bytes: 128 elements per rank, which every power of
				// two up to 64 divides, so that no piece is rounded.
				count := int64(128 * n)
				if row.Coll == algos.ReduceScatter || row.Coll == algos.AllGather {
					count = 128 // a block
				}
				got := simulate(t, row, topo, count).bytes
				want := tune.TrafficOn(row.Coll, row.Algo, topo) * ringBytes(row.Coll, n, count)
				if row.Flat != nil {
					ag := simulate(t, algos.Lookup(row.Algo, algos.AllGather), topo, count)
					want *= float64(ag.bytes) / ringBytes(algos.AllGather, n, count)
				}
				if math.Abs(float64(got)-want) > 1e-6*want {
					t.Errorf("%s/%s %s n=%d: the busiest rank moves %d elements, %.3f x the ring's; the model assumes %.3f x (tune.Traffic %.3f)",
						row.Algo, row.Coll, lay.name, n, got, float64(got)/ringBytes(row.Coll, n, count), want/ringBytes(row.Coll, n, count), tune.TrafficOn(row.Coll, row.Algo, topo))
				}
			}
		}
	}
}

// checkHierSteps checks HierRecDbl's steps: recursive doubling's hops
// between the hosts (algos.LogStepHops) and 2(ppn-1) inside, the leader's
// receives and sends one local rank after the other. Its leaders run
// recursive doubling among the hosts between those, so its simulator
// rounds are recursive doubling's among as many ranks as hosts plus ppn
// rounds up (the others' send, the leader's ppn-1 receives) and ppn down.
func checkHierSteps(t *testing.T, lay string, topo *algos.Topo, steps tune.Steps, m measured) {
	t.Helper()
	nh, ppn := topo.NHosts(), topo.MaxPerHost()
	want := tune.Steps{Intra: 2 * (ppn - 1), Inter: algos.LogStepHops(algos.RecDbl, algos.AllReduce, nh)}
	if steps != want {
		t.Errorf("HierRecDbl %s %d hosts x %d: model %+v, want %+v", lay, nh, ppn, steps, want)
	}
	rounds := 0
	if nh > 1 {
		rounds = simulate(t, algos.Lookup(algos.RecDbl, algos.AllReduce), algos.FlatTopo(nh), int64(nh)).rounds
	}
	if ppn > 1 {
		rounds += 2 * ppn
	}
	if m.rounds != rounds {
		t.Errorf("HierRecDbl %s %d hosts x %d: simulator %d rounds, want %d (recursive doubling among the hosts, %d up and down)", lay, nh, ppn, m.rounds, rounds, 2*ppn)
	}
}

// checkSteps compares the model's steps with the simulator's count.
func checkSteps(t *testing.T, row *algos.Algorithm, lay string, n int, steps tune.Steps, m measured) {
	t.Helper()
	if n == 1 {
		if steps != (tune.Steps{}) {
			t.Errorf("%s/%s n=1: model %+v, want no steps", row.Algo, row.Coll, steps)
		}
		return
	}
	switch {
	case row.Algo == algos.RecDbl || row.Algo == algos.Rabenseifner:
		// An exchange is a send Op, then a receive Op: rounds count Ops,
		// not hops.
		if want := algos.LogStepHops(row.Algo, row.Coll, n); steps.Total() != want {
			t.Errorf("%s/%s %s n=%d: model %d steps, want LogStepHops %d", row.Algo, row.Coll, lay, n, steps.Total(), want)
		}
	case steps.Ops > 0: // a slot program: the simulator's rounds are its steps
		if steps.Ops+1 != m.rounds {
			t.Errorf("%s/%s %s n=%d: model %d ops, simulator %d rounds (want ops+1)", row.Algo, row.Coll, lay, n, steps.Ops, m.rounds)
		}
	case steps.Total()+1 != m.rounds:
		t.Errorf("%s/%s %s n=%d: model %d steps (%+v), simulator %d rounds (want steps+1)", row.Algo, row.Coll, lay, n, steps.Total(), steps, m.rounds)
	}
}

// effFitted says that row's tune.Traffic is 1 although what it moves
// depends on the layout of ranks on hosts (the tree's chains inside hosts,
// CollNet's heads, NVLS's multicast), which Traffic does not see: the
// row's fitted efficiency absorbs it, exact only at the layout it was
// fitted on.
func effFitted(row *algos.Algorithm) bool {
	switch row.Algo {
	case algos.Tree, algos.CollNetDirect, algos.NVLSTree:
		return true
	case algos.NVLS:
		return row.Coll == algos.AllReduce
	}
	return false
}
