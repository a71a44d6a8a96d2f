package fabric

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/launch/hostfile"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}

// goldenRun is one judged run for the golden files.
type goldenRun struct {
	name        string
	cfg         Config
	m           *model
	counters    func(rounds []Round) []Counters
	unreachable []string
}

func goldenRuns() []goldenRun {
	lossy := newModel(6, 0.1, 5)
	lossy.tx[2] = 0.1
	degraded := newModel(8, 0.1, 9)
	for h := range 8 {
		degraded.slow(h, 0.33)
	}
	degraded.base = 0.8
	dead := newModel(6, 0.1, 11)
	dead.dead[3] = true
	return []goldenRun{
		{name: "full_tb5", cfg: cfgOf("full", func(c *Config) { c.MaxConcurrent = 1 }), m: studyModel(), unreachable: []string{"tb9"}},
		{name: "directed_lossy", cfg: cfgOf("directed", nil), m: lossy, counters: func(rounds []Round) []Counters {
			var cs []Counters
			for _, r := range rounds {
				for h := range 6 {
					c := Counters{Host: h, Round: r.Index, Iface: "eth0", RetransSegs: 2}
					if h == 5 {
						c.RetransSegs, c.RxDropped = 400, 3
					}
					cs = append(cs, c)
				}
			}
			return cs
		}},
		{name: "quick_degraded", cfg: cfgOf("quick", func(c *Config) {
			c.Baseline = &Baseline{Version: 1, Hosts: hostNames(testHosts(8)), Op: "sendrecv", Size: 32 << 20, LatSize: 8, GBps: 0.8, LatUS: 50, Path: "base.json"}
		}), m: degraded},
		{name: "quick_timeout", cfg: cfgOf("quick", nil), m: dead},
	}
}

// play runs and judges g.
func (g goldenRun) play(t *testing.T) (hosts []Host, rounds []Round, ms []Measurement, cs []Counters, v Verdict) {
	t.Helper()
	hosts = testHosts(g.m.n)
	rounds, ms = run(t, g.cfg, g.m)
	if g.counters != nil {
		cs = g.counters(rounds)
	}
	return hosts, rounds, ms, cs, Judge(hosts, g.unreachable, ms, cs, g.cfg)
}

func TestGolden(t *testing.T) {
	for _, g := range goldenRuns() {
		t.Run(g.name, func(t *testing.T) {
			hosts, rounds, ms, cs, v := g.play(t)
			var table bytes.Buffer
			if err := WriteTable(&table, hosts, ms, v); err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n") {
				if !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "   ") {
					t.Errorf("table line %q is neither a '#' line nor a host row", line)
				}
			}
			golden(t, g.name+".txt", table.Bytes())

			rec := &Record{Version: RecordVersion, CCVersion: "2.19.6+cc", Started: "2026-11-27T06:00:00Z",
				Args: []string{"cc-perf", "fabric", "--schedule", g.cfg.Schedule}, Config: g.cfg, Hosts: hosts, Unreachable: g.unreachable}
			for _, r := range rounds {
				for _, sub := range SplitRound(r, g.cfg.MaxConcurrent) {
					var got []Measurement
					for _, m := range ms {
						if m.Round == r.Index && slices.ContainsFunc(sub.Tests, func(x Test) bool { return testEqual(x, m.Test) }) {
							got = append(got, m)
						}
					}
					rec.Add(sub, got)
				}
			}
			rec.Counters = cs
			rec.Finish(v, 12.5)
			out, err := rec.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if len(rec.Rounds) != len(rounds) {
				t.Errorf("record: got %d rounds, want %d (sub-rounds merged)", len(rec.Rounds), len(rounds))
			}
			golden(t, g.name+".json", out)
		})
	}
}

// TestGoldenVerdicts says what the golden runs must show, so that -update
// cannot bless a wrong verdict unnoticed.
func TestGoldenVerdicts(t *testing.T) {
	want := map[string]struct {
		accused  []string
		fail     bool
		degraded bool
		summary  string
	}{
		"full_tb5":       {[]string{"tb5 slow-host"}, true, false, "FAIL 2 hosts (tb9 unreachable, tb5 slow-host)"},
		"directed_lossy": {[]string{"tb3 slow-tx", "tb6 lossy"}, true, false, "FAIL 2 hosts (tb3 slow-tx, tb6 lossy)"},
		"quick_degraded": {nil, true, true, "FAIL fabric degraded: fleet 0.252 GB/s, 0.31 of the baseline 0.8 GB/s"},
		"quick_timeout":  {[]string{"tb4 timeout"}, true, false, "FAIL 1 host (tb4 timeout)"},
	}
	for _, g := range goldenRuns() {
		hosts, _, _, _, v := g.play(t)
		w := want[g.name]
		if got := accused(hosts, v); !slices.Equal(got, w.accused) || v.Fail != w.fail || v.Degraded != w.degraded || v.Summary != w.summary {
			t.Errorf("%s: got %q fail %v degraded %v %q, want %q %v %v %q", g.name, got, v.Fail, v.Degraded, v.Summary, w.accused, w.fail, w.degraded, w.summary)
		}
	}
}

func TestRecordMarshalPartial(t *testing.T) {
	// A run that died after its first round: valid JSON, lists not null,
	// no verdict.
	rec := &Record{Version: RecordVersion, Config: DefaultConfig(), Hosts: testHosts(2)}
	out, err := rec.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("empty record: %v\n%s", err, out)
	}
	for _, k := range []string{"args", "unreachable", "rounds"} {
		if _, ok := doc[k].([]any); !ok {
			t.Errorf("empty record: %s is %v, want []", k, doc[k])
		}
	}
	if _, ok := doc["verdict"]; ok {
		t.Errorf("unjudged record has a verdict")
	}
	rec.Add(Round{Index: 0, Phase: PhaseSchedule, Tests: []Test{{A: 0, B: 1}}},
		[]Measurement{{Round: 0, Phase: PhaseSchedule, Test: Test{A: 0, B: 1}, Bytes: 8, Iters: 3, TMedUS: 1, GBps: 0.008, Status: StatusOK}})
	out, err = rec.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var back Record
	if err := json.Unmarshal(out, &back); err != nil || len(back.Rounds) != 1 || len(back.Rounds[0].Pairs) != 1 || back.Rounds[0].Pairs[0].GBps != 0.008 {
		t.Errorf("one round: got %+v, %v", back.Rounds, err)
	}
}

func TestExcludeAndGoodHostfile(t *testing.T) {
	hosts := testHosts(8)
	cfg := cfgOf("full", nil)
	_, ms := run(t, cfg, newModel(8, 0.05, 1).slow(4, 0.1))
	v := Judge(hosts, []string{"tb9"}, ms, nil, cfg)
	if got, want := string(ExcludeList(v)), "tb9\ntb5\n"; got != want {
		t.Errorf("ExcludeList: got %q, want %q", got, want)
	}
	good := GoodHostfile(hosts, v)
	parsed, err := hostfile.Parse("good", bytes.NewReader(good))
	if err != nil {
		t.Fatalf("GoodHostfile does not parse as a hostfile: %v\n%s", err, good)
	}
	var names []string
	for _, h := range parsed {
		if h.Slots != 1 || h.NoCount {
			t.Errorf("host %s: got %d slots (NoCount %v), want 1", h.Name, h.Slots, h.NoCount)
		}
		names = append(names, h.Name)
	}
	if want := []string{"tb1", "tb2", "tb3", "tb4", "tb6", "tb7", "tb8"}; !slices.Equal(names, want) {
		t.Errorf("GoodHostfile: got %v, want %v", names, want)
	}
	// an inconclusive host is left out of both, and named in a comment
	v.Hosts[len(v.Hosts)-1].Verdict = VerdictInconclusive
	name := v.Hosts[len(v.Hosts)-1].Host
	if g := string(GoodHostfile(hosts, v)); strings.Contains(g, name+" slots=1") || !strings.Contains(g, "inconclusive (noisy run): "+name) {
		t.Errorf("GoodHostfile with %s inconclusive:\n%s", name, g)
	}
}

func TestProgressLine(t *testing.T) {
	hosts := testHosts(8)
	ms := []Measurement{
		{Round: 0, Test: Test{A: 0, B: 1}, GBps: 0.80, Status: StatusOK},
		{Round: 0, Test: Test{A: 4, B: 5}, GBps: 0.12, Status: StatusOK},
		{Round: 1, Test: Test{A: 2, B: 3}, GBps: 0.79, Status: StatusOK},
		{Round: 1, Test: Test{A: 6, B: 7}, Status: StatusTimeout},
		{Round: 1, Test: Test{A: 1, B: 4, Dir: true}, GBps: 0.81, Status: StatusOK},
		{Round: 2, Test: Test{A: -1, B: -1, Group: []int{0, 1, 2, 3}}, GBps: 0.5, Status: StatusOK},
	}
	for _, tc := range []struct {
		r    Round
		want string
	}{
		{Round{Index: 0, Phase: PhaseSchedule}, "# round 0 schedule  tb1-tb2 0.80  tb5-tb6 0.12!"},
		{Round{Index: 1, Phase: PhaseConfirm}, "# round 1 confirm  tb3-tb4 0.79  tb7-tb8 timeout!  tb2>tb5 0.81"},
		{Round{Index: 2, Phase: PhaseBisect}, "# round 2 bisect  tb1..tb4/4 0.50"},
	} {
		if got := ProgressLine(hosts, tc.r, ms); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}

func TestJudgeUnreachableAndEmpty(t *testing.T) {
	// Nothing measured (every host but one unreachable, or a run that
	// ended at once): no NaN anywhere, the unreachable hosts flagged.
	hosts := testHosts(2)
	v := Judge(hosts, []string{"tb7", "tb8"}, nil, nil, DefaultConfig())
	if _, err := json.Marshal(v); err != nil {
		t.Errorf("verdict of an empty run does not marshal: %v", err)
	}
	if got, want := v.Flagged, []string{"tb7", "tb8"}; !slices.Equal(got, want) || !v.Fail {
		t.Errorf("got Flagged %v fail %v, want %v and a failure", got, v.Fail, want)
	}
	var b strings.Builder
	if err := WriteTable(&b, hosts, nil, v); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "tb7") || !strings.Contains(b.String(), "unreachable") {
		t.Errorf("table:\n%s", b.String())
	}
}
