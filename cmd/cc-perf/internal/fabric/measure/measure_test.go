package measure

import (
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/fabric"
	"github.com/seed-760dd1f1/cc/runtime/comm"
	"github.com/seed-760dd1f1/cc/runtime/param"
	"go.uber.org/goleak"
)

// Real ranks in one process: comm.InitLocalHosts gives rank i the host
// identity hi, so every pair talks loopback TCP as two hosts would.

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fixedPlan hands out its rounds in order and keeps what it was shown.
type fixedPlan struct {
	rounds []fabric.Round
	next   int
	shown  []int // len(done) at each call
}

func (p *fixedPlan) Next(done []fabric.Measurement) (fabric.Round, bool) {
	p.shown = append(p.shown, len(done))
	if p.next == len(p.rounds) {
		return fabric.Round{}, false
	}
	p.next++
	return p.rounds[p.next-1], true
}

// pairs is a round of undirected pairs, ab = a0 b0 a1 b1 ...
func pairs(i int, ab ...int) fabric.Round {
	r := fabric.Round{Index: i, Phase: fabric.PhaseSchedule}
	for k := 0; k < len(ab); k += 2 {
		r.Tests = append(r.Tests, fabric.Test{A: ab[k], B: ab[k+1]})
	}
	return r
}

// job is n ranks on n fake hosts h0..h(n-1), closed when the test ends.
func job(t *testing.T, n int) []*comm.Comm {
	t.Helper()
	p, err := param.Load(func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = fmt.Sprintf("h%d", i)
	}
	cs, err := comm.InitLocalHosts(t.Context(), hosts, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeAll(cs) })
	return cs
}

func closeAll(cs []*comm.Comm) {
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() { c.Close() })
	}
	wg.Wait()
}

// quick are options that keep a test short: 64 KiB, 8 B, 3 to 5
// iterations, every byte checked.
func quick() Options {
	return Options{Size: 64 << 10, LatSize: 8, PairTime: 2 * time.Millisecond, ItersMin: 3, ItersMax: 5, Check: true}
}

// runJob runs Run on every rank of cs with plan on rank 0 and returns
// rank 0's result and every rank's error.
func runJob(t *testing.T, cs []*comm.Comm, plan Planner, o Options) (*Result, []error) {
	t.Helper()
	errs := make([]error, len(cs))
	var res *Result
	var wg sync.WaitGroup
	for r, c := range cs {
		wg.Go(func() {
			or := o
			if r == 0 {
				or.Plan = plan
			}
			got, err := Run(t.Context(), c, len(cs), or, nil)
			errs[r] = err
			if r == 0 {
				res = got
			}
		})
	}
	wg.Wait()
	return res, errs
}

func mustRun(t *testing.T, cs []*comm.Comm, plan Planner, o Options) *Result {
	t.Helper()
	res, errs := runJob(t, cs, plan, o)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return res
}

// checkOK checks that m ended ok with numbers that fit o.
func checkOK(t *testing.T, m fabric.Measurement, o Options) {
	t.Helper()
	if m.Status != fabric.StatusOK || m.Err != "" {
		t.Errorf("test %+v: status %s %q, want ok", m.Test, m.Status, m.Err)
		return
	}
	if m.Iters < o.ItersMin || m.Iters > o.ItersMax || m.TMedUS <= 0 || m.Bytes != o.Size {
		t.Errorf("test %+v: %d B, %d iterations, median %g us; want %d B, %d..%d iterations, a time", m.Test, m.Bytes, m.Iters, m.TMedUS, o.Size, o.ItersMin, o.ItersMax)
	}
	if o.LatSize > 0 && (m.LatBytes != o.LatSize || m.LatIters < o.ItersMin || m.LatIters > o.ItersMax || m.LatUS <= 0) {
		t.Errorf("test %+v: latency %d B, %d iterations, %g us; want %d B, %d..%d iterations, a time", m.Test, m.LatBytes, m.LatIters, m.LatUS, o.LatSize, o.ItersMin, o.ItersMax)
	}
}

// TestHealthyRun: a full round-robin over 4 hosts with the data checked
// and the counters read: one ok Measurement per test in round order, the
// planner shown every earlier measurement, one Counters per host and round.
func TestHealthyRun(t *testing.T) {
	cs := job(t, 4)
	hosts, err := hostsOf(t, cs)
	if err != nil {
		t.Fatal(err)
	}
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	for i, h := range hosts {
		want := fabric.Host{Name: fmt.Sprintf("h%d", i), Addr: "127.0.0.1", Rank: i, BootID: strings.TrimSpace(string(boot))}
		if h != want {
			t.Errorf("host %d = %+v, want %+v", i, h, want)
		}
	}
	plan := &fixedPlan{rounds: []fabric.Round{pairs(0, 0, 1, 2, 3), pairs(1, 0, 2, 1, 3), pairs(2, 0, 3, 1, 2)}}
	o := quick()
	o.Counters = true
	res := mustRun(t, cs, plan, o)
	if want := []int{0, 2, 4, 6}; !reflect.DeepEqual(plan.shown, want) {
		t.Errorf("the plan was shown %v measurements, want %v", plan.shown, want)
	}
	if len(res.Measurements) != 6 {
		t.Fatalf("%d measurements, want 6", len(res.Measurements))
	}
	for i, m := range res.Measurements {
		r := plan.rounds[i/2]
		if m.Round != r.Index || m.Phase != r.Phase || !reflect.DeepEqual(m.Test, r.Tests[i%2]) {
			t.Errorf("measurement %d is of round %d test %+v, want round %d test %+v", i, m.Round, m.Test, r.Index, r.Tests[i%2])
		}
		checkOK(t, m, o)
		if want := float64(m.Bytes) / m.TMedUS / 1e3; m.GBps != want {
			t.Errorf("test %+v: %g GB/s, want %g (bytes / median time)", m.Test, m.GBps, want)
		}
	}
	if len(res.Counters) != 12 {
		t.Fatalf("%d counter records, want 12 (4 hosts x 3 rounds)", len(res.Counters))
	}
	for i, c := range res.Counters {
		if c.Round != i/4 || c.Host != i%4 || c.Iface != "lo" {
			t.Errorf("counters %d: round %d host %d iface %q, want round %d host %d iface lo", i, c.Round, c.Host, c.Iface, i/4, i%4)
		}
	}
}

func hostsOf(t *testing.T, cs []*comm.Comm) ([]fabric.Host, error) {
	t.Helper()
	all := make([][]fabric.Host, len(cs))
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for r, c := range cs {
		wg.Go(func() { all[r], errs[r] = Hosts(c) })
	}
	wg.Wait()
	for r := range all {
		if !reflect.DeepEqual(all[r], all[0]) {
			t.Errorf("rank %d sees hosts %+v, rank 0 %+v", r, all[r], all[0])
		}
	}
	return all[0], errors.Join(errs...)
}

// TestDirected: shifted rounds over 3 hosts (each a cycle of 3, so three
// Splits) and 4 hosts (two cycles of 2 at shift 2): each directed pair
// measured ok, with the data checked at the receiver.
func TestDirected(t *testing.T) {
	for _, n := range []int{3, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			cs := job(t, n)
			var rounds []fabric.Round
			for s := 1; s < n; s++ {
				r := fabric.Round{Index: s - 1, Phase: fabric.PhaseSchedule}
				for i := range n {
					r.Tests = append(r.Tests, fabric.Test{A: i, B: (i + s) % n, Dir: true})
				}
				rounds = append(rounds, r)
			}
			o := quick()
			res := mustRun(t, cs, &fixedPlan{rounds: rounds}, o)
			if len(res.Measurements) != n*(n-1) {
				t.Fatalf("%d measurements, want %d", len(res.Measurements), n*(n-1))
			}
			for _, m := range res.Measurements {
				if !m.Dir {
					t.Errorf("test %+v lost its direction", m.Test)
				}
				checkOK(t, m, o)
			}
		})
	}
}

// TestGroups: bisect's tests, an all-reduce over all 4 hosts and then one
// over each half at once: ok, GB/s the bus bandwidth.
func TestGroups(t *testing.T) {
	cs := job(t, 4)
	rounds := []fabric.Round{
		{Index: 0, Phase: fabric.PhaseBisect, Tests: []fabric.Test{{A: -1, B: -1, Group: []int{0, 1, 2, 3}}}},
		{Index: 1, Phase: fabric.PhaseBisect, Tests: []fabric.Test{{A: -1, B: -1, Group: []int{0, 1}}, {A: -1, B: -1, Group: []int{2, 3}}}},
	}
	o := quick()
	res := mustRun(t, cs, &fixedPlan{rounds: rounds}, o)
	if len(res.Measurements) != 3 {
		t.Fatalf("%d measurements, want 3", len(res.Measurements))
	}
	for _, m := range res.Measurements {
		checkOK(t, m, o)
		n := float64(len(m.Group))
		if want := float64(m.Bytes) / m.TMedUS / 1e3 * 2 * (n - 1) / n; m.GBps != want {
			t.Errorf("group %v: %g GB/s, want busbw %g", m.Group, m.GBps, want)
		}
	}
}

// TestSlowHost: host 2 waits 100 ms more in every iteration (the test
// hook): every test with host 2 takes at least that long per iteration.
func TestSlowHost(t *testing.T) {
	const extra = 100 * time.Millisecond
	cs := job(t, 4)
	o := quick()
	o.LatSize, o.ItersMax = 0, 3
	o.delay = func(h int) time.Duration {
		if h == 2 {
			return extra
		}
		return 0
	}
	res := mustRun(t, cs, &fixedPlan{rounds: []fabric.Round{pairs(0, 0, 1, 2, 3), pairs(1, 0, 2, 1, 3)}}, o)
	for _, m := range res.Measurements {
		checkOK(t, m, o)
		if slow := m.A == 2 || m.B == 2; slow && m.TMedUS < float64(extra.Microseconds()) {
			t.Errorf("test %+v with the slow host: median %g us, want >= %d", m.Test, m.TMedUS, extra.Microseconds())
		}
	}
}

// TestPairTimeout: host 3 never finishes an iteration; --pair-timeout
// aborts its pair's communicator only: its tests end timeout, the others
// ok, in both rounds (the run goes on after the first timeout).
func TestPairTimeout(t *testing.T) {
	cs := job(t, 4)
	o := quick()
	o.PairTimeout = 3 * time.Second
	o.delay = func(h int) time.Duration {
		if h == 3 {
			return time.Hour
		}
		return 0
	}
	res := mustRun(t, cs, &fixedPlan{rounds: []fabric.Round{pairs(0, 0, 1, 2, 3), pairs(1, 0, 3, 1, 2)}}, o)
	if len(res.Measurements) != 4 {
		t.Fatalf("%d measurements, want 4", len(res.Measurements))
	}
	checkHost(t, res, o, 3, fabric.StatusTimeout, "not finished within --pair-timeout 3s")
	for _, c := range cs {
		if err := c.Err(); err != nil {
			t.Errorf("the job's communicator failed: %v", err)
		}
	}
}

// TestWrongData: host 1 receives a wrong byte in every call: with -c its
// tests end error, naming the host and the byte; the others pass.
func TestWrongData(t *testing.T) {
	cs := job(t, 4)
	o := quick()
	o.corrupt = func(h int) bool { return h == 1 }
	res := mustRun(t, cs, &fixedPlan{rounds: []fabric.Round{pairs(0, 0, 1, 2, 3)}}, o)
	checkHost(t, res, o, 1, fabric.StatusError, "wrong data: host 1 received byte 32768 of 65536")
}

// checkHost checks that every test of host ended status with an error
// containing msg, and every other test ok.
func checkHost(t *testing.T, res *Result, o Options, host int, status fabric.Status, msg string) {
	t.Helper()
	for _, m := range res.Measurements {
		if m.A != host && m.B != host {
			checkOK(t, m, o)
			continue
		}
		if m.Status != status || !strings.Contains(m.Err, msg) {
			t.Errorf("test %+v: status %s %q, want %s %q", m.Test, m.Status, m.Err, status, msg)
		}
	}
}

// TestHostDies: a rank that fails instead of measuring ends the run on
// every other rank with an error naming it, without a hang.
func TestHostDies(t *testing.T) {
	cs := job(t, 4)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for r, c := range cs {
		wg.Go(func() {
			if r == 3 {
				c.Abort(errors.New("host died"))
				return
			}
			o := quick()
			if r == 0 {
				o.Plan = &fixedPlan{rounds: []fabric.Round{pairs(0, 0, 1, 2, 3)}}
			}
			_, errs[r] = Run(t.Context(), c, 4, o, nil)
		})
	}
	wg.Wait()
	for r, err := range errs[:3] {
		if err == nil || !strings.Contains(err.Error(), "rank 3 aborted: host died") {
			t.Errorf("rank %d: %v, want the error of rank 3", r, err)
		}
	}
}

// TestLocalFailure: a failure of one rank alone (here a wrong host count)
// aborts the job, so the others end naming it instead of waiting.
func TestLocalFailure(t *testing.T) {
	cs := job(t, 4)
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for r, c := range cs {
		wg.Go(func() {
			o, n := quick(), len(cs)
			if r == 0 {
				o.Plan = &fixedPlan{rounds: []fabric.Round{pairs(0, 0, 1, 2, 3)}}
			}
			if r == 2 {
				n = 5
			}
			_, errs[r] = Run(t.Context(), c, n, o, nil)
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "rank 2: 4 ranks for 5 hosts") {
			t.Errorf("rank %d: %v, want rank 2's failure", r, err)
		}
	}
}

// TestCancel: the end of the context (a signal) while host 1 is stuck in
// a test without a --pair-timeout ends the run on every rank with the
// context's cause.
func TestCancel(t *testing.T) {
	cs := job(t, 4)
	cause := errors.New("interrupted")
	ctx, cancel := context.WithCancelCause(t.Context())
	defer cancel(nil)
	o := quick()
	o.delay = func(h int) time.Duration {
		if h == 1 {
			cancel(cause) // as the test starts: it then waits for an hour
			return time.Hour
		}
		return 0
	}
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for r, c := range cs {
		wg.Go(func() {
			or := o
			if r == 0 {
				or.Plan = &fixedPlan{rounds: []fabric.Round{pairs(0, 0, 1, 2, 3), pairs(1, 0, 2, 1, 3)}}
			}
			_, errs[r] = Run(ctx, c, len(cs), or, nil)
		})
	}
	wg.Wait()
	for r, err := range errs {
		if err != cause {
			t.Errorf("rank %d: %v, want %v", r, err, cause)
		}
	}
}

// TestOnRoundStops: an error of rank 0's onRound (its -J file cannot be
// written) ends the run on every rank after that round.
func TestOnRoundStops(t *testing.T) {
	cs := job(t, 2)
	plan := &fixedPlan{rounds: []fabric.Round{pairs(0, 0, 1), pairs(1, 0, 1)}}
	errs := make([]error, 2)
	rounds := 0
	var wg sync.WaitGroup
	for r, c := range cs {
		wg.Go(func() {
			o := quick()
			var on func(fabric.Round, *Result) error
			if r == 0 {
				o.Plan = plan
				on = func(fabric.Round, *Result) error { rounds++; return errors.New("disk full") }
			}
			_, errs[r] = Run(t.Context(), c, 2, o, on)
		})
	}
	wg.Wait()
	if rounds != 1 || plan.next != 1 {
		t.Errorf("%d rounds seen, %d planned; want 1 and 1", rounds, plan.next)
	}
	if errs[0] == nil || errs[0].Error() != "disk full" {
		t.Errorf("rank 0: %v, want disk full", errs[0])
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "rank 0 stopped the run: disk full") {
		t.Errorf("rank 1: %v, want rank 0's reason", errs[1])
	}
}

// TestShare: rank 0's refusal reaches every rank; no refusal, none.
func TestShare(t *testing.T) {
	cs := job(t, 3)
	for _, refusal := range []string{"", "--baseline b.json: host tb9 is not in this run"} {
		got := make([]string, 3)
		errs := make([]error, 3)
		var wg sync.WaitGroup
		for r, c := range cs {
			wg.Go(func() {
				mine := "ignored"
				if r == 0 {
					mine = refusal
				}
				got[r], errs[r] = Share(c, mine)
			})
		}
		wg.Wait()
		for r := range got {
			if got[r] != refusal || errs[r] != nil {
				t.Errorf("rank %d: %q, %v; want %q", r, got[r], errs[r], refusal)
			}
		}
	}
}

// TestDuplicateHosts: ranks that share a host identity are named.
func TestDuplicateHosts(t *testing.T) {
	p, _ := param.Load(func(string) (string, bool) { return "", false })
	cs, err := comm.InitLocalHosts(t.Context(), []string{"a", "b", "a"}, p)
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(cs)
	if got, want := DuplicateHosts(cs[0]), []string{"a (ranks 0, 2)"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestPhases(t *testing.T) {
	dir := func(ab ...int) []fabric.Test {
		var ts []fabric.Test
		for k := 0; k < len(ab); k += 2 {
			ts = append(ts, fabric.Test{A: ab[k], B: ab[k+1], Dir: true})
		}
		return ts
	}
	tests := []struct {
		name  string
		tests []fabric.Test
		want  [][]int
		err   string
	}{
		{"pairs", pairs(0, 0, 1, 2, 3, 4, 5).Tests, [][]int{{0, 1, 2}}, ""},
		{"odd cycle", dir(0, 1, 1, 2, 2, 0), [][]int{{0}, {1}, {2}}, ""},
		{"even cycle", dir(0, 1, 1, 2, 2, 3, 3, 0), [][]int{{0, 2}, {1, 3}}, ""},
		{"two cycles", dir(0, 2, 1, 3, 2, 0, 3, 1), [][]int{{0, 1}, {2, 3}}, ""},
		{"groups", []fabric.Test{{A: -1, B: -1, Group: []int{0, 1}}, {A: -1, B: -1, Group: []int{2, 3}}}, [][]int{{0, 1}}, ""},
		{"host twice", pairs(0, 0, 1, 1, 2).Tests, nil, "host 1 is in two tests"},
		{"sends twice", dir(0, 1, 0, 2), nil, "host 0 is in two tests"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := phases(tc.tests, 6)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestHostName(t *testing.T) {
	for id, want := range map[string]string{
		"node1.example.com/5a3c8f0e-1b2d-4c6e-9f70-8a1b2c3d4e5f": "node1",
		"tb3/5a3c8f0e-1b2d-4c6e-9f70-8a1b2c3d4e5f":               "tb3",
		"h2":          "h2",
		"rack/node/x": "rack/node/x",
	} {
		if got := hostName(id); got != want {
			t.Errorf("hostName(%q) = %q, want %q", id, got, want)
		}
	}
}

// TestPairAllReduce: with Op all_reduce a pair all-reduces, checked, GB/s
// its bus bandwidth (for 2 ranks the algorithm bandwidth).
func TestPairAllReduce(t *testing.T) {
	cs := job(t, 4)
	o := quick()
	o.Op = "all_reduce"
	res := mustRun(t, cs, &fixedPlan{rounds: []fabric.Round{pairs(0, 0, 3, 1, 2)}}, o)
	for _, m := range res.Measurements {
		checkOK(t, m, o)
		if want := float64(m.Bytes) / m.TMedUS / 1e3; m.GBps != want {
			t.Errorf("test %+v: %g GB/s, want %g", m.Test, m.GBps, want)
		}
	}
}

// serialPlan runs a plan's rounds one test at a time (--max-concurrent 1).
type serialPlan struct {
	plan  *fabric.Plan
	queue []fabric.Round
}

func (p *serialPlan) Next(done []fabric.Measurement) (fabric.Round, bool) {
	if len(p.queue) == 0 {
		r, ok := p.plan.Next(done)
		if !ok {
			return r, false
		}
		p.queue = fabric.SplitRound(r, 1)
	}
	r := p.queue[0]
	p.queue = p.queue[1:]
	return r, true
}

// The judge's tests on real ranks. On 2 cores shared with other jobs a
// healthy 64 KiB test takes 1 to 30 ms, so that the judge rightly calls
// such a run noisy. Here every host's tests count 1 s more per iteration
// (the skew hook: added, not waited), as if every link took that long to
// move the data, and the slow host's 4 s: the load's few ms then blur
// nothing, and the verdicts are the judge's reading of a real run.

// TestHealthyPasses: quick and full over 4 hosts pass, nothing flagged.
func TestHealthyPasses(t *testing.T) {
	for _, schedule := range []string{"quick", "full"} {
		t.Run(schedule, func(t *testing.T) {
			v, res := judgeSkewed(t, 4, schedule, func(int) time.Duration { return time.Second })
			if v.Fail || len(v.Flagged) > 0 || len(v.Inconclusive) > 0 {
				t.Errorf("summary %q (fail %v, flagged %q, inconclusive %q), want a pass", v.Summary, v.Fail, v.Flagged, v.Inconclusive)
				logMeasurements(t, res)
			}
		})
	}
}

// TestSlowHostNamed: host 2 of 5 is slow: quick and full name it alone.
func TestSlowHostNamed(t *testing.T) {
	for _, schedule := range []string{"quick", "full"} {
		t.Run(schedule, func(t *testing.T) {
			v, res := judgeSkewed(t, 5, schedule, func(h int) time.Duration {
				if h == 2 {
					return 4 * time.Second
				}
				return time.Second
			})
			if !v.Fail || !reflect.DeepEqual(v.Flagged, []string{"h2"}) {
				t.Errorf("flagged %q (fail %v), want h2 alone; summary %q", v.Flagged, v.Fail, v.Summary)
				logMeasurements(t, res)
			}
		})
	}
}

// judgeSkewed runs schedule over n hosts whose iterations each count
// skew(host) more, 5 iterations of 64 KiB per test, and judges it.
func judgeSkewed(t *testing.T, n int, schedule string, skew func(int) time.Duration) (fabric.Verdict, *Result) {
	t.Helper()
	cs := job(t, n)
	hosts, err := hostsOf(t, cs)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fabric.DefaultConfig()
	cfg.Schedule, cfg.Size, cfg.LatSize = schedule, 64<<10, 0
	plan, err := fabric.NewPlan(cfg, len(hosts))
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Size: cfg.Size, ItersMin: 5, ItersMax: 5, skew: skew}
	res := mustRun(t, cs, plan, o)
	return fabric.Judge(hosts, nil, res.Measurements, nil, cfg), res
}

func logMeasurements(t *testing.T, res *Result) {
	t.Helper()
	for _, m := range res.Measurements {
		t.Logf("round %d %s %d-%d %s %d iterations, median %.0f us", m.Round, m.Phase, m.A, m.B, m.Status, m.Iters, m.TMedUS)
	}
}
