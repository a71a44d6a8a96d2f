package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed-760dd1f1/cc/runtime/wire"
)

// closeTimeout bounds Close and Abort: the time to send the last message and see the root
// hang up.
const closeTimeout = 5 * time.Second

// RankInfo is what a rank tells the others about itself when it joins.
type RankInfo struct {
	Rank   int
	Addr   string // the rank's data listen address, host:port
	HostID string // identity of the host (hostname + boot id), to find peers on the same host
	Host   string // hostname, for messages
	Pid    int
	// Machine is the boot id of the kernel the rank runs on, empty if unknown.
	// Ranks of one machine share its cores whatever their host identity says:
	// fake hosts (CC_HOST_ID), containers and network namespaces of one
	// machine have their own host names but one kernel.
	Machine string
	// CPUs is the rank's Cpus_allowed_list in the kernel's list form
	// ("0-3,8-11"), empty if unknown: ranks bound to CPUs (taskset, a
	// cpuset) share those, not every core of their machine.
	CPUs string
}

// Client is one rank's connection to the root; it is also the rank's lifeline: when the
// root or any rank fails, Done closes.
//
// One goroutine per Client (readLoop) reads the root's messages. It ends when the
// connection closes: after Close or Abort (which close it), or when the root hangs up or is
// lost.
type Client struct {
	conn   net.Conn
	addr   string
	me     RankInfo
	nranks int
	peers  []RankInfo

	wmu     sync.Mutex    // serialises writes, so rounds reach the root in order
	round   atomic.Uint64 // the next round number; advanced under wmu
	wbroken bool          // a write failed or timed out: the stream is unusable (under wmu)

	mu      sync.Mutex
	waiters map[uint64]chan [][]byte
	err     error
	done    chan struct{}

	readerDone chan struct{}
	finishOnce sync.Once
}

// Join connects to the root at rootAddr (retrying the connect retryCnt times with linear
// backoff, see wire.Dial), registers me as rank me.Rank of nranks, and waits until every rank
// has joined. ctx bounds the whole wait: a rank that cannot reach the root says so, naming
// its address; a rank that reached it aborts the job, citing ctx's cause, and fails with a
// *MissingError naming the ranks that never joined, as the root answers. A root that refuses
// the join (duplicate rank, wrong nranks, rank out of range) or a job that is aborted
// meanwhile makes Join fail with the root's reason (a *MissingError around it if the job was
// aborted before every rank joined).
func Join(ctx context.Context, rootAddr string, job wire.Job, me RankInfo, nranks int, retryCnt int, sleep time.Duration) (*Client, error) {
	if err := checkJoin(me, nranks); err != nil {
		return nil, err
	}
	conn, err := wire.Dial(ctx, rootAddr, job, wire.Hello{Kind: wire.KindBootstrap, Rank: int32(me.Rank)}, retryCnt, sleep)
	if err != nil {
		return nil, fmt.Errorf("rank %d: could not reach the bootstrap root at %s: %w", me.Rank, rootAddr, err)
	}
	tuneConn(conn)
	peers, err := welcome(ctx, conn, rootAddr, me, nranks)
	if err != nil {
		conn.Close()
		var missing *MissingError
		if errors.As(err, &missing) { // it names the root
			return nil, fmt.Errorf("rank %d: %w", me.Rank, err)
		}
		return nil, fmt.Errorf("rank %d: join bootstrap root %s: %w", me.Rank, rootAddr, err)
	}
	c := &Client{
		conn:       conn,
		addr:       rootAddr,
		me:         peers[me.Rank],
		nranks:     nranks,
		peers:      peers,
		waiters:    make(map[uint64]chan [][]byte),
		done:       make(chan struct{}),
		readerDone: make(chan struct{}),
	}
	go c.readLoop()
	return c, nil
}

func checkJoin(me RankInfo, nranks int) error {
	switch {
	case nranks < 1 || nranks > MaxRanks:
		return fmt.Errorf("bootstrap join: nranks %d, want 1..%d", nranks, MaxRanks)
	case me.Rank < 0 || me.Rank >= nranks:
		return fmt.Errorf("bootstrap join: rank %d, want 0..%d", me.Rank, nranks-1)
	}
	for _, f := range []struct{ name, v string }{{"addr", me.Addr}, {"host id", me.HostID}, {"host", me.Host}, {"machine", me.Machine}, {"cpus", me.CPUs}} {
		if len(f.v) > MaxInfoString {
			return fmt.Errorf("bootstrap join: rank %d: %s is %d bytes, at most %d allowed", me.Rank, f.name, len(f.v), MaxInfoString)
		}
	}
	return nil
}

// rollCallTimeout bounds the wait for the root's answer once a rank gives up joining; a
// live root answers at once.
const rollCallTimeout = time.Second

// welcome sends the join and waits for the peer table. If ctx ends first, the rank gives up
// (see giveUp). A job aborted before every rank joined makes it fail with a *MissingError.
func welcome(ctx context.Context, conn net.Conn, rootAddr string, me RankInfo, nranks int) ([]RankInfo, error) {
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	var joined []RankInfo // the root's roll call, once it sends one
	var peers []RankInfo
	_, err := conn.Write(encodeJoin(nranks, me))
	if err != nil {
		err = fmt.Errorf("send join: %w", err)
	} else {
		peers, err = awaitWelcome(conn, nranks, &joined)
	}
	if !stop() && (err == nil || errors.Is(err, os.ErrDeadlineExceeded)) {
		// ctx ended (the deadline is poisoned even if the welcome came as it did).
		peers, err = nil, giveUp(conn, context.Cause(ctx), nranks, &joined)
	}
	if err != nil && joined != nil {
		return nil, &MissingError{Addr: rootAddr, NRanks: nranks, Joined: joined, Err: err}
	}
	return peers, err
}

// awaitWelcome reads the root's answer to the join: the peer table, or a refusal, or the
// job's abort (after which the roll call, if one came first, is in *joined).
func awaitWelcome(conn net.Conn, nranks int, joined *[]RankInfo) ([]RankInfo, error) {
	for {
		t, p, err := readMsg(conn, maxFromRoot(nranks))
		if err != nil {
			return nil, fmt.Errorf("wait for the other ranks: %w", err)
		}
		switch t {
		case msgWelcome:
			return decodeWelcome(p, nranks)
		case msgRollCall:
			if *joined, err = decodeRollCall(p, nranks); err != nil {
				return nil, err
			}
			continue
		case msgReject:
			reason, err := decodeText(p, "reason")
			if err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("the root refused this rank: %s", reason)
		case msgAborted:
			re, err := decodeAborted(p, nranks)
			if err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("job aborted while joining: %w", re)
		}
		return nil, fmt.Errorf("%w: got %s while waiting for welcome", errProtocol, t)
	}
}

// giveUp ends a join that ctx cut short: the rank aborts the job, citing cause (so that the
// other ranks learn why, rather than that it was lost), and reads the root's answer for up
// to rollCallTimeout: the roll call, then the verdict. It returns cause, saying how many
// ranks it waited for when the root did not say which had joined.
//
// It reads even when the abort could not be written: a root whose own deadline came first
// (rank 0's, in the same process) has sent its roll call and verdict and hung up, with a
// reset when this rank's bytes were unread; what it sent is still in this socket's buffer.
// Reading only after a write that worked made which error a rank printed depend on whose
// deadline came first (a CI run: "the root did not say which had joined").
func giveUp(conn net.Conn, cause error, nranks int, joined *[]RankInfo) error {
	conn.SetDeadline(time.Now().Add(rollCallTimeout))
	conn.Write(encodeText(msgAbort, "gave up waiting for every rank to join: "+cause.Error()))
	awaitWelcome(conn, nranks, joined) // the verdict, the connection's end or the deadline
	if *joined == nil {
		return fmt.Errorf("%w (waited for all %d ranks; the root did not say which had joined)", cause, nranks)
	}
	return cause
}

// Peers returns every rank's info, index = rank.
func (c *Client) Peers() []RankInfo { return append([]RankInfo(nil), c.peers...) }

// Done is closed when the job is aborted by any rank, the root is lost, or Close/Abort is
// called; Err says which.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err is nil until Done closes, then why: a *RankError naming the rank that failed first
// (rank, host, pid, how, its message), a *RootLostError, or ErrClosed.
func (c *Client) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// AllGather sends data (at most MaxPayload bytes) and returns every rank's data, index =
// rank. Every rank must make the same sequence of AllGather and Barrier calls; the root
// aborts the job when calls do not match. If ctx ends first, AllGather returns ctx's cause
// and the round completes without this caller (its data was already sent). A job abort or
// root loss returns that error at once, also to calls made later.
func (c *Client) AllGather(ctx context.Context, data []byte) ([][]byte, error) {
	if len(data) > MaxPayload {
		return nil, fmt.Errorf("bootstrap allgather: %d bytes, at most %d allowed", len(data), MaxPayload)
	}
	return c.collective(ctx, opAllGather, data)
}

// Barrier returns once every rank has called Barrier; errors as for AllGather.
func (c *Client) Barrier(ctx context.Context) error {
	_, err := c.collective(ctx, opBarrier, nil)
	return err
}

func (c *Client) collective(ctx context.Context, o op, data []byte) ([][]byte, error) {
	if err := c.Err(); err != nil {
		return nil, fmt.Errorf("bootstrap %s: %w", o, err)
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("bootstrap %s: %w", o, context.Cause(ctx))
	}
	ch := make(chan [][]byte, 1)
	c.wmu.Lock()
	rnd := c.round.Load()
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		c.wmu.Unlock()
		return nil, fmt.Errorf("bootstrap %s: %w", o, c.Err())
	}
	c.waiters[rnd] = ch
	c.mu.Unlock()
	c.round.Add(1)
	err := c.writeLocked(encodeGather(rnd, o, data))
	c.wmu.Unlock()
	if err != nil {
		c.fail(&RootLostError{Addr: c.addr, Err: fmt.Errorf("send %s round %d: %w", o, rnd, err)})
		c.conn.Close() // the stream may hold half a message; end the read loop too
	}
	if testHookRoundSent != nil {
		testHookRoundSent(c)
	}
	var cause error
	select {
	case parts := <-ch:
		return parts, nil
	case <-c.done:
		cause = c.Err()
	case <-ctx.Done():
		cause = context.Cause(ctx)
	}
	// The read loop hands the result over before it closes done, so a
	// round that completed before the root hung up (a rank that failed
	// right after it) returns its result: which error a rank reports must
	// not depend on which ready case select happened to take.
	select {
	case parts := <-ch:
		return parts, nil
	default:
	}
	c.unwait(rnd)
	return nil, fmt.Errorf("bootstrap %s round %d: %w", o, rnd, cause)
}

// testHookRoundSent, when set by a test, runs after a rank has sent its
// part of a round and before it waits for the result.
var testHookRoundSent func(c *Client)

func (c *Client) unwait(rnd uint64) {
	c.mu.Lock()
	delete(c.waiters, rnd)
	c.mu.Unlock()
}

// writeLocked writes one message; c.wmu is held. After a failed write nothing more is
// written: the stream may end in the middle of a message.
func (c *Client) writeLocked(msg []byte) error {
	if c.wbroken {
		return errors.New("an earlier write to the root failed")
	}
	if _, err := c.conn.Write(msg); err != nil {
		c.wbroken = true
		return err
	}
	return nil
}

// fail records why the client is done, if it is the first reason, and closes Done.
func (c *Client) fail(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	close(c.done)
}

// Abort reports a fatal error of this rank to the root, which aborts the job: every other
// rank's Done closes with a *RankError naming this rank and cause. This rank's own Done
// closes with the same error. Abort then leaves like Close, waiting at most a few seconds.
func (c *Client) Abort(cause error) {
	msg := "aborted without a cause"
	if cause != nil {
		msg = cause.Error()
	}
	c.fail(&RankError{Rank: c.me.Rank, Host: c.me.Host, Pid: c.me.Pid, How: Failed, Cause: msg})
	c.finish(encodeText(msgAbort, msg))
}

// Close leaves the job cleanly: the root records that this rank is done, and nobody is
// aborted unless others still wait for this rank in a round. Pending calls return
// ErrClosed. Close waits (a few seconds at most) for the root to acknowledge by hanging up,
// so the leave message is not lost to a reset. It returns nil; calling it again does
// nothing.
func (c *Client) Close() error {
	c.fail(ErrClosed)
	c.finish(encodeMsg(msgLeave, nil))
	return nil
}

// finish sends the last message, half-closes, waits for the root to close its side (or
// closeTimeout), and closes the connection. Only the first call does anything.
func (c *Client) finish(last []byte) {
	c.finishOnce.Do(func() {
		// Unblock a write stuck on a root that stopped reading, then take the write lock.
		c.conn.SetWriteDeadline(time.Now().Add(closeTimeout))
		c.wmu.Lock()
		err := c.writeLocked(last)
		c.wmu.Unlock()
		if cw, ok := c.conn.(interface{ CloseWrite() error }); ok && err == nil {
			// The root answers a leave or abort by closing; the read loop sees EOF.
			cw.CloseWrite()
			c.conn.SetReadDeadline(time.Now().Add(closeTimeout))
			<-c.readerDone
		}
		c.conn.Close()
		<-c.readerDone
	})
}

// readLoop delivers the root's messages; see Client for when it ends.
func (c *Client) readLoop() {
	defer close(c.readerDone)
	limit := maxFromRoot(c.nranks)
	for {
		t, p, err := readMsg(c.conn, limit)
		if err != nil {
			c.fail(&RootLostError{Addr: c.addr, Err: rootLostCause(err)})
			return
		}
		if err := c.handle(t, p); err != nil {
			c.fail(&RootLostError{Addr: c.addr, Err: err})
			c.conn.Close()
			return
		}
	}
}

func (c *Client) handle(t msgType, p []byte) error {
	switch t {
	case msgGathered:
		rnd, parts, err := decodeGathered(p, c.nranks)
		if err != nil {
			return err
		}
		if rnd >= c.round.Load() {
			return fmt.Errorf("%w: result for round %d, which this rank has not started", errProtocol, rnd)
		}
		c.mu.Lock()
		ch := c.waiters[rnd]
		delete(c.waiters, rnd)
		c.mu.Unlock()
		if ch != nil { // nil: the caller gave up (ctx) and the result is dropped
			ch <- parts
		}
		return nil
	case msgAborted:
		re, err := decodeAborted(p, c.nranks)
		if err != nil {
			return err
		}
		c.fail(re)
		return nil
	}
	return fmt.Errorf("%w: unexpected %s from the root", errProtocol, t)
}
