package comm

import (
	"context"
	"fmt"
	"sync"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/runtime/engine"
	"github.com/seed-760dd1f1/cc/runtime/param"
	"github.com/seed-760dd1f1/cc/runtime/transport/tcp"
)

// p2pChannel is the channel id of point-to-point connections, apart from
// the collective channels 0..nchannels-1 so that a group's Send/Recv never
// interleave with a collective on the same stream.
const p2pChannel = 1 << 16

// channel holds one channel's connections, opened on first use (ring
// channels open theirs at Init). It implements engine.Conns.
type channel struct {
	c    *Comm
	id   int
	mu   sync.Mutex
	send map[int]*lazy[*tcp.SendConn]
	recv map[int]*lazy[*tcp.RecvConn]
}

// lazy is a connection opened once by its first user; others wait on ready.
type lazy[T any] struct {
	ready chan struct{} // closed once v and err are set
	v     T
	err   error
}

// get returns the lazy value for peer in m, opening it with open if this
// caller is the first.
func get[T any](mu *sync.Mutex, m map[int]*lazy[T], peer int, open func() (T, error)) (T, error) {
	mu.Lock()
	l := m[peer]
	first := l == nil
	if first {
		l = &lazy[T]{ready: make(chan struct{})}
		m[peer] = l
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
	return &channel{c: c, id: id, send: map[int]*lazy[*tcp.SendConn]{}, recv: map[int]*lazy[*tcp.RecvConn]{}}
}

func (ch *channel) name() string {
	if ch.id == p2pChannel {
		return "p2p"
	}
	return fmt.Sprintf("channel %d", ch.id)
}

// SendTo implements engine.Conns: the connection to peer, dialled once.
func (ch *channel) SendTo(peer int) (engine.SendConn, error) {
	c := ch.c
	v, err := get(&ch.mu, ch.send, peer, func() (*tcp.SendConn, error) {
		sc, err := c.tr.Connect(c.ctx, peer, c.peers[peer].Addr, ch.id, c.stepBytes)
		if err == nil {
			c.infof(param.SubsysNet, "%s: rank %d -> rank %d via TCP %s", ch.name(), c.rank, peer, c.peers[peer].Addr)
		}
		return sc, err
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

// RecvFrom implements engine.Conns: the connection from peer, accepted once.
func (ch *channel) RecvFrom(peer int) (engine.RecvConn, error) {
	c := ch.c
	v, err := get(&ch.mu, ch.recv, peer, func() (*tcp.RecvConn, error) {
		return c.tr.Accept(c.ctx, peer, ch.id, c.stepBytes)
	})
	if err != nil {
		return nil, err
	}
	return v, nil
}

// fail makes every open connection of the channel return cause.
func (ch *channel) fail(cause error) {
	ch.each(func(s *tcp.SendConn) { s.Fail(cause) }, func(r *tcp.RecvConn) { r.Fail(cause) })
}

// setClosing tells the receivers that peers closing from now on is normal.
func (ch *channel) setClosing() {
	ch.each(func(*tcp.SendConn) {}, func(r *tcp.RecvConn) { r.SetClosing() })
}

func (ch *channel) each(fs func(*tcp.SendConn), fr func(*tcp.RecvConn)) {
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
		go func(ch *channel) { _, err := ch.SendTo(next); errs <- err }(ch)
		go func(ch *channel) { _, err := ch.RecvFrom(prev); errs <- err }(ch)
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
