package tcp

import (
	"fmt"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/engine"
)

// LL and LL128 over TCP, as NCCL's socket transport carries them: the FIFO
// slot goes on the wire as it is, lines with their flags included (LL:
// 16-byte lines of 8 payload bytes and two 4-byte flags; LL128: 128-byte
// lines of 120 payload bytes and an 8-byte flag), in the stream form of
// protocols.EncodeWire, and the receiver checks every flag against the step
// while it decodes (protocols.DecodeWire). TCP is ordered, so the flags do
// not signal readiness here; they cost bandwidth (2x for LL, 128/120 for
// LL128) and catch a peer that runs another protocol or step. What LL and
// LL128 buy over TCP is eagerness: the engine writes a slice to the socket
// itself, with no hand-off to a writer goroutine, which saves a wake-up per
// slice and makes them the protocols of small messages.

// EagerSendConn sends LL or LL128 slices: the engine's goroutine encodes
// and writes each slice itself, round-robin over the sockets. A frame is
// written with one write on the raw descriptor; when the socket does not
// take it all at once, the write blocks with the rank's drainers armed
// (drainGroup), so that a peer writing to this rank meanwhile is read.
type EagerSendConn struct {
	proto     protocols.Proto
	socks     []net.Conn
	rcs       []syscall.RawConn // per socket; nil: write through the net.Conn
	drain     *drainGroup
	peer      string
	stepBytes int // wire bytes per step
	stage     []byte
	frame     []byte // the header, then the wire lines of one slice
	step, seq uint64
	cur       int

	// The state of one raw write, for writeFn (made once, so that a write
	// allocates nothing).
	wbuf    []byte
	werr    error
	wblock  bool
	writeFn func(fd uintptr) bool

	mu   sync.Mutex
	err  error
	once sync.Once
}

func newEagerSendConn(p protocols.Proto, socks []net.Conn, stepBytes int, peer string, g *drainGroup) *EagerSendConn {
	c := &EagerSendConn{proto: p, socks: socks, peer: peer, stepBytes: stepBytes, drain: g,
		stage: make([]byte, protocols.NSteps*p.Payload(stepBytes)),
		frame: make([]byte, headerSize+protocols.NSteps*stepBytes),
		rcs:   make([]syscall.RawConn, len(socks))}
	for i, s := range socks {
		if sc, ok := s.(syscall.Conn); ok {
			c.rcs[i], _ = sc.SyscallConn()
		}
	}
	c.writeFn = c.writeRaw
	return c
}

// Acquire implements engine.SendConn: a staging buffer for the payload of
// nsteps slots. Slots are free as soon as a write returns; TCP and the
// receiver's FIFO provide the back-pressure.
func (c *EagerSendConn) Acquire(nsteps int) ([]byte, error) {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	c.step = alignStep(c.step, nsteps)
	c.cur = nsteps
	return c.stage[:nsteps*c.proto.Payload(c.stepBytes)], nil
}

// Post implements engine.SendConn: encode the lines and write the frame.
func (c *EagerSendConn) Post(n int) error {
	wn := protocols.WireBytes(c.proto, n)
	protocols.EncodeWire(c.proto, c.frame[headerSize:headerSize+wn], c.stage[:n], c.step+1)
	putHeader((*[headerSize]byte)(c.frame[:headerSize]), wn, c.cur, c.step, c.seq)
	i := int(c.seq % uint64(len(c.socks)))
	c.step += uint64(c.cur)
	c.seq++
	if err := c.write(i, c.frame[:headerSize+wn]); err != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.err == nil {
			c.err = fmt.Errorf("send to %s: %w", c.peer, err)
		}
		return c.err
	}
	return nil
}

// write writes b to socket i: at once if the socket takes it, else
// blocking with the drainers armed.
func (c *EagerSendConn) write(i int, b []byte) error {
	rc := c.rcs[i]
	if rc == nil {
		c.drain.arm(nil)
		defer c.drain.disarm(nil)
		_, err := c.socks[i].Write(b)
		return err
	}
	c.wbuf, c.werr, c.wblock = b, nil, false
	err := rc.Write(c.writeFn)
	if err == nil && c.werr == nil && len(c.wbuf) > 0 {
		c.wblock = true
		c.drain.arm(nil)
		err = rc.Write(c.writeFn)
		c.drain.disarm(nil)
	}
	if err == nil {
		err = c.werr
	}
	c.wbuf = nil
	return err
}

// writeRaw is the callback of one raw write: it writes what the socket
// takes; true ends the runtime's Write, false makes it wait until the
// socket is writable (only once the write blocks: wblock).
func (c *EagerSendConn) writeRaw(fd uintptr) bool {
	for len(c.wbuf) > 0 {
		n, err := rawWrite(fd, c.wbuf)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return !c.wblock
		case err != nil:
			c.werr = err
			return true
		}
		c.wbuf = c.wbuf[n:]
	}
	return true
}

// SendSlot implements engine.SlotSender for the type's sake: the slot API
// needs the Simple protocol, and it returns an error saying so.
func (c *EagerSendConn) SendSlot(ahead int) ([]byte, error) { return nil, slotProtoErr(c.proto) }

// PostSlot implements engine.SlotSender: an error, as SendSlot.
func (c *EagerSendConn) PostSlot(nbytes int) error { return slotProtoErr(c.proto) }

// Fail makes every pending and later call return err; a write blocked on a
// full socket returns at once.
func (c *EagerSendConn) Fail(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	for _, s := range c.socks {
		s.SetWriteDeadline(time.Now())
	}
}

// Close closes the sockets.
func (c *EagerSendConn) Close() error {
	c.once.Do(func() {
		c.Fail(engine.ErrClosed)
		for _, s := range c.socks {
			s.Close()
		}
	})
	return nil
}
