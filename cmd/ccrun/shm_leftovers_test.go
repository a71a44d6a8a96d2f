package main

import (
	"fmt"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// pidRe reads a rank's pid from cc-perf's device lines.
var pidRe = regexp.MustCompile(`(?m)^(?:\S+:\s*)?#\s+Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+(\d+)`)

// rankPids maps each rank to its pid, as cc-perf's device lines in out show them.
func rankPids(out string) map[int]int {
	pids := map[int]int{}
	for _, m := range pidRe.FindAllStringSubmatch(out, -1) {
		r, _ := strconv.Atoi(m[1])
		pids[r], _ = strconv.Atoi(m[2])
	}
	return pids
}

// poolsOf lists the pool files (comm.MemAlloc's, /dev/shm/cc-mem-PID-...)
// of pids that ls, which lists a /dev/shm, shows.
func poolsOf(t *testing.T, ls func() (string, error), pids []int) []string {
	t.Helper()
	out, err := ls()
	if err != nil {
		t.Fatalf("list /dev/shm: %v: %s", err, out)
	}
	var left []string
	for _, name := range strings.Fields(out) {
		for _, pid := range pids {
			if strings.HasPrefix(name, fmt.Sprintf("cc-mem-%d-", pid)) {
				left = append(left, name)
			}
		}
	}
	return left
}

// killRankWithPools runs a two-rank NVLS all-reduce on registered buffers
// (-R 1) through ccrun with args, waits until both ranks' pool files exist
// (listed by ls), kills rank 1 with SIGKILL mid-run, and checks that once
// ccrun has ended the job no pool file of either rank is left.
func killRankWithPools(t *testing.T, ls func() (string, error), args ...string) {
	t.Helper()
	_, perf := binaries(t)
	args = append(args, "-x", "NCCL_ALGO=nvls", perf, "all_reduce", "-R", "1", "-b", "1M", "-e", "1M", "-w", "1", "-n", "1000000")
	j := startCCRun(t, args...)
	// The column header follows the device lines; the buffers exist
	// before the first measured call.
	j.waitOutput(t, regexp.MustCompile(`\(B\)\s+\(elements\)`), 2*time.Minute)
	pids := rankPids(j.out.String())
	if len(pids) != 2 {
		t.Fatalf("want the pids of ranks 0 and 1 in the device lines; stdout:\n%s", j.out)
	}
	both := []int{pids[0], pids[1]}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		got := poolsOf(t, ls, both)
		if len(poolsOf(t, ls, both[:1])) > 0 && len(poolsOf(t, ls, both[1:])) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool files of pids %v: %v after a minute, want one per rank (else this test proves nothing)", both, got)
		}
	}
	if err := syscall.Kill(pids[1], syscall.SIGKILL); err != nil {
		t.Fatalf("kill rank 1 (pid %d): %v", pids[1], err)
	}
	if code := j.wait(t, time.Minute); code == 0 {
		t.Fatalf("ccrun exited 0 after rank 1 was killed; stderr:\n%s", j.err)
	}
	if left := poolsOf(t, ls, both); len(left) > 0 {
		t.Errorf("pool files left in /dev/shm after the job ended: %v", left)
	}
}

// TestKilledRankLeavesNoPools: pools of ranks killed mid-call on this
// machine are gone when ccrun has ended the job.
func TestKilledRankLeavesNoPools(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	killRankWithPools(t, func() (string, error) {
		out, err := exec.Command("ls", "/dev/shm").CombinedOutput()
		return string(out), err
	}, "-np", "2")
}

// TestE2EKilledRankLeavesNoPools: the same on testbed host tb1, whose
// /dev/shm is its own: its agent removes what the killed ranks left.
func TestE2EKilledRankLeavesNoPools(t *testing.T) {
	tb := needTestbed(t)
	killRankWithPools(t, func() (string, error) {
		out, err := exec.Command(tb.tool, "exec", "tb1", "ls", "/dev/shm").CombinedOutput()
		return string(out), err
	}, "--ssh-config", tb.sshConfig, "-H", tb.addr(1)+":2", "-np", "2")
}

// shmOf lists /dev/shm of testbed host tbk: its own tmpfs (scripts/testbed.sh mounts one
// in each host's mount namespace), which only the processes of that host's ranks and
// agent see.
func (tb *testbed) shmOf(t *testing.T, k int) []string {
	t.Helper()
	out, err := exec.Command(tb.tool, "exec", fmt.Sprintf("tb%d", k), "ls", "-A", "/dev/shm").CombinedOutput()
	if err != nil {
		t.Fatalf("list /dev/shm of tb%d: %v: %s", k, err, out)
	}
	return strings.Fields(string(out))
}

// TestE2EKilledRanksLeaveShmAsBefore: NVLS_TREE all-reduce on registered buffers (-R 1),
// two ranks on each of tb1 and tb2, so each host holds the job's segment and its ranks'
// pools; one rank on each host is killed with SIGKILL mid-sweep. Once ccrun has ended
// the job, /dev/shm of both hosts lists exactly what it listed before the job. (This
// machine's /dev/shm is not compared: other jobs share it; the ranks ran on the hosts.)
func TestE2EKilledRanksLeaveShmAsBefore(t *testing.T) {
	tb := needTestbed(t)
	_, perf := binaries(t)
	before := map[int][]string{1: tb.shmOf(t, 1), 2: tb.shmOf(t, 2)}
	j := startCCRun(t, "--ssh-config", tb.sshConfig, "-H", tb.addr(1)+":2,"+tb.addr(2)+":2", "-np", "4",
		"-x", "NCCL_ALGO=nvlstree", perf, "all_reduce", "-R", "1", "-b", "1M", "-e", "1M", "-w", "1", "-n", "1000000")
	j.waitOutput(t, regexp.MustCompile(`\(B\)\s+\(elements\)`), 2*time.Minute)
	pids := rankPids(j.out.String())
	if len(pids) != 4 {
		t.Fatalf("want the pids of ranks 0..3 in the device lines; stdout:\n%s", j.out)
	}
	// Ranks 0, 1 run on tb1, ranks 2, 3 on tb2 (by slot). Wait until every rank's pool
	// is there, else the kill proves nothing.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		have := 0
		for r, p := range pids {
			ls := func() (string, error) { return strings.Join(tb.shmOf(t, 1+r/2), " "), nil }
			if len(poolsOf(t, ls, []int{p})) > 0 {
				have++
			}
		}
		if have == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute %d of 4 ranks have pool files in their host's /dev/shm, want all", have)
		}
	}
	// Stop both ranks first, then kill them: killed one after the other, rank 2
	// could see rank 1's sockets close and end by itself (cleaning its own pools)
	// before its SIGKILL arrives. A stopped rank keeps its sockets open and cannot
	// exit, so each host then loses a rank that could not clean up.
	for _, sig := range []syscall.Signal{syscall.SIGSTOP, syscall.SIGKILL} {
		for _, r := range []int{1, 2} {
			if err := syscall.Kill(pids[r], sig); err != nil {
				t.Fatalf("%v rank %d (pid %d): %v", sig, r, pids[r], err)
			}
		}
	}
	if code := j.wait(t, time.Minute); code == 0 {
		t.Fatalf("ccrun exited 0 after ranks were killed; stderr:\n%s", j.err)
	}
	for k, was := range before {
		if now := tb.shmOf(t, k); !slices.Equal(now, was) {
			t.Errorf("/dev/shm of tb%d: %q after the job, %q before", k, now, was)
		}
	}
}
