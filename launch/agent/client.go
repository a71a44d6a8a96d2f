package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/seed-760dd1f1/cc/launch"
)

// Conn is ccrun's end of one agent's stream: a launch.Spawner for the agent's host.
//
// Goroutines: the frame reader (ends when the stream ends; then every rank not yet ended
// gets the stream's end as its exit) and per rank with stdin a sender (ends at the end of
// the rank's stdin or of the rank).
type Conn struct {
	host   string
	fw     *frameWriter
	fr     *frameReader
	closer io.Closer
	ended  func(error) error
	// Agent is what the agent said of itself in its hello.
	Agent Info

	mu      sync.Mutex
	starts  map[int]chan startedMsg
	procs   map[int]*remoteProc
	pmi     map[int]*pmiRelay // ranks whose PMI connection the agent relays
	err     error             // why the stream ended; set once, under mu, before done closes
	done    chan struct{}     // closed when the stream has ended
	wg      sync.WaitGroup
	closeMu sync.Once
}

// Dial shakes hands with an agent over r (its output) and w (its input): both hellos
// cross at once, so this costs one round trip. c closes the stream (ctx's end closes it
// too). ended turns the reason the stream ended (a read error, io.EOF) into the error
// every rank still running reports as its exit (a lost host). The error of Dial is an
// *Error: no agent answered, or one of another version.
//
// Every keepalive (if above 0) ccrun sends a ping, and the agent ends the session after
// keepaliveMissed intervals without a frame.
func Dial(ctx context.Context, host string, r io.Reader, w io.Writer, c io.Closer, keepalive time.Duration, ended func(error) error) (*Conn, error) {
	cn := &Conn{
		host: host, fw: &frameWriter{w: w}, fr: newFrameReader(r), closer: c, ended: ended,
		starts: map[int]chan startedMsg{}, procs: map[int]*remoteProc{}, pmi: map[int]*pmiRelay{}, done: make(chan struct{}),
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	sent := make(chan error, 1)
	go func() {
		sent <- cn.fw.json(tHello, helloMsg{Magic: magic, Version: Version, KeepaliveMs: keepalive.Milliseconds()})
	}()
	h, err := readHello(cn.fr)
	if !stop() {
		err = context.Cause(ctx)
	}
	if err == nil && h.Version != Version {
		// Before the send's result: an agent of another version may
		// answer and exit before our hello reaches it, and its version
		// says more than the failed send.
		err = &VersionError{Theirs: h.Version}
	}
	if err == nil {
		err = <-sent
	}
	if err != nil {
		c.Close()
		return nil, &Error{Host: host, Err: err}
	}
	cn.Agent = Info{Host: h.Host, Pid: h.Pid, BootID: h.BootID, PMI: h.PMI}
	cn.wg.Go(cn.read)
	if keepalive > 0 {
		cn.wg.Go(func() { cn.ping(keepalive) })
	}
	return cn, nil
}

// ping sends a ping every interval until the stream ends.
func (c *Conn) ping(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
			c.fw.write(tPing)
		}
	}
}

// Info is an agent as its hello describes it.
type Info struct {
	Host string // its host name (uname -n)
	Pid  int    // its process id there
	// BootID is its host's boot id: with Host, the host's hw.HostID ("" from an agent
	// older than the field).
	BootID string
	// PMI: it relays its ranks' PMI connections (PMI_FD; false from an older agent).
	PMI bool
}

// Error is an agent that could not be reached on a host: ccrun falls back to a session
// per rank there.
type Error struct {
	Host string
	Err  error
}

// Error reads "host tb3: no agent: EOF (...)".
func (e *Error) Error() string { return fmt.Sprintf("host %s: no agent: %v", e.Host, e.Err) }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// read dispatches the agent's frames until the stream ends.
func (c *Conn) read() {
	var err error
	for err == nil {
		var typ byte
		var p []byte
		if typ, p, err = c.fr.next(); err == nil {
			err = c.handle(typ, p)
		}
	}
	c.closer.Close()
	err = c.ended(err)
	c.mu.Lock()
	c.err = err
	close(c.done)
	procs := c.procs
	c.procs = map[int]*remoteProc{}
	for _, r := range c.pmi {
		r.close()
	}
	c.mu.Unlock()
	for _, p := range procs {
		p.end(launch.Exit{Err: err})
	}
}

func (c *Conn) handle(typ byte, p []byte) error {
	switch typ {
	case tStarted:
		var m startedMsg
		if err := decodeJSON(typ, p, &m); err != nil {
			return err
		}
		c.mu.Lock()
		ch := c.starts[m.Rank]
		delete(c.starts, m.Rank)
		c.mu.Unlock()
		if ch == nil {
			return fmt.Errorf("%w: started rank %d, which ccrun did not start", ErrBadFrame, m.Rank)
		}
		ch <- m
	case tOutput:
		rank, stream, b, err := decodeData(typ, p, true)
		if err != nil {
			return err
		}
		if pr := c.proc(rank); pr != nil {
			w := pr.stdout
			if stream == streamStderr {
				w = pr.stderr
			}
			w.Write(b)
		}
	case tStdinAck:
		rank, _, b, err := decodeData(typ, p, false)
		if err != nil || len(b) != 4 {
			return fmt.Errorf("%w: stdin ack of %d bytes", ErrBadFrame, len(p))
		}
		if pr := c.proc(rank); pr != nil && pr.window != nil {
			pr.window.ack(int(binary.BigEndian.Uint32(b)))
		}
	case tPMI, tPMIEOF:
		return deliverPMI(typ, p, &c.mu, c.pmi)
	case tExit:
		var m exitMsg
		if err := decodeJSON(typ, p, &m); err != nil {
			return err
		}
		c.mu.Lock()
		pr := c.procs[m.Rank]
		delete(c.procs, m.Rank)
		c.mu.Unlock()
		if pr != nil {
			pr.end(launch.Exit{Code: m.Code, Signal: syscall.Signal(m.Signal)})
		}
	default:
		return fmt.Errorf("%w: type %d from the agent", ErrBadFrame, typ)
	}
	return nil
}

func (c *Conn) proc(rank int) *remoteProc {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.procs[rank]
}

// Start starts spec on the agent's host; it returns once the agent has answered. A rank
// the agent could not start (no such program or directory) is a Proc with pid 0 that has
// printed the agent's message on its stderr and exits with 127 or 126, as a rank started
// by a session of its own.
//
// ctx ends a start not yet sent. Once sent, Start waits for the agent's answer (it
// answers at once, or the connection ends): a rank started while ccrun tears the job
// down must reach the supervisor, which signals it and counts it, rather than be
// killed out of its sight.
func (c *Conn) Start(ctx context.Context, spec launch.Spec) (launch.Proc, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("no program to run")
	}
	rank := spec.Slot.Rank
	p := &remoteProc{c: c, rank: rank, stdout: orDiscard(spec.Stdout), stderr: orDiscard(spec.Stderr), exited: make(chan struct{})}
	if spec.Stdin != nil {
		p.window = newWindow(stdinWindow)
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("host %s: start: %w", c.host, context.Cause(ctx))
	}
	ch := make(chan startedMsg, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return nil, c.err
	}
	c.starts[rank] = ch
	c.procs[rank] = p
	// The rank's PMI bytes may come before the agent's answer: the relay is ready first.
	var server net.Conn
	relayPMI := spec.PMI != nil && c.Agent.PMI
	if relayPMI {
		var mine net.Conn
		mine, server = net.Pipe()
		c.pmi[rank] = newPMIRelay(c.fw, rank, mine, &c.wg)
	}
	c.mu.Unlock()
	err := c.fw.json(tStart, startMsg{Rank: rank, Argv: spec.Argv, Env: spec.Env, Dir: spec.Dir,
		DirOptional: spec.DirOptional, Secret: spec.Secret, Stdin: spec.Stdin != nil, PMI: relayPMI})
	if err == nil {
		select {
		case m := <-ch:
			if relayPMI && m.Pid != 0 {
				spec.PMI(server)
			} else if relayPMI {
				c.dropPMI(rank, server)
			}
			return c.started(p, m, spec.Stdin), nil
		case <-c.done:
			err = c.err
		}
	}
	c.mu.Lock()
	delete(c.starts, rank)
	delete(c.procs, rank)
	c.mu.Unlock()
	if relayPMI {
		c.dropPMI(rank, server)
	}
	return nil, fmt.Errorf("host %s: start: %w", c.host, err)
}

// dropPMI ends the relay of a rank that did not start, and the server's end of it.
func (c *Conn) dropPMI(rank int, server net.Conn) {
	c.mu.Lock()
	r := c.pmi[rank]
	delete(c.pmi, rank)
	c.mu.Unlock()
	r.close()
	server.Close()
}

// started completes a start with the agent's answer.
func (c *Conn) started(p *remoteProc, m startedMsg, stdin io.Reader) launch.Proc {
	if m.Pid == 0 {
		c.mu.Lock()
		delete(c.procs, p.rank)
		c.mu.Unlock()
		io.WriteString(p.stderr, strings.TrimSuffix(m.Msg, "\n")+"\n")
		p.end(launch.Exit{Code: m.Code})
		return p
	}
	p.pid = m.Pid
	if stdin != nil {
		c.wg.Go(func() { p.sendStdin(stdin) })
	}
	return p
}

// Close ends the stream: the agent ends every rank still running. Ranks not yet ended
// report the end of the stream. It waits for the stream's goroutines (see Shut).
func (c *Conn) Close() error {
	c.Shut()
	c.wg.Wait()
	return nil
}

// Shut closes the stream without waiting for the agent to close its end.
func (c *Conn) Shut() { c.closer.Close() }

// Done is closed when the stream has ended.
func (c *Conn) Done() <-chan struct{} { return c.done }

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// remoteProc is a rank an agent runs.
type remoteProc struct {
	c              *Conn
	rank, pid      int
	stdout, stderr io.Writer
	window         *window // nil: no stdin
	once           sync.Once
	exit           launch.Exit
	exited         chan struct{}
}

// Pid is the rank's pid on the agent's host; 0 if it could not start.
func (p *remoteProc) Pid() int { return p.pid }

// Signal asks the agent to signal the rank's process group; after the stream's end it
// does nothing (the rank reports the lost stream).
func (p *remoteProc) Signal(sig syscall.Signal) error {
	select {
	case <-p.c.done:
		return nil
	case <-p.exited:
		return nil
	default:
	}
	if p.pid == 0 {
		return nil
	}
	p.c.fw.json(tSignal, signalMsg{Rank: p.rank, Signal: int(sig)})
	return nil
}

// Wait returns the rank's exit as the agent reported it, or the stream's end.
func (p *remoteProc) Wait() launch.Exit {
	<-p.exited
	return p.exit
}

func (p *remoteProc) end(ex launch.Exit) {
	p.once.Do(func() {
		p.exit = ex
		if p.window != nil {
			p.window.close()
		}
		close(p.exited)
	})
}

// sendStdin sends in to the rank, at most the window ahead of the agent's acks, then EOF.
// It ends early when the rank ends; in is then closed, if it can be.
func (p *remoteProc) sendStdin(in io.Reader) {
	p.c.wg.Go(func() {
		<-p.exited
		if c, ok := in.(io.Closer); ok {
			c.Close()
		}
	})
	buf := make([]byte, dataChunk)
	for {
		n, err := in.Read(buf)
		if n > 0 {
			if !p.window.take(n) {
				return
			}
			if p.c.fw.data(tStdin, p.rank, 0, buf[:n]) != nil {
				return
			}
		}
		if err != nil {
			select {
			case <-p.exited:
			default:
				p.c.fw.data(tStdinEOF, p.rank, 0, nil)
			}
			return
		}
	}
}

// window counts the stdin bytes sent to a rank and not yet acknowledged.
type window struct {
	mu     sync.Mutex
	cond   *sync.Cond
	free   int
	closed bool
}

func newWindow(n int) *window {
	w := &window{free: n}
	w.cond = sync.NewCond(&w.mu)
	return w
}

// take waits for n bytes of room; false once the window is closed.
func (w *window) take(n int) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.free < n && !w.closed {
		w.cond.Wait()
	}
	if w.closed {
		return false
	}
	w.free -= n
	return true
}

func (w *window) ack(n int) {
	w.mu.Lock()
	w.free += n
	w.mu.Unlock()
	w.cond.Broadcast()
}

func (w *window) close() {
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	w.cond.Broadcast()
}
