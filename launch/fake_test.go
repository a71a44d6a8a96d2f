package launch

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/launch/hostfile"
	"github.com/seed-760dd1f1/cc/runtime/bootstrap"
)

// fakeRemote runs each "remote" rank as a goroutine executing body, so the supervisor's
// handling of bootstrap events, lost hosts and failed starts can be tested without SSH.
type fakeRemote struct {
	body      func(p *fakeProc) Exit
	failStart map[int]error

	mu    sync.Mutex
	procs []*fakeProc
	wg    sync.WaitGroup
}

type fakeProc struct {
	spec Spec
	sigs chan syscall.Signal
	done chan struct{}
	once sync.Once
	exit Exit
}

func (p *fakeProc) finish(e Exit) {
	p.once.Do(func() { p.exit = e; close(p.done) })
}

func (p *fakeProc) Pid() int { return 1000 + p.spec.Slot.Rank }

func (p *fakeProc) Signal(sig syscall.Signal) error {
	select {
	case p.sigs <- sig:
	default:
	}
	return nil
}

func (p *fakeProc) Wait() Exit { <-p.done; return p.exit }

func (f *fakeRemote) Connect(context.Context, []RemoteHost) error { return nil }
func (f *fakeRemote) Addrs(string) (string, string)               { return "127.0.0.1", "127.0.0.1" }
func (f *fakeRemote) Preload(_ context.Context, _, p string) (string, error) {
	return p, nil
}

func (f *fakeRemote) Start(_ context.Context, spec Spec) (Proc, error) {
	if err := f.failStart[spec.Slot.Rank]; err != nil {
		return nil, err
	}
	p := &fakeProc{spec: spec, sigs: make(chan syscall.Signal, 8), done: make(chan struct{})}
	f.mu.Lock()
	f.procs = append(f.procs, p)
	f.mu.Unlock()
	f.wg.Go(func() { p.finish(f.body(p)) })
	return p, nil
}

// Close ends ranks that are still running, as closing SSH connections does.
func (f *fakeRemote) Close() error {
	f.mu.Lock()
	for _, p := range f.procs {
		p.finish(Exit{Err: errors.New("connection closed")})
	}
	f.mu.Unlock()
	return nil
}

// untilSignal is a rank body that runs until it gets SIGTERM or SIGKILL.
func untilSignal(p *fakeProc) Exit {
	for {
		select {
		case sig := <-p.sigs:
			if sig == syscall.SIGTERM || sig == syscall.SIGKILL {
				return Exit{Signal: sig}
			}
		case <-p.done:
			return p.exit
		}
	}
}

func fakeJob(np int, f *fakeRemote) Options {
	return Options{
		Hosts:     []hostfile.Host{{Name: "h1", Slots: np / 2}, {Name: "h2", Slots: np - np/2}},
		Placement: Placement{NP: np},
		Argv:      []string{"prog"},
		Output:    Output{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}},
		Grace:     100 * time.Millisecond,
		Timeout:   time.Minute, // hang guard
		Remote:    f,
		IsLocal:   func(string) bool { return false },
	}
}

func lookupIn(env []string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		for i := len(env) - 1; i >= 0; i-- {
			if v, ok := strings.CutPrefix(env[i], k+"="); ok {
				return v, true
			}
		}
		return "", false
	}
}

// TestBootstrapContract has fake ranks discover their identity from the environment ccrun
// gives them and join the root ccrun hosts, with the runtime's own bootstrap client. Rank 1
// aborts: the summary names it and its cause.
func TestBootstrapContract(t *testing.T) {
	f := &fakeRemote{}
	f.body = func(p *fakeProc) Exit {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		id, err := bootstrap.Discover(lookupIn(append(p.spec.Env, EnvJobSecret+"="+p.spec.Secret)))
		if err != nil {
			t.Errorf("rank %d: Discover: %v", p.spec.Slot.Rank, err)
			return Exit{Code: 9}
		}
		if id.Rank != p.spec.Slot.Rank || id.NRanks != 4 || id.LocalRank != p.spec.Slot.LocalRank || id.Source == "" {
			t.Errorf("rank %d: identity %+v", p.spec.Slot.Rank, id)
		}
		c, err := bootstrap.Join(ctx, id.RootAddr, id.Job, bootstrap.RankInfo{Rank: id.Rank, Host: p.spec.Slot.Host, Pid: p.Pid()}, id.NRanks, 3, 10*time.Millisecond)
		if err != nil {
			t.Errorf("rank %d: Join: %v", id.Rank, err)
			return Exit{Code: 9}
		}
		if id.Rank == 1 {
			c.Abort(errors.New("boom: out of buffers"))
			// Exit only once ccrun acts on the abort (its SIGTERM), so that the
			// abort is the first failure however the machine schedules the two
			// events.
			select {
			case <-p.sigs:
			case <-time.After(20 * time.Second):
			}
			return Exit{Code: 3}
		}
		select {
		case <-c.Done():
			c.Close()
			return Exit{Code: 2}
		case sig := <-p.sigs:
			c.Close()
			return Exit{Signal: sig}
		}
	}
	rep, err := Run(context.Background(), fakeJob(4, f))
	f.wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	c := rep.Cause
	if c == nil || c.Kind != CauseAbort || c.Rank != 1 || !strings.Contains(c.Err.Error(), "boom: out of buffers") {
		t.Fatalf("cause %+v, want rank 1's abort", c)
	}
	if rep.ExitCode() != 3 {
		t.Errorf("exit %d, want 3 (rank 1's status)", rep.ExitCode())
	}
	for r, st := range rep.Ranks {
		if !st.Joined {
			t.Errorf("rank %d not marked joined", r)
		}
	}
	var sum bytes.Buffer
	rep.WriteSummary(&sum)
	if want := "rank 1 on host h1 (PID 1001) failed and the job was aborted:\n  rank 1 (host h1, pid 1001) failed: boom: out of buffers\nrank 1 then ended with exit code 3\n"; !strings.Contains(sum.String(), want) {
		t.Errorf("summary:\n%s\nwant it to contain:\n%s", sum.String(), want)
	}
}

func TestLostHost(t *testing.T) {
	lost := errors.New("lost the SSH connection to host h2: no answer to 3 keepalives in 15s")
	f := &fakeRemote{body: func(p *fakeProc) Exit {
		if p.spec.Slot.Host == "h2" && p.spec.Slot.LocalRank == 0 {
			return Exit{Err: lost}
		}
		return untilSignal(p)
	}}
	rep, err := Run(context.Background(), fakeJob(4, f))
	f.wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Cause; c == nil || c.Kind != CauseLost || c.Host != "h2" || rep.ExitCode() != 1 {
		t.Fatalf("cause %+v exit %d, want host h2 lost, exit 1", c, rep.ExitCode())
	}
	var sum bytes.Buffer
	rep.WriteSummary(&sum)
	if want := "ccrun lost its connection to host h2 (ranks 2,3):\n  " + lost.Error(); !strings.Contains(sum.String(), want) {
		t.Errorf("summary:\n%s\nwant:\n%s", sum.String(), want)
	}
}

func TestStartFailure(t *testing.T) {
	f := &fakeRemote{body: untilSignal, failStart: map[int]error{2: errors.New("open session: administratively prohibited")}}
	rep, err := Run(context.Background(), fakeJob(4, f))
	f.wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Cause; c == nil || c.Kind != CauseStart || c.Rank != 2 || rep.ExitCode() != 1 {
		t.Fatalf("cause %+v exit %d, want rank 2 failing to start", c, rep.ExitCode())
	}
	var sum bytes.Buffer
	rep.WriteSummary(&sum)
	if want := "ccrun could not start rank 2 on host h2:\n  open session: administratively prohibited"; !strings.Contains(sum.String(), want) {
		t.Errorf("summary:\n%s", sum.String())
	}
	for r, st := range rep.Ranks {
		if st.Started && (!st.Exited || st.Exit.Signal != syscall.SIGTERM) {
			t.Errorf("rank %d: %+v, want ended by SIGTERM", r, st)
		}
	}
}

// TestUnresponsiveRankAbandoned: a rank whose host never reports an exit, even after
// SIGKILL, is given up on after killWait; the job still ends.
func TestUnresponsiveRankAbandoned(t *testing.T) {
	defer func(d time.Duration) { killWait = d }(killWait)
	killWait = 200 * time.Millisecond
	started := make(chan struct{}) // rank 1 runs before rank 0 fails, however loaded the machine
	f := &fakeRemote{body: func(p *fakeProc) Exit {
		if p.spec.Slot.Rank == 0 {
			<-started
			return Exit{Code: 5}
		}
		close(started)
		<-p.done // deaf to signals: only Close ends it
		return p.exit
	}}
	rep, err := Run(context.Background(), fakeJob(2, f))
	f.wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if rep.ExitCode() != 5 {
		t.Errorf("exit %d, want 5", rep.ExitCode())
	}
	st := rep.Ranks[1]
	if st.Sent != syscall.SIGKILL || st.Exit.Err == nil || !strings.Contains(st.Exit.Err.Error(), "no exit status 200ms after SIGKILL (host h2 not answering)") {
		t.Errorf("rank 1: %+v, want abandoned after SIGKILL", st)
	}
}

// runClean runs o, whose Remote runs f's fake ranks, and fails the test unless the job
// ran and ended without a cause.
func runClean(t *testing.T, o Options, f *fakeRemote) *Report {
	t.Helper()
	rep, err := Run(context.Background(), o)
	f.wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Cause != nil {
		t.Fatalf("cause %+v, want none", rep.Cause)
	}
	return rep
}
