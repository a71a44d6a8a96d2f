package tune

import (
	"math"
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
)

// TestOneShotModel: OneShot takes one step inside a host and none where it
// cannot run, pays its own per-call cost (algo_gamma) instead of the
// class's gamma, and its all-reduce moves n/2 times the ring's bytes, its
// reduce-scatter 2(n-1)/n times the all-gather's (its own block stays in
// its input).
func TestOneShotModel(t *testing.T) {
	if got := StepsOf(algos.AllReduce, algos.OneShot, algos.BlockTopo(1, 4)); got != (Steps{Intra: 1}) {
		t.Errorf("steps on one host of 4: %+v, want one intra step", got)
	}
	if got := StepsOf(algos.AllReduce, algos.OneShot, algos.BlockTopo(2, 2)); got != (Steps{}) {
		t.Errorf("steps on two hosts: %+v, want none (it cannot run)", got)
	}
	c := fixedConsts(t)
	k := &c.Class[SHM]
	k.Eff[algos.OneShot], k.AlgoGamma[algos.OneShot] = 1, 0.125
	k.Eff[algos.Ring] = 1 // the yardstick: the ring's bytes at the same efficiency
	var mask Mask
	for coll := range algos.Coll(algos.NumColls) {
		mask[coll][algos.OneShot][protocols.Simple] = true
		mask[coll][algos.Ring][protocols.Simple] = true
	}
	const p = protocols.Simple
	for _, n := range []int{2, 4, 8} {
		m := New(c, algos.BlockTopo(1, n), mask, nil, false)
		if got, want := m.Lat(algos.AllReduce, algos.OneShot, p), 0.125+k.Alpha[p]; math.Abs(got-want) > 1e-12 {
			t.Errorf("n=%d: latency %v, want algo_gamma + one alpha = %v", n, got, want)
		}
		const bytes = 1 << 20
		for _, coll := range []algos.Coll{algos.AllReduce, algos.AllGather, algos.ReduceScatter} {
			got := m.Time(coll, algos.OneShot, p, bytes, 1) - m.Lat(coll, algos.OneShot, p)
			ring := float64(bytes) / (1000 * m.BW(coll, algos.Ring, p, 1))
			want := ring
			switch {
			case coll == algos.AllReduce && n > 2:
				want = ring * float64(n) / 2 // reads n-1 slots
			case coll == algos.ReduceScatter:
				want = ring * 2 * float64(n-1) / float64(n) // copies in the n-1 blocks others read
			}
			if math.Abs(got-want) > 1e-9 {
				t.Errorf("n=%d %s: bytes term %v us, want %v", n, coll, got, want)
			}
		}
	}
	k.AlgoGamma[algos.OneShot] = -1
	if err := c.Check(); err == nil || !strings.Contains(err.Error(), "algo_gamma OneShot = -1") {
		t.Errorf("Check with a negative algo_gamma: %v, want an error naming it", err)
	}
}

// TestDefaultPicksOneShot: with the built-in constants the tuner picks
// OneShot where it measured faster (small all-reduces on one host: up to
// 8 KiB with 2 ranks on idle cores, up to 32 KiB with 4 ranks on 2 cores)
// and the ring where OneShot measured slower.
func TestDefaultPicksOneShot(t *testing.T) {
	for _, c := range []struct {
		n     int
		busy  bool
		bytes int64
		want  bool
	}{
		{2, false, 8, true}, {2, false, 512, true}, {2, false, 8192, true}, {2, false, 128 << 10, false}, {2, false, 2 << 20, false},
		{4, true, 8, true}, {4, true, 32 << 10, true}, {4, true, 256 << 10, false},
	} {
		topo := algos.BlockTopo(1, c.n)
		// The mask comm builds on one host over shared memory: the
		// log-step rows run there only where NCCL_ALGO names them.
		mask := fullMask(topo)
		for coll := range algos.Coll(algos.NumColls) {
			mask[coll][algos.RecDbl] = [protocols.NumProtos]bool{}
			mask[coll][algos.Rabenseifner] = [protocols.NumProtos]bool{}
		}
		m := New(Default(), topo, mask, nil, c.busy)
		best, _ := m.Decide(algos.AllReduce, c.bytes, 1, -1)
		if got := best.Algo == algos.OneShot; got != c.want {
			t.Errorf("n=%d busy=%v %d B: picked %s, want OneShot: %v", c.n, c.busy, c.bytes, best, c.want)
		}
	}
}

// TestMaxBytes: an entry beyond its MaxBytes is chosen only when nothing
// else may run; with the built-in constants, 2 ranks' all-gather goes to
// OneShot at 32 KiB, to CMA from 64 KiB up to its bound (6 MiB) and to the
// ring beyond; the bound survives a calibration file and a negative one is
// refused.
func TestMaxBytes(t *testing.T) {
	var mask Mask
	for _, a := range []algos.Algo{algos.Ring, algos.OneShot, algos.CMA} {
		mask[algos.AllGather][a][protocols.Simple] = true
	}
	m := New(Default(), algos.BlockTopo(1, 2), mask, nil, false)
	for _, tc := range []struct {
		bytes int64
		want  algos.Algo
	}{{32 << 10, algos.OneShot}, {64 << 10, algos.CMA}, {256 << 10, algos.CMA}, {2 << 20, algos.CMA}, {6 << 20, algos.CMA}, {6<<20 + 4, algos.Ring}, {8 << 20, algos.Ring}, {16 << 20, algos.Ring}} {
		if best, _ := m.Decide(algos.AllGather, tc.bytes, 1, -1); best.Algo != tc.want {
			t.Errorf("all-gather of %d B: %s, want %s", tc.bytes, best.Algo, tc.want)
		}
	}
	var alone Mask
	alone[algos.AllGather][algos.CMA][protocols.Simple] = true
	m = New(Default(), algos.BlockTopo(1, 2), alone, nil, false)
	if best, next := m.Decide(algos.AllGather, 16<<20, 1, -1); best.Algo != algos.CMA || best.Time <= 0 || next.Time >= 0 {
		t.Errorf("CMA alone at 16 MiB: %+v then %+v, want CMA (named alone, beyond its bound) and nothing else", best, next)
	}
	b, err := Default().MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var back Consts
	if err := back.UnmarshalJSON(b); err != nil {
		t.Fatal(err)
	}
	if got := back.Class[SHM].MaxBytes[algos.CMA]; got != 6<<20 || !strings.Contains(string(b), `"max_bytes":{"CMA":6291456}`) {
		t.Errorf("max_bytes after a round trip: %v in %s", got, b)
	}
	back.Class[SHM].MaxBytes[algos.CMA] = -1
	if err := back.Check(); err == nil || !strings.Contains(err.Error(), "max_bytes CMA = -1") {
		t.Errorf("Check with a negative max_bytes: %v, want an error naming it", err)
	}
}
