package tune

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
)

// synthetic returns the times truth predicts for every entry of mask on
// topo, at sizes from 8 B to 16 MiB, on 1 and 2 channels.
func synthetic(truth *Consts, topo *algos.Topo, mask Mask) []Sample {
	m := New(truth, topo, mask, nil, false)
	var out []Sample
	for coll := range algos.Coll(algos.NumColls) {
		for a := range algos.Algo(algos.NumAlgos) {
			for p := range protocols.Proto(protocols.NumProtos) {
				if !mask[coll][a][p] {
					continue
				}
				for _, ch := range []int{1, 2} {
					for _, b := range []int64{8, 64, 512, 4096, 1 << 20, 4 << 20, 16 << 20} {
						out = append(out, Sample{Coll: coll, Algo: a, Proto: p, Channels: ch, Bytes: b, TimeUS: m.Time(coll, a, p, b, ch)})
					}
				}
			}
		}
	}
	return out
}

// TestFitRecoversConstants: times predicted from known constants give
// those constants back, for the class of the job (shm on one host, net
// across hosts with PAT's op cost), whatever the base; the other classes
// are the base's.
func TestFitRecoversConstants(t *testing.T) {
	for _, c := range []struct {
		name string
		topo *algos.Topo
		cl   Class
	}{
		{"one host", algos.NewTopo(make([]int, 4)), SHM},
		{"two hosts", algos.FlatTopo(2), Net},
		{"four hosts of two", algos.BlockTopo(4, 2), Net},
		{"eight alone", algos.FlatTopo(8), Net},
	} {
		truth := fixedConsts(t)
		k := &truth.Class[c.cl]
		k.Gamma = [3]float64{0.7, 1.1, 3}
		k.Alpha = [3]float64{1.5, 2.5, 7}
		k.Beta = [3]float64{0.4, 1.7, 3.1}
		k.BetaMax = [3]float64{0.5, 2.2, 4.4}
		k.Eff[algos.Tree], k.Eff[algos.CTRing], k.Eff[algos.PAT] = 1.2, 0.8, 0.6
		k.AlgoLat[algos.Tree], k.AlgoLat[algos.CTRing] = 4, 9
		k.Eff[algos.RecDbl], k.Eff[algos.Rabenseifner] = 0.9, 1.1 // whose bytes are not the ring's (Traffic)
		k.AlgoLat[algos.RecDbl], k.AlgoLat[algos.Rabenseifner] = 2, 3
		k.Eff[algos.HierRecDbl], k.AlgoLat[algos.HierRecDbl] = 0.85, 1.5 // whose bytes depend on the hosts (TrafficOn)
		k.OpCost = 1.25
		mask := fullMask(c.topo)
		base := fixedConsts(t)
		base.Class[c.cl].Eff[algos.RecDbl], base.Class[c.cl].Eff[algos.Rabenseifner] = 1, 1 // fit them
		base.Class[c.cl].Eff[algos.HierRecDbl] = 1
		m := New(base, c.topo, mask, nil, false)
		got, f, err := Fit(base, m, synthetic(truth, c.topo, mask), "test")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if f.ErrAfter > 1e-3 || f.ErrBefore < 0.05 {
			t.Errorf("%s: model error %.4f before the fit, %.4f after: want > 0.05 and ~0", c.name, f.ErrBefore, f.ErrAfter)
		}
		if f.Class != c.cl {
			t.Errorf("%s: fitted class %s, want %s", c.name, f.Class, c.cl)
		}
		want := *k
		want.Source = "test"
		if c.topo.MaxPerHost() > 1 { // no PAT: its constants stay the base's
			want.Eff[algos.PAT], want.OpCost = base.Class[c.cl].Eff[algos.PAT], base.Class[c.cl].OpCost
		}
		if d := constsDiff(&got.Class[c.cl], &want); d != "" {
			t.Errorf("%s: %s", c.name, d)
		}
		for cl := range Class(NumClasses) {
			if cl != c.cl && got.Class[cl] != base.Class[cl] {
				t.Errorf("%s: class %s changed", c.name, cl)
			}
		}
	}
}

// constsDiff names the first constant of got more than 0.1% away from want.
func constsDiff(got, want *ClassConsts) string {
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-3*math.Max(math.Abs(b), 1e-9) }
	for p := range protocols.Proto(protocols.NumProtos) {
		for _, e := range []struct {
			name string
			g, w float64
		}{{"gamma", got.Gamma[p], want.Gamma[p]}, {"alpha", got.Alpha[p], want.Alpha[p]}, {"beta", got.Beta[p], want.Beta[p]}, {"beta_max", got.BetaMax[p], want.BetaMax[p]}} {
			if !near(e.g, e.w) {
				return e.name + " " + p.String() + ": got " + ftoa(e.g) + ", want " + ftoa(e.w)
			}
		}
	}
	for a := range algos.Algo(algos.NumAlgos) {
		if !near(got.Eff[a], want.Eff[a]) {
			return "efficiency " + a.String() + ": got " + ftoa(got.Eff[a]) + ", want " + ftoa(want.Eff[a])
		}
		if !near(got.AlgoLat[a], want.AlgoLat[a]) {
			return "algo_lat " + a.String() + ": got " + ftoa(got.AlgoLat[a]) + ", want " + ftoa(want.AlgoLat[a])
		}
	}
	if !near(got.OpCost, want.OpCost) {
		return "op_cost: got " + ftoa(got.OpCost) + ", want " + ftoa(want.OpCost)
	}
	if got.Source != want.Source {
		return "source: got " + got.Source + ", want " + want.Source
	}
	return ""
}

// TestFitIgnoresOutliers: one sample in four disturbed tenfold changes
// no fitted constant by more than 0.1% (medians).
func TestFitIgnoresOutliers(t *testing.T) {
	topo := algos.FlatTopo(2)
	mask := fullMask(topo)
	base := fixedConsts(t)
	samples := synthetic(base, topo, mask)
	for i := range samples {
		if i%4 == 1 {
			samples[i].TimeUS *= 10
		}
	}
	got, _, err := Fit(base, New(base, topo, mask, nil, false), samples, base.Class[Net].Source)
	if err != nil {
		t.Fatal(err)
	}
	if d := constsDiff(&got.Class[Net], &base.Class[Net]); d != "" {
		t.Error(d)
	}
}

// TestFitKeepsWhatItDidNotMeasure: a protocol with no samples keeps the
// base's constants and the basis says why; with no large ring call at all
// the fit fails.
func TestFitKeepsWhatItDidNotMeasure(t *testing.T) {
	topo := algos.NewTopo(make([]int, 2))
	var mask Mask
	mask[algos.AllReduce][algos.Ring][protocols.Simple] = true
	mask[algos.AllReduce][algos.Ring][protocols.LL128] = true
	base := fixedConsts(t)
	truth := fixedConsts(t)
	truth.Class[SHM].Beta[protocols.Simple] = 3
	got, f, err := Fit(base, New(base, topo, mask, nil, false), synthetic(truth, topo, mask), "test")
	if err != nil {
		t.Fatal(err)
	}
	if g := got.Class[SHM].Beta[protocols.Simple]; math.Abs(g-3) > 1e-9 {
		t.Errorf("beta Simple %v, want 3", g)
	}
	if g, w := got.Class[SHM].Alpha[protocols.LL], base.Class[SHM].Alpha[protocols.LL]; g != w {
		t.Errorf("alpha LL %v, want the base's %v", g, w)
	}
	for _, name := range []string{"alpha LL", "beta LL", "efficiency Tree", "algo_lat Tree"} {
		if !strings.HasPrefix(f.Basis[name], "kept: no ") {
			t.Errorf("basis of %s: %q, want kept: no ... measured", name, f.Basis[name])
		}
	}
	if b := f.Basis["beta Simple"]; !strings.HasPrefix(b, "3 samples: ring") {
		t.Errorf("basis of beta Simple: %q", b)
	}
	var small []Sample
	for _, s := range synthetic(truth, topo, mask) {
		if s.Bytes < LargeBytes {
			small = append(small, s)
		}
	}
	if _, _, err := Fit(base, New(base, topo, mask, nil, false), small, "test"); err == nil || !strings.Contains(err.Error(), "no ring call of >= 1048576 B") {
		t.Errorf("fit without large calls: %v", err)
	}
}

func ftoa(x float64) string { return strconv.FormatFloat(x, 'g', 6, 64) }

// TestFitBoundedAlgorithm: an algorithm with a bound (MaxBytes) gets the
// bound where it stopped beating the ring, and its efficiency from its
// calls between a quarter of that bound and the bound: CMA's calls beyond
// 384 KiB, three times slower than its line, lose to the ring from 1 MiB
// on, so the bound lands between 256 KiB and 1 MiB and the efficiency is
// the one inside it. A CMA that never wins keeps the base's bound; one
// that wins at every size gets the largest.
func TestFitBoundedAlgorithm(t *testing.T) {
	topo := algos.NewTopo(make([]int, 2))
	var mask Mask
	mask[algos.AllGather][algos.Ring][protocols.Simple] = true
	mask[algos.AllGather][algos.CMA][protocols.Simple] = true
	base := Default()
	for _, c := range []struct {
		name   string
		slow   float64 // CMA's time beyond 384 KiB, times its line
		eff    float64 // CMA's true efficiency
		gamma  float64 // and per-call cost, µs
		bound  float64 // the fitted max_bytes
		effWin string  // the sizes its efficiency was fitted on
		basis  string
	}{
		{"crosses", 3, 1.6, 0.01, (256<<10 + 1<<20) / 2, "of 163840-655360 B", "beat the ring at 262144 B, not at 1048576 B"},
		{"never wins", 1, 0.5, 5, base.Class[SHM].MaxBytes[algos.CMA], "", "beat the ring at none of 7 sizes"},
		{"always wins", 1, 1.6, 0.01, 16 << 20, "of 1048576-16777216 B", "up to the largest size measured, 16777216 B"},
	} {
		truth := Default()
		truth.Class[SHM].Eff[algos.CMA] = c.eff
		truth.Class[SHM].AlgoGamma[algos.CMA] = c.gamma
		m := New(truth, topo, mask, nil, false)
		var samples []Sample
		for _, a := range []algos.Algo{algos.Ring, algos.CMA} {
			for _, b := range []int64{8, 512, 4096, 256 << 10, 1 << 20, 4 << 20, 16 << 20} {
				tm := m.Time(algos.AllGather, a, protocols.Simple, b, 1)
				if a == algos.CMA && b > 384<<10 {
					tm *= c.slow
				}
				samples = append(samples, Sample{Coll: algos.AllGather, Algo: a, Proto: protocols.Simple, Channels: 1, Bytes: b, TimeUS: tm})
			}
		}
		got, f, err := Fit(base, New(base, topo, mask, nil, false), samples, "test")
		if err != nil {
			t.Fatal(err)
		}
		if b := got.Class[SHM].MaxBytes[algos.CMA]; b != c.bound {
			t.Errorf("%s: max_bytes %v, want %v (%s)", c.name, b, c.bound, f.Basis["max_bytes CMA"])
		}
		if b := f.Basis["max_bytes CMA"]; !strings.Contains(b, c.basis) {
			t.Errorf("%s: max_bytes basis %q, want %q", c.name, b, c.basis)
		}
		if c.effWin == "" {
			continue
		}
		if e := got.Class[SHM].Eff[algos.CMA]; math.Abs(e-c.eff) > 0.01 {
			t.Errorf("%s: CMA's efficiency %v, want %v (its calls within its bound)", c.name, e, c.eff)
		}
		if b := f.Basis["efficiency CMA"]; !strings.Contains(b, c.effWin) {
			t.Errorf("%s: basis %q, want the sizes it was fitted on, %s", c.name, b, c.effWin)
		}
	}
}

// TestFitCPU: all-reduce ring calls that take alpha_cpu x (ranks/cores -
// 1) per net step beyond what the base predicts give alpha_cpu back, above
// alpha too, whatever the calls with fewer steps (reduce-scatter,
// all-gather) add; nothing else changes; a job that does not span hosts,
// has several ranks on a host, or whose ranks do not outnumber the cores,
// is refused; a later full Fit resets the alpha_cpu fitted against the
// alpha it replaces.
func TestFitCPU(t *testing.T) {
	topo := algos.BlockTopo(6, 1) // 6 ranks on 2 shared cores: factor 2
	mask := fullMask(topo)
	base := fixedConsts(t)
	m := New(base, topo, mask, nil, false)
	want := [3]float64{1, 2, 1e3} // Simple's far above its alpha
	var samples []Sample
	for _, s := range synthetic(base, topo, mask) {
		if s.Algo == algos.Ring && s.Bytes <= SmallBytes {
			if s.Coll == algos.AllReduce {
				s.TimeUS += want[s.Proto] * float64(m.classSteps(s.Coll, s.Algo)) * 2
			} else {
				s.TimeUS += 1e4 // what the fit must not read
			}
		}
		samples = append(samples, s)
	}
	got, f, err := FitCPU(base, m, samples, 2, "cpu test")
	if err != nil {
		t.Fatal(err)
	}
	k := got.Class[Net]
	for p, w := range want {
		if math.Abs(k.AlphaCPU[p]-w) > 1e-9 {
			t.Errorf("alpha_cpu %s = %v, want %v", protocols.Proto(p), k.AlphaCPU[p], w)
		}
	}
	k.AlphaCPU, k.Source = base.Class[Net].AlphaCPU, base.Class[Net].Source
	if k != base.Class[Net] || got.Class[SHM] != base.Class[SHM] || got.Class[SHMBusy] != base.Class[SHMBusy] {
		t.Error("FitCPU changed more than alpha_cpu")
	}
	if b := f.Basis["alpha_cpu Simple"]; !strings.Contains(b, "calls of 10 steps, 6 ranks on 2 cores") || !strings.Contains(got.Class[Net].Source, "alpha_cpu: cpu test") {
		t.Errorf("basis %q, source %q", b, got.Class[Net].Source)
	}
	if _, _, err := FitCPU(base, m, samples, 6, "x"); err == nil || !strings.Contains(err.Error(), "6 ranks on 6 shared cores") {
		t.Errorf("6 ranks on 6 cores: %v, want a refusal", err)
	}
	one := algos.NewTopo(make([]int, 4))
	if _, _, err := FitCPU(base, New(base, one, fullMask(one), nil, false), samples, 2, "x"); err == nil || !strings.Contains(err.Error(), "spans hosts") {
		t.Errorf("one host: %v, want a refusal", err)
	}
	two := algos.BlockTopo(2, 3)
	if _, _, err := FitCPU(base, New(base, two, fullMask(two), nil, false), samples, 2, "x"); err == nil || !strings.Contains(err.Error(), "6 ranks on 2 hosts: alpha_cpu is fitted on a job of one rank per host") {
		t.Errorf("3 ranks per host: %v, want a refusal", err)
	}
	// A full calibration of the net class afterwards: the alpha_cpu was
	// fitted against the old alpha, and goes.
	again, f, err := Fit(got, New(got, topo, mask, nil, false), synthetic(base, topo, mask), "full")
	if err != nil {
		t.Fatal(err)
	}
	if again.Class[Net].AlphaCPU != ([3]float64{}) || !strings.HasPrefix(f.Basis["alpha_cpu LL"], "reset") {
		t.Errorf("after a full fit: alpha_cpu %v, basis %q; want 0, reset", again.Class[Net].AlphaCPU, f.Basis["alpha_cpu LL"])
	}
}
