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
	// madR, madQ: the MAD of single tests' log bandwidth and inverted
	// latency ratios (testMAD)
	madR, madQ float64
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
		for _, p := range [][2]int{{m.A, m.B}, {m.B, m.A}} {
			i, j := p[0], p[1]
			h, partner := &a.hosts[i], &a.hosts[j]
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
			h.bw.add(t.r, &partner.bw)
			switch {
			case !m.Dir:
			case i == m.A:
				h.tx.add(t.r, &partner.rx)
			default:
				h.rx.add(t.r, &partner.tx)
			}
			if !math.IsNaN(t.q) {
				h.lat.add(t.q, &partner.lat)
				lats[i] = append(lats[i], m.LatUS)
			}
		}
	}
	gaugeOf := func(pick func(h *hostState) *gauge) []*gauge {
		gs := make([]*gauge, a.n)
		for i := range a.hosts {
			gs[i] = pick(&a.hosts[i])
		}
		return gs
	}
	bw := gaugeOf(func(h *hostState) *gauge { return &h.bw })
	tx := gaugeOf(func(h *hostState) *gauge { return &h.tx })
	rx := gaugeOf(func(h *hostState) *gauge { return &h.rx })
	lat := gaugeOf(func(h *hostState) *gauge { return &h.lat })
	for i := range a.hosts {
		lat[i].medLatency = median(lats[i])
		for _, g := range []*gauge{bw[i], tx[i], rx[i], lat[i]} {
			g.plain = median(g.all)
		}
	}
	for i := range a.hosts {
		bw[i].keep(a.bw.gate)
		tx[i].keep(a.bw.gate)
		rx[i].keep(a.bw.gate)
		lat[i].keep(a.lat.gate)
	}
	a.madR, a.madQ = testMAD(bw), testMAD(lat)
	if a.cfg.directed() {
		a.madR = testMAD(append(tx, rx...))
	}
	a.gate(bw, a.bw, true, a.madR)
	if a.cfg.directed() {
		a.gate(tx, a.bw, false, a.madR)
		a.gate(rx, a.bw, false, a.madR)
	}
	a.gate(lat, a.lat, true, a.madQ)
	accused := make([]bool, a.n)
	for i := range a.hosts {
		if g := lat[i]; g.cand && !(g.medLatency > a.cfg.LatFloorUS) {
			g.cand = false
		}
		accused[i] = bw[i].cand || tx[i].cand || rx[i].cand || lat[i].cand
	}
	// The noise: the spread (MAD/median) of the scores of the hosts not
	// accused.
	var healthy []float64
	for i, g := range bw {
		if !accused[i] && !math.IsNaN(g.score) {
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
			g.unsure = g.cand && a.noisy && !a.clear(*g)
		}
		h.verdict = a.hostVerdict(h)
	}
}

func (a *assessment) hostVerdict(h *hostState) string {
	switch {
	case h.tests == 0 && a.cfg.Schedule != "bisect":
		// never paired (random leaves a host idle in a round when n is
		// odd): nothing says it is ok. bisect's hosts in passing groups
		// have no pair test and passed.
		return VerdictInconclusive
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
