package tune

import (
	"fmt"
	"math"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/algos/sim"
	"github.com/seed-760dd1f1/cc/protocols"
)

// simRounds runs one chunk of row on topo in the simulator and returns
// its rounds: the critical path in steps, plus the first send.
func simRounds(t *testing.T, row *algos.Algorithm, topo *algos.Topo) int {
	t.Helper()
	n := topo.NRanks
	count := int64(n)
	inb, outb := int64(1), int64(1)
	switch row.Coll {
	case algos.ReduceScatter:
		inb = int64(n)
	case algos.AllGather:
		outb = int64(n)
	}
	ranks := make([]sim.Rank, n)
	if row.Flat != nil { // one piece: its copy into the slot, then one synchronization
		plans := make([][]algos.FlatPlan, n)
		for r := range n {
			ranks[r] = sim.Rank{In: make([]int64, inb*count), Out: make([]int64, outb*count)}
			plans[r] = row.Flat.Plans(algos.FlatArgs{Coll: row.Coll, Rank: r, NRanks: n, Count: count}, int64(n*n))
		}
		st, err := sim.RunFlat(ranks, plans, sim.Reduction{Op: func(a, b int64) int64 { return a + b }}, int64(n*n))
		if err != nil {
			t.Fatalf("%s/%s on %d ranks: %v", row.Algo, row.Coll, n, err)
		}
		return st.Syncs + 1
	}
	scheds := make([]algos.Schedule, n)
	for r := range n {
		ranks[r] = sim.Rank{In: make([]int64, inb*count), Out: make([]int64, outb*count)}
		scheds[r] = row.Gen(&algos.Args{Rank: r, Topo: topo, Count: count, Part: algos.Part{Count: count, Chunk: 1 << 20}, ElemSize: 4})
	}
	if row.Algo == algos.CollNetDirect { // the aggregation server runs beside the ranks
		ranks = append(ranks, sim.Rank{In: make([]int64, inb*count), Out: make([]int64, outb*count)})
		scheds = append(scheds, algos.CollNetServerAll(row.Coll, topo, 0, count, algos.Part{Count: count, Chunk: 1 << 20}))
	}
	red := sim.Reduction{Op: func(a, b int64) int64 { return a + b }}
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
	return st.Rounds
}

// TestStepsEqualSimulator: the model's steps of every algorithm the table
// has equal the simulator's critical path (rounds - 1) for one chunk (for
// PAT, whose program's steps run in order, the model's Ops), for n =
// 2..64 on one host, each rank alone, and hosts of 2 and 3 ranks.
func TestStepsEqualSimulator(t *testing.T) {
	layouts := map[string]func(n int) *algos.Topo{
		"onehost": func(n int) *algos.Topo { return algos.NewTopo(make([]int, n)) },
		"alone":   algos.FlatTopo,
		"pairs": func(n int) *algos.Topo {
			if n%2 != 0 {
				return nil
			}
			return algos.BlockTopo(n/2, 2)
		},
		"threes": func(n int) *algos.Topo {
			if n%3 != 0 {
				return nil
			}
			return algos.BlockTopo(n/3, 3)
		},
	}
	ns := []int{2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17, 24, 31, 32, 33, 48, 64}
	for _, row := range algos.Algorithms {
		for name, layout := range layouts {
			for _, n := range ns {
				topo := layout(n)
				if topo == nil || (row.Algo == algos.CollNetDirect && algos.CollNetRuns(row.Coll, topo) != nil) {
					continue
				}
				if (row.Algo == algos.NVLS || row.Algo == algos.NVLSTree) && algos.NvlsUnavailable(topo, row.Algo == algos.NVLSTree) != "" {
					continue
				}
				if row.Flat != nil && row.Flat.Unavailable(topo) != "" {
					continue
				}
				steps := StepsOf(row.Coll, row.Algo, topo)
				count := steps.Total()
				if steps.Ops > 0 { // a slot program: the simulator's rounds are its steps
					count = steps.Ops
				}
				if row.Algo == algos.RecDbl || row.Algo == algos.Rabenseifner {
					// An exchange is a send Op, then a receive Op (two
					// when Bruck's blocks wrap): rounds count Ops, not
					// hops. algos' TestLogStepHops checks the steps
					// (algos.LogStepHops) against the schedules' message
					// hops instead.
					if want := algos.LogStepHops(row.Algo, row.Coll, n); steps.Total() != want {
						t.Errorf("%s/%s %s n=%d: model %d steps, want LogStepHops %d", row.Algo, row.Coll, name, n, steps.Total(), want)
					}
					continue
				}
				if got := simRounds(t, &row, topo); count+1 != got {
					t.Errorf("%s/%s %s n=%d: model %d steps (%+v), simulator %d rounds (want steps+1)", row.Algo, row.Coll, name, n, steps.Total(), steps, got)
				}
			}
		}
	}
}

func ExampleStepsOf() {
	for _, n := range []int{4, 8} {
		fmt.Println(n, StepsOf(algos.AllReduce, algos.Ring, algos.BlockTopo(n/2, 2)), StepsOf(algos.AllReduce, algos.Tree, algos.FlatTopo(n)))
	}
	// Output:
	// 4 {4 2 0} {0 4 0}
	// 8 {8 6 0} {0 6 0}
}

// TestTraffic: recursive doubling all-reduce moves n log2 n / (2(n-1))
// times the ring's bytes, Rabenseifner the ring's for powers of two and
// the fold's two whole buffers more otherwise; other rows 1.
func TestTraffic(t *testing.T) {
	for _, tc := range []struct {
		coll algos.Coll
		a    algos.Algo
		n    int
		want float64
	}{
		{algos.AllReduce, algos.RecDbl, 1, 1},
		{algos.AllReduce, algos.RecDbl, 2, 1},
		{algos.AllReduce, algos.RecDbl, 4, 4.0 / 3},
		{algos.AllReduce, algos.RecDbl, 8, 8.0 * 3 / 14},
		{algos.AllReduce, algos.RecDbl, 64, 3.047619047619048},
		{algos.AllReduce, algos.RecDbl, 3, 3 * 3.0 / 4},  // (1 + 2) / (4/3)
		{algos.AllReduce, algos.Rabenseifner, 8, 1},      // the ring's bytes
		{algos.AllReduce, algos.Rabenseifner, 3, 2.25},   // (1 + 2) / (4/3)
		{algos.AllReduce, algos.Rabenseifner, 5, 2.1875}, // (1.5 + 2) / (8/5)
		{algos.AllGather, algos.RecDbl, 5, 1},
		{algos.AllReduce, algos.Ring, 8, 1},
	} {
		if got := Traffic(tc.coll, tc.a, tc.n); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("Traffic(%s, %s, %d) = %v, want %v", tc.coll, tc.a, tc.n, got, tc.want)
		}
	}
}

// TestIntraNetPricesSocketSteps: a model of ranks of one host whose links
// are TCP (NewIntra with Net) prices every step at the net class: its
// class is Net, every entry's latency is net gamma plus the algorithm's
// latency plus a net alpha per step (and its ops' cost), its bandwidth
// the net class's, as for the same ranks one per host. Two ranks, whose
// schedules are alike either way, decide as two ranks on two hosts do,
// where shared memory decides otherwise at some size.
func TestIntraNetPricesSocketSteps(t *testing.T) {
	c := fixedConsts(t)
	k := &c.Class[Net]
	for _, n := range []int{2, 3, 4, 8} {
		host := algos.NewTopo(make([]int, n))
		mask := fullMask(host)
		tcp := NewIntra(c, host, mask, nil, Net)
		apart := New(c, algos.FlatTopo(n), mask, nil, false) // the same mask: no PAT
		if cl := tcp.Class(); cl != Net {
			t.Fatalf("n=%d: class %s, want %s", n, cl, Net)
		}
		for coll := range algos.Coll(algos.NumColls) {
			for a := range algos.Algo(algos.NumAlgos) {
				for p := range protocols.Proto(protocols.NumProtos) {
					if !mask[coll][a][p] {
						continue
					}
					s := tcp.Steps(coll, a)
					want := k.Gamma[p] + k.AlgoLat[a] + float64(s.Total())*k.Alpha[p] + float64(s.Ops)*k.OpCost
					if got := tcp.Lat(coll, a, p); got != want {
						t.Errorf("n=%d %s %s/%s: latency %.3f us, want %.3f (steps %+v)", n, coll, a, p, got, want, s)
					}
					if got, want := tcp.BW(coll, a, p, 1), apart.BW(coll, a, p, 1); got != want {
						t.Errorf("n=%d %s %s/%s: bandwidth %.3f GB/s, one rank per host %.3f", n, coll, a, p, got, want)
					}
				}
			}
		}
		if n != 2 {
			continue
		}
		shm := New(c, host, mask, nil, false)
		differs := false
		for coll := range algos.Coll(algos.NumColls) {
			for size := int64(8); size <= 1<<28; size *= 4 {
				got, _ := tcp.Decide(coll, size, 1, -1)
				want, _ := apart.Decide(coll, size, 1, -1)
				if got != want {
					t.Errorf("%s %d B: one host over TCP picks %s, two hosts %s", coll, size, got, want)
				}
				if s, _ := shm.Decide(coll, size, 1, -1); s.Algo != got.Algo || s.Proto != got.Proto {
					differs = true
				}
			}
		}
		if !differs {
			t.Errorf("shared memory decides as TCP at every size: the test shows nothing")
		}
	}
}
