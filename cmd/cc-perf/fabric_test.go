package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/fabric"
	"github.com/seed-760dd1f1/cc/launch/proctest"
)

// cc-perf fabric with real ranks: "processes" of one job in this process
// (run with a torchrun environment each, CC_HOST_ID making each its own
// host), and real processes under the real ccrun.

// fabricProcs runs cc-perf fabric args as n processes of one job, process
// i on host hi (none: every process on this machine's host), and returns
// every result, whatever its exit.
func fabricProcs(t *testing.T, n int, ownHosts bool, args ...string) []result {
	t.Helper()
	return fabricProcsEnv(t, n, ownHosts, nil, args...)
}

// fabricProcsEnv is fabricProcs with extra environment on every process.
func fabricProcsEnv(t *testing.T, n int, ownHosts bool, extra []string, args ...string) []result {
	t.Helper()
	root := "MASTER_PORT=" + strconv.Itoa(freePort(t)-1)
	outs := make([]result, n)
	var wg sync.WaitGroup
	for rank := range n {
		wg.Go(func() {
			env := append(torchrunEnv(rank, n, root), extra...)
			if ownHosts {
				env = append(env, fmt.Sprintf("CC_HOST_ID=h%d", rank))
			}
			outs[rank] = runCmd(t, env, append([]string{"cc-perf", "fabric"}, args...)...)
		})
	}
	wg.Wait()
	return outs
}

// TestFabricBadInput: bad flags and a job that cannot be judged fail
// before anything is measured: exit 6, one line naming the value and
// what is allowed.
func TestFabricBadInput(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"one host", nil, []string{"at least 2 hosts", "ccrun --hostfile HOSTS -N 1"}},
		{"unknown schedule", []string{"--schedule", "ring"}, []string{`--schedule "ring"`, "quick, full, directed, random, bisect"}},
		{"tolerance 1", []string{"--tolerance", "1"}, []string{"--tolerance 1", "(0,1)"}},
		{"tolerance 0", []string{"--tolerance", "0"}, []string{"--tolerance 0", "(0,1)"}},
		{"iters", []string{"--iters-min", "9", "--iters-max", "3"}, []string{"--iters-min 9", "--iters-max 3"}},
		{"expect", []string{"--expect", "fast"}, []string{"--expect", `"fast"`, "0.8G or 800M"}},
		{"two references", []string{"--expect", "1G", "--baseline", filepath.Join(dir, "b.json")}, []string{"--expect 1G and --baseline", "one reference"}},
		{"negative timeout", []string{"--pair-timeout", "-1s"}, []string{"--pair-timeout -1s"}},
		{"stray argument", []string{"tb1"}, []string{`unexpected argument "tb1"`}},
		{"unknown op", []string{"--op", "bcast"}, []string{`--op "bcast"`, "sendrecv, all_reduce"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			checkOneLineError(t, runCmd(t, nil, append([]string{"cc-perf", "fabric"}, tc.args...)...), exitUsage, tc.want)
		})
	}
}

// TestFabricEnvFillsFlags: CC_PERF_<FLAG> fills a flag not given, and is
// checked as the flag is.
func TestFabricEnvFillsFlags(t *testing.T) {
	checkOneLineError(t, runCmd(t, []string{"CC_PERF_SCHEDULE=ring"}, "cc-perf", "fabric"), exitUsage, []string{`--schedule "ring"`})
	checkOneLineError(t, runCmd(t, []string{"CC_PERF_SCHEDULE=ring"}, "cc-perf", "fabric", "--schedule", "full"), exitUsage, []string{"at least 2 hosts"})
}

func TestBandwidthFlag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want float64 // GB/s, 0: refused
	}{{"1.2", 1.2}, {"0.8G", 0.8}, {"800M", 0.8}, {"800m", 0.8}, {"1.5GB/s", 1.5}, {"2T", 2000}, {"500K", 0.0005},
		{"", 0}, {"0", 0}, {"-1G", 0}, {"fast", 0}, {"1X", 0}, {"G", 0}, {"inf", 0}, {"NaN", 0}} {
		var b bandwidth
		err := b.Set(tc.in)
		if tc.want == 0 {
			if err == nil {
				t.Errorf("%q: accepted as %g GB/s, want an error", tc.in, float64(b))
			}
			continue
		}
		if err != nil || math.Abs(float64(b)-tc.want) > 1e-12 {
			t.Errorf("%q: %g GB/s, %v; want %g", tc.in, float64(b), err, tc.want)
		}
	}
}

// TestFabricUnreachable: hosts the launcher could not reach
// (CC_UNREACHABLE_HOSTS) are in the header and the table, flagged: exit 8.
func TestFabricUnreachable(t *testing.T) {
	outs := fabricProcsEnv(t, 2, true, []string{"CC_UNREACHABLE_HOSTS=tb7, tb9"}, "--size", "4K", "--lat-size", "0", "--iters-max", "3", "--schedule", "full")
	r := outs[0]
	if r.code != exitFabric || outs[1].code != 0 {
		t.Fatalf("exit %d and %d, want 8 and 0\nstdout:\n%s\nstderr:\n%s", r.code, outs[1].code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "#  unreachable: tb7 tb9\n") {
		t.Errorf("no unreachable line in the header:\n%s", r.stdout)
	}
	for _, h := range []string{"tb7", "tb9"} {
		if !strings.Contains(r.stdout, "   "+h+" ") || !strings.Contains(r.stderr, h) {
			t.Errorf("%s not in the table or the verdict:\n%s\n%s", h, r.stdout, r.stderr)
		}
	}
}

// TestFabricRanksPerHost: two ranks on one host are refused on both, with
// how to launch one rank per host.
func TestFabricRanksPerHost(t *testing.T) {
	for rank, r := range fabricProcs(t, 2, false, "--size", "4K") {
		t.Run(fmt.Sprint(rank), func(t *testing.T) {
			checkOneLineError(t, r, exitUsage, []string{"several ranks on one host", "(ranks 0, 1)", "ccrun -N 1", "srun --ntasks-per-node 1"})
		})
	}
}

// TestFabricBaselineRefused: a baseline of another host set is refused
// by rank 0, which reads it, and so by every rank, before measuring.
func TestFabricBaselineRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "base.json")
	b := fabric.Baseline{Version: fabric.BaselineVersion, Hosts: []string{"h0", "tb9"}, Op: "sendrecv", Size: 4096, GBps: 1}
	data, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	outs := fabricProcs(t, 2, true, "--size", "4K", "--lat-size", "0", "--baseline", path)
	checkOneLineError(t, outs[0], exitUsage, []string{"baseline " + path, "not in this run: tb9", "not in the baseline: h1"})
	checkOneLineError(t, outs[1], exitUsage, []string{"rank 0 refused the run", "tb9"})
}

// TestFabricRun: 4 hosts in one process, every file asked for: a header,
// a progress line per round, the table, a -J record with every round and
// the verdict, an exclude list and a good hostfile that agree with it,
// and a baseline the next run accepts. Whether the verdict is a pass is
// left out: on 2 cores shared with other jobs a healthy pair's median can
// swing several-fold from one test to the next; measure's
// TestHealthyPasses and TestSlowHostNamed judge runs whose times are
// dominated by a fixed wait instead.
func TestFabricRun(t *testing.T) {
	dir := t.TempDir()
	file := func(name string) string { return filepath.Join(dir, name) }
	// --iters-min 3: the default (1) lets a pair on a loaded machine stop
	// after one or two iterations of its 100 ms; the check below then
	// holds by the flag, not by the machine's speed.
	args := []string{"--size", "256K", "--pair-time", "100ms", "--iters-min", "3", "--max-concurrent", "1", "-c", "--counters",
		"-J", file("f.json"), "--exclude-file", file("bad.txt"), "--good-hostfile", file("good.txt"), "--save-baseline", file("base.json")}
	outs := fabricProcs(t, 4, true, args...)
	code := outs[0].code
	for rank, r := range outs {
		if rank == 0 && r.code != 0 && r.code != exitFabric || rank > 0 && r.code != 0 {
			t.Fatalf("rank %d: exit %d; want 0 or 8 on rank 0 (the judge's), 0 elsewhere\nstdout:\n%s\nstderr:\n%s", rank, r.code, r.stdout, r.stderr)
		}
		if rank > 0 && r.stdout != "" {
			t.Errorf("rank %d printed %q, want nothing", rank, r.stdout)
		}
	}
	out := outs[0].stdout
	for _, want := range []string{"# cc-perf fabric: 4 hosts, schedule quick, op sendrecv, size 262144 B, latency size 8 B, seed ", "#  hosts: h0 h1 h2 h3\n", "#  verdict: ", "# elapsed "} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(outs[0].stderr, "# round "); n < 2 {
		t.Errorf("%d progress lines, want one per round (>= 2):\n%s", n, outs[0].stderr)
	}
	var rec fabric.Record
	data, err := os.ReadFile(file("f.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatalf("-J file: %v\n%s", err, data)
	}
	tests := 0
	for _, r := range rec.Rounds {
		tests += len(r.Pairs)
		for _, m := range r.Pairs {
			if m.Status != fabric.StatusOK || m.Iters < 3 || m.LatIters < 3 || m.GBps <= 0 {
				t.Errorf("round %d test %d-%d: %s, %d and %d iterations, %g GB/s; want ok, >= 3 iterations at each size (--iters-min 3)",
					m.Round, m.A, m.B, m.Status, m.Iters, m.LatIters, m.GBps)
			}
		}
	}
	if len(rec.Hosts) != 4 || len(rec.Rounds) < 2 || tests < 4 || rec.Summary == nil || len(rec.Counters) != 4*tests {
		t.Fatalf("-J record: %d hosts, %d rounds, %d tests, %d counter records, summary %+v; want 4 hosts, >= 2 rounds, >= 4 tests, 4 counter records per test (one test a round), a summary",
			len(rec.Hosts), len(rec.Rounds), tests, len(rec.Counters), rec.Summary)
	}
	if rec.Summary.Fail != (code == exitFabric) || !strings.Contains(out, "#  verdict: "+rec.Summary.Verdict+"\n") {
		t.Errorf("exit %d, summary %+v; want exit 8 exactly when it fails, and its verdict on stdout", code, rec.Summary)
	}
	bad, _ := os.ReadFile(file("bad.txt"))
	if want := strings.Join(rec.Summary.Flagged, "\n"); strings.TrimSuffix(string(bad), "\n") != want {
		t.Errorf("exclude file %q, want the flagged hosts %q", bad, rec.Summary.Flagged)
	}
	good, _ := os.ReadFile(file("good.txt"))
	if rec.Verdict == nil || len(rec.Verdict.Hosts) != 4 {
		t.Fatalf("-J verdict %+v, want one per host", rec.Verdict)
	}
	for _, h := range rec.Verdict.Hosts {
		in := strings.Contains(string(good), h.Host+" slots=1\n")
		if in != (h.Verdict == fabric.VerdictOK) {
			t.Errorf("%s (%s) in the good hostfile: %v, want it there exactly when ok:\n%s", h.Host, h.Verdict, in, good)
		}
	}
	data, _ = os.ReadFile(file("base.json"))
	if _, err := fabric.ParseBaseline(file("base.json"), data); err != nil {
		t.Fatalf("saved baseline: %v", err)
	}
	for rank, r := range fabricProcs(t, 4, true, "--size", "256K", "--pair-time", "10ms", "--baseline", file("base.json")) {
		if r.code != 0 && r.code != exitFabric {
			t.Errorf("rank %d: exit %d with the saved baseline; stderr %q", rank, r.code, r.stderr)
		}
	}
}

// TestFabricSchedules: directed (every host in two tests a round: the one
// it sends in and the one it receives in) and bisect (groups, then pairs)
// over 4 hosts: every test measured ok, as the -J record shows.
func TestFabricSchedules(t *testing.T) {
	for _, tc := range []struct {
		schedule string
		check    func(m fabric.Measurement) bool // the tests the schedule must have run
		want     int                             // at least
	}{
		{"directed", func(m fabric.Measurement) bool { return m.Dir }, 12},
		{"bisect", func(m fabric.Measurement) bool { return len(m.Group) > 0 }, 1},
	} {
		t.Run(tc.schedule, func(t *testing.T) {
			js := filepath.Join(t.TempDir(), "f.json")
			outs := fabricProcs(t, 4, true, "--schedule", tc.schedule, "--size", "64K", "--pair-time", "20ms", "-c", "-J", js)
			if outs[0].code != 0 && outs[0].code != exitFabric {
				t.Fatalf("exit %d; stderr %q", outs[0].code, outs[0].stderr)
			}
			data, err := os.ReadFile(js)
			if err != nil {
				t.Fatal(err)
			}
			var rec fabric.Record
			if err := json.Unmarshal(data, &rec); err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, r := range rec.Rounds {
				for _, m := range r.Pairs {
					if m.Status != fabric.StatusOK || m.GBps <= 0 {
						t.Errorf("round %d test %+v: %s %q, %g GB/s; want ok", r.Index, m.Test, m.Status, m.Err, m.GBps)
					}
					if tc.check(m) {
						n++
					}
				}
			}
			if n < tc.want {
				t.Errorf("%d %s tests, want at least %d", n, tc.schedule, tc.want)
			}
		})
	}
}

// ccrunOnce builds ccrun for the tests that launch through it.
var ccrunOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "cc-perf-fabric-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "ccrun")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/seed-760dd1f1/cc/cmd/ccrun").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ccrun: %v\n%s", err, out)
	}
	return bin, nil
})

// ccrunJob is a ccrun of cc-perf fabric.
type ccrunJob struct {
	cmd        *exec.Cmd
	out, errb  proctest.Buffer
	firstRound chan struct{} // closed when rank 0 reports its first round on stderr
	readDone   chan struct{} // stderr read to its end
}

// ccrunFabric starts ccrun -np n with every rank this test binary running
// cc-perf fabric args on host h<rank> (CC_HOST_ID), each writing its pid
// to dir/pid.<rank> first.
func ccrunFabric(t *testing.T, n int, dir string, args ...string) *ccrunJob {
	t.Helper()
	ccrun, err := ccrunOnce()
	if err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`echo $$ > %s/pid.$CC_RANK; CC_HOST_ID=h$CC_RANK %s=1 exec %s fabric %s`,
		dir, childEnv, os.Args[0], strings.Join(args, " "))
	j := &ccrunJob{cmd: exec.Command(ccrun, "-np", strconv.Itoa(n), "--oversubscribe", "/bin/sh", "-c", script),
		firstRound: make(chan struct{}), readDone: make(chan struct{})}
	j.cmd.Env = baseEnv
	j.cmd.Stdout = &j.out
	stderr, err := j.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := j.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(j.readDone)
		sc := bufio.NewScanner(stderr)
		seen := false
		for sc.Scan() {
			fmt.Fprintln(&j.errb, sc.Text())
			if !seen && strings.Contains(sc.Text(), "# round ") {
				seen = true
				close(j.firstRound)
			}
		}
	}()
	t.Cleanup(func() { j.cmd.Process.Kill(); j.wait() })
	return j
}

// wait waits for ccrun to exit, its stderr read to the end.
func (j *ccrunJob) wait() error {
	<-j.readDone
	return j.cmd.Wait()
}

// TestFabricUnderCCRun: 4 processes launched by the real ccrun, each its
// own host: the run ends judged (exit 0, or 8 when the busy machine made a
// host look slow: see TestFabricRun), with the table on ccrun's stdout.
func TestFabricUnderCCRun(t *testing.T) {
	if testing.Short() {
		t.Skip("launches ccrun: skipped in -short mode")
	}
	dir := t.TempDir()
	j := ccrunFabric(t, 4, dir, "--size", "256K", "--pair-time", "100ms", "--max-concurrent", "1", "-J", dir+"/f.json")
	err := j.wait()
	var exit *exec.ExitError
	if err != nil && (!errors.As(err, &exit) || exit.ExitCode() != exitFabric) {
		t.Fatalf("ccrun: %v, want exit 0 or 8\nstdout:\n%s\nstderr:\n%s", err, j.out.String(), j.errb.String())
	}
	for _, w := range []string{"#  hosts: h0 h1 h2 h3\n", "#  host  addr", "#  verdict: "} {
		if !strings.Contains(j.out.String(), w) {
			t.Errorf("stdout lacks %q:\n%s", w, j.out.String())
		}
	}
	if failed := strings.Contains(j.out.String(), "#  verdict: FAIL"); failed != (err != nil) {
		t.Errorf("ccrun: %v, but the verdict failed: %v\n%s", err, failed, j.out.String())
	}
}

// TestFabricHostDies: a rank killed while the run measures ends the job
// as a cc job ends (non-zero, ccrun naming the rank), and the -J file is
// still valid JSON holding the rounds finished before.
func TestFabricHostDies(t *testing.T) {
	if testing.Short() {
		t.Skip("launches ccrun: skipped in -short mode")
	}
	dir := t.TempDir()
	js := filepath.Join(dir, "f.json")
	// 3 s per test at least: the run is still measuring when rank 3 dies.
	j := ccrunFabric(t, 4, dir, "--size", "4K", "--lat-size", "0", "--pair-time", "3s", "--iters-max", "1000000", "-J", js)
	<-j.firstRound // the first round is on disk
	data, err := os.ReadFile(js)
	var rec fabric.Record
	if err == nil {
		err = json.Unmarshal(data, &rec)
	}
	if err != nil || len(rec.Rounds) != 1 {
		t.Fatalf("-J file after the first round: %v, %d rounds, want 1", err, len(rec.Rounds))
	}
	pid, err := os.ReadFile(filepath.Join(dir, "pid.3"))
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(strings.TrimSpace(string(pid)))
	if err := syscall.Kill(p, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := j.wait(); err == nil {
		t.Fatalf("ccrun exited 0 after rank 3 was killed\nstdout:\n%s\nstderr:\n%s", j.out.String(), j.errb.String())
	}
	if !strings.Contains(j.errb.String(), "rank 3") {
		t.Errorf("stderr does not name rank 3:\n%s", j.errb.String())
	}
	data, _ = os.ReadFile(js)
	var after fabric.Record
	if err := json.Unmarshal(data, &after); err != nil || len(after.Rounds) < 1 || after.Summary != nil {
		t.Errorf("-J file after the death: %v, %d rounds, summary %v; want valid JSON with the finished rounds and no verdict", err, len(after.Rounds), after.Summary)
	}
}
