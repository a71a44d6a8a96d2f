package comm

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/engine"
	"github.com/seed-760dd1f1/cc/runtime/param"
)

// p2pChannel is the channel id of point-to-point connections, apart from
// the collective channels 0..nchannels-1 so that a group's Send/Recv never
// interleave with a collective on the same stream.
const p2pChannel = 1 << 16

// channel holds one channel's connections, one per (peer, protocol,
// connection index), opened on first use (the Simple ones of the
// algorithms a communicator expects to run are opened at Init), and the
// Runner that executes its lanes.
type channel struct {
	c      *Comm
	id     int
	mu     sync.Mutex
	send   map[connKey]*lazy[sender]
	recv   map[connKey]*lazy[receiver]
	views  [protocols.NumProtos]*conns
	runner *engine.Runner

	// Opened connections by protocol, connection index and peer, read
	// without the lock on every Op (the maps are for opening them once).
	fastSend [protocols.NumProtos][algos.MaxConns][]atomic.Pointer[sender]
	fastRecv [protocols.NumProtos][algos.MaxConns][]atomic.Pointer[receiver]
}

type connKey struct {
	peer  int
	proto protocols.Proto
	conn  int
}

// sender and receiver are connections of either transport. TCP ones fail
// one by one (failer); shared-memory ones fail with their segment.
type (
	sender   = engine.SendConn
	receiver = engine.RecvConn
	failer   interface{ Fail(error) }
	closer   interface{ SetClosing() }
)

// conns is the engine's view of one channel for one protocol.
type conns struct {
	ch    *channel
	proto protocols.Proto
}

func (v *conns) SendTo(peer, conn int) (engine.SendConn, error) {
	return v.ch.sendTo(peer, v.proto, conn)
}

func (v *conns) RecvFrom(peer, conn int) (engine.RecvConn, error) {
	return v.ch.recvFrom(peer, v.proto, conn)
}

// with returns the channel's connections for protocol p.
func (ch *channel) with(p protocols.Proto) *conns { return ch.views[p] }

// lazy is a connection opened once by its first user; others wait on ready.
type lazy[T any] struct {
	ready chan struct{} // closed once v and err are set
	v     T
	err   error
}

// get returns the lazy value for k in m, opening it with open if this
// caller is the first.
func get[T any](mu *sync.Mutex, m map[connKey]*lazy[T], k connKey, open func() (T, error)) (T, error) {
	mu.Lock()
	l := m[k]
	first := l == nil
	if first {
		l = &lazy[T]{ready: make(chan struct{})}
		m[k] = l
	}
	mu.Unlock()
	if first {
		l.v, l.err = open()
		close(l.ready)
	}
	<-l.ready
	return l.v, l.err
}

// opened returns the value if it has been opened successfully, without
// waiting for one still opening.
func (l *lazy[T]) opened() (T, bool) {
	select {
	case <-l.ready:
		return l.v, l.err == nil
	default:
		var zero T
		return zero, false
	}
}

func newChannel(c *Comm, id int) *channel {
	ch := &channel{c: c, id: id, send: map[connKey]*lazy[sender]{}, recv: map[connKey]*lazy[receiver]{}}
	for p := range ch.views {
		ch.views[p] = &conns{ch: ch, proto: protocols.Proto(p)}
		for k := range algos.MaxConns {
			// Peers beyond the ranks are the multicast regions (algos.McastPeer).
			ch.fastSend[p][k] = make([]atomic.Pointer[sender], algos.McastPeer(c.nranks, c.nranks))
			ch.fastRecv[p][k] = make([]atomic.Pointer[receiver], algos.McastPeer(c.nranks, c.nranks))
		}
	}
	ch.runner = engine.NewRunner(func(err error) {
		c.fail(fmt.Errorf("rank %d: %s: %w", c.rank, ch.name(), err))
	})
	return ch
}

func (ch *channel) name() string {
	if ch.id == p2pChannel {
		return "p2p"
	}
	return fmt.Sprintf("channel %d", ch.id)
}

// sendTo is the protocol-p connection to peer with connection index conn,
// opened once: shared memory when peer is on this host, TCP otherwise.
func (ch *channel) sendTo(peer int, p protocols.Proto, conn int) (sender, error) {
	if peer == ch.c.nranks {
		return ch.serverSend(p, conn)
	}
	if s := ch.fastSend[p][conn][peer].Load(); s != nil {
		return *s, nil
	}
	s, err := ch.openSend(peer, p, conn)
	if err == nil {
		ch.fastSend[p][conn][peer].Store(&s)
	}
	return s, err
}

// recvFrom is the protocol-p connection from peer with connection index
// conn, accepted once.
func (ch *channel) recvFrom(peer int, p protocols.Proto, conn int) (receiver, error) {
	if peer == ch.c.nranks {
		return ch.serverRecv(p, conn)
	}
	if r := ch.fastRecv[p][conn][peer].Load(); r != nil {
		return *r, nil
	}
	r, err := ch.openRecv(peer, p, conn)
	if err == nil {
		ch.fastRecv[p][conn][peer].Store(&r)
	}
	return r, err
}

// openSend opens the connection sendTo returns, once for all callers.
func (ch *channel) openSend(peer int, p protocols.Proto, conn int) (sender, error) {
	c := ch.c
	return get(&ch.mu, ch.send, connKey{peer, p, conn}, func() (sender, error) {
		if head, ok := algos.McastHead(c.nranks, peer); ok {
			return c.mcastSend(ch, head, conn)
		}
		if lp, ok := c.local(peer); ok {
			sc, err := c.seg.Send(c.shmSet(ch.id, conn), c.localRank, lp, p)
			if err != nil {
				return nil, fmt.Errorf("rank %d: shared memory to rank %d: %w", c.rank, peer, err)
			}
			c.infof(param.SubsysSHM, "%s: rank %d -> rank %d via SHM %s, protocol %s%s", ch.name(), c.rank, peer, c.seg.Name(), p, connName(conn))
			return sc, nil
		}
		sc, err := c.tr.Connect(c.ctx, peer, c.peers[peer].Addr, tcpSet(ch.id, conn), p, c.buffSize[p]/protocols.NSteps)
		if err != nil {
			return nil, err
		}
		c.infof(param.SubsysNet, "%s: rank %d -> rank %d via TCP %s, protocol %s%s", ch.name(), c.rank, peer, c.peers[peer].Addr, p, connName(conn))
		return sc, nil
	})
}

// openRecv accepts the connection recvFrom returns, once for all callers.
func (ch *channel) openRecv(peer int, p protocols.Proto, conn int) (receiver, error) {
	c := ch.c
	return get(&ch.mu, ch.recv, connKey{peer, p, conn}, func() (receiver, error) {
		if head, ok := algos.McastHead(c.nranks, peer); ok {
			return c.mcastRecv(ch, head, conn)
		}
		if lp, ok := c.local(peer); ok {
			rc, err := c.seg.Recv(c.shmSet(ch.id, conn), lp, c.localRank, p)
			if err != nil {
				return nil, fmt.Errorf("rank %d: shared memory from rank %d: %w", c.rank, peer, err)
			}
			return rc, nil
		}
		rc, err := c.tr.Accept(c.ctx, peer, tcpSet(ch.id, conn), p, c.buffSize[p]/protocols.NSteps)
		if err != nil {
			return nil, err
		}
		return rc, nil
	})
}

// mcastSend opens the writing end of this rank's multicast region (the
// virtual peer algos.McastPeer(nranks, head), head being this rank).
func (c *Comm) mcastSend(ch *channel, head, conn int) (sender, error) {
	if head != c.rank || c.seg == nil {
		return nil, fmt.Errorf("rank %d: multicast region of rank %d: a rank with local peers writes only its own", c.rank, head)
	}
	sc, err := c.seg.McastSend(c.shmSet(ch.id, conn), c.localRank)
	if err != nil {
		return nil, fmt.Errorf("rank %d: NVLS multicast region: %w", c.rank, err)
	}
	c.infof(param.SubsysNVLS, "%s: rank %d multicast region via SHM %s%s", ch.name(), c.rank, c.seg.Name(), connName(conn))
	return sc, nil
}

// mcastRecv opens this rank's reading end of head's multicast region.
func (c *Comm) mcastRecv(ch *channel, head, conn int) (receiver, error) {
	lh, ok := c.local(head)
	if !ok {
		return nil, fmt.Errorf("rank %d: multicast region of rank %d: not a rank of this host", c.rank, head)
	}
	rc, err := c.seg.McastRecv(c.shmSet(ch.id, conn), lh, c.localRank)
	if err != nil {
		return nil, fmt.Errorf("rank %d: NVLS multicast region of rank %d: %w", c.rank, head, err)
	}
	return rc, nil
}

func connName(conn int) string {
	if conn == 0 {
		return ""
	}
	return fmt.Sprintf(", connection %d", conn)
}

// fail makes every open connection of the channel return cause.
func (ch *channel) fail(cause error) {
	fail := func(x any) {
		if f, ok := x.(failer); ok {
			f.Fail(cause)
		}
	}
	ch.each(func(s sender) { fail(s) }, func(r receiver) { fail(r) })
}

// setClosing tells the receivers that peers closing from now on is normal.
func (ch *channel) setClosing() {
	ch.each(func(sender) {}, func(r receiver) {
		if c, ok := r.(closer); ok {
			c.SetClosing()
		}
	})
}

func (ch *channel) each(fs func(sender), fr func(receiver)) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	// A connection still being opened fails through the comm's context.
	for _, l := range ch.send {
		if v, ok := l.opened(); ok {
			fs(v)
		}
	}
	for _, l := range ch.recv {
		if v, ok := l.opened(); ok {
			fr(v)
		}
	}
}

// connect opens, on every collective channel, the Simple connections of
// links: what the algorithms this communicator expects to run need, so that
// the first collective does not pay for connection set-up. Both ends of
// every link are opened by the same call on the two ranks (every rank
// derives the same links from the same settings), concurrently, since a
// TCP connect waits for its accept.
func (c *Comm) connect(ctx context.Context, links []algos.Link) error {
	if len(links) == 0 {
		return nil
	}
	n := len(links) * len(c.channels)
	errs := make(chan error, n)
	for _, ch := range c.channels {
		for _, l := range links {
			go func() {
				var err error
				if l.Send {
					_, err = ch.sendTo(l.Peer, protocols.Simple, int(l.Conn))
				} else {
					_, err = ch.recvFrom(l.Peer, protocols.Simple, int(l.Conn))
				}
				errs <- err
			}()
		}
	}
	var first error
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil && first == nil {
			first = err
			c.cancel(err) // stop the others waiting
		}
	}
	return first
}

// local returns peer's index among this host's ranks, when the two talk
// through shared memory.
func (c *Comm) local(peer int) (int, bool) {
	if c.seg == nil {
		return 0, false
	}
	i, ok := c.localIndex[peer]
	return i, ok
}

// Connection sets. The transports keep the connections of a (channel,
// connection index) apart by a set number: collective channels first, then
// point-to-point, algos.MaxConns sets per channel.

// shmSet is the shared-memory segment's connection set of channel id and
// connection index conn.
func (c *Comm) shmSet(id, conn int) int {
	if id == p2pChannel {
		id = c.nchannels
	}
	return id*algos.MaxConns + conn
}

// shmSets is the number of connection sets the segment holds.
func (c *Comm) shmSets() int { return (c.nchannels + 1) * algos.MaxConns }

// tcpSet is the TCP transport's channel number of channel id and
// connection index conn.
func tcpSet(id, conn int) int { return id*algos.MaxConns + conn }
