package tune

import (
	"fmt"
	"math"
	"slices"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
)

// Calibration: the constants of one link class refitted from times
// measured on a job whose slowest class it is (cc-perf calibrate). The
// model is linear, T = lat + bytes / bw, so each constant comes from the
// sizes where it dominates:
//
//  1. beta, per protocol: the ring's large calls (>= LargeBytes) on the
//     fewest channels measured, bus bandwidth after the predicted latency
//     is taken off; beta_max likewise from the most channels measured;
//  2. alpha, per protocol: the ring's small calls (<= SmallBytes), the
//     call's other costs (gamma, the other class's steps, the bytes at the
//     new beta) taken off, divided by the steps of this class;
//  3. per other algorithm: its efficiency from its large calls against
//     the refitted ring, then its per-call latency (for PAT, the cost of
//     each of its program's steps) from its small calls.
//
// Each estimate is the median over the samples that feed it, so one
// disturbed measurement moves nothing. What was not measured (a protocol
// NCCL_PROTO excluded, PAT on a host with several ranks) keeps the base
// value and the report says so.

// Sizes that split a calibration's samples: latency from calls of at most
// SmallBytes, bandwidth from calls of at least LargeBytes.
const (
	SmallBytes = 4 << 10
	LargeBytes = 1 << 20
)

// Sample is one measured configuration of a calibration run.
type Sample struct {
	Coll     algos.Coll
	Algo     algos.Algo
	Proto    protocols.Proto
	Channels int
	Bytes    int64   // NCCL's nBytes: the larger of the send and receive bytes
	TimeUS   float64 // the time of one call (a median), µs
}

// Fitted is a calibration's result for one class: the constants before
// and after, and what each new value rests on.
type Fitted struct {
	Class    Class
	Old, New ClassConsts
	// Basis says, per constant ("alpha LL", "efficiency Tree", ...), how
	// many samples the new value rests on, or why it was kept.
	Basis map[string]string
	// ErrBefore and ErrAfter are the median relative error of the model's
	// predictions over every sample, with the base constants and with the
	// fitted ones (0.1 = 10%).
	ErrBefore, ErrAfter float64
}

// Fit returns a copy of base whose class m.Class() is refitted from
// samples measured on m's job (m gives the topology, its steps and its
// class; its own constants are not used), with source as the class's
// Source. It fails when no large ring call of any protocol shows a
// bandwidth.
func Fit(base *Consts, m *Model, samples []Sample, source string) (*Consts, *Fitted, error) {
	cl := m.Class()
	c := *base
	x := &fitter{f: &Fitted{Class: cl, Old: base.Class[cl], Basis: map[string]string{}}, k: &c.Class[cl], fm: *m, samples: samples}
	x.k.Source = source
	x.fm.c = &c // the model on the constants being fitted
	for _, s := range samples {
		if x.minCh == 0 || s.Channels < x.minCh {
			x.minCh = s.Channels
		}
		x.maxCh = max(x.maxCh, s.Channels)
	}
	// A bound rests on the measured times alone: first, so that each
	// round fits efficiencies inside it.
	for a := range algos.Algo(algos.NumAlgos) {
		if x.k.MaxBytes[a] > 0 && x.k.Eff[a] != 0 {
			x.bound(a)
		}
	}
	// Twice: each estimate takes off terms the others give (beta the
	// latency, alpha the bandwidth); the second round starts from the
	// first's values.
	for range 2 {
		if err := x.ring(); err != nil {
			return nil, nil, err
		}
		if err := x.others(); err != nil {
			return nil, nil, err
		}
	}
	x.f.New = *x.k
	if err := c.Check(); err != nil {
		return nil, nil, fmt.Errorf("the fitted constants are unusable: %w", err)
	}
	x.f.ErrBefore, x.f.ErrAfter = m.With(base).relErr(samples), x.fm.relErr(samples)
	return &c, x.f, nil
}

// fitter is one Fit in progress.
type fitter struct {
	f            *Fitted
	k            *ClassConsts // the class being fitted, inside fm's constants
	fm           Model
	samples      []Sample
	minCh, maxCh int // the fewest and most channels measured
}

// pick returns the samples of algorithm a and protocol p (KeepProto: any)
// on ch channels (0: any), large (>= LargeBytes) or small (1..SmallBytes:
// a call of no bytes returns before any step).
func (x *fitter) pick(a algos.Algo, p protocols.Proto, ch int, large bool) []Sample {
	var out []Sample
	lo, hi := x.largeRange(a)
	for _, s := range x.samples {
		if s.Algo == a && (p == KeepProto || s.Proto == p) && (ch == 0 || s.Channels == ch) && s.TimeUS > 0 &&
			((large && s.Bytes >= lo && s.Bytes <= hi) || (!large && s.Bytes > 0 && s.Bytes <= SmallBytes)) {
			out = append(out, s)
		}
	}
	return out
}

// largeRange is the sizes of algorithm a's large calls: from LargeBytes
// up; for an algorithm with a bound (MaxBytes), where it may be chosen,
// from a quarter of the bound to the bound.
func (x *fitter) largeRange(a algos.Algo) (lo, hi int64) {
	lo, hi = LargeBytes, math.MaxInt64
	if b := x.k.MaxBytes[a]; b > 0 {
		hi = int64(b)
		lo = min(lo, hi/4)
	}
	return lo, hi
}

// largeSizes says which sizes largeRange gives a, for the fit's notes.
func (x *fitter) largeSizes(a algos.Algo) string {
	lo, hi := x.largeRange(a)
	if hi == math.MaxInt64 {
		return fmt.Sprintf(">= %d B", lo)
	}
	return fmt.Sprintf("of %d-%d B", lo, hi)
}

// busBW returns the bus bandwidth each sample shows once the model's
// latency is taken off (the class's bandwidth times the algorithm's
// efficiency; an algorithm that moves more bytes than the ring, Traffic,
// is credited with them), divided by div(s), leaving out samples that took
// no longer than the latency.
func (x *fitter) busBW(ss []Sample, div func(Sample) float64) []float64 {
	var out []float64
	for _, s := range ss {
		if t := s.TimeUS - x.fm.Lat(s.Coll, s.Algo, s.Proto); t > 0 {
			out = append(out, float64(s.Bytes)/(1000*t)/x.fm.algFactor(s.Coll)*x.fm.traffic[s.Coll][s.Algo]/div(s))
		}
	}
	return out
}

// tooFast says why a bandwidth was kept when every large call took no
// longer than the predicted latency.
const tooFast = "the large calls took no longer than the predicted latency"

// ringTwin returns the ring's sample of the same collective, protocol,
// channels and size as s, if one was measured.
func (x *fitter) ringTwin(s Sample) (Sample, bool) {
	for _, r := range x.samples {
		if r.Algo == algos.Ring && r.Coll == s.Coll && r.Proto == s.Proto && r.Channels == s.Channels && r.Bytes == s.Bytes && r.TimeUS > 0 {
			return r, true
		}
	}
	return Sample{}, false
}

// excess is what a sample took beyond the model's prediction, in µs.
func (x *fitter) excess(s Sample) float64 {
	return s.TimeUS - x.fm.predict(s.Coll, s.Algo, s.Proto, s.Bytes, s.Channels)
}

// ring fits the ring's beta, beta_max and alpha, per protocol measured.
func (x *fitter) ring() error {
	k, f := x.k, x.f
	fitted := 0
	for p := range protocols.Proto(protocols.NumProtos) {
		name := "beta " + p.String()
		ss := x.pick(algos.Ring, p, x.minCh, true)
		if len(ss) == 0 {
			f.keep(name, fmt.Sprintf("no ring %s call of >= %d B was measured", p, LargeBytes))
			f.keep("beta_max "+p.String(), "beta was not measured")
			continue
		}
		one := func(Sample) float64 { return 1 }
		bw := x.busBW(ss, func(Sample) float64 { return float64(x.minCh) })
		if len(bw) == 0 {
			f.keep(name, tooFast)
			f.keep("beta_max "+p.String(), tooFast)
			continue
		}
		ratio := k.BetaMax[p] / k.Beta[p]
		k.Beta[p] = median(bw)
		f.note(name, len(bw), fmt.Sprintf("ring, %d channel(s), >= %d B", x.minCh, LargeBytes))
		fitted++
		if big := x.busBW(x.pick(algos.Ring, p, x.maxCh, true), one); x.maxCh > x.minCh && len(big) > 0 {
			k.BetaMax[p] = max(k.Beta[p], median(big))
			f.note("beta_max "+p.String(), len(big), fmt.Sprintf("ring, %d channels", x.maxCh))
		} else {
			k.BetaMax[p] = k.Beta[p] * ratio
			f.keep("beta_max "+p.String(), fmt.Sprintf("only %d channel(s) measured: the base's ratio to beta, %.2f", x.minCh, ratio))
		}
	}
	if fitted == 0 {
		return fmt.Errorf("no ring call of >= %d B was measured that took longer than the predicted latency: nothing to fit a bandwidth to", LargeBytes)
	}
	// gamma and alpha: a small call's cost beyond its bytes and the other
	// class's steps is gamma + steps x alpha. The median at each step count
	// (the ring's all-reduce has twice the steps of its reduce-scatter and
	// all-gather) is a point; the line through the points gives both. With
	// one step count, only alpha is fitted.
	for p := range protocols.Proto(protocols.NumProtos) {
		ss := x.pick(algos.Ring, p, 0, false)
		if len(ss) == 0 {
			why := fmt.Sprintf("no ring %s call of 1..%d B was measured", p, SmallBytes)
			f.keep("alpha "+p.String(), why)
			f.keep("gamma "+p.String(), why)
			continue
		}
		gamma := k.Gamma[p]
		k.Alpha[p], k.Gamma[p] = 0, 0
		bySteps := map[int][]float64{}
		for _, s := range ss {
			n := x.fm.classSteps(s.Coll, s.Algo)
			bySteps[n] = append(bySteps[n], x.excess(s))
		}
		var xs, ys []float64
		for n, e := range bySteps {
			xs, ys = append(xs, float64(n)), append(ys, median(e))
		}
		if len(xs) == 1 {
			k.Gamma[p] = gamma
			k.Alpha[p] = max(0, (ys[0]-gamma)/xs[0])
			f.keep("gamma "+p.String(), fmt.Sprintf("the ring's calls measured have one step count (%g)", xs[0]))
		} else {
			k.Alpha[p], k.Gamma[p] = line(xs, ys)
			f.note("gamma "+p.String(), len(ss), fmt.Sprintf("ring, 1..%d B, %d step counts", SmallBytes, len(xs)))
		}
		f.note("alpha "+p.String(), len(ss), fmt.Sprintf("ring, 1..%d B, %d step counts", SmallBytes, len(xs)))
		if k.AlphaCPU[p] != 0 { // fitted against the alpha before: stale
			k.AlphaCPU[p] = 0
			f.Basis["alpha_cpu "+p.String()] = "reset: alpha was refitted (fit it again: calibrate --shared-cores)"
		}
	}
	return nil
}

// line fits y = slope x + icept to the points by least squares, with
// neither below 0 (a negative one is set to 0 and the other refitted).
func line(xs, ys []float64) (slope, icept float64) {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx, sy, sxx, sxy = sx+xs[i], sy+ys[i], sxx+xs[i]*xs[i], sxy+xs[i]*ys[i]
	}
	slope = (n*sxy - sx*sy) / (n*sxx - sx*sx)
	icept = (sy - slope*sx) / n
	switch {
	case icept < 0:
		return max(0, sxy/sxx), 0
	case slope < 0:
		return 0, max(0, sy/n)
	}
	return slope, icept
}

// minAlgoGamma is the least per-call cost a fit gives an algorithm with
// its own (0 would mean the class's gamma): 10 ns.
const minAlgoGamma = 0.01

// others fits each other algorithm's efficiency against the ring, then its
// latency per call (PAT: per step of its program).
func (x *fitter) others() error {
	k, f := x.k, x.f
	for a := range algos.Algo(algos.NumAlgos) {
		if a == algos.Ring || k.Eff[a] == 0 {
			continue
		}
		name := "efficiency " + a.String()
		ss := x.pick(a, KeepProto, x.minCh, true)
		// Against the ring's own call of the same size where there is one
		// (bandwidth changes with size: caches), else the ring's fit.
		eff := x.busBW(ss, func(s Sample) float64 {
			if r, ok := x.ringTwin(s); ok {
				if bw := x.busBW([]Sample{r}, func(Sample) float64 { return 1 }); len(bw) == 1 {
					return bw[0]
				}
			}
			return min(float64(s.Channels)*k.Beta[s.Proto], k.BetaMax[s.Proto])
		})
		switch {
		case len(ss) == 0:
			f.keep(name, fmt.Sprintf("no %s call %s was measured", a, x.largeSizes(a)))
		case len(eff) == 0:
			f.keep(name, tooFast)
		default:
			k.Eff[a] = min(2, median(eff))
			f.note(name, len(eff), fmt.Sprintf("%d channel(s), %s, against the ring", x.minCh, x.largeSizes(a)))
		}
		lname, per := "algo_lat "+a.String(), func(Sample) float64 { return 1 }
		if k.AlgoGamma[a] != 0 { // its own per-call cost in place of the class's gamma
			lname = "algo_gamma " + a.String()
		}
		if a == algos.PAT { // PAT's cost grows with its program's steps
			lname = "op_cost"
			per = func(s Sample) float64 { return float64(max(1, x.fm.steps[s.Coll][a].Ops)) }
		}
		small := x.pick(a, KeepProto, 0, false)
		if len(small) == 0 {
			f.keep(lname, fmt.Sprintf("no %s call of 1..%d B was measured", a, SmallBytes))
			continue
		}
		v := median(mapped(small, func(s Sample) float64 { return x.excess(s) / per(s) }))
		switch {
		case a == algos.PAT:
			k.OpCost = max(0, k.OpCost+v)
		case k.AlgoGamma[a] != 0:
			k.AlgoGamma[a] = max(minAlgoGamma, k.AlgoGamma[a]+v)
		default:
			k.AlgoLat[a] = max(0, k.AlgoLat[a]+v)
		}
		f.note(lname, len(small), fmt.Sprintf("1..%d B, beyond the ring's steps", SmallBytes))
	}
	return nil
}

// bound refits MaxBytes of an algorithm that has one (CMA): where it
// stops beating the ring is a matter of the machine's caches (CMA's
// single copy wins while the data sits in them; the same code crossed at
// 384 KiB on one 2-core VM and above 2 MiB on another), not of its line.
// The new bound lies between the largest measured size where its median
// beat the ring's fastest protocol (same collective and channels) and the
// next measured size, where it lost: their mean. Winning at the largest
// size measured puts the bound there; never winning, or no ring at the
// same sizes, keeps the base's.
func (x *fitter) bound(a algos.Algo) {
	name := "max_bytes " + a.String()
	type key struct {
		coll  algos.Coll
		ch    int
		bytes int64
	}
	best := map[key]float64{} // the ring's fastest protocol per key
	for _, s := range x.samples {
		if s.Algo == algos.Ring && s.TimeUS > 0 && s.Bytes > 0 {
			k := key{s.Coll, s.Channels, s.Bytes}
			if t, ok := best[k]; !ok || s.TimeUS < t {
				best[k] = s.TimeUS
			}
		}
	}
	wins := map[int64]bool{} // per size: won on every key measured
	for _, s := range x.samples {
		if s.Algo != a || s.TimeUS <= 0 || s.Bytes <= 0 {
			continue
		}
		r, ok := best[key{s.Coll, s.Channels, s.Bytes}]
		if !ok {
			continue
		}
		w, seen := wins[s.Bytes]
		wins[s.Bytes] = (w || !seen) && s.TimeUS < r
	}
	sizes := make([]int64, 0, len(wins))
	for b := range wins {
		sizes = append(sizes, b)
	}
	slices.Sort(sizes)
	won := -1
	for i, b := range sizes {
		if wins[b] {
			won = i
		}
	}
	switch {
	case won < 0:
		x.f.keep(name, fmt.Sprintf("%s beat the ring at none of %d sizes", a, len(sizes)))
		return
	case won == len(sizes)-1:
		x.k.MaxBytes[a] = float64(sizes[won])
		x.f.Basis[name] = fmt.Sprintf("%s beat the ring up to the largest size measured, %d B", a, sizes[won])
	default:
		x.k.MaxBytes[a] = float64(sizes[won]+sizes[won+1]) / 2
		x.f.Basis[name] = fmt.Sprintf("%s beat the ring at %d B, not at %d B", a, sizes[won], sizes[won+1])
	}
}

// relErr is the median of |predicted / measured - 1| over samples.
func (m *Model) relErr(samples []Sample) float64 {
	if len(samples) == 0 {
		return 0
	}
	return median(mapped(samples, func(s Sample) float64 {
		return math.Abs(m.predict(s.Coll, s.Algo, s.Proto, s.Bytes, s.Channels)/s.TimeUS - 1)
	}))
}

// note records that constant name rests on n samples of what.
func (f *Fitted) note(name string, n int, what string) {
	f.Basis[name] = fmt.Sprintf("%d samples: %s", n, what)
}

// keep records that constant name kept the base's value, and why.
func (f *Fitted) keep(name, why string) { f.Basis[name] = "kept: " + why }

// classSteps is the number of steps of coll by a on links of the model's
// class (Fit's alpha divides by it); at least 1.
func (m *Model) classSteps(coll algos.Coll, a algos.Algo) int {
	s := m.steps[coll][a]
	switch {
	case m.intra == Net: // every step crosses a socket
		return max(1, s.Total())
	case m.Class() == Net:
		return max(1, s.Inter)
	}
	return max(1, s.Intra)
}

func mapped(ss []Sample, f func(Sample) float64) []float64 {
	out := make([]float64, len(ss))
	for i, s := range ss {
		out[i] = f(s)
	}
	return out
}

// median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// FitCPU returns a copy of base whose net class's AlphaCPU is fitted from
// samples measured on m's job: its ranks span hosts that share cores
// cores between them, fewer than the ranks (hosts in namespaces or VMs of
// one machine). Base's gamma and alpha must come from a job with a core
// per rank (Fit). Here every step's ranks wait for cores ranks/cores times
// too few, so a step takes alpha + AlphaCPU x (ranks/cores - 1) (cc-perf
// predict's replay charges it to the cores the same way): the fit is the
// median over the ring's small calls of their time beyond base's
// prediction, per step and per that factor. Nothing else changes.
//
// The fit is bound to neither alpha nor gamma: the split between the two
// that base's 2-rank calls give (one step against two) moves from run to
// run, while the time that ranks sharing cores add per step does not.
func FitCPU(base *Consts, m *Model, samples []Sample, cores int, source string) (*Consts, *Fitted, error) {
	ranks := m.n
	if m.Class() != Net {
		return nil, nil, fmt.Errorf("the job's link class is %s: alpha_cpu is fitted on a job that spans hosts (class %s)", m.Class(), Net)
	}
	if m.nodes != ranks {
		return nil, nil, fmt.Errorf("%d ranks on %d hosts: alpha_cpu is fitted on a job of one rank per host, whose every step crosses hosts", ranks, m.nodes)
	}
	if cores < 1 || ranks <= cores {
		return nil, nil, fmt.Errorf("%d ranks on %d shared cores: alpha_cpu is fitted where ranks outnumber the cores", ranks, cores)
	}
	c := *base
	k := &c.Class[Net]
	x := &fitter{f: &Fitted{Class: Net, Old: base.Class[Net], Basis: map[string]string{}}, k: k, fm: *m, samples: samples}
	x.fm.c = &c
	over := float64(ranks)/float64(cores) - 1
	fitted := 0
	for p := range protocols.Proto(protocols.NumProtos) {
		name := "alpha_cpu " + p.String()
		ss := x.pick(algos.Ring, p, 0, false)
		if len(ss) == 0 {
			x.f.keep(name, fmt.Sprintf("no ring %s call of 1..%d B was measured", p, SmallBytes))
			continue
		}
		// The calls with the most steps (the all-reduce's): a call's own
		// cost waits for cores too, by more in the reduce-scatter and
		// all-gather (measured: 20-30% of theirs on the testbed), and
		// weighs least there.
		most := 0
		for _, s := range ss {
			most = max(most, x.fm.classSteps(s.Coll, s.Algo))
		}
		ss = slices.DeleteFunc(ss, func(s Sample) bool { return x.fm.classSteps(s.Coll, s.Algo) < most })
		v := median(mapped(ss, func(s Sample) float64 { return x.excess(s) / float64(most) / over }))
		k.AlphaCPU[p] = max(0, v)
		what := fmt.Sprintf("ring, 1..%d B, calls of %d steps, %d ranks on %d cores", SmallBytes, most, ranks, cores)
		x.f.note(name, len(ss), what)
		fitted++
	}
	if fitted == 0 {
		return nil, nil, fmt.Errorf("no ring call of 1..%d B was measured: nothing to fit alpha_cpu to", SmallBytes)
	}
	k.Source = x.f.Old.Source + "; alpha_cpu: " + source
	x.f.New = *k
	x.f.ErrBefore = m.With(base).relErr(samples)
	x.f.ErrAfter = x.f.ErrBefore // the tuner's model does not read AlphaCPU
	return &c, x.f, nil
}
