package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/launch/hostfile"
	"github.com/seed-760dd1f1/cc/launch/proctest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// syncBuffer is a bytes.Buffer safe for the supervisor's writers and the test's reads, that
// also tells waiters when a line containing a marker has arrived.
type syncBuffer struct {
	mu   sync.Mutex
	b    bytes.Buffer
	wait map[string]chan struct{}
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Write(p)
	for m, ch := range s.wait {
		if strings.Contains(s.b.String(), m) {
			close(ch)
			delete(s.wait, m)
		}
	}
	return len(p), nil
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor returns a channel closed once the output contains marker.
func (s *syncBuffer) waitFor(marker string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	if strings.Contains(s.b.String(), marker) {
		close(ch)
		return ch
	}
	if s.wait == nil {
		s.wait = map[string]chan struct{}{}
	}
	s.wait[marker] = ch
	return ch
}

// localJob is a job of np ranks of /bin/sh -c script on this machine.
func localJob(np int, script string) (Options, *syncBuffer, *syncBuffer) {
	out, errb := &syncBuffer{}, &syncBuffer{}
	return Options{
		Hosts:     LocalHost(),
		Placement: Placement{NP: np, Oversubscribe: true}, // tests run more ranks than CPUs
		Argv:      []string{"/bin/sh", "-c", script},
		Environ:   []string{"PATH=" + os.Getenv("PATH"), "NCCL_ALGO=ring", "CC_JOB_SECRET=leak"},
		Env:       EnvRequest{Forward: DefaultForward},
		Output:    Output{Stdout: out, Stderr: errb},
		Grace:     500 * time.Millisecond,
		Timeout:   60 * time.Second, // a hang guard: a stuck test fails with a timeout report
	}, out, errb
}

// checkGone fails if a live process of any rank's process group is left after Run (the
// group has had its SIGKILL when Run returns; the kernel gets a bounded while to finish).
func checkGone(t *testing.T, rep *Report) {
	t.Helper()
	for _, st := range rep.Ranks {
		if st.Pid == 0 {
			continue
		}
		if left := proctest.WaitNone(func() []int { return proctest.InGroup(st.Pid) }, 10*time.Second); len(left) > 0 {
			syscall.Kill(-st.Pid, syscall.SIGKILL)
			t.Errorf("rank %d: alive in its process group %d after Run:\n%s", st.Slot.Rank, st.Pid, proctest.Describe(left))
		}
	}
}

func run(t *testing.T, ctx context.Context, o Options) *Report {
	t.Helper()
	rep, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	t.Cleanup(func() { checkGone(t, rep) })
	return rep
}

func TestRunSuccessEnv(t *testing.T) {
	o, out, _ := localJob(4, `echo "rank=$CC_RANK n=$CC_NRANKS local=$CC_LOCAL_RANK/$CC_LOCAL_NRANKS node=$CC_NODE_RANK `+
		`ompi=$OMPI_COMM_WORLD_RANK/$OMPI_COMM_WORLD_SIZE pmi=$PMI_RANK/$PMI_SIZE torch=$RANK/$WORLD_SIZE/$LOCAL_RANK/$LOCAL_WORLD_SIZE `+
		`algo=$NCCL_ALGO x=$XV secret=${#CC_JOB_SECRET} master=$MASTER_ADDR root=${CC_ROOT_ADDR%:*} job=${#CC_JOB_ID}"`)
	o.Env.X = []string{"XV=1"}
	o.Output.Label = true
	rep := run(t, context.Background(), o)
	if rep.Cause != nil || rep.ExitCode() != 0 {
		t.Fatalf("cause %+v, exit %d; output:\n%s", rep.Cause, rep.ExitCode(), out)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	sort.Strings(lines)
	for r, l := range lines {
		want := fmt.Sprintf("[%d] rank=%d n=4 local=%d/4 node=0 ompi=%d/4 pmi=%d/4 torch=%d/4/%d/4 algo=ring x=1 secret=32 master=127.0.0.1 root=127.0.0.1 job=16",
			r, r, r, r, r, r, r)
		if l != want {
			t.Errorf("line %d:\n got %s\nwant %s", r, l, want)
		}
	}
}

func TestRunRankExits3(t *testing.T) {
	o, _, _ := localJob(4, `if [ "$CC_RANK" = 2 ]; then exit 3; fi; exec sleep 60`)
	rep := run(t, context.Background(), o)
	c := rep.Cause
	if c == nil || c.Kind != CauseExit || c.Rank != 2 || rep.ExitCode() != 3 {
		t.Fatalf("cause %+v exit %d, want rank 2 exit 3", c, rep.ExitCode())
	}
	var sum bytes.Buffer
	rep.WriteSummary(&sum)
	for _, want := range []string{"The first rank to do so was:", "Rank:       2", "Host:       localhost",
		fmt.Sprintf("PID:        %d", rep.Ranks[2].Pid), "Exit code:  3", "other rank(s) were terminated by ccrun."} {
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum.String())
		}
	}
	for r, st := range rep.Ranks {
		// A rank whose start had not begun when rank 2 failed is never started.
		if r != 2 && st.Started && (st.Sent != syscall.SIGTERM || st.Exit.Signal != syscall.SIGTERM) {
			t.Errorf("rank %d: sent %v, exit %v; want SIGTERM and death by it", r, st.Sent, st.Exit)
		}
	}
}

func TestRunRankKilled(t *testing.T) {
	o, _, _ := localJob(3, `if [ "$CC_RANK" = 1 ]; then kill -9 $$; fi; exec sleep 60`)
	rep := run(t, context.Background(), o)
	if c := rep.Cause; c == nil || c.Kind != CauseExit || c.Rank != 1 || rep.ExitCode() != 137 {
		t.Fatalf("cause %+v exit %d, want rank 1 killed (137)", c, rep.ExitCode())
	}
	var sum bytes.Buffer
	rep.WriteSummary(&sum)
	want := fmt.Sprintf("ccrun noticed that rank 1 with PID %d on host localhost exited on\nsignal 9 (killed).", rep.Ranks[1].Pid)
	if !strings.Contains(sum.String(), want) {
		t.Errorf("summary:\n%s\nwant it to contain:\n%s", sum.String(), want)
	}
}

func TestRunTimeout(t *testing.T) {
	o, _, _ := localJob(2, `exec sleep 60`)
	o.Timeout = 300 * time.Millisecond
	rep := run(t, context.Background(), o)
	if c := rep.Cause; c == nil || c.Kind != CauseTimeout || rep.ExitCode() != 110 {
		t.Fatalf("cause %+v exit %d, want timeout 110", c, rep.ExitCode())
	}
	var sum bytes.Buffer
	rep.WriteSummary(&sum)
	for r := range 2 {
		want := fmt.Sprintf("%5d  %-20s %8d  running (has not joined the bootstrap)", r, "localhost", rep.Ranks[r].Pid)
		if !strings.Contains(sum.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, sum.String())
		}
	}
}

func TestRunInterrupt(t *testing.T) {
	o, out, _ := localJob(2, `echo ready$CC_RANK; exec sleep 60`)
	ctx, cancel := context.WithCancelCause(context.Background())
	ready := out.waitFor("ready1")
	ready0 := out.waitFor("ready0")
	go func() {
		<-ready
		<-ready0
		cancel(errors.New("interrupt"))
	}()
	rep := run(t, ctx, o)
	if c := rep.Cause; c == nil || c.Kind != CauseInterrupt || rep.ExitCode() != 130 || c.Err.Error() != "interrupt" {
		t.Fatalf("cause %+v exit %d, want interrupt 130", c, rep.ExitCode())
	}
	for r, st := range rep.Ranks {
		if st.Exit.Signal != syscall.SIGTERM {
			t.Errorf("rank %d ended with %v, want SIGTERM", r, st.Exit)
		}
	}
}

func TestRunGraceThenKill(t *testing.T) {
	// Rank 0 ignores SIGTERM (and so does its sleep): only SIGKILL after the grace ends it.
	dir := t.TempDir()
	o, _, _ := localJob(2, `if [ "$CC_RANK" = 0 ]; then trap '' TERM; touch `+dir+`/ready; exec sleep 60; fi
		i=0; while [ ! -e `+dir+`/ready ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done; exit 5`)
	rep := run(t, context.Background(), o)
	if rep.ExitCode() != 5 {
		t.Fatalf("exit %d, want 5 (cause %+v)", rep.ExitCode(), rep.Cause)
	}
	if st := rep.Ranks[0]; st.Sent != syscall.SIGKILL || st.Exit.Signal != syscall.SIGKILL {
		t.Errorf("rank 0: sent %v, exit %v; want SIGKILL", st.Sent, st.Exit)
	}
}

func TestRunForwardsUSR1(t *testing.T) {
	o, out, _ := localJob(2, `trap 'echo got-usr1-$CC_RANK; exit 0' USR1; echo ready$CC_RANK; while :; do sleep 0.05; done`)
	fwd := make(chan os.Signal, 1)
	o.Forward = fwd
	r0, r1 := out.waitFor("ready0"), out.waitFor("ready1")
	go func() {
		<-r0
		<-r1
		fwd <- syscall.SIGUSR1
	}()
	rep := run(t, context.Background(), o)
	if rep.Cause != nil {
		t.Fatalf("cause %+v; output:\n%s", rep.Cause, out)
	}
	for r := range 2 {
		if !strings.Contains(out.String(), fmt.Sprintf("got-usr1-%d", r)) {
			t.Errorf("rank %d did not get SIGUSR1; output:\n%s", r, out)
		}
	}
}

func TestRunBadInput(t *testing.T) {
	tests := []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"missing program", func(o *Options) { o.Argv = []string{"no-such-program-ccrun"} },
			`program "no-such-program-ccrun" not found on this machine (PATH=` + os.Getenv("PATH") + ")"},
		{"too many ranks", func(o *Options) {
			o.Placement = Placement{NP: 9}
			o.Hosts = []hostfile.Host{{Name: "localhost", Slots: 8}}
		},
			"9 ranks requested but the 1 hosts have 8 slots: use -np 8 or fewer, add slots, or add --oversubscribe"},
		{"bad -x", func(o *Options) { o.Env.X = []string{"9X=1"} },
			`-x "9X=1": bad variable name "9X": want letters, digits and _, not starting with a digit`},
		{"negative timeout", func(o *Options) { o.Timeout = -time.Second }, "bad timeout -1s: want 0 (none) or more"},
		{"remote host without spawner", func(o *Options) { o.Hosts[0].Name = "tb9" }, "host tb9 is not this machine and ccrun has no way to reach it"},
		{"no program", func(o *Options) { o.Argv = nil }, "no program given"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, _, _ := localJob(2, "exit 0")
			tt.mod(&o)
			rep, err := Run(context.Background(), o)
			if err == nil || err.Error() != tt.want {
				t.Errorf("Run error\n got %v\nwant %s", err, tt.want)
			}
			if rep != nil {
				t.Errorf("Run returned a report for bad input: %+v", rep)
			}
		})
	}
}

func TestRunOutputFiles(t *testing.T) {
	o, out, _ := localJob(2, `echo out$CC_RANK; echo err$CC_RANK >&2`)
	o.Output.Dir = t.TempDir()
	rep := run(t, context.Background(), o)
	if rep.Cause != nil {
		t.Fatalf("cause %+v", rep.Cause)
	}
	if out.String() != "" {
		t.Errorf("terminal got %q, want nothing with --output-filename", out)
	}
	for r := range 2 {
		for _, stream := range []string{"stdout", "stderr"} {
			b, err := os.ReadFile(fmt.Sprintf("%s/1/rank.%d/%s", o.Output.Dir, r, stream))
			if want := fmt.Sprintf("%s%d\n", stream[3:], r); err != nil || string(b) != want {
				t.Errorf("rank %d %s: got %q, %v; want %q", r, stream, b, err, want)
			}
		}
	}
}
