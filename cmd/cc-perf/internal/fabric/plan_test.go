package fabric

import (
	"fmt"
	"math"
	"slices"
	"testing"
)

// phases is the phase of every round, in order.
func phases(rounds []Round) []Phase {
	var out []Phase
	for _, r := range rounds {
		out = append(out, r.Phase)
	}
	return out
}

func TestPlanQuickConfirmsSuspects(t *testing.T) {
	cfg := cfgOf("quick", nil)
	m := newModel(8, 0.05, 1).slow(4, 0.05)
	rounds, ms := run(t, cfg, m)
	if got, want := phases(rounds), []Phase{PhaseSchedule, PhaseSchedule, PhaseConfirm, PhaseConfirm}; !slices.Equal(got, want) {
		t.Fatalf("got phases %v, want %v", got, want)
	}
	// The suspects are the hosts of the two slow pairs: 3, 4 and 5.
	suspects := []int{3, 4, 5}
	met := map[[2]int]bool{}
	for _, r := range rounds[:2] {
		for _, x := range r.Tests {
			met[[2]int{x.A, x.B}] = true
		}
	}
	partners := map[int][]int{}
	for _, r := range rounds[2:] {
		roundsDisjoint(t, "confirm", 8, [][]Test{r.Tests})
		for _, x := range r.Tests {
			s, g := x.A, x.B
			if !slices.Contains(suspects, s) {
				s, g = g, s
			}
			if !slices.Contains(suspects, s) || slices.Contains(suspects, g) {
				t.Errorf("round %d: test %d-%d is not a suspect with a good host", r.Index, x.A, x.B)
			}
			if met[[2]int{x.A, x.B}] {
				t.Errorf("round %d: %d-%d met before", r.Index, x.A, x.B)
			}
			met[[2]int{x.A, x.B}] = true
			partners[s] = append(partners[s], g)
		}
	}
	for _, s := range suspects {
		if got := partners[s]; len(got) != cfg.Confirm {
			t.Errorf("suspect %d: got partners %v, want %d", s, got, cfg.Confirm)
		}
	}
	v := Judge(testHosts(8), nil, ms, nil, cfg)
	if got, want := accused(testHosts(8), v), []string{"tb5 slow-host"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestPlanQuickHealthyStops(t *testing.T) {
	cfg := cfgOf("quick", nil)
	for _, n := range []int{2, 3, 7, 8} {
		rounds, ms := run(t, cfg, newModel(n, 0, 1))
		if got, want := len(rounds), len(Neighbor(n)); got != want {
			t.Errorf("n=%d: got %d rounds, want the %d neighbour rounds", n, got, want)
		}
		if v := Judge(testHosts(n), nil, ms, nil, cfg); v.Fail {
			t.Errorf("n=%d: got %s, want a pass", n, v.Summary)
		}
	}
}

// groups are the groups of each bisection round.
func groups(rounds []Round) [][][]int {
	var out [][][]int
	for _, r := range rounds {
		if r.Phase != PhaseBisect {
			continue
		}
		var gs [][]int
		for _, x := range r.Tests {
			gs = append(gs, x.Group)
		}
		out = append(out, gs)
	}
	return out
}

func TestPlanBisect(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int
		cfg    Config
		fabric func(m *model)
		groups string // the groups of every bisection round
		hosts  []string
		full   bool // FullScaleOnly
	}{
		{name: "one slow host", n: 8, cfg: cfgOf("bisect", nil), fabric: func(m *model) { m.slow(5, 0.1) },
			groups: "[[[0 1 2 3 4 5 6 7]] [[0 1 2 3] [4 5 6 7]] [[4 5] [6 7]]]", hosts: []string{"tb6 slow-host"}},
		{name: "odd n", n: 11, cfg: cfgOf("bisect", nil), fabric: func(m *model) { m.slow(9, 0.1) },
			groups: "[[[0 1 2 3 4 5 6 7 8 9 10]] [[0 1 2 3 4 5] [6 7 8 9 10]] [[6 7 8] [9 10]]]", hosts: []string{"tb10 slow-host"}},
		{name: "healthy with --expect", n: 8, cfg: cfgOf("bisect", func(c *Config) { c.Expect = 1 }), fabric: func(m *model) {},
			groups: "[[[0 1 2 3 4 5 6 7]]]"},
		{name: "healthy without a reference", n: 8, cfg: cfgOf("bisect", nil), fabric: func(m *model) {},
			groups: "[[[0 1 2 3 4 5 6 7]] [[0 1 2 3] [4 5 6 7]]]"},
		{name: "fails only at full scale", n: 8, cfg: cfgOf("bisect", func(c *Config) { c.Expect = 1 }), fabric: func(m *model) {
			m.groupGBps = func(g []int) float64 { return map[bool]float64{true: 0.3, false: 1}[len(g) == 8] }
		}, groups: "[[[0 1 2 3 4 5 6 7]] [[0 1 2 3] [4 5 6 7]]]", full: true},
		{name: "3 hosts run full's rounds", n: 3, cfg: cfgOf("bisect", nil), fabric: func(m *model) {}, groups: "[]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newModel(tc.n, 0.05, 3)
			tc.fabric(m)
			rounds, ms := run(t, tc.cfg, m)
			if got := fmt.Sprint(groups(rounds)); got != tc.groups {
				t.Errorf("got groups %s, want %s", got, tc.groups)
			}
			for i, r := range rounds {
				if r.Phase == PhaseBisect && i > 0 && rounds[i-1].Phase != PhaseBisect {
					t.Errorf("round %d: a bisection round after %s rounds", i, rounds[i-1].Phase)
				}
			}
			hosts := testHosts(tc.n)
			v := Judge(hosts, nil, ms, nil, tc.cfg)
			if got := accused(hosts, v); !slices.Equal(got, tc.hosts) || v.FullScaleOnly != tc.full {
				t.Errorf("got %q full-scale-only %v, want %q %v\n%s", got, v.FullScaleOnly, tc.hosts, tc.full, table(t, hosts, ms, v))
			}
			if v.Fail != (len(tc.hosts) > 0 || tc.full) {
				t.Errorf("got Fail %v (%s)", v.Fail, v.Summary)
			}
		})
	}
}

func TestPlanRandomBySeed(t *testing.T) {
	roundsOf := func(seed int64) string {
		cfg := cfgOf("random", func(c *Config) { c.Rounds, c.Seed = 4, seed })
		rounds, _ := run(t, cfg, newModel(10, 0, 1))
		return fmt.Sprint(rounds)
	}
	if a, b := roundsOf(7), roundsOf(7); a != b {
		t.Errorf("seed 7 twice: got\n%s\n%s", a, b)
	}
	if a, b := roundsOf(7), roundsOf(8); a == b {
		t.Errorf("seeds 7 and 8: got the same rounds %s", a)
	}
	if got, want := roundsOf(7), fmt.Sprint(roundsWith(PhaseSchedule, Random(10, 4, 7))); got != want {
		t.Errorf("got %s, want Random's rounds %s", got, want)
	}
}

// roundsWith numbers rounds from 0 in phase.
func roundsWith(p Phase, rs [][]Test) []Round {
	var out []Round
	for i, r := range rs {
		out = append(out, Round{Index: i, Phase: p, Tests: r})
	}
	return out
}

func TestPlanFixedSchedules(t *testing.T) {
	for _, tc := range []struct {
		schedule string
		want     [][]Test
	}{
		{"full", Circle(9)}, {"directed", Shift(9)}, {"quick", Neighbor(9)},
	} {
		rounds, _ := run(t, cfgOf(tc.schedule, nil), newModel(9, 0, 1))
		if got, want := fmt.Sprint(rounds), fmt.Sprint(roundsWith(PhaseSchedule, tc.want)); got != want {
			t.Errorf("%s, healthy: got %s, want %s", tc.schedule, got, want)
		}
	}
}

func TestPlanRetestsSlowLink(t *testing.T) {
	cfg := cfgOf("full", nil)
	m := newModel(8, 0.05, 1)
	m.link[[2]int{1, 5}] = 0.1
	rounds, ms := run(t, cfg, m)
	last := rounds[len(rounds)-1]
	if len(rounds) != 8 || last.Phase != PhaseRetest || fmt.Sprint(last.Tests) != fmt.Sprint([]Test{{A: 1, B: 5}}) {
		t.Fatalf("got rounds %v, want the 7 circle rounds and a retest of 1-5", rounds)
	}
	v := Judge(testHosts(8), nil, ms, nil, cfg)
	want := []LinkVerdict{{A: "tb2", B: "tb6", Tests: 1, Slow: 1, Retested: true, Confirmed: true, Verdict: VerdictSuspectLink}}
	got := slices.Clone(v.Links)
	for i := range got {
		got[i].Ratio, got[i].ModZ = 0, 0
	}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(accused(testHosts(8), v)) > 0 || !v.Fail {
		t.Errorf("got links %+v hosts %q fail %v, want %+v, no host, fail", got, accused(testHosts(8), v), v.Fail, want)
	}
	if r := v.Links[0].Ratio; math.Abs(r-0.1) > 0.02 {
		t.Errorf("got link ratio %.3f, want about 0.1", r)
	}
}

func TestPlanLinkPassesRetest(t *testing.T) {
	// 1-5 is slow in its first test only: the retest clears it.
	cfg := cfgOf("full", nil)
	m := newModel(8, 0, 1)
	slowOnce := true
	m.pairGBps = func(a, b int) float64 {
		if a == 1 && b == 5 && slowOnce {
			slowOnce = false
			return 0.1
		}
		return 1
	}
	_, ms := run(t, cfg, m)
	v := Judge(testHosts(8), nil, ms, nil, cfg)
	if len(v.Links) != 1 || v.Links[0].Verdict != VerdictOK || !v.Links[0].Retested || v.Links[0].Confirmed || v.Fail {
		t.Errorf("got links %+v fail %v, want tb2-tb6 ok after its retest and a pass", v.Links, v.Fail)
	}
}

// studyModel is the measured case of cluster-acceptance.md section 5:
// tb5 throttled to 1 Gbit among 8 hosts, pairs measured serially, tb5's
// pairs at 0.11-0.12 GB/s and every other pair between 0.30 and 1.03.
func studyModel() *model {
	m := newModel(8, 0, 1)
	k := 0
	m.pairGBps = func(a, b int) float64 {
		k++
		if a == 4 || b == 4 {
			return 0.11 + 0.01*float64(k%2)
		}
		// spread the others over 0.30-1.03 in a scrambled order
		return 0.30 + 0.73*math.Mod(float64(k)*0.618034, 1)
	}
	return m
}

func TestStudyCase(t *testing.T) {
	hosts := testHosts(8)
	for _, schedule := range []string{"full", "quick"} {
		cfg := cfgOf(schedule, func(c *Config) { c.MaxConcurrent = 1 })
		_, ms := run(t, cfg, studyModel())
		for _, m := range ms {
			if m.A != 4 && m.B != 4 && (m.GBps < 0.30 || m.GBps > 1.03) {
				t.Fatalf("model: %d-%d at %.2f GB/s, outside the study's 0.30-1.03", m.A, m.B, m.GBps)
			}
		}
		v := Judge(hosts, nil, ms, nil, cfg)
		if got, want := accused(hosts, v), []string{"tb5 slow-host"}; !slices.Equal(got, want) || len(failingLinks(v)) > 0 {
			t.Errorf("%s: got %q links %q, want %q alone\n%s", schedule, got, failingLinks(v), want, table(t, hosts, ms, v))
		}
	}
}

func TestNewPlanRejectsBadConfig(t *testing.T) {
	if _, err := NewPlan(cfgOf("bogus", nil), 8); err == nil {
		t.Errorf("NewPlan with schedule bogus: got no error")
	}
	if _, err := NewPlan(DefaultConfig(), 1); err == nil {
		t.Errorf("NewPlan over 1 host: got no error")
	}
}

func TestConfirmRounds(t *testing.T) {
	for _, tc := range []struct {
		name           string
		suspects, good []int
		k              int
		fill           bool
		wantRounds     int
		wantPerSuspect int
	}{
		{"one suspect", []int{3}, []int{0, 1, 2, 4}, 2, false, 2, 2},
		{"more suspects than good hosts", []int{0, 1, 2, 3, 4}, []int{5, 6}, 2, false, 5, 2},
		{"fewer good hosts than k", []int{0, 1}, []int{2}, 3, false, 2, 1},
		{"no good host", []int{0, 1}, nil, 2, false, 0, 0},
		{"k 0", []int{0}, []int{1, 2}, 0, false, 0, 0},
		{"fill", []int{0}, []int{1, 2, 3, 4, 5}, 2, true, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			met := map[[2]int]bool{}
			rounds := confirmRounds(tc.suspects, tc.good, tc.k, tc.fill, met)
			if len(rounds) != tc.wantRounds {
				t.Errorf("got %d rounds %v, want %d", len(rounds), rounds, tc.wantRounds)
			}
			roundsDisjoint(t, tc.name, 8, rounds)
			partners := map[int]map[int]bool{}
			for _, r := range rounds {
				fills := 0
				for _, x := range r {
					s, g := x.A, x.B
					if !slices.Contains(tc.suspects, s) {
						s, g = g, s
					}
					switch {
					case slices.Contains(tc.suspects, s) && slices.Contains(tc.good, g):
						if partners[s] == nil {
							partners[s] = map[int]bool{}
						}
						if partners[s][g] {
							t.Errorf("suspect %d meets %d twice", s, g)
						}
						partners[s][g] = true
					case tc.fill && slices.Contains(tc.good, x.A) && slices.Contains(tc.good, x.B):
						fills++
					default:
						t.Errorf("test %d-%d is neither a suspect with a good host nor a fill", x.A, x.B)
					}
				}
				if tc.fill && fills == 0 {
					t.Errorf("round %v: no fill pair among %d idle good hosts", r, len(tc.good)-1)
				}
			}
			for _, s := range tc.suspects {
				if got := len(partners[s]); got != tc.wantPerSuspect {
					t.Errorf("suspect %d: got %d partners, want %d", s, got, tc.wantPerSuspect)
				}
			}
		})
	}
}
