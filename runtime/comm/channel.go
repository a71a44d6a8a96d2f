package comm

import (
	"context"
	"fmt"
	"sync"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/engine"
	"github.com/seed-760dd1f1/cc/runtime/param"
)

// p2pChannel is the channel id of point-to-point connections, apart from
// the collective channels 0..nchannels-1 so that a group's Send/Recv never
// interleave with a collective on the same stream.
const p2pChannel = 1 << 16

// channel holds one channel's connections, one per (peer, protocol),
// opened on first use (the ring channels open their Simple ones at Init).
type channel struct {
	c    *Comm
	id   int
	mu   sync.Mutex
	send map[connKey]*lazy[sender]
	recv map[connKey]*lazy[receiver]
}

type connKey struct {
	peer  int
	proto protocols.Proto
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

func (v conns) SendTo(peer int) (engine.SendConn, error)   { return v.ch.sendTo(peer, v.proto) }
func (v conns) RecvFrom(peer int) (engine.RecvConn, error) { return v.ch.recvFrom(peer, v.proto) }

// with returns the channel's connections for protocol p.
func (ch *channel) with(p protocols.Proto) conns { return conns{ch: ch, proto: p} }

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
	return &channel{c: c, id: id, send: map[connKey]*lazy[sender]{}, recv: map[connKey]*lazy[receiver]{}}
}

func (ch *channel) name() string {
	if ch.id == p2pChannel {
		return "p2p"
	}
	return fmt.Sprintf("channel %d", ch.id)
}

// sendTo is the protocol-p connection to peer, opened once: shared memory
// when peer is on this host, TCP otherwise.
func (ch *channel) sendTo(peer int, p protocols.Proto) (sender, error) {
	c := ch.c
	return get(&ch.mu, ch.send, connKey{peer, p}, func() (sender, error) {
		if lp, ok := c.local(peer); ok {
			sc, err := c.seg.Send(c.shmChannel(ch.id), c.localRank, lp, p)
			if err != nil {
				return nil, fmt.Errorf("rank %d: shared memory to rank %d: %w", c.rank, peer, err)
			}
			c.infof(param.SubsysSHM, "%s: rank %d -> rank %d via SHM %s, protocol %s", ch.name(), c.rank, peer, c.seg.Name(), p)
			return sc, nil
		}
		sc, err := c.tr.Connect(c.ctx, peer, c.peers[peer].Addr, ch.id, p, c.wireStep(p))
		if err != nil {
			return nil, err
		}
		c.infof(param.SubsysNet, "%s: rank %d -> rank %d via TCP %s, protocol %s", ch.name(), c.rank, peer, c.peers[peer].Addr, p)
		return sc, nil
	})
}

// recvFrom is the protocol-p connection from peer, accepted once.
func (ch *channel) recvFrom(peer int, p protocols.Proto) (receiver, error) {
	c := ch.c
	return get(&ch.mu, ch.recv, connKey{peer, p}, func() (receiver, error) {
		if lp, ok := c.local(peer); ok {
			rc, err := c.seg.Recv(c.shmChannel(ch.id), lp, c.localRank, p)
			if err != nil {
				return nil, fmt.Errorf("rank %d: shared memory from rank %d: %w", c.rank, peer, err)
			}
			return rc, nil
		}
		rc, err := c.tr.Accept(c.ctx, peer, ch.id, p, c.wireStep(p))
		if err != nil {
			return nil, err
		}
		return rc, nil
	})
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

// connectRings opens every ring channel's connections: a send connection to
// the next rank and a receive connection from the previous one.
func (c *Comm) connectRings(ctx context.Context) error {
	if c.nranks == 1 {
		return nil
	}
	next, prev := algos.RingNext(c.rank, c.nranks), algos.RingPrev(c.rank, c.nranks)
	errs := make(chan error, 2*len(c.channels))
	for _, ch := range c.channels {
		go func(ch *channel) { _, err := ch.sendTo(next, protocols.Simple); errs <- err }(ch)
		go func(ch *channel) { _, err := ch.recvFrom(prev, protocols.Simple); errs <- err }(ch)
	}
	var first error
	for i := 0; i < 2*len(c.channels); i++ {
		if err := <-errs; err != nil && first == nil {
			first = err
			c.cancel(err) // stop the others waiting
		}
	}
	if first == nil {
		c.infof(param.SubsysInit, "%d ring channels: rank %d -> %d -> %d", len(c.channels), prev, c.rank, next)
	}
	return first
}

// worker runs the tasks of one extra channel on its own goroutine; the
// calling goroutine runs channel 0 itself.
type worker struct {
	jobs chan func()
	done chan struct{}
}

func newWorker() *worker {
	w := &worker{jobs: make(chan func()), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for f := range w.jobs {
			f()
		}
	}()
	return w
}

func (w *worker) stop() {
	close(w.jobs)
	<-w.done
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

// shmChannel maps a channel id to the segment's connection set: ring
// channels first, then point-to-point.
func (c *Comm) shmChannel(id int) int {
	if id == p2pChannel {
		return c.nchannels
	}
	return id
}
