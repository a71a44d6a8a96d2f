package fabric

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// The verdict words of hosts and links, worst first.
const (
	VerdictUnreachable  = "unreachable"  // SSH could not reach it (ccrun --skip-unreachable)
	VerdictTimeout      = "timeout"      // more than half its tests timed out; a link: its test did
	VerdictError        = "error"        // more than half its tests had wrong data or failed; a link: its test did
	VerdictSlowHost     = "slow-host"    // bandwidth (directed: both directions) below the gates
	VerdictSlowTx       = "slow-tx"      // directed: what it sends is slow, what it receives is not
	VerdictSlowRx       = "slow-rx"      // directed: what it receives is slow
	VerdictSuspectLink  = "suspect-link" // one pair slow while both its hosts pass
	VerdictSlowLatency  = "slow-latency" // latency above the gates and the floor
	VerdictLossy        = "lossy"        // its counters grew while the others' stayed flat
	VerdictInconclusive = "inconclusive" // it would be accused, but the run is too noisy to be sure; or it was never measured
	VerdictOK           = "ok"
)

// verdictOrder ranks the verdict words, worst first.
var verdictOrder = []string{VerdictUnreachable, VerdictTimeout, VerdictError, VerdictSlowHost,
	VerdictSlowTx, VerdictSlowRx, VerdictSuspectLink, VerdictSlowLatency, VerdictLossy,
	VerdictInconclusive, VerdictOK}

func verdictRank(v string) int { return slices.Index(verdictOrder, v) }

// failing says whether verdict v fails the run (exit 8).
func failing(v string) bool { return v != VerdictOK && v != VerdictInconclusive }

// Lossy thresholds (--counters): a host is lossy when, summed over the
// run, its TCP retransmits exceed max(LossyRetrans, LossyFactor x the
// hosts' median), or its interface errors and drops exceed
// max(LossyErrDrops, LossyFactor x their median). A host counts the
// retransmits of what it sends: a host that drops what it receives makes
// its partners retransmit, spread over them.
const (
	LossyRetrans  = 100
	LossyErrDrops = 10
	LossyFactor   = 4
)

// Reference is what ratios are taken against.
type Reference struct {
	Source    string  `json:"source"` // baseline, expect or fleet (the median of this run's tests)
	GBps      float64 `json:"gbps"`
	LatSource string  `json:"lat_source,omitempty"` // baseline or fleet
	LatUS     float64 `json:"lat_us,omitempty"`
	Size      int64   `json:"size"`
	LatSize   int64   `json:"lat_size,omitempty"`
}

// HostVerdict is the judge's word on one host, with the numbers behind it.
// Ratios are bandwidth over the reference; LatRatio is latency over the
// reference (above 1 is slower). Numbers a host has no tests for are 0.
type HostVerdict struct {
	Host     string   `json:"host"`
	Addr     string   `json:"addr,omitempty"`
	Index    int      `json:"index"`    // into the run's hosts, -1 for an unreachable one
	Tests    int      `json:"tests"`    // its tests, retests of links left out
	Measured int      `json:"measured"` // of them, finished ones
	Slow     int      `json:"slow"`     // of them, slow or timed out
	Timeouts int      `json:"timeouts,omitempty"`
	Errors   int      `json:"errors,omitempty"`
	GBps     float64  `json:"gbps"`         // median bandwidth of its finished tests
	Score    float64  `json:"score"`        // median ratio
	ModZ     float64  `json:"modz"`         // the score's modified z among the hosts
	Tx       *float64 `json:"tx,omitempty"` // directed: median ratio of what it sends
	TxZ      *float64 `json:"tx_modz,omitempty"`
	Rx       *float64 `json:"rx,omitempty"` // directed: median ratio of what it receives
	RxZ      *float64 `json:"rx_modz,omitempty"`
	LatUS    float64  `json:"lat_us,omitempty"` // median latency
	LatRatio float64  `json:"lat_ratio,omitempty"`
	Retrans  uint64   `json:"retrans,omitempty"`   // --counters: TCP retransmits over the run
	ErrDrops uint64   `json:"err_drops,omitempty"` // --counters: interface errors and drops
	Verdict  string   `json:"verdict"`
}

// LinkVerdict is the judge's word on one pair of hosts (A sends to B when
// Dir) that was slow while both hosts passed.
type LinkVerdict struct {
	A         string  `json:"a"`
	B         string  `json:"b"`
	Dir       bool    `json:"dir,omitempty"`
	Ratio     float64 `json:"ratio"` // median over its tests, retests included
	ModZ      float64 `json:"modz"`  // on a log scale among the tests of passing hosts
	Tests     int     `json:"tests"`
	Slow      int     `json:"slow"`
	Retested  bool    `json:"retested"`
	Confirmed bool    `json:"confirmed"` // retested and slow again
	Verdict   string  `json:"verdict"`
}

// Verdict is the judge's reading of a run.
type Verdict struct {
	Schedule  string        `json:"schedule"`
	Tolerance float64       `json:"tolerance"`
	Hosts     []HostVerdict `json:"hosts"` // worst first
	Links     []LinkVerdict `json:"links"` // worst first
	Reference Reference     `json:"reference"`
	// RatioOf is the bandwidth ratios are taken against: the reference's,
	// or the fleet's median when Degraded.
	RatioOf float64 `json:"ratio_of"`
	// Fleet is the median of the tests between hosts that passed: what
	// --save-baseline saves.
	Fleet Reference `json:"fleet"`
	Noise float64   `json:"noise"` // MAD/median of the passing hosts' scores
	Noisy bool      `json:"noisy"` // Noise > Tolerance/2: near-gate accusations became inconclusive
	// Degraded: against a baseline or --expect, the fleet's median is
	// below (1-tolerance) of it (LatDegraded: its latency above
	// (1+lat-tolerance)); hosts were then judged against the fleet.
	Degraded    bool `json:"degraded"`
	LatDegraded bool `json:"lat_degraded,omitempty"`
	// FullScaleOnly (bisect): the whole set failed the gate and both
	// halves passed: congestion or routing, not a host.
	FullScaleOnly bool     `json:"full_scale_only,omitempty"`
	Fail          bool     `json:"fail"`         // a host, link or fabric verdict failed: exit 8
	Flagged       []string `json:"flagged"`      // failing hosts, unreachable ones included, worst first
	Inconclusive  []string `json:"inconclusive"` // hosts that are neither ok nor accused
	Summary       string   `json:"summary"`
}

// Judge reads a run: hosts (in rank order), the hosts SSH could not reach,
// every measurement and the counters (nil without --counters).
func Judge(hosts []Host, unreachable []string, ms []Measurement, cs []Counters, cfg Config) Verdict {
	a := assess(len(hosts), ms, cfg)
	v := Verdict{
		Schedule:    cfg.Schedule,
		Tolerance:   cfg.Tolerance,
		Reference:   a.ref,
		RatioOf:     num(a.bw.ref),
		Noise:       a.noise,
		Noisy:       a.noisy,
		Degraded:    a.bw.degraded,
		LatDegraded: a.lat.degraded,
	}
	retrans, errDrops := counterTotals(len(hosts), cs)
	lossy := lossyHosts(retrans, errDrops)
	for i, h := range a.hosts {
		hv := HostVerdict{
			Host: hosts[i].Name, Addr: hosts[i].Addr, Index: i,
			Tests: h.tests, Measured: len(h.gbps), Slow: h.slow, Timeouts: h.timeouts, Errors: h.errors,
			GBps: num(median(h.gbps)), Score: num(h.bw.score), ModZ: num(h.bw.z),
			LatUS: num(h.lat.medLatency), Verdict: h.verdict,
		}
		if hv.Measured == 0 {
			hv.Score, hv.ModZ = 0, 0 // nothing finished: no ratio to judge
		}
		if q := h.lat.score; q > 0 {
			hv.LatRatio = 1 / q
		}
		if cfg.directed() {
			hv.Tx, hv.TxZ = ptr(h.tx.score), ptr(h.tx.z)
			hv.Rx, hv.RxZ = ptr(h.rx.score), ptr(h.rx.z)
		}
		if cs != nil {
			hv.Retrans, hv.ErrDrops = retrans[i], errDrops[i]
			if lossy[i] && verdictRank(hv.Verdict) > verdictRank(VerdictLossy) {
				hv.Verdict = VerdictLossy
			}
		}
		v.Hosts = append(v.Hosts, hv)
	}
	for _, name := range unreachable {
		v.Hosts = append(v.Hosts, HostVerdict{Host: name, Index: -1, Verdict: VerdictUnreachable})
	}
	slices.SortStableFunc(v.Hosts, func(x, y HostVerdict) int {
		if c := verdictRank(x.Verdict) - verdictRank(y.Verdict); c != 0 {
			return c
		}
		return cmpFloat(x.Score, y.Score)
	})
	for _, l := range a.links {
		v.Links = append(v.Links, LinkVerdict{
			A: hosts[l.a].Name, B: hosts[l.b].Name, Dir: l.dir,
			Ratio: num(l.ratio), ModZ: num(l.z), Tests: l.tests, Slow: l.slow,
			Retested: l.retested, Confirmed: l.confirmed, Verdict: l.verdict,
		})
	}
	passing := make([]bool, len(hosts))
	for _, hv := range v.Hosts {
		switch {
		case failing(hv.Verdict):
			v.Flagged = append(v.Flagged, hv.Host)
		case hv.Verdict == VerdictInconclusive:
			v.Inconclusive = append(v.Inconclusive, hv.Host)
		case hv.Index >= 0:
			passing[hv.Index] = true
		}
	}
	fleetBW, fleetLat := fleetMedians(a.fleetTests(func(x, y int) bool { return passing[x] && passing[y] }))
	v.Fleet = Reference{Source: "fleet", GBps: num(fleetBW), LatUS: num(fleetLat), Size: cfg.Size, LatSize: cfg.LatSize}
	if v.Fleet.LatUS > 0 {
		v.Fleet.LatSource = "fleet"
	}
	v.Reference.GBps, v.Reference.LatUS = num(v.Reference.GBps), num(v.Reference.LatUS)
	if v.Reference.LatUS == 0 {
		v.Reference.LatSource = ""
	}
	v.FullScaleOnly = fullScaleOnly(len(hosts), ms, a)
	v.Fail = len(v.Flagged) > 0 || v.Degraded || v.LatDegraded || v.FullScaleOnly
	for _, l := range v.Links {
		v.Fail = v.Fail || failing(l.Verdict)
	}
	v.Summary = summary(v)
	return v
}

// fullScaleOnly says whether a bisection's whole set failed the gate of a
// given reference while both its halves, measured next, passed it.
func fullScaleOnly(n int, ms []Measurement, a *assessment) bool {
	if !a.bw.absolute && !a.bw.degraded {
		return false
	}
	ref := a.ref.GBps
	var whole *Measurement
	halves := 0
	for i := range ms {
		m := &ms[i]
		switch {
		case m.Phase != PhaseBisect || m.Group == nil:
		case len(m.Group) == n:
			whole = m
		case whole != nil && m.Round == whole.Round+1 && m.Status == StatusOK && m.GBps >= a.bw.gate*ref:
			halves++
		}
	}
	return whole != nil && (whole.Status != StatusOK || whole.GBps < a.bw.gate*ref) && halves == 2
}

// counterTotals sums each host's counters over the run.
func counterTotals(n int, cs []Counters) (retrans, errDrops []uint64) {
	retrans, errDrops = make([]uint64, n), make([]uint64, n)
	for _, c := range cs {
		if c.Host < 0 || c.Host >= n {
			continue
		}
		retrans[c.Host] += c.RetransSegs
		errDrops[c.Host] += c.RxErrors + c.TxErrors + c.RxDropped + c.TxDropped
	}
	return retrans, errDrops
}

// lossyHosts applies the lossy thresholds to the totals.
func lossyHosts(retrans, errDrops []uint64) []bool {
	asFloat := func(xs []uint64) []float64 {
		out := make([]float64, len(xs))
		for i, x := range xs {
			out[i] = float64(x)
		}
		return out
	}
	mr, me := median(asFloat(retrans)), median(asFloat(errDrops))
	lossy := make([]bool, len(retrans))
	for i := range lossy {
		lossy[i] = float64(retrans[i]) > math.Max(LossyRetrans, LossyFactor*mr) ||
			float64(errDrops[i]) > math.Max(LossyErrDrops, LossyFactor*me)
	}
	return lossy
}

// summary is the one-line reading of v, without the elapsed time.
func summary(v Verdict) string {
	var parts []string
	if len(v.Flagged) > 0 {
		var hs []string
		for _, h := range v.Hosts {
			if failing(h.Verdict) {
				hs = append(hs, h.Host+" "+h.Verdict)
			}
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", plural(len(hs), "host"), strings.Join(hs, ", ")))
	}
	var ls []string
	for _, l := range v.Links {
		if failing(l.Verdict) {
			ls = append(ls, linkName(l)+" "+l.Verdict)
		}
	}
	if len(ls) > 0 {
		parts = append(parts, fmt.Sprintf("%s (%s)", plural(len(ls), "link"), strings.Join(ls, ", ")))
	}
	if v.Degraded {
		parts = append(parts, fmt.Sprintf("fabric degraded: fleet %.3g GB/s, %.2f of the %s %.3g GB/s",
			v.Fleet.GBps, v.Fleet.GBps/v.Reference.GBps, v.Reference.Source, v.Reference.GBps))
	}
	if v.LatDegraded {
		parts = append(parts, fmt.Sprintf("fabric degraded: fleet latency %.3g us, %.2f x the baseline %.3g us",
			v.Fleet.LatUS, v.Fleet.LatUS/v.Reference.LatUS, v.Reference.LatUS))
	}
	if v.FullScaleOnly {
		parts = append(parts, "fabric degraded: fails only at full scale (congestion or routing), both halves pass")
	}
	switch {
	case v.Fail:
		return "FAIL " + strings.Join(parts, "; ")
	case len(v.Inconclusive) > 0:
		return fmt.Sprintf("INCONCLUSIVE %s (%s): too noisy to judge (try --max-concurrent 1 or a longer --pair-time) or never measured",
			plural(len(v.Inconclusive), "host"), strings.Join(v.Inconclusive, ", "))
	}
	inc := 0
	for _, l := range v.Links {
		if l.Verdict == VerdictInconclusive {
			inc++
		}
	}
	if inc > 0 {
		return fmt.Sprintf("PASS %s ok, %s inconclusive (noisy run)", plural(len(v.Hosts), "host"), plural(inc, "link"))
	}
	return fmt.Sprintf("PASS %s ok", plural(len(v.Hosts), "host"))
}

// linkName is "a-b", or "a>b" for a directed link.
func linkName(l LinkVerdict) string {
	if l.Dir {
		return l.A + ">" + l.B
	}
	return l.A + "-" + l.B
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// num is x, or 0 for NaN and infinities (JSON has no NaN).
func num(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}

// ptr is &x, or nil for NaN.
func ptr(x float64) *float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return nil
	}
	return &x
}
