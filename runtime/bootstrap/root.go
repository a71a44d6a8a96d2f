package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/seed-760dd1f1/cc/runtime/wire"
)

// flushTimeout bounds the last writes on a connection that is being closed (an abort
// message, a reject), so a peer that stopped reading cannot hold a goroutine.
const flushTimeout = 5 * time.Second

// Root is the rendezvous server of one job: ccrun hosts it, or rank 0 hosts it in-process.
//
// Goroutines, and how each ends:
//   - Serve's caller runs the accept loop; it ends when the listener is closed by Close
//     or by ctx ending, and then waits for all the others.
//   - one per accepted connection (serveConn): handshake, join, then the rank's read loop;
//     it ends on a handshake/join failure, when its rank leaves, aborts or is lost, or at
//     shutdown (which closes half-joined connections and moves joined ones' read deadlines
//     into the past).
//   - one writer per joined rank (writeLoop): drains the rank's outbox; it ends when its
//     serveConn closes the outbox, after flushing what is queued within flushTimeout.
type Root struct {
	ln     net.Listener
	nranks int
	job    wire.Job
	logf   func(format string, args ...any)
	events chan Event

	mu       sync.Mutex
	closed   bool
	serving  bool
	closing  chan struct{}          // closed by shutdown
	conns    map[net.Conn]*rankConn // every live accepted connection; nil until it joins
	ranks    []*rankConn            // index = rank; nil until that rank joins
	joined   int
	welcomed bool
	left     int
	rounds   map[uint64]*round
	abort    *RankError // the first failure; non-nil once the job is aborted

	eventsOnce sync.Once
	served     chan struct{} // closed when Serve returns
	wg         sync.WaitGroup
}

// rankConn is a joined rank. Fields other than info, conn, out and writerDone are guarded
// by Root.mu.
type rankConn struct {
	info       RankInfo
	conn       net.Conn
	out        *outbox
	writerDone chan struct{}

	next     uint64 // the next round this rank must contribute to
	gone     bool   // it left, aborted or was lost: nothing more is read from or sent to it
	left     bool   // it left cleanly
	reported bool   // its Failed, Lost or Left event was emitted
}

// round collects one AllGather or Barrier.
type round struct {
	op    op
	first int // the rank that opened the round, for mismatch messages
	parts [][]byte
	count int
}

// NewRoot returns a root for an nranks job that will accept on ln. logf receives one line
// per rejected connection and one when the job is aborted; it may be nil, and must not call
// back into the Root. Call Serve to start it.
func NewRoot(ln net.Listener, nranks int, job wire.Job, logf func(format string, args ...any)) *Root {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	r := &Root{
		ln:      ln,
		nranks:  nranks,
		job:     job,
		logf:    logf,
		closing: make(chan struct{}),
		conns:   make(map[net.Conn]*rankConn),
		rounds:  make(map[uint64]*round),
		served:  make(chan struct{}),
	}
	// Room for every event a job can produce, so emitting never blocks: Joined and one of
	// Failed/Lost/Left per rank, plus AllJoined, AllLeft and Aborted.
	r.events = make(chan Event, 2*max(nranks, 0)+3)
	if nranks >= 1 && nranks <= MaxRanks {
		r.ranks = make([]*rankConn, nranks)
	}
	return r
}

// Addr returns the address the root listens on.
func (r *Root) Addr() string { return r.ln.Addr().String() }

// Events returns the job's events. The channel is closed when Serve returns (or by Close
// if Serve never ran). It is buffered for every event a job can produce, so a slow reader
// never stalls the root.
func (r *Root) Events() <-chan Event { return r.events }

// Serve accepts and serves ranks until ctx ends or Close is called, then closes every
// connection and waits for its goroutines. A connection that fails the handshake or sends
// a bad join is dropped with one log line and does not disturb the job. Serve returns nil
// when stopped by ctx or Close, and an error if nranks is out of range or accepting fails
// for good.
func (r *Root) Serve(ctx context.Context) error {
	r.mu.Lock()
	if r.serving {
		r.mu.Unlock()
		return fmt.Errorf("bootstrap root %s: Serve called twice", r.Addr())
	}
	r.serving = true
	closed := r.closed
	r.mu.Unlock()
	defer close(r.served)
	defer r.closeEvents()
	if r.nranks < 1 || r.nranks > MaxRanks {
		r.shutdown()
		return fmt.Errorf("bootstrap root: nranks %d, want 1..%d", r.nranks, MaxRanks)
	}
	if closed {
		return nil
	}
	stop := context.AfterFunc(ctx, r.shutdown)
	defer stop()

	var err error
	backoff := 5 * time.Millisecond
	for {
		conn, aerr := r.ln.Accept()
		if aerr != nil {
			if r.isClosed() {
				break
			}
			if errors.Is(aerr, net.ErrClosed) {
				err = fmt.Errorf("bootstrap root %s: %w", r.Addr(), aerr)
				break
			}
			// Out of file descriptors and the like: wait and retry, as net/http does.
			r.logf("bootstrap root %s: accept: %v; retrying in %v", r.Addr(), aerr, backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-r.closing:
				t.Stop()
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		if !r.track(conn) {
			conn.Close()
			continue
		}
		r.wg.Add(1)
		go r.serveConn(conn)
	}
	r.shutdown()
	r.wg.Wait()
	return err
}

// Close stops the root: the listener and every connection close, ranks see the root lost.
// If Serve is running, Close waits for it to return.
func (r *Root) Close() error {
	r.shutdown()
	r.mu.Lock()
	serving := r.serving
	r.mu.Unlock()
	if serving {
		<-r.served
	} else {
		r.closeEvents()
	}
	return nil
}

func (r *Root) closeEvents() { r.eventsOnce.Do(func() { close(r.events) }) }

func (r *Root) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closed
}

// shutdown closes the listener, drops half-joined connections and ends the read loops of
// joined ranks (their writers then flush and their connections close).
func (r *Root) shutdown() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	close(r.closing)
	for c, rc := range r.conns {
		if rc == nil {
			c.Close()
		} else {
			c.SetReadDeadline(time.Unix(1, 0))
		}
	}
	r.mu.Unlock()
	r.ln.Close()
}

func (r *Root) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = nil
	return true
}

func (r *Root) untrack(c net.Conn) {
	r.mu.Lock()
	delete(r.conns, c)
	r.mu.Unlock()
}

// serveConn runs one accepted connection to its end; see Root for when that is.
func (r *Root) serveConn(conn net.Conn) {
	defer r.wg.Done()
	defer r.untrack(conn)
	defer conn.Close()
	tuneConn(conn)
	remote := conn.RemoteAddr()
	h, err := wire.Server(conn, r.job, time.Now().Add(wire.HandshakeTimeout))
	if err != nil {
		if r.isClosed() {
			r.logf("bootstrap root %s: shutting down: closed connection from %s before its handshake completed", r.Addr(), remote)
		} else {
			r.logf("bootstrap root %s: dropped a stranger: %v", r.Addr(), err)
		}
		return
	}
	if h.Kind != wire.KindBootstrap {
		r.logf("bootstrap root %s: dropped connection from %s: it opened a %s stream, want %s",
			r.Addr(), remote, h.Kind, wire.KindBootstrap)
		return
	}
	conn.SetReadDeadline(time.Now().Add(wire.HandshakeTimeout))
	t, p, err := readMsg(conn, maxFromRank)
	if err == nil && t != msgJoin {
		err = fmt.Errorf("%w: first message is %s, want join", errProtocol, t)
	}
	var nranks int
	var info RankInfo
	if err == nil {
		nranks, info, err = decodeJoin(p, int(h.Rank))
	}
	if err != nil {
		r.logf("bootstrap root %s: dropped rank %d from %s: join: %v", r.Addr(), h.Rank, remote, err)
		return
	}
	rc, reason := r.admit(conn, nranks, info)
	if rc == nil {
		conn.SetWriteDeadline(time.Now().Add(flushTimeout))
		conn.Write(encodeText(msgReject, reason))
		r.logf("bootstrap root %s: rejected rank %d from %s (host %s, pid %d): %s",
			r.Addr(), info.Rank, remote, info.Host, info.Pid, reason)
		return
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		rc.writeLoop()
	}()
	r.gone(rc, r.readLoop(rc))
	rc.out.close()
	conn.SetWriteDeadline(time.Now().Add(flushTimeout))
	<-rc.writerDone
}

// admit registers a joining rank, or says why it cannot join.
func (r *Root) admit(conn net.Conn, nranks int, info RankInfo) (*rankConn, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.closed:
		return nil, "the bootstrap root is shutting down"
	case nranks != r.nranks:
		return nil, fmt.Sprintf("rank %d says the job has %d ranks, the root was started for %d", info.Rank, nranks, r.nranks)
	case info.Rank < 0 || info.Rank >= r.nranks:
		return nil, fmt.Sprintf("rank %d is out of range, want 0..%d", info.Rank, r.nranks-1)
	}
	if o := r.ranks[info.Rank]; o != nil {
		return nil, fmt.Sprintf("rank %d has already joined from %s (host %s, pid %d)",
			info.Rank, o.conn.RemoteAddr(), o.info.Host, o.info.Pid)
	}
	// Under the lock, so that shutdown's read deadline cannot be overwritten.
	conn.SetReadDeadline(time.Time{})
	rc := &rankConn{info: info, conn: conn, out: newOutbox(), writerDone: make(chan struct{})}
	r.ranks[info.Rank] = rc
	r.conns[conn] = rc
	r.joined++
	r.emit(Event{Kind: EventJoined, Rank: info.Rank, Info: info})
	switch {
	case r.abort != nil:
		rc.out.put(encodeAborted(r.abort))
	case r.joined == r.nranks:
		r.welcomed = true
		peers := make([]RankInfo, r.nranks)
		for i, o := range r.ranks {
			peers[i] = o.info
		}
		r.broadcast(encodeWelcome(peers))
		r.emit(Event{Kind: EventAllJoined, Rank: -1})
	}
	return rc, ""
}

// readLoop reads a joined rank's messages until it leaves or aborts (nil) or the
// connection fails (the error).
func (r *Root) readLoop(rc *rankConn) error {
	for {
		t, p, err := readMsg(rc.conn, maxFromRank)
		if err != nil {
			return err
		}
		switch t {
		case msgGather:
			rnd, o, data, err := decodeGather(p)
			if err != nil {
				return err
			}
			r.contribute(rc, rnd, o, data)
		case msgAbort:
			cause, err := decodeText(p, "cause")
			if err != nil {
				return err
			}
			r.mu.Lock()
			r.fail(rc, Failed, cause) // before gone: rc gets the verdict (and the roll call) too
			rc.gone = true
			r.mu.Unlock()
			return nil
		case msgLeave:
			if len(p) != 0 {
				return fmt.Errorf("%w: leave with a %d-byte payload", errProtocol, len(p))
			}
			r.leave(rc)
			return nil
		default:
			return fmt.Errorf("%w: a rank sent %s", errProtocol, t)
		}
	}
}

// gone handles the end of a rank's read loop with err (nil after leave or abort).
func (r *Root) gone(rc *rankConn, err error) {
	if err == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || rc.gone {
		return
	}
	rc.gone = true
	if errors.Is(err, errProtocol) {
		r.fail(rc, Failed, "sent a malformed bootstrap message: "+err.Error())
		return
	}
	r.fail(rc, Lost, lostCause(err))
}

// fail reports rc's failure and aborts the job if it is the first. r.mu is held.
func (r *Root) fail(rc *rankConn, how Failure, cause string) {
	if rc.reported {
		return
	}
	rc.reported = true
	re := &RankError{Rank: rc.info.Rank, Host: rc.info.Host, Pid: rc.info.Pid, How: how, Cause: cause}
	kind := EventFailed
	if how == Lost {
		kind = EventLost
	}
	r.emit(Event{Kind: kind, Rank: rc.info.Rank, Info: rc.info, Err: re})
	r.abortJob(re, rc.info)
}

// abortJob records the job's first failure and sends it to every rank still connected,
// after the roll call if not every rank has joined. r.mu is held.
func (r *Root) abortJob(re *RankError, info RankInfo) {
	if r.abort != nil {
		return
	}
	r.abort = re
	clear(r.rounds)
	if !r.welcomed {
		// Some ranks never came: every rank still waiting learns which.
		r.broadcast(encodeRollCall(r.rollCall()))
	}
	r.broadcast(encodeAborted(re))
	r.emit(Event{Kind: EventAborted, Rank: re.Rank, Info: info, Err: re})
	r.logf("bootstrap root %s: job aborted: %v", r.Addr(), re)
}

// rollCall is every rank that has joined, in rank order. r.mu is held.
func (r *Root) rollCall() []RankInfo {
	var joined []RankInfo
	for _, o := range r.ranks {
		if o != nil {
			joined = append(joined, o.info)
		}
	}
	return joined
}

// leave handles a rank's clean close. A rank that others still wait for in a round has
// left early, which aborts the job.
func (r *Root) leave(rc *rankConn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rc.gone = true
	if rc.reported {
		return
	}
	if r.abort == nil {
		for rnd, rd := range r.rounds {
			if rc.next <= rnd {
				r.fail(rc, LeftEarly, fmt.Sprintf("closed its bootstrap client while rank %d waits in %s round %d", rd.first, rd.op, rnd))
				return
			}
		}
	}
	rc.left = true
	rc.reported = true
	r.left++
	r.emit(Event{Kind: EventLeft, Rank: rc.info.Rank, Info: rc.info})
	if r.left == r.nranks {
		r.emit(Event{Kind: EventAllLeft, Rank: -1})
	}
}

// contribute adds a rank's part to a round and, when the round is complete, sends the
// result to every rank.
func (r *Root) contribute(rc *rankConn, rnd uint64, o op, data []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.abort != nil || rc.reported {
		return
	}
	if !r.welcomed || rnd != rc.next {
		r.fail(rc, Failed, fmt.Sprintf("sent %s round %d, the root expected round %d (welcomed: %v)", o, rnd, rc.next, r.welcomed))
		return
	}
	rc.next++
	rd := r.rounds[rnd]
	if rd == nil {
		rd = &round{op: o, first: rc.info.Rank, parts: make([][]byte, r.nranks)}
		r.rounds[rnd] = rd
		// A rank that already left can never contribute to this round.
		for _, other := range r.ranks {
			if other.left && other.next <= rnd {
				r.abortJob(&RankError{Rank: other.info.Rank, Host: other.info.Host, Pid: other.info.Pid, How: LeftEarly,
					Cause: fmt.Sprintf("closed its bootstrap client before rank %d's %s round %d", rc.info.Rank, o, rnd)}, other.info)
				return
			}
		}
	}
	if rd.op != o {
		r.fail(rc, Failed, fmt.Sprintf("called %s for bootstrap round %d where rank %d called %s; every rank must make the same calls in the same order",
			o, rnd, rd.first, rd.op))
		return
	}
	rd.parts[rc.info.Rank] = data
	rd.count++
	if rd.count == r.nranks {
		delete(r.rounds, rnd)
		r.broadcast(encodeGathered(rnd, rd.parts))
	}
}

// broadcast queues msg for every rank still connected. r.mu is held.
func (r *Root) broadcast(msg []byte) {
	for _, o := range r.ranks {
		if o != nil && !o.gone {
			o.out.put(msg)
		}
	}
}

// emit queues an event without blocking (the buffer holds every event a job can make).
// r.mu is held.
func (r *Root) emit(ev Event) {
	select {
	case r.events <- ev:
	default:
		r.logf("bootstrap root %s: event buffer full, dropped %s event for rank %d", r.Addr(), ev.Kind, ev.Rank)
	}
}
