package main

// End-to-end tests against the real Slurm of the testbed (scripts/testbed.sh up 8 --slurm:
// munged, slurmctld and one slurmd per host). They skip unless the testbed is up with Slurm
// (TESTBED_SLURM=1, SLURM_CONF set) and srun, salloc, sbatch and scancel are installed;
// scripts/testbed.sh brings the testbed up with Slurm when the packages are there.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/launch/proctest"
)

// needSlurm returns the testbed when its Slurm cluster runs, or skips.
func needSlurm(t *testing.T) *testbed {
	t.Helper()
	tb := needTestbed(t)
	for _, p := range []string{"srun", "salloc", "sbatch", "scancel"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s not found: install slurmctld slurmd slurm-client munge to run the Slurm tests", p)
		}
	}
	if os.Getenv("TESTBED_SLURM") != "1" || os.Getenv("SLURM_CONF") == "" {
		t.Skip("the testbed runs no Slurm (TESTBED_SLURM is not 1 or SLURM_CONF is unset): bring it up with `scripts/testbed.sh up 8 --slurm`")
	}
	return tb
}

// startCmd starts a command (ccrun, or a Slurm client: srun, salloc, sbatch); the test's
// cleanup kills it if it is still running.
func startCmd(t *testing.T, name string, args ...string) *job {
	t.Helper()
	return startJob(t, exec.Command(name, args...))
}

// startJob starts cmd, its output collected in the job unless cmd.Stdout is already set;
// the test's cleanup kills it if it is still running.
func startJob(t *testing.T, cmd *exec.Cmd) *job {
	t.Helper()
	j := &job{cmd: cmd, out: &syncBuf{}, err: &syncBuf{}, done: make(chan struct{})}
	if j.cmd.Stdout == nil {
		j.cmd.Stdout = j.out
	}
	j.cmd.Stderr = j.err
	if err := j.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		j.cmd.Wait()
		j.code = j.cmd.ProcessState.ExitCode()
		close(j.done)
	}()
	t.Cleanup(func() {
		j.cmd.Process.Kill()
		<-j.done
	})
	t.Logf("%s", strings.Join(cmd.Args, " "))
	return j
}

var listingHostRe = regexp.MustCompile(`(?m)^#  Rank +\d+ Group  0 Pid +\d+ on +(\S+) device`)

// checkListing checks that the device listing shows perHost ranks on each of nHosts hosts
// (which hosts Slurm picks depends on what earlier jobs still hold), and one table.
func checkListing(t *testing.T, out string, nHosts, perHost int) {
	t.Helper()
	count := map[string]int{}
	for _, m := range listingHostRe.FindAllStringSubmatch(out, -1) {
		count[m[1]]++
	}
	ok := len(count) == nHosts
	for _, n := range count {
		ok = ok && n == perHost
	}
	if !ok {
		t.Errorf("ranks per host %v, want %d hosts with %d each; output:\n%s", count, nHosts, perHost, out)
	}
	if got := strings.Count(out, "# Collective test starting"); got != 1 {
		t.Errorf("%d tables printed, want 1 (only rank 0 prints)", got)
	}
}

func TestE2ESlurmSrunCCPerf(t *testing.T) {
	needSlurm(t)
	_, perf := binaries(t)
	j := startCmd(t, "srun", "-N", "4", "-n", "8", perf, "all_reduce", "-b", "8", "-e", "4M", "-f", "4", "-c", "1")
	if code := j.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("srun exited %d; stdout:\n%s\nstderr:\n%s", code, j.out, j.err)
	}
	t.Logf("output:\n%s", j.out)
	checkRows(t, j.out.String(), 10) // 8 B .. 2 MiB by 4
	checkListing(t, j.out.String(), 4, 2)
	checkNothingLeft(t, perf, 10*time.Second)
}

func TestE2ESlurmSallocCCRun(t *testing.T) {
	tb := needSlurm(t)
	ccrun, perf := binaries(t)
	for _, launcher := range []string{"ssh", "srun"} {
		t.Run(launcher, func(t *testing.T) {
			j := startCmd(t, "salloc", "-N", "2", "-n", "4", ccrun, "--launcher", launcher, "--ssh-config", tb.sshConfig,
				perf, "reduce_scatter", "-c", "1")
			if code := j.wait(t, 3*time.Minute); code != 0 {
				t.Fatalf("salloc ccrun exited %d; stdout:\n%s\nstderr:\n%s", code, j.out, j.err)
			}
			t.Logf("output:\n%s", j.out)
			checkRows(t, j.out.String(), 1)
			checkListing(t, j.out.String(), 2, 2)
			checkNothingLeft(t, perf, 10*time.Second)
		})
	}
}

var rank5Re = regexp.MustCompile(`(?m)^#  Rank  5 Group  0 Pid +(\d+) on +(tb\d) device`)

// killRank5 kills rank 5 of a running job once the device listing names it.
func killRank5(t *testing.T, j *job) (pid int, host string) {
	t.Helper()
	m := j.waitOutput(t, rank5Re, 2*time.Minute)
	pid, _ = strconv.Atoi(m[1])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d (rank 5 on %s): %v", pid, m[2], err)
	}
	return pid, m[2]
}

func longPerf(perf string) []string {
	return []string{perf, "all_reduce", "-b", "1M", "-e", "1M", "-n", "1000000", "-c", "1"}
}

func TestE2ESlurmKillRankEndsStep(t *testing.T) {
	needSlurm(t)
	_, perf := binaries(t)
	j := startCmd(t, "srun", append([]string{"--kill-on-bad-exit=1", "-N", "4", "-n", "8"}, longPerf(perf)...)...)
	pid, host := killRank5(t, j)
	start := time.Now()
	code := j.wait(t, time.Minute)
	t.Logf("srun exited %d, %v after kill -9 of rank 5 (pid %d on %s); stderr:\n%s", code, time.Since(start).Round(time.Millisecond), pid, host, j.err)
	if code == 0 {
		t.Errorf("srun exited 0 after a rank was killed")
	}
	// The other ranks name the lost peer rather than hanging.
	lost := fmt.Sprintf("rank 5 (host %s, pid %d) lost", host, pid)
	if n := strings.Count(j.err.String(), lost); n == 0 {
		t.Errorf("no rank reported %q; stderr:\n%s", lost, j.err)
	}
	checkNothingLeft(t, perf, 10*time.Second)
}

func TestE2ESlurmCCRunSrunKillRank(t *testing.T) {
	needSlurm(t)
	ccrun, perf := binaries(t)
	j := startCmd(t, "salloc", append([]string{"-N", "4", "-n", "8", ccrun, "--launcher", "srun"}, longPerf(perf)...)...)
	pid, host := killRank5(t, j)
	code := j.wait(t, time.Minute)
	t.Logf("salloc ccrun exited %d after kill -9 of rank 5 (pid %d on %s); stderr:\n%s", code, pid, host, j.err)
	if code != 137 {
		t.Errorf("exit %d, want 137 (srun reports the killed task as 128+9)", code)
	}
	// No "other rank(s) were terminated" count: under srun, Slurm cancels the
	// step and the other ranks end by themselves (they see the lost peer), so
	// ccrun terminated none of them and does not say it did.
	for _, want := range []string{"Rank:       5", "Host:       " + host, fmt.Sprintf("PID:        %d", pid)} {
		if !strings.Contains(j.err.String(), want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	checkNothingLeft(t, perf, 10*time.Second)
	checkNothingLeft(t, ccrun, 10*time.Second)
}

func TestE2ESlurmScancel(t *testing.T) {
	needSlurm(t)
	_, perf := binaries(t)
	out := filepath.Join(t.TempDir(), "job.out")
	cmd := strings.Join(append([]string{"srun"}, longPerf(perf)...), " ")
	b, err := exec.Command("sbatch", "--parsable", "-N", "4", "-n", "8", "-o", out, "--wrap", cmd).CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch: %v: %s", err, b)
	}
	id := strings.TrimSpace(string(b))
	t.Cleanup(func() { exec.Command("scancel", id).Run() })
	deadline := time.Now().Add(2 * time.Minute)
	for {
		text, _ := os.ReadFile(out)
		if rank5Re.Match(text) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s: no device listing after 2m; output:\n%s", id, text)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := len(proctest.WithCmdline(perf)); n < 8 {
		t.Fatalf("%d cc-perf processes running, want 8 before scancel", n)
	}
	if b, err := exec.Command("scancel", id).CombinedOutput(); err != nil {
		t.Fatalf("scancel %s: %v: %s", id, err, b)
	}
	checkNothingLeft(t, perf, 20*time.Second)
	text, _ := os.ReadFile(out)
	t.Logf("job %s output after scancel:\n%s", id, text)
}

func TestE2ESlurmBadInput(t *testing.T) {
	needSlurm(t)
	ccrun, perf := binaries(t)
	hostfile := filepath.Join(t.TempDir(), "hosts")
	os.WriteFile(hostfile, []byte("tb2\ntb1\n"), 0o644) // task 0 on tb2, SLURM_STEP_NODELIST=tb[1-2]
	for _, c := range []struct {
		name string
		argv []string
		want []string
		env  []string
	}{
		{"arbitrary distribution", []string{"srun", "-m", "arbitrary", "-n", "2", perf, "all_reduce", "-c", "1"},
			[]string{"SLURM_DISTRIBUTION=arbitrary: task 0 need not run on tb1", "set NCCL_COMM_ID"}, []string{"SLURM_HOSTFILE=" + hostfile}},
		{"malformed nodelist", []string{"srun", "-N", "1", "-n", "2", "/usr/bin/env", "SLURM_STEP_NODELIST=tb[1-", perf, "all_reduce", "-c", "1"},
			[]string{"SLURM_STEP_NODELIST", `"tb[1-"`}, nil},
		{"procid beyond ntasks", []string{"srun", "-N", "1", "-n", "2", "/usr/bin/env", "SLURM_NTASKS=1", perf, "all_reduce", "-c", "1"},
			[]string{"SLURM_PROCID=1 is not below SLURM_NTASKS=1"}, nil},
		{"more ranks than tasks", []string{"salloc", "-N", "2", "-n", "4", ccrun, "--launcher", "srun", "-np", "8", perf, "all_reduce", "-c", "1"},
			[]string{"-np 8 is more than the 4 tasks of the Slurm allocation (SLURM_JOB_NODELIST=tb", "SLURM_TASKS_PER_NODE=2(x2))"}, nil},
		{"more ranks than tasks, ssh", []string{"salloc", "-N", "2", "-n", "4", ccrun, "-np", "8", perf, "all_reduce", "-c", "1"},
			[]string{"the Slurm allocation (SLURM_JOB_NODELIST=tb", "SLURM_TASKS_PER_NODE=2(x2)): 8 ranks requested but the 2 hosts have 4 slots"}, nil},
		{"srun launcher outside an allocation", []string{ccrun, "--launcher", "srun", "-np", "2", perf},
			[]string{"--launcher srun needs a Slurm allocation"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(c.argv[0], c.argv[1:]...)
			cmd.Env = append(withoutSlurmJob(os.Environ()), c.env...)
			out, err := cmd.CombinedOutput()
			t.Logf("%s\n%s", strings.Join(c.argv, " "), out)
			if err == nil {
				t.Errorf("exit 0, want an error")
			}
			for _, w := range c.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q", w)
				}
			}
		})
	}
	checkNothingLeft(t, perf, 10*time.Second)
}

// withoutSlurmJob drops the variables of an enclosing allocation, so that the test behaves
// the same when `go test` itself runs inside one.
func withoutSlurmJob(environ []string) []string {
	var out []string
	for _, kv := range environ {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "SLURM_") && k != "SLURM_CONF" {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// TestE2ESlurmSampleScript submits scripts/cc-perf.sbatch, which runs cc-perf under srun and
// then under ccrun --launcher srun: two tables, every row #wrong 0.
func TestE2ESlurmSampleScript(t *testing.T) {
	needSlurm(t)
	_, perf := binaries(t)
	script, err := filepath.Abs("../../scripts/cc-perf.sbatch")
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "job.out")
	cmd := exec.Command("sbatch", "--wait", "-N", "2", "--ntasks-per-node=2", "-o", out, script, "all_reduce", "-b", "8", "-e", "1M", "-f", "8", "-c", "1")
	cmd.Env = append(withoutSlurmJob(os.Environ()), "CC_BIN="+filepath.Dir(perf))
	b, err := cmd.CombinedOutput()
	text, _ := os.ReadFile(out)
	t.Logf("sbatch: %s\njob output:\n%s", b, text)
	if err != nil {
		t.Fatalf("sbatch --wait: %v", err)
	}
	if n := strings.Count(string(text), "# Collective test starting"); n != 2 {
		t.Errorf("%d tables, want 2 (srun, then ccrun --launcher srun)", n)
	}
	checkRows(t, string(text), 12) // 8 B .. 256 KiB by 8, twice
	checkNothingLeft(t, perf, 10*time.Second)
}
