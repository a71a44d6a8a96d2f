// Package tcp is the socket transport of the runtime: FIFO connections
// between ranks over TCP, satisfying runtime/engine's SendConn and RecvConn.
//
// Each rank listens on one address (published through the bootstrap). A
// connection is directional, from a sender to a receiver, and keyed by
// (sender rank, channel); it consists of NCCL_SOCKET_NTHREADS x
// NCCL_NSOCKS_PERTHREAD sockets, each opened with the wire handshake (magic,
// version, job id, authenticator). Strangers, wrong secrets and garbage are
// dropped with one log line and the listener keeps serving.
//
// On each socket the sender writes frames (header + slice payload) from its
// FIFO with one writer goroutine per socket; the receiver has one reader
// goroutine per socket that reads frames into free slots of its own FIFO.
// Flow control is NCCL's head/tail: a reader only reads a frame when its
// slots are free, so a slow consumer back-pressures the sender through TCP.
//
// Simple connections also offer the slot API of PAT's schedules
// (engine.SlotSender, engine.SlotReceiver): the sender writes any of the
// next NSteps slots in any order (SendSlot) and posts them in FIFO order
// one step at a time (PostSlot), each as a frame of one step; a slot is
// free again, as for Acquire, once the frame that last used it has been
// written to its socket (the receiver's FIFO back-pressures through TCP).
// The receiver reads any of the next NSteps slots once it has arrived, as
// often as it likes (RecvSlot), and frees them in order (ReleaseSlot).
// Both share the connection's step counters with Acquire/Post and
// Wait/Release, so one collective may use slots and the next slices, but
// the two never overlap. LL and LL128 connections return an error from the
// slot API.
package tcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/engine"
	"github.com/seed-760dd1f1/cc/runtime/wire"
)

// Options configure a Transport.
type Options struct {
	Rank       int
	Job        wire.Job
	ListenAddr string // host:port to listen on; port 0 picks one
	NSocks     int    // sockets per connection (NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD), >= 1
	RetryCnt   int    // connect retries (NCCL_SOCKET_RETRY_CNT)
	RetrySleep time.Duration
	Logf       func(format string, args ...any) // one line per dropped stranger; may be nil
	// OnError is told about a connection that failed on its own (the peer
	// died or reset it), so the communicator can abort.
	OnError func(error)
	// Spin is how long a receive polls its socket before it blocks
	// (connections of one socket read on the caller's goroutine).
	Spin time.Duration
}

type key struct {
	from    int
	channel int
}

// Transport owns a rank's listener and routes incoming sockets to the
// receivers waiting for them.
type Transport struct {
	o      Options
	ln     net.Listener
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	drain  *drainGroup // the drainers of the inline receivers

	mu      sync.Mutex
	pending map[key][]net.Conn // accepted sockets by (from, channel), indexed by socket index
	arrived map[key]chan struct{}
	conns   []interface{ Close() error }
	hs      map[net.Conn]struct{} // sockets in their handshake
	closed  bool
}

// Listen opens the rank's listener and starts accepting.
func Listen(o Options) (*Transport, error) {
	if o.NSocks < 1 {
		o.NSocks = 1
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	ln, err := net.Listen("tcp", o.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("rank %d: listen on %s: %w", o.Rank, o.ListenAddr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &Transport{o: o, ln: ln, ctx: ctx, cancel: cancel, drain: &drainGroup{},
		pending: map[key][]net.Conn{}, arrived: map[key]chan struct{}{}, hs: map[net.Conn]struct{}{}}
	t.wg.Add(1)
	go t.accept()
	return t, nil
}

// SetSpin changes Options.Spin for the connections accepted from now on
// (the communicator knows how many ranks share the host only after
// joining).
func (t *Transport) SetSpin(d time.Duration) {
	t.mu.Lock()
	t.o.Spin = d
	t.mu.Unlock()
}

// Spin returns Options.Spin as SetSpin left it.
func (t *Transport) Spin() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.o.Spin
}

// Addr is the address peers dial.
func (t *Transport) Addr() string { return t.ln.Addr().String() }

// accept runs until the listener closes (Close).
func (t *Transport) accept() {
	defer t.wg.Done()
	for {
		c, err := t.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			t.o.Logf("rank %d: accept: %v", t.o.Rank, err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			c.Close()
			return
		}
		t.hs[c] = struct{}{}
		t.wg.Add(1)
		t.mu.Unlock()
		go t.handshake(c)
	}
}

// handshake authenticates one incoming socket and files it under its key.
// It exits within the handshake deadline.
func (t *Transport) handshake(c net.Conn) {
	defer t.wg.Done()
	h, err := wire.Server(c, t.o.Job, time.Now().Add(10*time.Second))
	t.mu.Lock()
	delete(t.hs, c)
	t.mu.Unlock()
	if err != nil {
		t.o.Logf("rank %d: dropped connection from %s: %v", t.o.Rank, c.RemoteAddr(), err)
		c.Close()
		return
	}
	if h.Kind != wire.KindData || h.Index < 0 || int(h.Index) >= t.o.NSocks {
		t.o.Logf("rank %d: dropped connection from %s: kind %v socket %d (want data socket < %d)", t.o.Rank, c.RemoteAddr(), h.Kind, h.Index, t.o.NSocks)
		c.Close()
		return
	}
	setSockOpts(c)
	k := key{from: int(h.Rank), channel: int(h.Channel)}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		c.Close()
		return
	}
	socks := t.pending[k]
	if socks == nil {
		socks = make([]net.Conn, t.o.NSocks)
		t.pending[k] = socks
	}
	if socks[h.Index] != nil {
		t.o.Logf("rank %d: dropped duplicate socket %d from rank %d channel %d (%s)", t.o.Rank, h.Index, h.Rank, h.Channel, c.RemoteAddr())
		c.Close()
		return
	}
	socks[h.Index] = c
	for _, s := range socks {
		if s == nil {
			return
		}
	}
	t.arrivedChan(k) // make sure it exists
	close(t.arrived[k])
}

func (t *Transport) arrivedChan(k key) chan struct{} {
	ch := t.arrived[k]
	if ch == nil {
		ch = make(chan struct{})
		t.arrived[k] = ch
	}
	return ch
}

func setSockOpts(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
}

// Sender is the sending end of a connection, whatever its protocol (the
// slot API works on Simple connections only).
type Sender interface {
	engine.SendConn
	engine.SlotSender
	Fail(error)
	Close() error
}

// Receiver is the receiving end of a connection (the slot API works on
// Simple connections only).
type Receiver interface {
	engine.RecvConn
	engine.DirectReceiver
	engine.SlotReceiver
	Fail(error)
	SetClosing()
	Close() error
}

var (
	_ engine.SlotSender   = (*SendConn)(nil)
	_ engine.SlotReceiver = (*RecvConn)(nil)
	_ engine.SlotSender   = (*EagerSendConn)(nil)
	_ engine.RefSender    = (*SendConn)(nil)
	_ engine.RefSender    = (*EagerSendConn)(nil)
)

// streamID keeps the connections of each (channel, protocol) apart in the
// handshake's channel field: channel<<2 | the protocol's stream code.
func streamID(channel int, p protocols.Proto) int32 { return int32(channel<<2 | streamCode[p]) }

// streamCode numbers the protocols in streamID as handshake versions 1 and 2 do
// (Simple 0, LL 1, LL128 2), independent of protocols.Proto's numbering.
var streamCode = [protocols.NumProtos]int{protocols.Simple: 0, protocols.LL: 1, protocols.LL128: 2}

// Connect opens the sending connection of protocol p to peer (listening at
// addr) on channel, with stepBytes-sized FIFO slots (wire bytes).
func (t *Transport) Connect(ctx context.Context, peer int, addr string, channel int, p protocols.Proto, stepBytes int) (Sender, error) {
	socks := make([]net.Conn, 0, t.o.NSocks)
	for i := 0; i < t.o.NSocks; i++ {
		h := wire.Hello{Kind: wire.KindData, Rank: int32(t.o.Rank), Channel: streamID(channel, p), Index: int32(i)}
		c, err := wire.Dial(ctx, addr, t.o.Job, h, t.o.RetryCnt, t.o.RetrySleep)
		if err != nil {
			for _, s := range socks {
				s.Close()
			}
			return nil, fmt.Errorf("rank %d: connect to rank %d channel %d: %w", t.o.Rank, peer, channel, err)
		}
		setSockOpts(c)
		socks = append(socks, c)
	}
	name := fmt.Sprintf("rank %d (%s)", peer, addr)
	var c Sender
	if p == protocols.Simple {
		c = newSendConn(socks, stepBytes, name, t.drain)
	} else {
		c = newEagerSendConn(p, socks, stepBytes, name, t.drain)
	}
	if !t.track(c) {
		return nil, errors.New("transport closed")
	}
	return c, nil
}

// Accept waits for peer's sending connection of protocol p on channel and
// returns its receiving end.
func (t *Transport) Accept(ctx context.Context, peer int, channel int, p protocols.Proto, stepBytes int) (Receiver, error) {
	k := key{from: peer, channel: int(streamID(channel, p))}
	t.mu.Lock()
	ch := t.arrivedChan(k)
	t.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		return nil, fmt.Errorf("rank %d: waiting for rank %d channel %d to connect: %w", t.o.Rank, peer, channel, context.Cause(ctx))
	case <-t.ctx.Done():
		return nil, errors.New("transport closed")
	}
	t.mu.Lock()
	socks := t.pending[k]
	delete(t.pending, k)
	delete(t.arrived, k)
	t.mu.Unlock()
	addr := "?"
	if len(socks) > 0 {
		addr = socks[0].RemoteAddr().String()
	}
	t.mu.Lock()
	spin := t.o.Spin
	t.mu.Unlock()
	c := newRecvConn(p, socks, stepBytes, fmt.Sprintf("rank %d (%s)", peer, addr), t.o.OnError, spin, t.drain)
	if !t.track(c) {
		return nil, errors.New("transport closed")
	}
	return c, nil
}

func (t *Transport) track(c interface{ Close() error }) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		c.Close()
		return false
	}
	t.conns = append(t.conns, c)
	return true
}

// Close closes the listener, every connection and every socket not yet
// claimed, and waits for the transport's goroutines to exit.
func (t *Transport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	conns := t.conns
	pending := t.pending
	t.pending = map[key][]net.Conn{}
	for c := range t.hs {
		c.Close() // ends its handshake at once
	}
	t.mu.Unlock()
	t.cancel()
	err := t.ln.Close()
	for _, c := range conns {
		c.Close()
	}
	for _, socks := range pending {
		for _, s := range socks {
			if s != nil {
				s.Close()
			}
		}
	}
	t.wg.Wait()
	return err
}
