package launch

// The CollNet aggregation server as a supervised child that is not a rank
// (ccrun --collnet-server[=HOST]): Run starts it before the ranks, reads
// the port it listens on from its first line of output, gives every rank
// CC_COLLNET_SERVER=host:port, ends the job if it dies, and stops it once
// the ranks have ended. It runs through the same spawners as the ranks, so
// it has their lifeline: it never outlives ccrun.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/seed-760dd1f1/cc/runtime/collnet"
	"github.com/seed-760dd1f1/cc/runtime/wire"
)

// CollNetServer asks Run to start the CollNet aggregation server.
type CollNetServer struct {
	// Host is where it runs: this machine (IsLocal) or a host reached
	// through Remote, which need not run a rank.
	Host string
	// Argv runs the server. Its first line on stdout must end with
	// "listening on ADDR:PORT" (ADDR is ignored: the ranks reach Host);
	// its other lines go to ccrun's stderr.
	Argv []string
}

// CollNetListening is the text before the address on the server's first
// line of output.
const CollNetListening = "listening on "

// collnetStartTimeout bounds the wait for the server's address.
var collnetStartTimeout = 30 * time.Second

// ServerState is what ccrun knows about the aggregation server.
type ServerState struct {
	Host string
	Addr string // host:port, as the ranks reach it
	Pid  int
	// Died: it ended before ccrun stopped it (Exit says how), or ccrun
	// lost its host.
	Died bool
	Exit Exit
}

// name is "collnet aggregation server HOST:PORT", how reports name it.
func (s *ServerState) name() string { return "collnet aggregation server " + s.Addr }

// server is a started aggregation server.
type server struct {
	state   *ServerState
	proc    Proc
	exit    chan Exit // its Exit, once
	exited  bool      // exit has been received
	lost    <-chan error
	unwatch context.CancelFunc
}

// startServer starts the aggregation server, waits for its port and adds
// its address to the ranks' environment.
func (j *job) startServer(ctx context.Context) (*server, error) {
	cn := j.o.CollNet
	st := &ServerState{Host: cn.Host}
	// Its lines go to ccrun's stderr whole, as the ranks' do.
	stderr := &lockedWriter{w: j.o.Output.Stderr, name: "stderr"}
	prefix := []byte("collnet-server: ")
	out := &firstLine{rest: &lineWriter{dst: stderr, prefix: prefix}, got: make(chan string, 1)}
	spec := Spec{Slot: Slot{Rank: -1, Host: cn.Host}, Argv: cn.Argv, Env: []string{"CC_JOB_ID=" + j.id}, Secret: j.secret,
		Stdout: out, Stderr: &lineWriter{dst: stderr, prefix: prefix}}
	if !j.local[cn.Host] {
		if p := j.progOn[cn.Host]; p != "" {
			spec.Argv = append([]string{p}, cn.Argv[1:]...)
		}
	}
	p, err := j.spawner(cn.Host).Start(ctx, spec)
	if err != nil {
		return nil, fmt.Errorf("collnet aggregation server on %s: %w", cn.Host, err)
	}
	st.Pid = p.Pid()
	s := &server{state: st, proc: p, exit: make(chan Exit, 1), unwatch: func() {}}
	go func() { s.exit <- p.Wait() }()
	t := time.NewTimer(collnetStartTimeout)
	defer t.Stop()
	var line string
	select {
	case line = <-out.got:
	case ex := <-s.exit:
		return nil, fmt.Errorf("collnet aggregation server on %s ended before it listened: %s", cn.Host, ex)
	case <-t.C:
		err = fmt.Errorf("collnet aggregation server on %s did not say where it listens within %v", cn.Host, collnetStartTimeout)
	case <-ctx.Done():
		err = fmt.Errorf("collnet aggregation server on %s: %w", cn.Host, context.Cause(ctx))
	}
	if err == nil {
		_, addr, ok := strings.Cut(line, CollNetListening)
		_, port, perr := net.SplitHostPort(strings.TrimSpace(addr))
		if !ok || perr != nil {
			err = fmt.Errorf("collnet aggregation server on %s: first line %q: want %q and an address", cn.Host, line, CollNetListening)
		}
		st.Addr = net.JoinHostPort(j.serverHost(), port)
	}
	if err != nil {
		s.stop(j.o.Grace)
		return nil, err
	}
	// ccrun watches the server's link as the ranks do, so that it learns of
	// a cut-off host about when they do, not at SSH's keepalive timeout.
	wctx, unwatch := context.WithCancel(context.Background())
	s.unwatch = unwatch
	if s.lost, err = collnet.Watch(wctx, st.Addr, wire.Job{ID: j.id, Secret: []byte(j.secret)}); err != nil {
		s.stop(j.o.Grace)
		return nil, err
	}
	j.base = append(j.base, "CC_COLLNET_SERVER="+st.Addr)
	j.o.Logf("%s on %s (pid %d)", st.name(), cn.Host, st.Pid)
	return s, nil
}

// serverHost is the address the ranks reach the server's host by: for
// this machine, 127.0.0.1 when every rank is here, else the address remote
// hosts reach ccrun at; for a remote host, its address as ccrun sees it.
func (j *job) serverHost() string {
	h := j.o.CollNet.Host
	if !j.local[h] {
		_, remote := j.o.Remote.Addrs(h)
		return remote
	}
	for _, r := range j.remote {
		return j.rootHost[r.Name]
	}
	return "127.0.0.1"
}

// stop ends the server (SIGTERM, grace, SIGKILL, then at most killWait)
// unless it has ended, and records how it ended unless it had died
// before.
func (s *server) stop(grace time.Duration) {
	s.unwatch()
	if s.exited {
		return
	}
	s.exited = true
	var ex Exit
	select {
	case ex = <-s.exit:
		if !s.state.Died {
			s.state.Died, s.state.Exit = true, ex // it ended by itself, unseen by the supervisor
		}
		return
	default:
		s.proc.Signal(syscall.SIGTERM)
		select {
		case ex = <-s.exit:
		case <-time.After(grace):
			s.proc.Signal(syscall.SIGKILL)
			select {
			case ex = <-s.exit:
			case <-time.After(killWait):
				ex = Exit{Err: fmt.Errorf("no exit status %v after SIGKILL (host %s not answering)", killWait, s.state.Host)}
			}
		}
	}
	if !s.state.Died {
		s.state.Died, s.state.Exit = ex.Err != nil, ex // a lost host is a failure, not a stop
	}
}

// collnetFailWait is how long the ranks get, after the server died, to
// fail by themselves and say so (each notices within tcp.DuplexTimeout
// and waits up to 5 s for the job's verdict) before ccrun tears the job
// down. A variable for tests.
var collnetFailWait = 20 * time.Second

// serverDied records that the server ended by itself while the job ran:
// it is the job's cause, whatever a rank reported before (ranks fail
// because it is gone). The ranks then get collnetFailWait to fail by
// themselves, naming it, before the teardown.
func (s *supervisor) serverDied(ex Exit) {
	st := s.srv.state
	if st.Died {
		// Its connection was lost first; a status of its own says more
		// (killed, exited) than the lost connection, a lost host does not.
		if ex.Err == nil && s.rep.Cause != nil && s.rep.Cause.Kind == CauseServer {
			st.Exit = ex
			s.rep.Cause.Err = errors.New(ex.String())
		}
		return
	}
	st.Died, st.Exit = true, ex
	s.rep.Cause = &Cause{Kind: CauseServer, Rank: -1, Host: st.Host, Err: errors.New(ex.String())}
	if s.phase == running {
		s.serverWait = time.NewTimer(collnetFailWait)
	}
}

// letRanksFail says that the teardown waits: the server died and the
// ranks are failing by themselves (an interrupt or the timeout does not
// wait).
func (s *supervisor) letRanksFail(c *Cause) bool {
	return s.serverWait != nil && c.Kind != CauseInterrupt && c.Kind != CauseTimeout && c.Kind != CauseOutput
}

// serverExit is the server's exit channel while the supervisor watches it.
func (s *supervisor) serverExit() <-chan Exit {
	if s.srv == nil || s.srv.exited {
		return nil
	}
	return s.srv.exit
}

// serverLost is the server's watch channel until the server is known dead.
func (s *supervisor) serverLost() <-chan error {
	if s.srv == nil || s.srv.state.Died {
		return nil
	}
	return s.srv.lost
}

// firstLine hands the first line written to it to got, and every line,
// that one included, to rest.
type firstLine struct {
	rest *lineWriter
	got  chan string
	sent bool
	buf  []byte
}

func (f *firstLine) Write(b []byte) (int, error) {
	if f.sent {
		return f.rest.Write(b)
	}
	f.buf = append(f.buf, b...)
	if i := bytes.IndexByte(f.buf, '\n'); i >= 0 {
		f.sent = true
		f.got <- string(f.buf[:i])
		f.rest.Write(f.buf)
		f.buf = nil
	}
	return len(b), nil
}
