package fabric

import (
	"math"
)

// assessment is what the measurements say about each host and link before
// names, counters and wording: the part of the judge the Plan also needs
// (to pick suspects, good partners and links to retest).
type assessment struct {
	cfg   Config
	n     int
	ref   Reference // the reference as given: baseline, expect or fleet
	bw    scale     // what bandwidth ratios are judged against
	lat   scale     // what latency ratios are judged against (inverted: ref/lat)
	tests []judged  // every pair test, in order
	hosts []hostState
	links []linkState
	noise float64 // MAD/median of the healthy hosts' scores
	noisy bool
}

// scale is one quantity's reference and gate.
type scale struct {
	ref      float64 // ratios are value/ref (bandwidth) or ref/value (latency); NaN: none
	absolute bool    // ref is a baseline or --expect: the ratio gate alone applies
	degraded bool    // the fleet's median is below the gate of the given reference
	gate     float64 // a ratio below the gate is slow
}

// judged is one pair test with its ratios.
type judged struct {
	m       *Measurement
	r       float64 // bandwidth ratio; 0 for a timeout, NaN for an error or no reference
	q       float64 // inverted latency ratio ref/lat; NaN when not measured
	slowBW  bool    // timed out, or r below the gate
	slowLat bool    // q below the latency gate and the latency above the floor
}

func (t judged) slow() bool { return t.slowBW || t.slowLat || t.m.Status != StatusOK }

// gauge is one host's view of one quantity: the ratios of its tests, its
// score (their median), modified z and whether it is accused.
type gauge struct {
	vals       []float64
	slow       int
	score      float64 // NaN without values
	z          float64 // modified z of the score among the hosts' scores
	cand       bool    // passes the gates: would be accused
	unsure     bool    // would be accused but the run is too noisy to be sure
	medLatency float64 // latency gauge: the median latency in us
}

func (g gauge) accused() bool { return g.cand && !g.unsure }

// hostState is what the tests say about one host.
type hostState struct {
	tests, slow, timeouts, errors int
	gbps                          []float64 // its ok tests' bandwidths
	bw, tx, rx, lat               gauge
	verdict                       string // without counters and unreachability
}

// linkState is what the tests say about one pair of hosts (an ordered one
// when directed).
type linkState struct {
	a, b      int
	dir       bool
	tests     int // its tests outside retests
	slow      int
	retested  bool
	confirmed bool // every retest was slow too
	ratio     float64
	z         float64
	verdict   string
}

// assess judges the pair tests among ms for n hosts. It is the whole judge
// except counters (lossy), unreachable hosts, bisection groups and names.
func assess(n int, ms []Measurement, cfg Config) *assessment {
	a := &assessment{cfg: cfg, n: n}
	for i := range ms {
		m := &ms[i]
		if m.Group != nil || m.A < 0 || m.B < 0 || m.A >= n || m.B >= n || m.A == m.B {
			continue
		}
		a.tests = append(a.tests, judged{m: m})
	}
	a.reference()
	for i := range a.tests {
		a.ratio(&a.tests[i])
	}
	a.judgeHosts()
	a.judgeLinks()
	return a
}

// fleetTests are the tests whose median is the fleet reference: the
// schedule's own ok tests, or every ok test outside retests if the
// schedule has none (bisect), restricted to keep(a, b) when keep is set.
func (a *assessment) fleetTests(keep func(x, y int) bool) []*Measurement {
	var sched, other []*Measurement
	for _, t := range a.tests {
		m := t.m
		if m.Status != StatusOK || m.Phase == PhaseRetest || (keep != nil && !keep(m.A, m.B)) {
			continue
		}
		if m.Phase == PhaseSchedule {
			sched = append(sched, m)
		} else {
			other = append(other, m)
		}
	}
	if len(sched) > 0 {
		return sched
	}
	return other
}

// fleetMedians are the median bandwidth and latency of tests (NaN: none).
func fleetMedians(tests []*Measurement) (gbps, latUS float64) {
	var bw, lat []float64
	for _, m := range tests {
		bw = append(bw, m.GBps)
		if m.LatBytes > 0 && m.LatUS > 0 {
			lat = append(lat, m.LatUS)
		}
	}
	return median(bw), median(lat)
}

// reference picks the reference (baseline, else --expect, else the fleet
// median) and the scales the tests are judged on. Against a given
// reference a fleet whose own median is below the gate is degraded; its
// hosts are then judged against the fleet, so that the verdict is
// "fabric degraded" rather than every host accused.
func (a *assessment) reference() {
	cfg := a.cfg
	fleetBW, fleetLat := fleetMedians(a.fleetTests(nil))
	a.ref = Reference{Source: "fleet", GBps: fleetBW, LatSource: "fleet", LatUS: fleetLat, Size: cfg.Size, LatSize: cfg.LatSize}
	switch {
	case cfg.Baseline != nil:
		a.ref.Source, a.ref.GBps = "baseline", cfg.Baseline.GBps
		if cfg.Baseline.LatUS > 0 {
			a.ref.LatSource, a.ref.LatUS = "baseline", cfg.Baseline.LatUS
		}
	case cfg.Expect > 0:
		a.ref.Source, a.ref.GBps = "expect", cfg.Expect
	}
	a.bw = scale{ref: a.ref.GBps, absolute: a.ref.Source != "fleet", gate: 1 - cfg.Tolerance}
	if a.bw.absolute && fleetBW < a.bw.gate*a.bw.ref {
		a.bw = scale{ref: fleetBW, degraded: true, gate: a.bw.gate}
	}
	a.lat = scale{ref: a.ref.LatUS, absolute: a.ref.LatSource != "fleet", gate: 1 / (1 + cfg.LatTolerance)}
	if a.lat.absolute && a.lat.ref < a.lat.gate*fleetLat && fleetLat > cfg.LatFloorUS {
		a.lat = scale{ref: fleetLat, degraded: true, gate: a.lat.gate}
	}
}

// ratio sets t's ratios and slowness.
func (a *assessment) ratio(t *judged) {
	m := t.m
	t.r, t.q = math.NaN(), math.NaN()
	switch m.Status {
	case StatusTimeout:
		t.r, t.slowBW = 0, true
		return
	case StatusOK:
	default:
		return
	}
	if a.bw.ref > 0 {
		t.r = m.GBps / a.bw.ref
		t.slowBW = t.r < a.bw.gate
	}
	if m.LatBytes > 0 && m.LatUS > 0 && a.lat.ref > 0 {
		t.q = a.lat.ref / m.LatUS
		t.slowLat = t.q < a.lat.gate && m.LatUS > a.cfg.LatFloorUS
	}
}

// judgeHosts fills a.hosts: each host's gauges over its tests (retests
// left out: they are about links), the gates, the noise and the verdicts.
func (a *assessment) judgeHosts() {
	a.hosts = make([]hostState, a.n)
	lats := make([][]float64, a.n)
	for _, t := range a.tests {
		m := t.m
		if m.Phase == PhaseRetest {
			continue
		}
		for _, i := range []int{m.A, m.B} {
			h := &a.hosts[i]
			h.tests++
			switch m.Status {
			case StatusTimeout:
				h.timeouts++
			case StatusError:
				h.errors++
			case StatusOK:
				h.gbps = append(h.gbps, m.GBps)
			}
			if t.slowBW {
				h.slow++
			}
			h.bw.add(t.r, t.slowBW)
			if a.cfg.directed() {
				g := &h.rx
				if i == m.A {
					g = &h.tx
				}
				g.add(t.r, t.slowBW)
			}
			if !math.IsNaN(t.q) {
				h.lat.add(t.q, t.slowLat)
				lats[i] = append(lats[i], m.LatUS)
			}
		}
	}
	for i := range a.hosts {
		a.hosts[i].lat.medLatency = median(lats[i])
	}
	gaugeOf := func(pick func(h *hostState) *gauge) []*gauge {
		gs := make([]*gauge, a.n)
		for i := range a.hosts {
			gs[i] = pick(&a.hosts[i])
		}
		return gs
	}
	bw := gaugeOf(func(h *hostState) *gauge { return &h.bw })
	a.gate(bw, a.bw, true)
	if a.cfg.directed() {
		a.gate(gaugeOf(func(h *hostState) *gauge { return &h.tx }), a.bw, false)
		a.gate(gaugeOf(func(h *hostState) *gauge { return &h.rx }), a.bw, false)
	}
	lat := gaugeOf(func(h *hostState) *gauge { return &h.lat })
	a.gate(lat, a.lat, true)
	for i := range a.hosts {
		if g := lat[i]; g.cand && !(g.medLatency > a.cfg.LatFloorUS) {
			g.cand = false
		}
	}
	// The noise: the spread of the scores of the hosts not accused.
	var healthy []float64
	for _, g := range bw {
		if !g.cand && !math.IsNaN(g.score) {
			healthy = append(healthy, g.score)
		}
	}
	if med := median(healthy); med > 0 {
		a.noise = mad(healthy, med) / med
	}
	a.noisy = a.noise > a.cfg.Tolerance/2
	for i := range a.hosts {
		h := &a.hosts[i]
		for _, g := range []*gauge{&h.bw, &h.tx, &h.rx, &h.lat} {
			g.unsure = g.cand && a.noisy && !a.clear(*g, a.scaleOf(g, h))
		}
		h.verdict = a.hostVerdict(h)
	}
}

// scaleOf is the scale gauge g of h is judged on.
func (a *assessment) scaleOf(g *gauge, h *hostState) scale {
	if g == &h.lat {
		return a.lat
	}
	return a.bw
}

// add counts one test's ratio (NaN: not measured) in g.
func (g *gauge) add(v float64, slow bool) {
	if math.IsNaN(v) {
		return
	}
	g.vals = append(g.vals, v)
	if slow {
		g.slow++
	}
}

// gate scores gs and marks the hosts that pass the gates: the vote of
// quick and bisect (more than half of the host's tests slow), or the
// score (median ratio) below the ratio gate and, against the fleet, its
// modified z below -zmax. vote says whether this quantity is voted on in
// voting schedules.
func (a *assessment) gate(gs []*gauge, s scale, vote bool) {
	var scores []float64
	for _, g := range gs {
		g.score = median(g.vals)
		if !math.IsNaN(g.score) {
			scores = append(scores, g.score)
		}
	}
	med := median(scores)
	dev := mad(scores, med)
	for _, g := range gs {
		if math.IsNaN(g.score) {
			g.z = math.NaN()
			continue
		}
		g.z = modZ(g.score, med, dev, a.cfg.MADFloor*med)
		if vote && a.cfg.voting() {
			g.cand = 2*g.slow > len(g.vals)
		} else {
			g.cand = g.score < s.gate && (s.absolute || g.z < -a.cfg.ZMax)
		}
	}
}

// clear says whether an accusation stands in a noisy run: the score is
// below the gate applied twice and its modified z below -zmax, so that
// noise alone cannot have made it.
func (a *assessment) clear(g gauge, s scale) bool {
	return g.score < s.gate*s.gate && g.z < -a.cfg.ZMax
}

// hostVerdict words h's state, the worst reading first.
func (a *assessment) hostVerdict(h *hostState) string {
	switch {
	case h.tests > 0 && 2*h.timeouts > h.tests:
		return VerdictTimeout
	case h.tests > 0 && 2*h.errors > h.tests:
		return VerdictError
	case a.cfg.directed() && h.tx.accused() && h.rx.accused():
		return VerdictSlowHost
	case a.cfg.directed() && h.tx.accused():
		return VerdictSlowTx
	case a.cfg.directed() && h.rx.accused():
		return VerdictSlowRx
	case !a.cfg.directed() && h.bw.accused():
		return VerdictSlowHost
	case h.lat.accused():
		return VerdictSlowLatency
	case h.bw.unsure || h.tx.unsure || h.rx.unsure || h.lat.unsure:
		return VerdictInconclusive
	}
	return VerdictOK
}
