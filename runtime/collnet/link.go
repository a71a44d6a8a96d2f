package collnet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/seed-760dd1f1/cc/runtime/engine"
	"github.com/seed-760dd1f1/cc/runtime/transport/tcp"
	"github.com/seed-760dd1f1/cc/runtime/wire"
)

// DialOptions say which head dials the server, and how.
type DialOptions struct {
	Addr       string   // the server's host:port
	Job        wire.Job // the job the server was started for
	Join       Join
	RetryCnt   int // connect retries (NCCL_SOCKET_RETRY_CNT)
	RetrySleep time.Duration
	// OnError is told when the connection fails on its own (the server
	// died, reset it or was cut off), with an error naming the server:
	// "collnet aggregation server host:port lost: <cause>".
	OnError func(error)
}

// Link is one head's connection to the server on one channel: Sender and
// Receiver are the engine's connections to the peer algos.CollNetPeer.
type Link struct {
	addr string
	send Sender
	recv *Receiver
}

// Dial connects a head to the server: the handshake, then its Join.
func Dial(ctx context.Context, o DialOptions) (*Link, error) {
	join, err := o.Join.Encode()
	if err != nil {
		return nil, err
	}
	h := wire.Hello{Kind: wire.KindCollNet, Rank: int32(o.Join.Rank), Channel: int32(o.Join.Channel)}
	c, err := wire.Dial(ctx, o.Addr, o.Job, h, o.RetryCnt, o.RetrySleep)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", Name, o.Addr, err)
	}
	c.SetWriteDeadline(time.Now().Add(wire.HandshakeTimeout))
	if _, err := c.Write(join[:]); err != nil {
		c.Close()
		return nil, fmt.Errorf("%s %s: send join record: %w", Name, o.Addr, err)
	}
	c.SetWriteDeadline(time.Time{})
	onError := func(err error) {
		if o.OnError != nil {
			o.OnError(lost(o.Addr, err))
		}
	}
	s, r := tcp.Duplex(c, o.Join.StepBytes, "the server", onError)
	return &Link{addr: o.Addr, send: Sender{s, o.Addr}, recv: &Receiver{RecvConn: r, addr: o.Addr}}, nil
}

// lost is how a head reports a failed connection to the server.
func lost(addr string, err error) error { return fmt.Errorf("%s %s lost: %w", Name, addr, err) }

// Begin announces the next collective: it sends d, and the Receiver's
// next Wait first takes the server's answer (an error naming the
// server when the heads' descriptors disagree). Call it before the
// engine runs a schedule that talks to the server, from the goroutine
// that then starts the engine.
func (l *Link) Begin(d Desc) error {
	b, err := l.send.SendConn.Acquire(1)
	if err != nil {
		return lost(l.addr, err)
	}
	enc := d.Encode()
	copy(b, enc[:])
	if err := l.send.SendConn.Post(DescSize); err != nil {
		return lost(l.addr, err)
	}
	l.recv.ack = true
	return nil
}

// Sender is the engine's connection to the server.
func (l *Link) Sender() engine.SendConn { return l.send }

// Receiver is the engine's connection from the server.
func (l *Link) Receiver() engine.RecvConn { return l.recv }

// Close closes the connection; the server sees the head leave.
func (l *Link) Close() {
	l.recv.SetClosing()
	l.send.Close()
	l.recv.Close()
}

// Sender sends to the server; its errors name the server.
type Sender struct {
	*tcp.SendConn
	addr string
}

// Acquire implements engine.SendConn.
func (s Sender) Acquire(nsteps int) ([]byte, error) {
	b, err := s.SendConn.Acquire(nsteps)
	if err != nil {
		return nil, lost(s.addr, err)
	}
	return b, nil
}

// Post implements engine.SendConn.
func (s Sender) Post(n int) error {
	if err := s.SendConn.Post(n); err != nil {
		return lost(s.addr, err)
	}
	return nil
}

// Receiver receives from the server; its errors name the server.
type Receiver struct {
	*tcp.RecvConn
	addr string
	ack  bool // the answer to a descriptor comes before the next slice
}

// Wait implements engine.RecvConn.
func (r *Receiver) Wait(nsteps, nbytes int) ([]byte, error) {
	if err := r.takeAck(); err != nil {
		return nil, err
	}
	b, err := r.RecvConn.Wait(nsteps, nbytes)
	if err != nil {
		return nil, lost(r.addr, err)
	}
	return b, nil
}

// WaitInto implements engine.DirectReceiver as Wait does: the answer to a
// descriptor first, then the slice, into dst.
func (r *Receiver) WaitInto(nsteps int, dst []byte) error {
	if err := r.takeAck(); err != nil {
		return err
	}
	if err := r.RecvConn.WaitInto(nsteps, dst); err != nil {
		return lost(r.addr, err)
	}
	return nil
}

// takeAck receives the server's answer to a descriptor, if one is due
// before the next slice, and returns the error it carries.
func (r *Receiver) takeAck() error {
	if !r.ack {
		return nil
	}
	r.ack = false
	b, err := r.RecvConn.Wait(1, AckSize)
	if err != nil {
		return lost(r.addr, err)
	}
	msg, err := decodeAck(b)
	r.RecvConn.Release()
	switch {
	case err != nil:
		return fmt.Errorf("%s %s: %w", Name, r.addr, err)
	case msg != "":
		return fmt.Errorf("%s %s: %s", Name, r.addr, msg)
	}
	return nil
}

// watchChannel is the channel of a watcher's hello: a connection that only
// tells its dialler when the server is lost (Watch).
const watchChannel = -1

// Watch connects to the server as a watcher (ccrun does, beside the
// ranks) and returns a channel that gets the error ("connection lost:
// <cause>") once the connection is lost: the server died or its host is cut off (keepalives, within about
// tcp.DuplexTimeout, as the heads notice it). Cancelling ctx closes the
// connection without a report.
func Watch(ctx context.Context, addr string, job wire.Job) (<-chan error, error) {
	c, err := wire.Dial(ctx, addr, job, wire.Hello{Kind: wire.KindCollNet, Channel: watchChannel}, 3, 100*time.Millisecond)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", Name, addr, err)
	}
	tcp.SetLiveness(c, tcp.DuplexTimeout)
	lostc := make(chan error, 1)
	stop := context.AfterFunc(ctx, func() { c.Close() })
	go func() {
		defer c.Close()
		var b [1]byte
		_, err := c.Read(b[:]) // the server never writes: any return is the end
		if stop() {
			if err == nil || errors.Is(err, io.EOF) {
				err = errors.New("the server closed the connection")
			}
			lostc <- fmt.Errorf("connection lost: %w", err)
		}
		close(lostc)
	}()
	return lostc, nil
}
