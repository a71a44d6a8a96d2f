package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/seed-760dd1f1/cc/launch"
)

// ServeOptions configures the agent's side.
type ServeOptions struct {
	// Environ is what the ranks inherit (the agent's login environment).
	Environ []string
	// Host names this host in messages (uname -n).
	Host string
	// BootID is the host's kernel boot id (hw.HostID with Host), sent in the hello; ""
	// when it could not be read.
	BootID string
	// Grace is the time between SIGTERM and SIGKILL when the session ends with ranks
	// still running (default 3 s, as the lifeline watcher).
	Grace time.Duration
	// Logf receives the agent's diagnostics (its stderr); nil discards them.
	Logf func(format string, args ...any)
}

// server is one agent session.
//
// Goroutines: the frame reader (ends when in ends; in the agent process it may stay
// blocked on stdin until exit); per start one goroutine (ends when the rank has started
// or failed to); per rank one waiter (ends when the rank has ended) and, with stdin, one
// feeder (ends when the rank's stdin is closed). Serve waits for all but the reader.
type server struct {
	o  ServeOptions
	fw *frameWriter

	mu     sync.Mutex
	ranks  map[int]*agentRank
	pmi    map[int]*pmiRelay // by rank, from the rank's start (before ranks has it)
	ending bool              // the session ended: kill what starts from now on
	wg     sync.WaitGroup
}

// agentRank is one rank the agent runs.
type agentRank struct {
	proc  launch.Proc
	stdin *stdinQueue // nil: /dev/null
}

// Serve runs one agent session: it sends its hello, checks ccrun's, then starts, signals
// and feeds the ranks ccrun asks for, sending their output and exit statuses, until in
// ends or ctx is done (ccrun closed the session, died, or the connection broke; the agent
// got SIGTERM). Then it sends SIGTERM to every rank's process group still running, waits
// up to Grace, sends SIGKILL, waits for them all and returns. The error says why the
// session ended, nil for a clean end of in.
func Serve(ctx context.Context, in io.Reader, out io.Writer, o ServeOptions) error {
	if o.Grace <= 0 {
		o.Grace = 3 * time.Second
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	s := &server{o: o, fw: &frameWriter{w: out}, ranks: map[int]*agentRank{}, pmi: map[int]*pmiRelay{}}
	if err := s.fw.json(tHello, helloMsg{Magic: magic, Version: Version, Host: o.Host, Pid: os.Getpid(), BootID: o.BootID, PMI: true}); err != nil {
		return fmt.Errorf("send hello: %w", err)
	}
	fr := newFrameReader(in)
	h, err := readHello(fr)
	if err != nil {
		return fmt.Errorf("read ccrun's hello: %w", err)
	}
	if h.Version != Version {
		return &VersionError{Theirs: h.Version}
	}
	type frame struct {
		typ byte
		p   []byte
		err error
	}
	frames := make(chan frame)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			typ, p, err := fr.next()
			select {
			case frames <- frame{typ, p, err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var silence <-chan time.Time // fires after keepaliveMissed intervals without a frame
	var timer *time.Timer
	limit := time.Duration(h.KeepaliveMs) * time.Millisecond * keepaliveMissed
	if limit > 0 {
		timer = time.NewTimer(limit)
		defer timer.Stop()
		silence = timer.C
	}
	var end error
	for end == nil {
		select {
		case <-ctx.Done():
			end = context.Cause(ctx)
		case <-silence:
			end = fmt.Errorf("no word from ccrun in %v", limit)
		case f := <-frames:
			if timer != nil {
				timer.Reset(limit)
			}
			switch {
			case errors.Is(f.err, io.EOF):
				end = io.EOF
			case f.err != nil:
				end = f.err
			default:
				end = s.handle(f.typ, f.p)
			}
		}
	}
	s.shutdown()
	if errors.Is(end, io.EOF) {
		return nil
	}
	return end
}

// handle acts on one frame from ccrun; an error ends the session.
func (s *server) handle(typ byte, p []byte) error {
	switch typ {
	case tStart:
		var m startMsg
		if err := decodeJSON(typ, p, &m); err != nil {
			return err
		}
		s.wg.Go(func() { s.start(m) })
	case tSignal:
		var m signalMsg
		if err := decodeJSON(typ, p, &m); err != nil {
			return err
		}
		if r := s.rank(m.Rank); r != nil {
			r.proc.Signal(syscall.Signal(m.Signal))
		}
	case tPing:
	case tPMI, tPMIEOF:
		return deliverPMI(typ, p, &s.mu, s.pmi)
	case tStdin, tStdinEOF:
		rank, _, b, err := decodeData(typ, p, false)
		if err != nil {
			return err
		}
		if r := s.rank(rank); r != nil && r.stdin != nil {
			if typ == tStdinEOF {
				r.stdin.close()
			} else if !r.stdin.put(b) {
				return fmt.Errorf("%w: rank %d: more stdin than the window of %d bytes", ErrBadFrame, rank, stdinWindow)
			}
		}
	default:
		return fmt.Errorf("%w: type %d from ccrun", ErrBadFrame, typ)
	}
	return nil
}

func (s *server) rank(r int) *agentRank {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ranks[r]
}

// start starts one rank with launch.Local, as ccrun starts its local ones, and answers.
func (s *server) start(m startMsg) {
	fail := func(code int, format string, args ...any) {
		s.fw.json(tStarted, startedMsg{Rank: m.Rank, Code: code, Msg: fmt.Sprintf(format, args...)})
	}
	if len(m.Argv) == 0 {
		fail(127, "ccrun: no program to run on host %s", s.o.Host)
		return
	}
	dir := m.Dir
	if dir != "" {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			if !m.DirOptional {
				fail(126, "ccrun: cannot enter directory %s on host %s", dir, s.o.Host)
				return
			}
			dir = "" // ccrun's directory does not exist here: the login directory
		}
	}
	if _, err := launch.LookProgram(m.Argv[0], dir); err != nil {
		fail(127, "ccrun: program %s not found on host %s (PATH=%s)", m.Argv[0], s.o.Host, os.Getenv("PATH"))
		return
	}
	r := &agentRank{}
	spec := launch.Spec{
		Slot: launch.Slot{Rank: m.Rank, Host: s.o.Host}, Argv: m.Argv, Env: m.Env, Dir: dir, Secret: m.Secret,
		Stdout: &outWriter{fw: s.fw, rank: m.Rank, stream: streamStdout},
		Stderr: &outWriter{fw: s.fw, rank: m.Rank, stream: streamStderr},
	}
	if m.Stdin {
		r.stdin = newStdinQueue(s.fw, m.Rank)
		spec.Stdin = r.stdin.pr
	}
	if m.PMI {
		spec.PMI = func(nc net.Conn) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.pmi[m.Rank] = newPMIRelay(s.fw, m.Rank, nc, &s.wg)
		}
	}
	p, err := launch.Local{Environ: s.o.Environ}.Start(context.Background(), spec)
	if err != nil {
		if r.stdin != nil {
			r.stdin.close()
		}
		fail(126, "ccrun: rank %d on host %s: %v", m.Rank, s.o.Host, err)
		return
	}
	r.proc = p
	s.mu.Lock()
	ending := s.ending
	s.ranks[m.Rank] = r
	s.mu.Unlock()
	if ending {
		p.Signal(syscall.SIGKILL)
	}
	s.fw.json(tStarted, startedMsg{Rank: m.Rank, Pid: p.Pid()})
	if r.stdin != nil {
		s.wg.Go(r.stdin.feed)
	}
	s.wg.Go(func() {
		ex := p.Wait()
		if r.stdin != nil {
			r.stdin.close()
		}
		s.mu.Lock()
		delete(s.ranks, m.Rank)
		s.mu.Unlock()
		s.fw.json(tExit, exitMsg{Rank: m.Rank, Code: ex.Code, Signal: int(ex.Signal)})
	})
}

// shutdown ends every rank still running: SIGTERM to its group, Grace, SIGKILL; then
// waits for every start and rank.
func (s *server) shutdown() {
	s.mu.Lock()
	s.ending = true
	procs := make([]launch.Proc, 0, len(s.ranks))
	for _, r := range s.ranks {
		procs = append(procs, r.proc)
	}
	for _, r := range s.pmi {
		r.close() // ccrun is gone: a rank's MPI call fails instead of waiting
	}
	s.mu.Unlock()
	if len(procs) > 0 {
		s.o.Logf("session ended: SIGTERM to %d rank(s), SIGKILL in %v", len(procs), s.o.Grace)
	}
	for _, p := range procs {
		p.Signal(syscall.SIGTERM)
	}
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	t := time.NewTimer(s.o.Grace)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	s.mu.Lock()
	for _, r := range s.ranks {
		r.proc.Signal(syscall.SIGKILL)
	}
	s.mu.Unlock()
	<-done
}

// outWriter sends one rank's stream as output frames. It never fails: output that cannot
// be sent (the session is gone) is dropped, so the rank never blocks on it.
type outWriter struct {
	fw     *frameWriter
	rank   int
	stream byte
	broken bool
}

func (w *outWriter) Write(p []byte) (int, error) {
	for b := p; len(b) > 0 && !w.broken; {
		n := min(len(b), dataChunk)
		if err := w.fw.data(tOutput, w.rank, w.stream, b[:n]); err != nil {
			w.broken = true
		}
		b = b[n:]
	}
	return len(p), nil
}

// stdinQueue holds the stdin bytes ccrun sent one rank and feeds them to the rank's pipe,
// acknowledging each chunk once written, so that ccrun sends more: ccrun keeps at most
// stdinWindow bytes unacknowledged, so the queue never holds more. A PMI relay uses one
// without acknowledgements (see pmiRelay).
type stdinQueue struct {
	fw     *frameWriter
	rank   int
	pr     *io.PipeReader
	w      io.WriteCloser // the rank's stdin pipe, or a PMI connection
	ack    bool           // send tStdinAck for what is written
	mu     sync.Mutex
	cond   *sync.Cond
	q      [][]byte
	held   int  // bytes in q
	closed bool // no more: EOF from ccrun, or the rank ended
}

func newStdinQueue(fw *frameWriter, rank int) *stdinQueue {
	pr, pw := io.Pipe()
	sq := newQueue(fw, rank, pw, true)
	sq.pr = pr
	return sq
}

// newQueue returns a queue that feeds w, acknowledging what it writes if ack.
func newQueue(fw *frameWriter, rank int, w io.WriteCloser, ack bool) *stdinQueue {
	sq := &stdinQueue{fw: fw, rank: rank, w: w, ack: ack}
	sq.cond = sync.NewCond(&sq.mu)
	return sq
}

// put queues b without blocking; false if ccrun overran the window.
func (sq *stdinQueue) put(b []byte) bool {
	sq.mu.Lock()
	defer sq.mu.Unlock()
	if sq.closed {
		return true // the rank's stdin is closed: drop
	}
	if sq.held+len(b) > stdinWindow {
		return false
	}
	sq.q = append(sq.q, b)
	sq.held += len(b)
	sq.cond.Signal()
	return true
}

// close ends the rank's stdin once what is queued has been written (EOF from ccrun), or
// drops it if the rank has ended.
func (sq *stdinQueue) close() {
	sq.mu.Lock()
	sq.closed = true
	sq.mu.Unlock()
	sq.cond.Signal()
}

// feed writes the queue to the rank's pipe until it is closed and empty, or until the
// rank stops reading.
func (sq *stdinQueue) feed() {
	defer sq.w.Close()
	for {
		sq.mu.Lock()
		for len(sq.q) == 0 && !sq.closed {
			sq.cond.Wait()
		}
		if len(sq.q) == 0 {
			sq.mu.Unlock()
			return
		}
		b := sq.q[0]
		sq.q = sq.q[1:]
		sq.held -= len(b)
		sq.mu.Unlock()
		if _, err := sq.w.Write(b); err != nil {
			sq.mu.Lock() // the rank's stdin is gone: drop what comes
			sq.closed, sq.q, sq.held = true, nil, 0
			sq.mu.Unlock()
			return
		}
		if sq.ack {
			sq.fw.data(tStdinAck, sq.rank, 0, binary.BigEndian.AppendUint32(nil, uint32(len(b))))
		}
	}
}
