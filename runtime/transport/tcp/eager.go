package tcp

import (
	"fmt"
	"net"
	"sync"
	"time"

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
// and writes each slice itself, round-robin over the sockets.
type EagerSendConn struct {
	proto     protocols.Proto
	socks     []net.Conn
	peer      string
	stepBytes int // wire bytes per step
	stage     []byte
	wire      []byte
	hdr       [headerSize]byte
	vec       [2][]byte
	bufs      net.Buffers
	step, seq uint64
	cur       int

	mu   sync.Mutex
	err  error
	once sync.Once
}

func newEagerSendConn(p protocols.Proto, socks []net.Conn, stepBytes int, peer string) *EagerSendConn {
	return &EagerSendConn{proto: p, socks: socks, peer: peer, stepBytes: stepBytes,
		stage: make([]byte, protocols.NSteps*p.Payload(stepBytes)),
		wire:  make([]byte, protocols.NSteps*stepBytes)}
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
	protocols.EncodeWire(c.proto, c.wire[:wn], c.stage[:n], c.step+1)
	putHeader(&c.hdr, wn, c.cur, c.step, c.seq)
	sock := c.socks[c.seq%uint64(len(c.socks))]
	c.step += uint64(c.cur)
	c.seq++
	// The two-buffer list lives in the connection, so a write allocates
	// nothing (WriteTo consumes the list it is called on).
	c.vec = [2][]byte{c.hdr[:], c.wire[:wn]}
	c.bufs = c.vec[:]
	if _, err := c.bufs.WriteTo(sock); err != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.err == nil {
			c.err = fmt.Errorf("send to %s: %w", c.peer, err)
		}
		return c.err
	}
	return nil
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
