package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/launch/hostfile"
	"github.com/seed-760dd1f1/cc/launch/proctest"
)

// markedJob is localJob with a marker in every rank's inherited environment.
func markedJob(t *testing.T, np int, script string) (Options, *syncBuffer, string) {
	o, out, _ := localJob(np, script)
	marker := fmt.Sprintf("CC_LAUNCH_TEST_MARK=%s-%d", t.Name(), os.Getpid())
	o.Environ = append(o.Environ, marker)
	t.Cleanup(func() {
		for _, p := range proctest.WithEnv(marker) {
			syscall.Kill(p, syscall.SIGKILL)
		}
	})
	return o, out, marker
}

// checkNoneLive fails if a process holding marker is still alive a bounded while after Run
// returned (Wait returns once each rank's watcher has sent its group SIGKILL; the kernel
// may take a moment to finish them).
func checkNoneLive(t *testing.T, marker string) {
	t.Helper()
	if left := proctest.WaitNone(func() []int { return proctest.WithEnv(marker) }, 10*time.Second); len(left) > 0 {
		t.Errorf("processes of the job alive after Run returned:\n%s", proctest.Describe(left))
	}
}

func TestLocalLeftoversKilled(t *testing.T) {
	// Each rank leaves a child and a SIGTERM-deaf grandchild behind and exits 0.
	o, _, marker := markedJob(t, 2, `sh -c '(trap "" TERM; sleep 300) & sleep 300; :' & echo started`)
	rep := run(t, context.Background(), o)
	if rep.Cause != nil {
		t.Fatalf("cause %+v, want none", rep.Cause)
	}
	checkNoneLive(t, marker)
}

func TestRunKillNow(t *testing.T) {
	// The ranks ignore SIGTERM and the grace period is long: only Kill ends them early.
	o, out, marker := markedJob(t, 2, `trap "" TERM; sleep 300 & echo ready$CC_RANK; wait`)
	o.Grace = 10 * time.Minute
	o.Timeout = 0
	kill := make(chan os.Signal, 1)
	o.Kill = kill
	ctx, cancel := context.WithCancelCause(context.Background())
	r0, r1 := out.waitFor("ready0"), out.waitFor("ready1")
	go func() {
		<-r0
		<-r1
		cancel(errors.New("SIGINT received"))
		kill <- syscall.SIGINT
	}()
	rep := run(t, ctx, o)
	if c := rep.Cause; c == nil || c.Kind != CauseInterrupt || rep.ExitCode() != 130 || rep.KillNow != "SIGINT" {
		t.Fatalf("cause %+v, exit %d, kill-now %q; want an interrupt, 130, SIGINT", c, rep.ExitCode(), rep.KillNow)
	}
	for r, st := range rep.Ranks {
		if st.Sent != syscall.SIGKILL || st.Exit.Signal != syscall.SIGKILL {
			t.Errorf("rank %d: sent %v, exit %v; want SIGKILL", r, st.Sent, st.Exit)
		}
	}
	var sum bytes.Buffer
	rep.WriteSummary(&sum)
	if want := "SIGINT during the teardown: every rank was killed at once (SIGKILL).\n\n2 rank(s) were terminated by ccrun."; !strings.Contains(sum.String(), want) {
		t.Errorf("summary:\n%s\nwant it to contain:\n%s", sum.String(), want)
	}
	checkNoneLive(t, marker)
}

// epipeWriter is a stdout whose reader has gone.
type epipeWriter struct{}

func (epipeWriter) Write([]byte) (int, error) {
	return 0, &os.PathError{Op: "write", Path: "/dev/stdout", Err: syscall.EPIPE}
}

func TestRunOutputClosed(t *testing.T) {
	o, _, marker := markedJob(t, 2, `sleep 300 & while :; do echo x; sleep 0.05; done`)
	o.Output.Stdout = epipeWriter{}
	rep := run(t, context.Background(), o)
	if c := rep.Cause; c == nil || c.Kind != CauseOutput || rep.ExitCode() != 141 {
		t.Fatalf("cause %+v, exit %d; want the closed output, 141", c, rep.ExitCode())
	}
	var sum bytes.Buffer
	rep.WriteSummary(&sum)
	if want := "ccrun terminated the job: nothing reads ccrun's stdout any more: broken pipe."; !strings.Contains(sum.String(), want) {
		t.Errorf("summary:\n%s\nwant it to contain %q", sum.String(), want)
	}
	checkNoneLive(t, marker)
}

func TestKilledCount(t *testing.T) {
	rank := func(r int, sent syscall.Signal, e Exit, exited bool) RankState {
		return RankState{Slot: Slot{Rank: r}, Sent: sent, Exit: e, Exited: exited, Started: true}
	}
	rep := &Report{Ranks: []RankState{
		rank(0, 0, Exit{Code: 3}, true),                                // the first failure
		rank(1, syscall.SIGTERM, Exit{Signal: syscall.SIGTERM}, true),  // killed: counted
		rank(2, syscall.SIGTERM, Exit{Code: 3}, true),                  // its own code: not
		rank(3, syscall.SIGTERM, Exit{Code: 0}, true),                  // had finished: not
		rank(4, syscall.SIGKILL, Exit{Code: 143}, true),                // a shell's SIGTERM: counted
		rank(5, syscall.SIGKILL, Exit{}, false),                        // never reported: counted
		rank(6, 0, Exit{Code: 0}, true),                                // not signalled: not
		rank(7, syscall.SIGKILL, Exit{Err: errors.New("lost")}, true),  // lost: counted
		rank(8, syscall.SIGTERM, Exit{Signal: syscall.SIGKILL}, true),  // killed: counted
		rank(9, syscall.SIGTERM, Exit{Code: 128 + 15 + 1}, true),       // its own code: not
		rank(10, syscall.SIGTERM, Exit{Code: 128 + 15}, true),          // counted
		rank(11, syscall.SIGTERM, Exit{Signal: syscall.SIGSEGV}, true), // died of a signal: counted
	}}
	if got, want := rep.killed(0), 7; got != want {
		t.Errorf("killed(0) = %d, want %d", got, want)
	}
}

func TestOneNode(t *testing.T) {
	local := func(h string) bool { return h == "localhost" || h == "me" || h == "10.0.0.9" }
	tests := []struct{ in, want string }{
		{"localhost,me", "localhost:2"},
		{"me:2,a,localhost:3", "me:5 a:1"},
		{"a:2,b", "a:2 b:1"},
		{"a,10.0.0.9,b,me", "a:1 10.0.0.9:2 b:1"},
	}
	for _, tt := range tests {
		var got []string
		for _, h := range OneNode(hosts(tt.in), local) {
			got = append(got, fmt.Sprintf("%s:%d", h.Name, h.Slots))
		}
		if g := strings.Join(got, " "); g != tt.want {
			t.Errorf("OneNode(%s) = %s, want %s", tt.in, g, tt.want)
		}
	}
	// One node: local ranks are numbered across the names.
	slots, err := Place(OneNode(hosts("localhost,me"), local), Placement{})
	if err != nil || layout(slots) != "localhost:0/0/2/0 localhost:1/1/2/0" {
		t.Errorf("placement %s, %v; want one node of two local ranks", layout(slots), err)
	}
}

func TestIsLocalName(t *testing.T) {
	name, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	short, _, _ := strings.Cut(name, ".")
	yes := []string{"localhost", "LOCALHOST", "127.0.0.1", "127.0.1.1", "::1", "[::1]", name, strings.ToUpper(name), short, short + ".some.domain"}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			yes = append(yes, n.IP.String()) // every address of this machine
		}
	}
	for _, h := range yes {
		if !IsLocalName(h) {
			t.Errorf("IsLocalName(%q) = false, want true", h)
		}
	}
	for _, h := range []string{"192.0.2.254", "no-such-host-ccrun", short + "x", "x" + short, "203.0.113.7"} {
		if IsLocalName(h) {
			t.Errorf("IsLocalName(%q) = true, want false", h)
		}
	}
}

func TestLocalHostIsOneSlotPerCPU(t *testing.T) {
	h := LocalHost()
	if len(h) != 1 || h[0] != (hostfile.Host{Name: "localhost", Slots: runtime.NumCPU()}) {
		t.Errorf("LocalHost() = %+v, want localhost with %d slots", h, runtime.NumCPU())
	}
	_, err := Place(h, Placement{NP: runtime.NumCPU() + 1})
	if err == nil || !strings.Contains(err.Error(), "add --oversubscribe") {
		t.Errorf("one rank more than CPUs: %v, want the --oversubscribe error", err)
	}
}

func TestWdir(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "prog")
	os.WriteFile(prog, []byte("#!/bin/sh\npwd\n"), 0o755)
	// A relative program is found in --wdir, where the rank runs.
	o, out, _ := localJob(1, "")
	o.Argv, o.Wdir = []string{"./prog"}, dir
	if rep := run(t, context.Background(), o); rep.Cause != nil || out.String() != dir+"\n" {
		t.Errorf("cause %+v, output %q; want %q", rep.Cause, out, dir+"\n")
	}
	for _, tt := range []struct{ wdir, prog, want string }{
		{filepath.Join(dir, "nope"), "true", "--wdir " + filepath.Join(dir, "nope") + ": no such file or directory"},
		{prog, "true", "--wdir " + prog + ": not a directory"},
		{os.TempDir(), "./no-such-prog-ccrun", `program "./no-such-prog-ccrun" not found on this machine (in --wdir ` + os.TempDir() + `)`},
	} {
		o, _, _ := localJob(1, "")
		o.Argv, o.Wdir = []string{tt.prog}, tt.wdir
		if _, err := Run(context.Background(), o); err == nil || err.Error() != tt.want {
			t.Errorf("--wdir %s %s: error\n got %v\nwant %s", tt.wdir, tt.prog, err, tt.want)
		}
	}
}
