package fabric

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// model is a synthetic fabric for tests: every host a transmit and a
// receive factor and a latency factor, every link a factor, and
// multiplicative noise: each measurement is multiplied by a factor drawn
// uniformly from [1-noise, 1+noise] by a seeded generator.
type model struct {
	n       int
	base    float64 // GB/s of a healthy pair
	baseLat float64 // us of a healthy pair
	tx, rx  []float64
	lat     []float64
	link    map[[2]int]float64 // by unordered pair
	dead    map[int]bool       // hosts whose tests time out
	noise   float64
	rng     *rand.Rand
	// pairGBps and groupGBps, when set, give every measurement instead
	// (no noise): a measured table.
	pairGBps  func(a, b int) float64
	groupGBps func(g []int) float64
}

func newModel(n int, noise float64, seed uint64) *model {
	m := &model{n: n, base: 1, baseLat: 50, noise: noise, link: map[[2]int]float64{}, dead: map[int]bool{},
		rng: rand.New(rand.NewPCG(seed, 1))}
	m.tx, m.rx, m.lat = make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range n {
		m.tx[i], m.rx[i], m.lat[i] = 1, 1, 1
	}
	return m
}

// slow makes host h's both directions f times as fast.
func (m *model) slow(h int, f float64) *model { m.tx[h], m.rx[h] = f, f; return m }

func (m *model) jitter() float64 { return 1 + m.noise*(2*m.rng.Float64()-1) }

func (m *model) linkOf(a, b int) float64 {
	if f, ok := m.link[[2]int{min(a, b), max(a, b)}]; ok {
		return f
	}
	return 1
}

// measure is what the runner would measure for round r.
func (m *model) measure(r Round) []Measurement {
	var out []Measurement
	for _, t := range r.Tests {
		ms := Measurement{Round: r.Index, Phase: r.Phase, Test: t, Bytes: 32 << 20, Iters: 10, LatBytes: 8, LatIters: 10, Status: StatusOK}
		var f, lat float64
		var hosts []int
		switch {
		case t.Group != nil:
			hosts = t.Group
			f = 1
			for _, h := range t.Group {
				f = min(f, m.tx[h], m.rx[h])
			}
			lat = 1
		case t.Dir:
			hosts = []int{t.A, t.B}
			f = min(m.tx[t.A], m.rx[t.B]) * m.linkOf(t.A, t.B)
			lat = max(m.lat[t.A], m.lat[t.B])
		default:
			hosts = []int{t.A, t.B}
			f = min(m.tx[t.A], m.rx[t.B], m.tx[t.B], m.rx[t.A]) * m.linkOf(t.A, t.B)
			lat = max(m.lat[t.A], m.lat[t.B])
		}
		for _, h := range hosts {
			if m.dead[h] {
				ms.Status = StatusTimeout
			}
		}
		switch {
		case ms.Status != StatusOK:
		case t.Group == nil && m.pairGBps != nil:
			ms.GBps = m.pairGBps(t.A, t.B)
		case t.Group != nil && m.groupGBps != nil:
			ms.GBps = m.groupGBps(t.Group)
		default:
			ms.GBps = m.base * f * m.jitter()
		}
		if ms.Status == StatusOK {
			ms.TMedUS = float64(ms.Bytes) / ms.GBps / 1e3
			ms.LatUS = m.baseLat * lat * m.jitter()
		} else {
			ms.Iters, ms.LatIters, ms.LatBytes = 0, 0, 0
			ms.Err = "no iteration finished within --pair-timeout"
		}
		out = append(out, ms)
	}
	return out
}

// testHosts are n hosts tb1..tbn.
func testHosts(n int) []Host {
	hs := make([]Host, n)
	for i := range hs {
		hs[i] = Host{Name: fmt.Sprintf("tb%d", i+1), Addr: fmt.Sprintf("10.252.0.%d", i+1), Rank: i,
			BootID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i+1)}
	}
	return hs
}

// run plays cfg's plan against m the way the runner does and returns the
// rounds and every measurement.
func run(t *testing.T, cfg Config, m *model) ([]Round, []Measurement) {
	t.Helper()
	p, err := NewPlan(cfg, m.n)
	if err != nil {
		t.Fatalf("NewPlan: %v", err)
	}
	var rounds []Round
	var ms []Measurement
	for {
		r, ok := p.Next(ms)
		if !ok {
			return rounds, ms
		}
		if r.Index != len(rounds) {
			t.Fatalf("round %d: got Index %d", len(rounds), r.Index)
		}
		if len(rounds) > 4*m.n+16 {
			t.Fatalf("the plan does not end: %d rounds", len(rounds))
		}
		rounds = append(rounds, r)
		for _, sub := range SplitRound(r, cfg.MaxConcurrent) {
			ms = append(ms, m.measure(sub)...)
		}
	}
}

// verdictOf is host name's verdict in v, "" if absent.
func verdictOf(v Verdict, name string) string {
	for _, h := range v.Hosts {
		if h.Host == name {
			return h.Verdict
		}
	}
	return ""
}

// accused are the hosts of v whose verdict is neither ok nor inconclusive,
// in host order, with their verdicts: "tb5 slow-host".
func accused(hosts []Host, v Verdict) []string {
	var out []string
	for _, h := range hosts {
		if w := verdictOf(v, h.Name); failing(w) {
			out = append(out, h.Name+" "+w)
		}
	}
	return out
}

// failingLinks are v's failing links: "tb2-tb6 suspect-link".
func failingLinks(v Verdict) []string {
	var out []string
	for _, l := range v.Links {
		if failing(l.Verdict) {
			out = append(out, linkName(l)+" "+l.Verdict)
		}
	}
	return out
}
