package main

// End-to-end tests: the real ccrun and cc-perf binaries against the SSH testbed (eight hosts
// tb1..tb8 in network namespaces, scripts/testbed.sh). They skip unless TESTBED_DIR names an
// up testbed and the test runs as root; scripts/testbed.sh run-e2e brings one up and runs them.

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/launch/proctest"
)

// testbed is the state an up testbed exports (scripts/testbed.sh env).
type testbed struct {
	dir, hostfile, sshConfig, knownHosts, key, tool string
	addrs                                           []string // addrs[k-1] is host tbk's address
}

// addr is host tbk's address.
func (tb *testbed) addr(k int) string { return tb.addrs[k-1] }

func needTestbed(t *testing.T) *testbed {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	dir := os.Getenv("TESTBED_DIR")
	if dir == "" {
		t.Skip("TESTBED_DIR is unset: run scripts/testbed.sh run-e2e (as root, with openssh-server and iproute2) to run the testbed tests")
	}
	if os.Geteuid() != 0 {
		t.Skip("the testbed needs root")
	}
	tb := &testbed{
		dir: dir, hostfile: filepath.Join(dir, "hostfile"), sshConfig: filepath.Join(dir, "ssh_config"),
		knownHosts: filepath.Join(dir, "known_hosts"), key: filepath.Join(dir, "id_ed25519"),
		tool: os.Getenv("TESTBED_TOOL"), addrs: strings.Split(os.Getenv("TESTBED_HOSTS"), ","),
	}
	if tb.tool == "" {
		tb.tool, _ = filepath.Abs("../../scripts/testbed.sh")
	}
	// TESTBED_DIR says a testbed is meant to be up: from here on a broken
	// one fails the test rather than skipping it, so CI cannot pass without
	// running these tests.
	for _, f := range []string{tb.hostfile, tb.sshConfig, tb.knownHosts, tb.key} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("TESTBED_DIR=%s but the testbed is not up (%v): run scripts/testbed.sh up", dir, err)
		}
	}
	if len(tb.addrs) < 8 {
		t.Fatalf("TESTBED_HOSTS=%q: the end-to-end tests need 8 hosts or more (scripts/testbed.sh up 8): the agent tests use tb6..tb8, the CollNet server runs on tb7", os.Getenv("TESTBED_HOSTS"))
	}
	if out, err := exec.Command(tb.tool, "status").CombinedOutput(); err != nil {
		t.Fatalf("TESTBED_DIR=%s but `%s status` failed: %v: %s", dir, tb.tool, err, out)
	}
	return tb
}

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries builds ccrun and cc-perf once, into a directory every testbed host sees (the
// hosts share the file system).
func binaries(t *testing.T) (ccrunBin, ccperfBin string) {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "ccrun-e2e-")
		if buildErr != nil {
			return
		}
		for _, p := range []string{"ccrun", "cc-perf"} {
			out, err := exec.Command("go", "build", "-o", filepath.Join(binDir, p), "github.com/seed-760dd1f1/cc/cmd/"+p).CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", p, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "ccrun"), filepath.Join(binDir, "cc-perf")
}

// job is a running ccrun.
type job struct {
	cmd      *exec.Cmd
	out, err *syncBuf
	done     chan struct{}
	code     int
}

// syncBuf collects a stream written by one goroutine and read by another.
type syncBuf = proctest.Buffer

// startCCRun starts the ccrun binary; the test's cleanup kills it if it is still running.
func startCCRun(t *testing.T, args ...string) *job {
	t.Helper()
	bin, _ := binaries(t)
	return startCmd(t, bin, args...)
}

// wait waits for ccrun to exit, at most limit (a hang guard, not a speed requirement).
func (j *job) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-j.done:
		return j.code
	case <-time.After(limit):
		j.cmd.Process.Kill()
		<-j.done
		t.Fatalf("ccrun still running after %v; stdout:\n%s\nstderr:\n%s", limit, j.out, j.err)
		return -1
	}
}

// waitOutput waits until stdout matches re, at most limit.
func (j *job) waitOutput(t *testing.T, re *regexp.Regexp, limit time.Duration) []string {
	t.Helper()
	return j.waitStream(t, j.out, re, limit)
}

// waitStderr waits until stderr matches re, at most limit.
func (j *job) waitStderr(t *testing.T, re *regexp.Regexp, limit time.Duration) []string {
	t.Helper()
	return j.waitStream(t, j.err, re, limit)
}

// waitStream waits until the stream collected in b matches re, at most limit.
func (j *job) waitStream(t *testing.T, b *syncBuf, re *regexp.Regexp, limit time.Duration) (m []string) {
	t.Helper()
	j.waitFor(t, fmt.Sprint(re), limit, func() bool {
		m = re.FindStringSubmatch(b.String())
		return m != nil
	})
	return m
}

// waitFor waits until cond holds (what says what it checks), at most limit; the test fails
// if ccrun exits first.
func (j *job) waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		select {
		case <-j.done:
			t.Fatalf("ccrun exited (%d) before %s; stdout:\n%s\nstderr:\n%s", j.code, what, j.out, j.err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s in ccrun's output after %v; stdout:\n%s\nstderr:\n%s", what, limit, j.out, j.err)
		}
	}
}

// checkNothingLeft fails if a process of the job (its command line holds marker; every
// testbed host shares the process table) is still there after limit.
func checkNothingLeft(t *testing.T, marker string, limit time.Duration) {
	t.Helper()
	checkNoneOf(t, func() []int { return proctest.WithCmdline(marker) }, limit)
}

// checkNoneOf fails if list still names a process after limit, and kills what it names.
func checkNoneOf(t *testing.T, list func() []int, limit time.Duration) {
	t.Helper()
	if left := proctest.WaitNone(list, limit); len(left) > 0 {
		t.Errorf("left behind after %v:\n%s", limit, proctest.Describe(left))
		for _, p := range left {
			syscall.Kill(p, syscall.SIGKILL)
		}
	}
}

// cut pulls host's cable and returns heal, which plugs it back in (once;
// the test's cleanup calls it too).
func (tb *testbed) cut(t *testing.T, host string) (heal func()) {
	t.Helper()
	if out, err := exec.Command(tb.tool, "cut", host).CombinedOutput(); err != nil {
		t.Fatalf("testbed cut %s: %v: %s", host, err, out)
	}
	healed := false
	heal = func() {
		if !healed {
			healed = true
			if out, err := exec.Command(tb.tool, "heal", host).CombinedOutput(); err != nil {
				t.Errorf("testbed heal %s: %v: %s", host, err, out)
			}
		}
	}
	t.Cleanup(heal)
	return heal
}

func (tb *testbed) args(extra ...string) []string {
	return append([]string{"--hostfile", tb.hostfile, "--ssh-config", tb.sshConfig}, extra...)
}

var wrongRe = regexp.MustCompile(`(?m)^(?:\[1,0\]<stdout>:)?\s*(\d+)\s+(\d+)\s+float\s+(?:sum|none)\s+-1\s+\S+\s+\S+\s+\S+\s+(\d+)\s+\S+\s+\S+\s+\S+\s+(\d+)\s*$`)

// checkRows checks that out holds wantRows data rows of a cc-perf table, each #wrong 0 out of and in place.
func checkRows(t *testing.T, out string, wantRows int) {
	t.Helper()
	if rows := checkWrong(t, out); rows != wantRows {
		t.Errorf("got %d data rows, want %d; output:\n%s", rows, wantRows, out)
	}
}

// checkWrong checks that every data row of out has #wrong 0 both halves, and returns the
// number of rows.
func checkWrong(t *testing.T, out string) int {
	t.Helper()
	rows := wrongRe.FindAllStringSubmatch(out, -1)
	for _, r := range rows {
		if r[3] != "0" || r[4] != "0" {
			t.Errorf("size %s: #wrong %s (out of place), %s (in place), want 0", r[1], r[3], r[4])
		}
	}
	return len(rows)
}

func TestE2EAllReduce8Ranks(t *testing.T) {
	tb := needTestbed(t)
	_, perf := binaries(t)
	// -n 5: the default 20 timed iterations of each size added 7 s (16.5 s against 9.3 on the
	// testbed, 2026-11-29) and checked nothing more; -c 1 checks every size's data.
	j := startCCRun(t, tb.args("-np", "8", perf, "all_reduce", "-b", "8", "-e", "8M", "-f", "4", "-c", "1", "-n", "5")...)
	if code := j.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, j.err)
	}
	t.Logf("output:\n%s", j.out)
	checkRows(t, j.out.String(), 11) // 8 B .. 8 MiB by 4
	for _, h := range []string{"tb1", "tb2", "tb3", "tb4"} {
		if n := strings.Count(j.out.String(), " on        "+h+" device"); n != 2 {
			t.Errorf("%d ranks listed on %s, want 2", n, h)
		}
	}
	checkNothingLeft(t, perf, 10*time.Second)
}

func TestE2EEnvReachesRemoteRanks(t *testing.T) {
	tb := needTestbed(t)
	_, perf := binaries(t)
	j := startCCRun(t, tb.args("-np", "8", "--tag-output", "-x", "NCCL_ALGO=ring", "-x", "NCCL_BUFFSIZE=1048576", "-x", "NCCL_DEBUG=INFO",
		perf, "all_reduce", "-b", "8", "-e", "8M", "-f", "4", "-c", "1", "-n", "5")...)
	if code := j.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, j.err)
	}
	checkRows(t, j.out.String(), 11)
	// Every rank, remote ones included, reports the forwarded buffer size.
	for r := range 8 {
		re := regexp.MustCompile(fmt.Sprintf(`(?m)^\[1,%d\]<stderr>:tb\d:\d+:\d+ \[%d\] NCCL INFO comm rank %d nranks 8 host tb\d: .*buffsize 1048576`, r, r, r))
		if m := re.FindString(j.err.String()); m == "" {
			t.Errorf("rank %d: no NCCL INFO line with buffsize 1048576; stderr:\n%s", r, j.err)
		} else if r == 5 {
			t.Logf("remote rank 5: %s", m)
		}
	}
	// A shell rank shows the variables themselves, and that NCCL_*/CC_* of ccrun's own
	// environment are forwarded without -x.
	bin, _ := binaries(t)
	cmd := exec.Command(bin, tb.args("-np", "8", "-x", "NCCL_ALGO=ring", "/bin/sh", "-c",
		`echo "$(hostname) $CC_RANK algo=$NCCL_ALGO proto=$NCCL_PROTO cc=$CC_E2E_FLAG"`)...)
	cmd.Env = append(os.Environ(), "NCCL_PROTO=Simple", "CC_E2E_FLAG=yes", "OTHER_VAR=no")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	for r := range 8 {
		want := fmt.Sprintf("tb%d %d algo=ring proto=Simple cc=yes", r/2+1, r)
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("no line %q in:\n%s", want, out)
		}
	}
}

var listingRe = regexp.MustCompile(`(?m)^#  Rank  5 Group  0 Pid +(\d+) on +(tb\d) device`)

func longRun(tb *testbed, perf string, extra ...string) []string {
	return tb.args(append(extra, "-np", "8", perf, "all_reduce", "-b", "1M", "-e", "1M", "-n", "1000000", "-c", "1")...)
}

func TestE2EKillRemoteRank(t *testing.T) {
	tb := needTestbed(t)
	_, perf := binaries(t)
	j := startCCRun(t, longRun(tb, perf)...)
	m := j.waitOutput(t, listingRe, 2*time.Minute)
	pid, _ := strconv.Atoi(m[1])
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d (rank 5 on %s): %v", pid, m[2], err)
	}
	start := time.Now()
	code := j.wait(t, time.Minute)
	t.Logf("ccrun exited %d, %v after kill -9 of rank 5 (pid %d on %s); stderr:\n%s", code, time.Since(start).Round(time.Millisecond), pid, m[2], j.err)
	if code == 0 {
		t.Errorf("exit 0 after a rank was killed")
	}
	for _, want := range []string{fmt.Sprintf("rank 5 with PID %d on host %s exited on\nsignal 9 (killed)", pid, tb.addr(3))} {
		if !strings.Contains(j.err.String(), want) {
			t.Errorf("stderr lacks %q", want)
		}
	}
	checkNothingLeft(t, perf, 10*time.Second)
}

func TestE2ECtrlC(t *testing.T) {
	tb := needTestbed(t)
	_, perf := binaries(t)
	j := startCCRun(t, longRun(tb, perf)...)
	j.waitOutput(t, listingRe, 2*time.Minute)
	j.cmd.Process.Signal(syscall.SIGINT)
	if code := j.wait(t, time.Minute); code != 130 {
		t.Errorf("exit %d after SIGINT, want 130; stderr:\n%s", code, j.err)
	}
	if !strings.Contains(j.err.String(), "ccrun was interrupted (SIGINT received) and terminated the job.") {
		t.Errorf("stderr lacks the interrupt summary:\n%s", j.err)
	}
	checkNothingLeft(t, perf, 10*time.Second)
}

func TestE2ECutHost(t *testing.T) {
	tb := needTestbed(t)
	_, perf := binaries(t)
	j := startCCRun(t, longRun(tb, perf)...)
	j.waitOutput(t, listingRe, 2*time.Minute)
	heal := tb.cut(t, "tb3")
	start := time.Now()
	code := j.wait(t, 2*time.Minute)
	t.Logf("ccrun exited %d, %v after the cut; stderr:\n%s", code, time.Since(start).Round(time.Millisecond), j.err)
	if code == 0 {
		t.Errorf("exit 0 after a host was cut off")
	}
	if !strings.Contains(j.err.String(), "lost the SSH connection to host "+tb.addr(3)) {
		t.Errorf("stderr does not name the lost host %s", tb.addr(3))
	}
	// Ranks on the other hosts are gone at once; those on tb3 go once it is reachable again
	// (their bootstrap lifeline breaks, then sshd ends their session and its watcher).
	heal()
	checkNothingLeft(t, perf, 90*time.Second)
}

func TestE2EWrongHostKey(t *testing.T) {
	tb := needTestbed(t)
	kh, err := os.ReadFile(tb.knownHosts)
	if err != nil {
		t.Fatal(err)
	}
	// Give tb2 another host's key.
	lines := strings.Split(strings.TrimSpace(string(kh)), "\n")
	var bad []string
	var tb1Key string
	for _, l := range lines {
		if f := strings.Fields(l); len(f) == 3 && strings.HasPrefix(f[0], "tb1,") {
			tb1Key = f[1] + " " + f[2]
		}
	}
	for _, l := range lines {
		if strings.HasPrefix(l, "tb2,") {
			l = "tb2," + tb.addr(2) + " " + tb1Key
		}
		bad = append(bad, l)
	}
	badFile := filepath.Join(t.TempDir(), "known_hosts")
	os.WriteFile(badFile, []byte(strings.Join(bad, "\n")+"\n"), 0o600)
	j := startCCRun(t, tb.args("-np", "8", "--ssh-known-hosts", badFile, "/bin/true")...)
	code := j.wait(t, time.Minute)
	msg := strings.TrimSpace(j.err.String())
	t.Logf("exit %d: %s", code, msg)
	a2 := tb.addr(2)
	if code != 1 || strings.Count(msg, "\n") != 0 ||
		!strings.HasPrefix(msg, "ccrun: host "+a2+": host key of "+a2+":22 does not match "+badFile+":2") ||
		!strings.Contains(msg, "ssh-keygen -R '"+a2+"' -f "+badFile) {
		t.Errorf("want one line naming host %s, the file and the ssh-keygen fix", a2)
	}
}

func TestE2ESetupErrors(t *testing.T) {
	tb := needTestbed(t)
	home := t.TempDir()
	tests := []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"refused port", []string{"--ssh-config", tb.sshConfig, "-np", "2", "-H", tb.addr(1) + ":2", "--ssh-port", "2222", "/bin/true"}, nil,
			"ccrun: host " + tb.addr(1) + ": dial tcp " + tb.addr(1) + ":2222: connect: connection refused"},
		{"unknown host", []string{"-np", "1", "-H", "no-such-host.invalid", "--ssh-config", tb.sshConfig, "-i", tb.key,
			"--ssh-known-hosts", tb.knownHosts, "/bin/true"}, nil, "ccrun: host no-such-host.invalid: dial tcp: lookup no-such-host.invalid"},
		{"no usable key", []string{"-np", "1", "-H", tb.addr(1), "--ssh-config", "none", "--ssh-user", "root",
			"--ssh-known-hosts", tb.knownHosts, "/bin/true"}, []string{"HOME=" + home, "SSH_AUTH_SOCK="},
			"ccrun: no usable SSH key for root@" + tb.addr(1) + ": no ssh-agent (SSH_AUTH_SOCK unset)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin, _ := binaries(t)
			cmd := exec.Command(bin, tt.args...)
			cmd.Env = append(os.Environ(), tt.env...)
			out, err := cmd.CombinedOutput()
			msg := strings.TrimSpace(string(out))
			if err == nil || !strings.HasPrefix(msg, tt.want) || strings.Contains(msg, "\n") {
				t.Errorf("got %v:\n%s\nwant one line starting %q", err, msg, tt.want)
			}
		})
	}
}

func TestE2EProgramMissingRemotely(t *testing.T) {
	tb := needTestbed(t)
	j := startCCRun(t, "--ssh-config", tb.sshConfig, "-np", "2", "-H", tb.addr(3)+":2", "no-such-program-ccrun")
	code := j.wait(t, time.Minute)
	if code != 127 || !strings.Contains(j.err.String(), "ccrun: program no-such-program-ccrun not found on host tb3") ||
		!strings.Contains(j.err.String(), "Exit code:  127 (the program was not found on that host)") {
		t.Errorf("exit %d, stderr:\n%s\nwant 127 naming the program and host", code, j.err)
	}
}

func TestE2ERankExitCodeAndPreload(t *testing.T) {
	tb := needTestbed(t)
	script := filepath.Join(t.TempDir(), "rank.sh")
	os.WriteFile(script, []byte("#!/bin/sh\necho \"$CC_RANK $0\"\n[ \"$CC_RANK\" = 6 ] && exit 4\nexec sleep 60\n"), 0o755)
	j := startCCRun(t, tb.args("-np", "8", "--preload-binary", script)...)
	code := j.wait(t, time.Minute)
	if code != 4 || !strings.Contains(j.err.String(), "Rank:       6\n  Host:       "+tb.addr(4)) {
		t.Errorf("exit %d, stderr:\n%s\nwant 4 from rank 6 on %s", code, j.err, tb.addr(4))
	}
	sc := bufio.NewScanner(strings.NewReader(j.out.String()))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && (!strings.Contains(f[1], "/ccrun-preload.") || f[1] == script) {
			t.Errorf("rank %s ran %s, want a preloaded copy", f[0], f[1])
		}
	}
	checkNothingLeft(t, "ccrun-preload.", 10*time.Second)
	if m, _ := filepath.Glob(filepath.Join(os.TempDir(), "ccrun-preload.*")); len(m) > 0 {
		t.Errorf("preload directories left: %v", m)
	}
}

func TestE2ELocalCCPerf(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	_, perf := binaries(t)
	j := startCCRun(t, "-np", "4", "--oversubscribe", perf, "all_reduce", "-b", "8", "-e", "1M", "-f", "4", "-c", "1")
	if code := j.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, j.err)
	}
	checkRows(t, j.out.String(), 9)
	checkNothingLeft(t, perf, 10*time.Second)
}

// TestE2ELocalAlgorithms runs the README's main job with each algorithm
// besides the ring forced through NCCL_ALGO: 4 local ranks, 8 B to 32 MiB,
// and every row's data check must pass.
func TestE2ELocalAlgorithms(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	_, perf := binaries(t)
	for _, algo := range []string{"tree", "ctring"} {
		t.Run(algo, func(t *testing.T) {
			j := startCCRun(t, "-np", "4", "--oversubscribe", "-x", "NCCL_ALGO="+algo, perf, "all_reduce", "-b", "8", "-e", "32M", "-f", "4", "-w", "1", "-n", "2", "-c", "1")
			if code := j.wait(t, 5*time.Minute); code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", code, j.err)
			}
			checkRows(t, j.out.String(), 12) // 8 B .. 32 MiB by 4
			checkNothingLeft(t, perf, 10*time.Second)
		})
	}
}

// TestE2ELocalPAT runs cc-perf reduce_scatter and all_gather with PAT
// forced, n = 2, 3, 5, 8: over TCP with every rank alone on a fake host
// (CC_HOST_ID per rank: PAT's automatic case) and over shared memory with
// NCCL_PAT_ENABLE=1; every row's data check must pass.
func TestE2ELocalPAT(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	_, perf := binaries(t)
	for _, tr := range []struct{ name, hostID, enable string }{
		{"tcp", "fake$CC_RANK", "2"},
		{"shm", "one", "1"},
	} {
		for _, n := range []string{"2", "3", "5", "8"} {
			for _, coll := range []string{"reduce_scatter", "all_gather"} {
				t.Run(tr.name+"/n"+n+"/"+coll, func(t *testing.T) {
					j := startCCRun(t, "-np", n, "--oversubscribe", "-x", "NCCL_ALGO=pat", "-x", "NCCL_PAT_ENABLE="+tr.enable, "/bin/sh", "-c",
						"CC_HOST_ID="+tr.hostID+" exec "+perf+" "+coll+" -b 1K -e 1M -f 4 -w 1 -n 2 -c 1")
					if code := j.wait(t, 5*time.Minute); code != 0 {
						t.Fatalf("exit %d; stderr:\n%s", code, j.err)
					}
					checkRows(t, j.out.String(), 6) // 1 KiB .. 1 MiB by 4
				})
			}
		}
	}
	checkNothingLeft(t, perf, 10*time.Second)
}
