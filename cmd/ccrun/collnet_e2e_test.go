package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/launch/proctest"
)

// CollNet Direct on the testbed: ranks on tb1..tb4 (two each), the
// aggregation server on a host of its own: tb7 when the testbed has it
// (the host these tests may cut off), else the last host beyond tb4, else
// ccrun's machine (and the cut test skips).

// collnetServerHost is the testbed host of the server ("" for ccrun's
// machine) and its name for testbed.sh cut.
func (tb *testbed) collnetServerHost() (addr, name string) {
	switch n := len(tb.addrs); {
	case n >= 7:
		return tb.addr(7), "tb7"
	case n >= 5:
		return tb.addr(n), fmt.Sprintf("tb%d", n)
	}
	return "", ""
}

// collnetArgs runs cc-perf with CollNet forced, the server on its host.
func (tb *testbed) collnetArgs(perf string, cc ...string) []string {
	hosts := tb.addr(1) + ":2," + tb.addr(2) + ":2," + tb.addr(3) + ":2," + tb.addr(4) + ":2"
	server := "--collnet-server"
	if addr, _ := tb.collnetServerHost(); addr != "" {
		server += "=" + addr
	}
	return append([]string{"--ssh-config", tb.sshConfig, "-H", hosts, "-np", "8", server,
		"-x", "NCCL_COLLNET_ENABLE=1", "-x", "NCCL_ALGO=collnetdirect", perf}, cc...)
}

// TestE2ECollNet: all-reduce, reduce-scatter and all-gather through the
// server, every row #wrong 0; the server is gone afterwards.
func TestE2ECollNet(t *testing.T) {
	tb := needTestbed(t)
	bin, perf := binaries(t)
	for _, coll := range []string{"all_reduce", "reduce_scatter", "all_gather"} {
		j := startCCRun(t, tb.collnetArgs(perf, coll, "-b", "8", "-e", "1M", "-f", "8", "-c", "1")...)
		if code := j.wait(t, 5*time.Minute); code != 0 {
			t.Fatalf("%s: exit %d; stderr:\n%s", coll, code, j.err)
		}
		checkCollRows(t, coll, j.out.String())
		if !strings.Contains(j.err.String(), "collnet-server: collnet aggregation server listening on") {
			t.Errorf("%s: stderr does not show the server starting:\n%s", coll, j.err)
		}
	}
	checkNoneOf(t, func() []int { return servers(bin) }, 10*time.Second)
}

// checkCollRows checks cc-perf's rows of any collective: 8 B .. 256 KiB by 8
// (rows of 0 elements for reduce-scatter and all-gather at the small
// sizes), every #wrong 0.
func checkCollRows(t *testing.T, coll, out string) {
	t.Helper()
	row := regexp.MustCompile(`(?m)^\s*(\d+)\s+(\d+)\s+float\s+(?:sum|none)\s+-1\s+\S+\s+\S+\s+\S+\s+(\d+)\s+\S+\s+\S+\s+\S+\s+(\d+)\s*$`)
	rows := row.FindAllStringSubmatch(out, -1)
	if len(rows) != 6 {
		t.Errorf("%s: %d data rows, want 6; output:\n%s", coll, len(rows), out)
	}
	for _, r := range rows {
		if r[3] != "0" || r[4] != "0" {
			t.Errorf("%s size %s: #wrong %s (out of place), %s (in place), want 0", coll, r[1], r[3], r[4])
		}
	}
}

// serverPid waits for the job's aggregation server and returns its pid
// (the testbed hosts share the process table).
func serverPid(t *testing.T, bin string) int {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if ps := servers(bin); len(ps) > 0 {
			return ps[0]
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no aggregation server process within a minute")
	return 0
}

// servers lists the processes that are bin in its server mode (not the
// shells that started them).
func servers(bin string) []int {
	return proctest.Live(func(dir string) bool {
		b, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		return err == nil && bytes.HasPrefix(b, []byte(bin+"\x00--"+collnetServeFlag))
	})
}

// checkServerFailure checks that ccrun failed naming the server first and
// that every rank failed naming it.
func checkServerFailure(t *testing.T, j *job, code int, rankWhy string) {
	t.Helper()
	if code == 0 {
		t.Errorf("exit 0 after the server was lost")
	}
	errOut := j.err.String()
	summary := ""
	if end := strings.LastIndex(errOut, rule()); end > 0 {
		if start := strings.LastIndex(errOut[:end], rule()); start >= 0 {
			summary = errOut[start+len(rule())+1 : end]
		}
	}
	if !strings.HasPrefix(summary, "collnet aggregation server ") {
		t.Errorf("the summary does not name the server first:\n%s", summary)
	}
	for r := range 8 {
		re := regexp.MustCompile(`(?m)^cc-perf: rank ` + strconv.Itoa(r) + `: .*collnet aggregation server \S+ ` + rankWhy)
		if !re.MatchString(errOut) {
			t.Errorf("rank %d does not report the server %s; stderr:\n%s", r, rankWhy, errOut)
		}
	}
}

func rule() string { return strings.Repeat("-", 74) }

// TestE2ECollNetServerKilled: kill -9 of the server mid all-reduce: every
// rank fails naming it, ccrun exits non-zero and names it first.
func TestE2ECollNetServerKilled(t *testing.T) {
	tb := needTestbed(t)
	bin, perf := binaries(t)
	j := startCCRun(t, tb.collnetArgs(perf, "all_reduce", "-b", "1M", "-e", "1M", "-n", "1000000", "-c", "1")...)
	j.waitOutput(t, listingRe, 2*time.Minute)
	pid := serverPid(t, bin)
	time.Sleep(time.Second) // mid all-reduce
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d (the server): %v", pid, err)
	}
	code := j.wait(t, 2*time.Minute)
	t.Logf("ccrun exited %d; stderr:\n%s", code, j.err)
	checkServerFailure(t, j, code, "lost")
	checkNothingLeft(t, perf, 10*time.Second)
}

// TestE2ECollNetCut: the server's host is cut off mid all-reduce: every
// rank fails naming the server (TCP keepalives and the user timeout, not
// a reset, tell them), ccrun names it first.
func TestE2ECollNetCut(t *testing.T) {
	tb := needTestbed(t)
	_, host := tb.collnetServerHost()
	if host == "" {
		t.Skipf("the testbed has %d hosts: cutting the server off needs a fifth (scripts/testbed.sh up 8)", len(tb.addrs))
	}
	bin, perf := binaries(t)
	j := startCCRun(t, tb.collnetArgs(perf, "all_reduce", "-b", "1M", "-e", "1M", "-n", "1000000", "-c", "1")...)
	j.waitOutput(t, listingRe, 2*time.Minute)
	serverPid(t, bin)
	time.Sleep(time.Second)
	heal := tb.cut(t, host)
	code := j.wait(t, 3*time.Minute)
	t.Logf("ccrun exited %d; stderr:\n%s", code, j.err)
	checkServerFailure(t, j, code, "lost")
	heal()
	checkNothingLeft(t, perf, 30*time.Second)
	checkNoneOf(t, func() []int { return servers(bin) }, 90*time.Second)
}
