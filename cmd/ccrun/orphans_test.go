package main

// End-to-end tests of ccrun's teardown on this machine: the real ccrun binary, ranks with
// children and grandchildren, and afterwards the live processes of the job, found by a
// marker in their environment (local ranks and all they start inherit ccrun's), must come
// to 0. The bounds on waits guard against hangs; none is a speed requirement.

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/launch/proctest"
)

// markedJob starts the ccrun binary with a unique marker in its environment and returns
// the function that lists the job's live processes: those with the marker in their
// environment (local ranks inherit it; remote ranks get it as a forwarded CC_ variable)
// or command line (a remote rank's session script), and the ccrun binary's own processes
// (ccrun, its remote agents). stdout may be nil (collected in j.out) or a file.
func markedJob(t *testing.T, stdout *os.File, args ...string) (*job, func() []int) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	bin, _ := binaries(t)
	var b [8]byte
	rand.Read(b[:])
	marker := "CC_ORPHAN_MARK=" + hex.EncodeToString(b[:])
	list := func() []int {
		return union(proctest.WithEnv(marker), proctest.WithCmdline(marker[len("CC_ORPHAN_MARK="):]), proctest.WithCmdline(bin))
	}
	t.Cleanup(func() { // after startJob's cleanup has killed ccrun
		for _, p := range list() {
			syscall.Kill(p, syscall.SIGKILL)
		}
	})
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), marker)
	if stdout != nil {
		cmd.Stdout = stdout
	}
	return startJob(t, cmd), list
}

// waitLines waits until text() holds n lines matching re.
func waitLines(t *testing.T, j *job, text func() string, re *regexp.Regexp, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for len(re.FindAllString(text(), -1)) < n {
		select {
		case <-j.done:
			t.Fatalf("ccrun exited (%d) before %d lines matching %v; stdout:\n%s\nstderr:\n%s", j.code, n, re, j.out, j.err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %d lines matching %v; stdout:\n%s\nstderr:\n%s", n, re, j.out, j.err)
		}
	}
}

var readyRe = regexp.MustCompile(`(?m)^ready$`)

// family is a rank that starts a child, which starts a grandchild, and a second child
// deaf to SIGTERM, then says ready and waits for them.
const family = `sh -c 'sleep 300; :' & (trap "" TERM; sleep 300) & echo ready; wait`

// union lists the pids of every list once.
func union(lists ...[]int) []int {
	seen := map[int]bool{}
	var out []int
	for _, l := range lists {
		for _, p := range l {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return out
}

// TestNoOrphans ends a job in each way that used to leave processes behind, and counts.
func TestNoOrphans(t *testing.T) {
	for _, tc := range teardownCases(t, 2) {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, []string{"-np", "2"}) })
	}
}

// teardownCase is one way a job ends.
type teardownCase struct {
	name string
	args []string
	// pipe: ccrun's stdout is a pipe that the test closes after one line.
	pipe bool
	// end ends the job once it runs (nil: the job ends by itself).
	end     func(*testing.T, *job, func() []int)
	code    int    // ccrun's exit status; -1 for killed
	summary string // a line of ccrun's summary
}

// teardownCases are the ways a job of np ranks ends, each with ranks that start children
// and grandchildren (some deaf to SIGTERM).
func teardownCases(t *testing.T, np int) []teardownCase {
	// signal waits for every rank's family, then sends ccrun sigs.
	signal := func(sigs ...syscall.Signal) func(*testing.T, *job, func() []int) {
		return func(t *testing.T, j *job, list func() []int) {
			waitLines(t, j, j.out.String, readyRe, np)
			// A rank: itself, 2 children, a grandchild, its watcher. "ready" comes
			// before the grandchild's fork, so wait for it (bounded).
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
				n := len(list())
				if n >= 1+np*5 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d processes of the job running, want ccrun and at least 5 per rank", n)
				}
			}
			for i, s := range sigs {
				if i > 0 { // the first one must have been seen, or the two may merge
					waitLines(t, j, j.err.String, regexp.MustCompile(`ccrun: ending the job: SIGTERM to every rank`), 1)
				}
				j.cmd.Process.Signal(s)
			}
		}
	}
	return []teardownCase{
		// The ranks and their children ignore SIGTERM and the grace period is long: only
		// the second Ctrl-C, SIGKILL at once, can end the job before the hang guard.
		{"second SIGINT", []string{"-v", "--grace", "10m", "/bin/sh", "-c", `trap "" TERM; ` + family}, false,
			signal(syscall.SIGINT, syscall.SIGINT), 130, "SIGINT during the teardown: every rank was killed at once (SIGKILL)."},
		{"second SIGTERM", []string{"-v", "--grace", "10m", "/bin/sh", "-c", `trap "" TERM; ` + family}, false,
			signal(syscall.SIGTERM, syscall.SIGTERM), 143, "SIGTERM during the teardown: every rank was killed at once (SIGKILL)."},
		{"SIGHUP", []string{"/bin/sh", "-c", family}, false,
			signal(syscall.SIGHUP), 129, "ccrun was interrupted (SIGHUP received) and terminated the job."},
		// ccrun ... | head -1: the reader goes after one line; the ranks keep writing.
		{"closed output pipe", []string{"/bin/sh", "-c", `sh -c 'sleep 300; :' & i=0; while [ $i -lt 3000 ]; do echo ready; i=$((i+1)); sleep 0.1; done`}, true,
			nil, 141, "ccrun terminated the job: nothing reads ccrun's stdout any more: broken pipe."},
		{"kill -9 of ccrun", []string{"/bin/sh", "-c", family}, false,
			signal(syscall.SIGKILL), -1, ""},
		// The ranks exit 0 at once and leave children behind, one of them deaf to SIGTERM.
		{"leftover children", []string{"/bin/sh", "-c", `sleep 300 & (trap "" TERM; sleep 300) & echo started`}, false,
			nil, 0, ""},
		// Rank 1 fails once every other rank has started its family.
		{"a rank fails", []string{"--grace", "1s", "/bin/sh", "-c",
			fmt.Sprintf(`if [ "$CC_RANK" = 1 ]; then while [ $(ls "$0" | wc -l) -lt %d ]; do sleep 0.05; done; exit 3; fi; `, np-1) +
				`touch "$0/$CC_RANK"; ` + family, t.TempDir()}, false,
			nil, 3, fmt.Sprintf("%d other rank(s) were terminated by ccrun.", np-1)},
	}
}

// run starts ccrun with hostArgs and the case's arguments, ends the job as the case
// says, checks ccrun's exit status and summary, and that no process of the job is left.
func (tc teardownCase) run(t *testing.T, hostArgs []string) {
	var r, w *os.File
	if tc.pipe {
		var err error
		if r, w, err = os.Pipe(); err != nil {
			t.Fatal(err)
		}
		defer r.Close()
	}
	j, list := markedJob(t, w, append(hostArgs, tc.args...)...)
	if tc.pipe {
		w.Close()
		if line, err := bufio.NewReader(r).ReadString('\n'); err != nil || line != "ready\n" {
			t.Fatalf("first line %q, %v", line, err)
		}
		r.Close()
	}
	if tc.end != nil {
		tc.end(t, j, list)
	}
	if code := j.wait(t, 2*time.Minute); code != tc.code || !strings.Contains(j.err.String(), tc.summary) {
		t.Errorf("exit %d, stderr:\n%s\nwant %d and %q", code, j.err, tc.code, tc.summary)
	}
	checkNoneOf(t, list, 20*time.Second)
}
