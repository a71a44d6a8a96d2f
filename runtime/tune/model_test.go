package tune

import (
	"fmt"
	"math"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
)

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
// the fold's whole buffer more otherwise; other rows 1.
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
		{algos.AllReduce, algos.RecDbl, 3, 2 * 3.0 / 4},  // (1 + 1) / (4/3)
		{algos.AllReduce, algos.Rabenseifner, 8, 1},      // the ring's bytes
		{algos.AllReduce, algos.Rabenseifner, 3, 1.5},    // (1 + 1) / (4/3)
		{algos.AllReduce, algos.Rabenseifner, 5, 1.5625}, // (1.5 + 1) / (8/5)
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

// TestStagedHierPicked: on 2 hosts of 2 ranks with idle cores (shm inside
// the hosts) the built-in constants pick staged HierRecDbl for an 8-byte
// all-reduce (one step between hosts where recursive doubling over the 4
// ranks takes two) and not for 16 MiB (it moves whole buffers, the ring
// 2(n-1)/n). Where ranks outnumber cores each of its two synchronizations
// costs a step of that class, staged or not, and recursive doubling keeps
// 8 B (runtime README: staged measured 0.61-0.91x of it on 2 cores; the
// tuner does not model the CPU that recursive doubling's extra TCP steps
// take from the ranks sharing a core).
func TestStagedHierPicked(t *testing.T) {
	topo := algos.BlockTopo(2, 2)
	var mask Mask
	for _, a := range []algos.Algo{algos.Ring, algos.Tree, algos.RecDbl, algos.Rabenseifner, algos.HierRecDbl} {
		for p := range protocols.Proto(protocols.NumProtos) {
			mask[algos.AllReduce][a][p] = true
		}
	}
	for _, tc := range []struct {
		intra  Class
		staged bool
		size   int64
		want   bool // HierRecDbl picked
	}{
		{SHM, true, 8, true},
		{SHM, true, 16 << 20, false},
		{SHMBusy, true, 8, false},
		{SHMBusy, false, 8, false},
	} {
		m := NewIntra(Default(), topo, mask, nil, tc.intra)
		if tc.staged {
			m = m.WithStagedHier(topo)
		}
		best, _ := m.Decide(algos.AllReduce, tc.size, 1, -1)
		if got := best.Algo == algos.HierRecDbl; got != tc.want {
			t.Errorf("%s staged %v, %d B: picked %s, want HierRecDbl %v", tc.intra, tc.staged, tc.size, best, tc.want)
		}
	}
	if s := HierStagedSteps(algos.BlockTopo(4, 8)); s != (Steps{Intra: 2, Inter: 2}) {
		t.Errorf("4 hosts x 8: staged steps %+v, want 2 inside and 2 between", s)
	}
	if s := HierStagedSteps(algos.BlockTopo(4, 1)); s != (Steps{Inter: 2}) {
		t.Errorf("4 hosts x 1: staged steps %+v, want 2 between", s)
	}
}
