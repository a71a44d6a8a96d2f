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

// gauge is one host's view of one quantity: the ratios of its tests, its
// score (their median), modified z and whether it is accused.
type gauge struct {
	obs        []observation
	all        []float64 // every test's value
	plain      float64   // median of all
	vals       []float64 // the values kept (see keep)
	outliers   int       // of them, below the gate and beyond the noise (test z below -zmax)
	score      float64   // NaN without values
	z          float64   // modified z of the score among the hosts' scores
	cand       bool      // passes the gates: would be accused
	unsure     bool      // would be accused but the run is too noisy to be sure
	medLatency float64   // latency gauge: the median latency in us
}

// observation is one test as one host's gauge sees it.
type observation struct {
	v       float64
	partner *gauge // the partner's gauge the test counts in
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

// add counts one test's ratio (NaN: not measured) in g; partner is the
// partner's gauge that the same test counts in.
func (g *gauge) add(v float64, partner *gauge) {
	if math.IsNaN(v) {
		return
	}
	g.all = append(g.all, v)
	g.obs = append(g.obs, observation{v: v, partner: partner})
}

// keep sets g's values and score from its tests, leaving out
// those whose partner is clearly slow (its plain score below gate squared)
// while one test remains: a test with a slow partner says nothing about
// this host. Without it, in full with two hosts at 0.15 of eight, every
// healthy host's median is taken over five fair tests and two slow ones,
// which spreads the healthy scores enough to hide the slow hosts (on
// synthetic runs with +-50% noise: 69 of 400 missed).
func (g *gauge) keep(gate float64) {
	g.vals = nil
	for _, o := range g.obs {
		if !(o.partner.plain < gate*gate) {
			g.vals = append(g.vals, o.v)
		}
	}
	if len(g.vals) == 0 {
		g.vals = g.all
	}
	g.score = median(g.vals)
}

// gate scores gs and marks the hosts that pass the gates. A test is an
// outlier when its ratio is below the ratio gate and beyond the noise of
// single tests: 0.6745 (ln(ratio) - centre) / max(testDev, MADFloor)
// below -zmax/sqrt 2, testDev being the MAD of single tests' log ratios
// (testMAD) and centre the healthy tests' median (testCentre);
// an accusation takes a majority of at least two such tests, and two
// independent tests at -zmax/sqrt 2 together are at -zmax (Stouffer).
//
// In quick and bisect (vote: a host has 2 to 4 tests) a host passes when
// more than half its tests are outliers and, against the fleet, its
// score's modified z is below -zmax. Elsewhere it passes when its score
// (median ratio) is below the ratio gate and, against the fleet, the
// score's modified z is below -zmax, or, against a given reference, more
// than half its tests are outliers: the ratio gate applies against the
// reference, so a uniformly slow fleet is caught (see reference), but a
// single host is accused only beyond the noise (with +-50% noise and the
// ratio gate alone, a healthy host scored below 0.8 of the baseline in 1
// synthetic run of 3).
//
// The modified z is taken on the logarithm of the scores: a slow NIC is a
// factor, and so is the noise of concurrent tests on shared cores. On a
// linear scale, hosts whose scores spread from 0.9 to 1.55 (+-50% noise
// per test, 7 tests each) give a MAD of 0.27, and a host 6.7x slower
// (score 0.16) reaches only z = -2.1; on the log scale it is below -5.
// A fraction f of the median on the linear scale is about f on the log
// scale, so MADFloor keeps its meaning.
//
// The median and MAD are those of the hosts that are not clearly slow
// (plain score at least the gate squared, when 3 are), so that slow hosts
// do not inflate the MAD they are judged by: with two hosts at 0.15 of
// eight and +-50% noise, the MAD over all eight scores hid both in 1 run
// of 12. The MAD is floored at MADFloor and at testDev: a host is accused when
// its typical test is an outlier against the noise of single tests, not
// merely when its median is one among medians. Eight medians of seven
// tests can agree by chance and make a tiny MAD; with +-50% uniform noise
// per test, the MAD of the scores alone accused a healthy host in 4% of
// synthetic full runs of 8 hosts (the experiment behind
// TestJudgeSynthetic, 400 seeds), and a vote over tests below the ratio
// gate accused a healthy host in 1 quick run of 20 (two tests of four
// below 0.8 is common at that noise).
func (a *assessment) gate(gs []*gauge, s scale, vote bool, testDev float64) {
	var logs, fair []float64
	for _, g := range gs {
		if !math.IsNaN(g.score) {
			logs = append(logs, logRatio(g.score))
			if !(g.plain < s.gate*s.gate) {
				fair = append(fair, logRatio(g.score))
			}
		}
	}
	if len(fair) >= 3 {
		logs = fair
	}
	med := median(logs)
	dev := mad(logs, med)
	floor := math.Max(a.cfg.MADFloor, testDev)
	centre := testCentre(gs, s.gate)
	for _, g := range gs {
		g.cand, g.outliers = false, 0
		for _, v := range g.vals {
			out := v < s.gate && modZ(logRatio(v), centre, 0, floor) < -a.cfg.ZMax/math.Sqrt2
			if out {
				g.outliers++
			}

		}
		if math.IsNaN(g.score) {
			g.z = math.NaN()
			continue
		}
		if vote && a.cfg.voting() {
			// A median of 2 to 4 tests: the scores' own MAD is their
			// sampling noise; judge the typical test against single tests'.
			g.z = modZ(logRatio(g.score), med, 0, floor)
			g.cand = a.clear(*g) && (s.absolute || g.z < -a.cfg.ZMax)
		} else {
			g.z = modZ(logRatio(g.score), med, dev, floor)
			g.cand = g.score < s.gate && (g.z < -a.cfg.ZMax || (s.absolute && a.clear(*g)))
		}
	}
}

// testCentre is the median log ratio of the tests kept by the gauges
// that are not clearly slow (plain score below the gate squared), or of
// all tests kept if every gauge is: the centre that single tests are
// outliers from. The ratios are taken against the median of all tests,
// which slow hosts pull down (two of eight are in 13 of 28 tests), so the
// healthy tests' own centre is above 0.
func testCentre(gs []*gauge, gate float64) float64 {
	var fair, all []float64
	for _, g := range gs {
		for _, v := range g.vals {
			all = append(all, logRatio(v))
			if !(g.plain < gate*gate) {
				fair = append(fair, logRatio(v))
			}
		}
	}
	if len(fair) > 0 {
		return median(fair)
	}
	return median(all)
}

// logRatio is the natural log of a ratio, a ratio below 1/1000 counting
// as 1/1000 (a host whose tests timed out has score 0).
func logRatio(r float64) float64 { return math.Log(math.Max(r, 1e-3)) }

// testMAD is the MAD of single tests' log ratios, estimated within
// hosts: the median, over every two tests kept by one gauge (see keep), of
// the difference of their log values, over sqrt 2 (for normal noise
// median|x1 - x2| is sqrt 2 times the MAD). A slow host's own tests are
// slow alike and tests with a clearly slow partner are left out, so faults
// do not inflate it, as they inflate the MAD over all tests at once (two
// slow hosts of eight are in 13 of the 28 tests of full). Differences
// need no centre: the median of each host's MAD around its own median of
// 7 tests came out at 0.75 of the noise's MAD on synthetic runs, and 1 in
// 100 at 0.4 of it, which accused healthy hosts. The estimate is raised
// by 1/sqrt(m) of itself for m differences, about its standard error, so
// that few tests (quick, random, bisect: 8 to 30 differences) make the
// judge more careful, never bolder. NaN without a gauge of 2 values.
func testMAD(gs []*gauge) float64 {
	var diffs []float64
	for _, g := range gs {
		for i := range g.vals {
			for j := range i {
				diffs = append(diffs, math.Abs(logRatio(g.vals[i])-logRatio(g.vals[j])))
			}
		}
	}
	if len(diffs) == 0 {
		return math.NaN()
	}
	return median(diffs) / math.Sqrt2 * (1 + 1/math.Sqrt(float64(len(diffs))))
}

// clear says whether an accusation stands in a noisy run: more than half
// the host's tests are outliers beyond the noise of single tests, so that
// noise alone cannot have made it.
func (a *assessment) clear(g gauge) bool {
	return 2*g.outliers > len(g.vals)
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
