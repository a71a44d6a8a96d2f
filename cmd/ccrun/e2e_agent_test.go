package main

// End-to-end tests of the per-host agents on the testbed: every way a job ends, with ranks
// on two hosts, through agents and with a session per rank (--no-agent), counting the
// job's processes afterwards on every host (the testbed's hosts share one process table,
// so /proc here shows them all: ranks, children, grandchildren, watchers, agents); the
// agent's output, stdin and exit statuses; a host cut off (tb8, the only host these tests
// cut).

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
)

// teardownModes are the two ways remote ranks start.
var teardownModes = []struct {
	name string
	args []string
}{{"agent", nil}, {"no-agent", []string{"--no-agent"}}}

func TestE2ENoOrphans(t *testing.T) {
	tb := needTestbed(t)
	for _, mode := range teardownModes {
		for _, tc := range teardownCases(t, 4) {
			t.Run(mode.name+"/"+tc.name, func(t *testing.T) {
				tc.run(t, append([]string{"--ssh-config", tb.sshConfig, "-H", tb.addr(6) + ":2," + tb.addr(7) + ":2", "-np", "4"}, mode.args...))
			})
		}
	}
}

// TestE2EAgent: 8 ranks on every host (64 on 8) through one agent each: every rank's output arrives
// whole and tagged, stdin reaches every rank (--stdin all) and rank 0 alone (the default),
// (TestE2ERankExitCodeAndPreload runs the agent copied with --preload-binary.)
func TestE2EAgent(t *testing.T) {
	tb := needTestbed(t)
	bin, _ := binaries(t)
	line := strings.Repeat("x", 40000) // more than one frame of output
	// 8 ranks on every host, whatever slots the testbed's hostfile gives.
	var hosts []string
	for _, a := range tb.addrs {
		hosts = append(hosts, a+":8")
	}
	np := strconv.Itoa(8 * len(hosts))
	on := []string{"--ssh-config", tb.sshConfig, "-H", strings.Join(hosts, ",")}
	cmd := exec.Command(bin, append(on, "-v", "-np", np, "--tag-output", "--stdin", "all", "/bin/sh", "-c",
		`n=$(wc -l); i=0; while [ $i -lt 3 ]; do echo "$CC_RANK $n `+line+`"; i=$((i+1)); done`)...)
	cmd.Stdin = strings.NewReader(strings.Repeat("a line of stdin\n", 50000)) // 800 KB: flow control
	var out, errb syncBuf
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v; stderr:\n%s", err, errb.String())
	}
	for k := 1; k <= len(hosts); k++ {
		if !regexp.MustCompile(fmt.Sprintf(`(?m)^ccrun: host %s: agent pid \d+ on tb%d$`, regexp.QuoteMeta(tb.addr(k)), k)).MatchString(errb.String()) {
			t.Errorf("no agent on host %s; stderr:\n%s", tb.addr(k), errb.String())
		}
	}
	for r := range 8 * len(hosts) {
		want := fmt.Sprintf("[1,%d]<stdout>:%d 50000 %s\n", r, r, line)
		if n := strings.Count(out.String(), want); n != 3 {
			t.Errorf("rank %d: %d whole lines with 50000 stdin lines, want 3", r, n)
		}
	}
	if n := strings.Count(out.String(), "\n"); n != 8*len(hosts)*3 {
		t.Errorf("%d lines in all, want %d", n, 8*len(hosts)*3)
	}

	// Default: rank 0 alone reads stdin; the others read /dev/null.
	cmd = exec.Command(bin, append(on, "-np", "16", "--map-by", "node", "-l", "/bin/sh", "-c", `echo "got $(cat)"`)...)
	cmd.Stdin = strings.NewReader("hello")
	got, err := cmd.Output()
	if err != nil {
		t.Errorf("%v", err)
	}
	if !strings.Contains(string(got), "[0] got hello\n") || strings.Count(string(got), "got hello") != 1 || strings.Count(string(got), "got \n") != 15 {
		t.Errorf("output:\n%s\nwant rank 0 alone to get the stdin", got)
	}
}

// TestE2EAgentCutHost: a host cut off is a lost host, and its agent, hearing nothing from
// ccrun, ends its ranks even before the cable is back.
func TestE2EAgentCutHost(t *testing.T) {
	tb := needTestbed(t)
	healed := false
	heal := func() {
		if !healed {
			healed = true
			if out, err := exec.Command(tb.tool, "heal", "tb8").CombinedOutput(); err != nil {
				t.Errorf("testbed heal tb8: %v: %s", err, out)
			}
		}
	}
	j, list := markedJob(t, nil, "--ssh-config", tb.sshConfig, "-H", tb.addr(7)+":2,"+tb.addr(8)+":2", "-np", "4",
		"--ssh-keepalive", "1s", "/bin/sh", "-c", family)
	waitLines(t, j, j.out.String, readyRe, 4)
	if out, err := exec.Command(tb.tool, "cut", "tb8").CombinedOutput(); err != nil {
		t.Fatalf("testbed cut tb8: %v: %s", err, out)
	}
	t.Cleanup(heal)
	code := j.wait(t, 2*time.Minute)
	if code != 1 || !strings.Contains(j.err.String(), "lost the SSH connection to host "+tb.addr(8)) {
		t.Errorf("exit %d, stderr:\n%s\nwant 1 and the lost host %s", code, j.err, tb.addr(8))
	}
	// Still cut: the agent on tb8 has had no ping for 3 s.
	checkNoneOf(t, list, 30*time.Second)
	heal()
}

// TestE2EAgentKilled: kill -9 of a host's agent is a lost host; its ranks and their
// children go with it (each has a lifeline to the agent), the other host's at teardown.
func TestE2EAgentKilled(t *testing.T) {
	tb := needTestbed(t)
	j, list := markedJob(t, nil, "-v", "--ssh-config", tb.sshConfig, "-H", tb.addr(6)+":2,"+tb.addr(7)+":2", "-np", "4", "/bin/sh", "-c", family)
	waitLines(t, j, j.out.String, readyRe, 4)
	m := regexp.MustCompile(`ccrun: host ` + regexp.QuoteMeta(tb.addr(7)) + `: agent pid (\d+) on tb7`).FindStringSubmatch(j.err.String())
	if m == nil {
		t.Fatalf("no agent on tb7 in:\n%s", j.err)
	}
	var pid int
	fmt.Sscan(m[1], &pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil { // one process table for all hosts
		t.Fatalf("kill -9 %d (the agent on tb7): %v", pid, err)
	}
	code := j.wait(t, time.Minute)
	if want := "lost the agent on host " + tb.addr(7) + ": killed by signal KILL"; code != 1 || !strings.Contains(j.err.String(), want) {
		t.Errorf("exit %d, stderr:\n%s\nwant 1 and %q", code, j.err, want)
	}
	checkNoneOf(t, list, 20*time.Second)
}

// TestE2EAgentFallback: a host without ccrun at ccrun's path nor in its PATH, and a host
// whose ccrun speaks another protocol version, each get a session per rank, with a note
// under -v; the job runs as usual. ccrun runs from /dev/shm, which each host has its own of.
func TestE2EAgentFallback(t *testing.T) {
	tb := needTestbed(t)
	bin, _ := binaries(t)
	dir, err := os.MkdirTemp("/dev/shm", "ccrun-e2e-")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	defer os.RemoveAll(dir)
	self := filepath.Join(dir, "ccrun")
	if out, err := exec.Command("cp", bin, self).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	// On tb8, a "ccrun" that answers with a hello of version 99 (a 37-byte frame).
	fake := `mkdir -p ` + dir + ` && printf '#!/bin/sh\nprintf "\\000\\000\\000\\045\\001{\\"magic\\":\\"ccrun-agent\\",\\"version\\":99}"\n' >` + self + ` && chmod +x ` + self
	if out, err := exec.Command(tb.tool, "ssh", "tb8", fake).CombinedOutput(); err != nil {
		t.Fatalf("fake ccrun on tb8: %v: %s", err, out)
	}
	defer exec.Command(tb.tool, "ssh", "tb8", "rm -rf "+dir).Run()
	cmd := exec.Command(self, "-v", "--ssh-config", tb.sshConfig, "-H", tb.addr(7)+":2,"+tb.addr(8)+":2", "-np", "4", "-l",
		"/bin/sh", "-c", `echo "$CC_RANK on $(hostname)"`)
	var out, errb syncBuf
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v; stderr:\n%s", err, errb.String())
	}
	for _, want := range []string{
		"ccrun: host " + tb.addr(7) + ": no agent: EOF (no ccrun at " + self + " nor in PATH=",
		"ccrun: host " + tb.addr(8) + ": no agent: agent protocol version 99, want 1 (ccrun and its agent are different builds): one SSH session per rank there",
	} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
	for r, h := range []string{"tb7", "tb7", "tb8", "tb8"} {
		if want := fmt.Sprintf("[%d] %d on %s\n", r, r, h); !strings.Contains(out.String(), want) {
			t.Errorf("no line %q in:\n%s", want, out.String())
		}
	}
}
