package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/seed-760dd1f1/cc/hw"
	"github.com/seed-760dd1f1/cc/launch"
	"github.com/seed-760dd1f1/cc/launch/sshspawn"
)

// Flag is the first argument that makes the ccrun binary an agent (a hidden mode: the
// agent reads frames on stdin and writes frames on stdout).
const Flag = "--ccrun-agent"

// findScript starts the agent on a remote host: ccrun at $1 (the path of ccrun on this
// machine, or the preloaded copy), else the ccrun in the remote PATH. It contains no
// single quote (sshspawn.OpenScript quotes it).
const findScript = `p=$1
if [ ! -x "$p" ]; then p=$(command -v ccrun) || { echo "no ccrun at $1 nor in PATH=$PATH on host $(uname -n)" >&2; exit 127; }; fi
exec "$p" ` + Flag

// SSHOptions configures NewSSH.
type SSHOptions struct {
	// Path is ccrun's own executable: the agent is looked for at the same path on each
	// host, then as ccrun in the host's PATH.
	Path string
	// Preload copies Path to each host first (--preload-binary) and runs that copy.
	Preload bool
	// Disabled: no agents, a session per rank everywhere (--no-agent).
	Disabled bool
	// Timeout bounds an agent's start and handshake (default 10 s); a host whose agent
	// does not answer in time gets a session per rank.
	Timeout time.Duration
	// Keepalive is the interval of ccrun's pings to each agent (default 5 s); an agent
	// that hears nothing for 3 intervals ends its ranks, even while its host is cut off.
	Keepalive time.Duration
	// Logf receives one line per host without an agent, and why.
	Logf func(format string, args ...any)
}

// SSH is a launch.Remote over sp that starts each host's ranks through one agent on that
// host, over one SSH session, and falls back to a session per rank (launch.SSH(sp)) on
// hosts where no agent can run.
type SSH struct {
	sp       *sshspawn.Spawner
	fallback launch.Remote
	o        SSHOptions

	mu    sync.Mutex
	conns map[string]*Conn
}

// NewSSH returns the Remote; nothing is contacted before Connect.
func NewSSH(sp *sshspawn.Spawner, o SSHOptions) *SSH {
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Keepalive <= 0 {
		o.Keepalive = 5 * time.Second
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	return &SSH{sp: sp, fallback: launch.SSH(sp), o: o, conns: map[string]*Conn{}}
}

// Connect connects to every host, then starts an agent on each, concurrently.
func (r *SSH) Connect(ctx context.Context, hosts []launch.RemoteHost) error {
	if err := r.fallback.Connect(ctx, hosts); err != nil {
		return err
	}
	if r.o.Disabled {
		r.o.Logf("--no-agent: one SSH session per rank")
		return nil
	}
	var wg sync.WaitGroup
	for _, h := range hosts {
		wg.Go(func() {
			c, err := r.dial(ctx, h.Name)
			if err != nil {
				r.o.Logf("%v: one SSH session per rank there", err)
				return
			}
			r.mu.Lock()
			r.conns[h.Name] = c
			r.mu.Unlock()
			r.o.Logf("host %s: agent pid %d on %s", h.Name, c.Agent.Pid, c.Agent.Host)
		})
	}
	wg.Wait()
	return ctx.Err()
}

// dial starts the agent on host and shakes hands with it.
func (r *SSH) dial(ctx context.Context, host string) (*Conn, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, r.o.Timeout, fmt.Errorf("no answer in %v", r.o.Timeout))
	defer cancel()
	path := r.o.Path
	if r.o.Preload {
		p, err := r.sp.PreloadAs(ctx, host, path, "ccrun")
		if err != nil {
			return nil, &Error{Host: host, Err: fmt.Errorf("--preload-binary: %w", err)}
		}
		path = p
	}
	stderr := &tail{max: 512}
	st, err := r.sp.OpenScript(ctx, host, findScript, "ccrun-agent", []string{path}, stderr)
	if err != nil {
		return nil, &Error{Host: host, Err: err}
	}
	c, err := Dial(ctx, host, st.Stdout, st.Stdin, st, r.o.Keepalive, func(err error) error { return streamEnd(host, st, stderr, err) })
	if err != nil {
		st.Wait() // the session is closed: this collects the agent's last words on stderr
		if s := stderr.String(); s != "" {
			err = fmt.Errorf("%w (%s)", err, s)
		}
		return nil, err
	}
	return c, nil
}

// streamEnd is the exit of every rank still running when an agent's stream ended: the
// connection's LostError when it broke, else what ended the agent.
func streamEnd(host string, st *sshspawn.Stream, stderr *tail, readErr error) error {
	if lost := st.Lost(); lost != nil {
		return lost
	}
	why := readErr
	if errors.Is(readErr, io.EOF) || errors.Is(readErr, io.ErrClosedPipe) {
		why = st.Wait()
		if lost := st.Lost(); lost != nil {
			return lost
		}
		if why == nil {
			why = errors.New("exit status 0")
		}
	}
	if s := stderr.String(); s != "" {
		why = fmt.Errorf("%w: %s", why, s)
	}
	return &LostError{Host: host, Err: why}
}

// LostError is an agent whose stream ended while it ran ranks, the SSH connection still up:
// it died (kill -9) or broke the protocol. Its ranks' fate is unknown to ccrun (they are
// killed by their lifelines).
type LostError struct {
	Host string
	Err  error
}

// Error reads "lost the agent on host tb3: killed by signal KILL".
func (e *LostError) Error() string {
	return fmt.Sprintf("lost the agent on host %s: %v", e.Host, e.Err)
}

// Unwrap returns the cause.
func (e *LostError) Unwrap() error { return e.Err }

// Addrs is the SSH connection's addresses.
func (r *SSH) Addrs(host string) (local, remote string) { return r.fallback.Addrs(host) }

// Preload copies the program (--preload-binary).
func (r *SSH) Preload(ctx context.Context, host, path string) (string, error) {
	return r.fallback.Preload(ctx, host, path)
}

// Start starts a rank through its host's agent, or in a session of its own.
func (r *SSH) Start(ctx context.Context, spec launch.Spec) (launch.Proc, error) {
	r.mu.Lock()
	c := r.conns[spec.Slot.Host]
	r.mu.Unlock()
	if c == nil {
		if spec.Stdin != nil {
			r.o.Logf("rank %d on %s: stdin is /dev/null (no agent there)", spec.Slot.Rank, spec.Slot.Host)
		}
		return r.fallback.Start(ctx, spec)
	}
	return c.Start(ctx, spec)
}

// HostID is the identity the host's agent sent in its hello, or where no agent runs (or
// an older one that does not send it) the answer to one command (sshspawn.HostID).
func (r *SSH) HostID(ctx context.Context, host string) (hw.HostID, error) {
	r.mu.Lock()
	c := r.conns[host]
	r.mu.Unlock()
	if c != nil && c.Agent.BootID != "" {
		id, err := hw.ParseHostID(c.Agent.Host, c.Agent.BootID)
		if err != nil {
			return id, fmt.Errorf("host %s: agent's hello: %w", host, err)
		}
		return id, nil
	}
	return r.sp.HostID(ctx, host)
}

// PMIFD reports whether host's ranks start through an agent that relays their PMI
// connections (launch.PMIRelay): they get PMI_FD, and ccrun opens no port for them.
func (r *SSH) PMIFD(host string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.conns[host]
	return c != nil && c.Agent.PMI
}

// ListenPMI opens a port on host's loopback forwarded to ccrun over its SSH connection
// (launch.PMIForwarder), for the ranks of a host without an agent.
func (r *SSH) ListenPMI(host string) (net.Listener, error) { return r.sp.ListenLoopback(host) }

var (
	_ launch.PMIRelay     = (*SSH)(nil)
	_ launch.PMIForwarder = (*SSH)(nil)
)

// HasAgent reports whether host's ranks start through an agent.
func (r *SSH) HasAgent(host string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conns[host] != nil
}

// Close ends every agent's session (each ends what is left of its ranks) and the
// connections.
func (r *SSH) Close() error {
	r.mu.Lock()
	conns := r.conns
	r.conns = map[string]*Conn{}
	r.mu.Unlock()
	for _, c := range conns {
		c.Shut()
	}
	// Closing the connections ends the streams of hosts that do not answer any more.
	err := r.fallback.Close()
	for _, c := range conns {
		c.Close()
	}
	return err
}

// tail keeps the last max bytes written to it: an agent's stderr, for messages.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.ReplaceAll(string(bytes.TrimSpace(t.b)), "\n", "; ")
}

var (
	_ launch.Remote         = (*SSH)(nil)
	_ launch.HostIdentifier = (*SSH)(nil)
)
