package fabric

import (
	"math"
	"slices"
)

// judgeLinks fills a.links: every pair of hosts (ordered when directed)
// with a slow, timed-out or wrong test outside retests while both hosts
// are ok, so that the host does not explain it.
//
// A link's ratio is the median over all its tests, retests included. It
// is a suspect link when that ratio is below the gate and its modified z
// is below -zmax,
// taken on the logarithm of the ratios of the tests between ok hosts (a
// throttle is a factor, and on a log scale a 6x slower link stands out
// of +-50% noise where on a linear one it does not), the MAD floored at
// the noise of single tests within hosts (testMAD): 28 tests can cluster
// by chance (a MAD of 0.11 where the noise's is 0.25, in one synthetic
// run of 400), and a link measured twice at the bottom of the noise then
// looked like a fault. A link that was not retested (the run ended
// first) is inconclusive: one slow test is not enough. A retest that is not
// slow clears the link ("ok"); one that is slow confirms it.
func (a *assessment) judgeLinks() {
	okHost := func(i int) bool { return a.hosts[i].verdict == VerdictOK }
	type key struct{ a, b int }
	keyOf := func(m *Measurement) key {
		if m.Dir {
			return key{m.A, m.B}
		}
		return key{min(m.A, m.B), max(m.A, m.B)}
	}
	byKey := map[key][]judged{}
	var order []key
	var logR, logQ []float64 // tests between ok hosts
	for _, t := range a.tests {
		k := keyOf(t.m)
		if _, ok := byKey[k]; !ok {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], t)
		if okHost(t.m.A) && okHost(t.m.B) {
			if t.r > 0 {
				logR = append(logR, math.Log(t.r))
			}
			if t.q > 0 {
				logQ = append(logQ, math.Log(t.q))
			}
		}
	}
	zOf := func(logs []float64, testDev float64) func(x float64) float64 {
		med := median(logs)
		dev := mad(logs, med)
		floor := a.cfg.MADFloor
		if testDev > floor {
			floor = testDev
		}
		return func(x float64) float64 {
			if !(x > 0) {
				return math.Inf(-1) // a link that never finished
			}
			return modZ(math.Log(x), med, dev, floor)
		}
	}
	zR, zQ := zOf(logR, a.madR), zOf(logQ, a.madQ)
	for _, k := range order {
		ts := byKey[k]
		if !okHost(k.a) || !okHost(k.b) {
			continue
		}
		l := linkState{a: k.a, b: k.b, dir: ts[0].m.Dir}
		var rs, qs []float64
		var lats []float64
		timeout, wrong, slowBW, slowLat := false, false, false, false
		retestsSlow := true
		for _, t := range ts {
			if !math.IsNaN(t.r) {
				rs = append(rs, t.r)
			}
			if !math.IsNaN(t.q) {
				qs = append(qs, t.q)
				lats = append(lats, t.m.LatUS)
			}
			if t.m.Phase == PhaseRetest {
				l.retested = true
				retestsSlow = retestsSlow && t.slow()
				continue
			}
			l.tests++
			if t.slow() {
				l.slow++
			}
			timeout = timeout || t.m.Status == StatusTimeout
			wrong = wrong || t.m.Status == StatusError
			slowBW = slowBW || t.slowBW
			slowLat = slowLat || t.slowLat
		}
		if l.slow == 0 {
			continue
		}
		l.confirmed = l.retested && retestsSlow
		l.ratio = median(rs)
		l.z = zR(l.ratio)
		switch {
		case l.retested && !retestsSlow:
			l.verdict = VerdictOK // slow once, then passed its retest
		case wrong:
			l.verdict = VerdictError
		case timeout:
			l.verdict = VerdictTimeout
		case !l.confirmed:
			l.verdict = VerdictInconclusive // slow once, not retested
		case slowBW && a.linkGate(l.ratio, l.z, a.bw):
			l.verdict = VerdictSuspectLink
		case slowLat && median(lats) > a.cfg.LatFloorUS && a.linkGate(median(qs), zQ(median(qs)), a.lat):
			l.verdict = VerdictSuspectLink
		default:
			l.verdict = VerdictInconclusive // slow, but not clearly more than noise
		}
		a.links = append(a.links, l)
	}
	slices.SortStableFunc(a.links, func(x, y linkState) int {
		if c := verdictRank(x.verdict) - verdictRank(y.verdict); c != 0 {
			return c
		}
		return cmpFloat(x.ratio, y.ratio)
	})
}

// linkGate says whether a link of ratio r and modified z (log scale)
// passes the gates on scale s.
func (a *assessment) linkGate(r, z float64, s scale) bool {
	return r < s.gate && z < -a.cfg.ZMax
}

// cmpFloat orders NaN last.
func cmpFloat(x, y float64) int {
	switch {
	case math.IsNaN(x) && math.IsNaN(y):
		return 0
	case math.IsNaN(x):
		return 1
	case math.IsNaN(y):
		return -1
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}
