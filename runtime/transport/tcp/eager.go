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

// LL and LL128 over TCP. On shared memory their lines carry flags that
// tell the reader the data is there; a TCP stream is ordered and the
// frame's header already says how many bytes and which step follow, so
// over TCP the flags would only cost copies (encoding the lines on the
// sender, decoding them on the receiver) and bandwidth (2x for LL, 128/120
// for LL128). A frame of LL or LL128 carries the slice's payload as it is,
// as Simple's do; the receiver checks each header's size, steps, step and
// sequence number against the slice it waits for. What LL and LL128 keep
// over TCP is their slot size and their eagerness: the engine writes a
// slice to the socket itself, header and payload with one writev, with no
// hand-off to a writer goroutine, which saves a wake-up per slice and makes
// them the protocols of small messages. A slice posted by reference
// (engine.RefSender) is written straight from the caller's memory.

// EagerSendConn sends LL or LL128 slices: the engine's goroutine writes
// each slice itself, round-robin over the sockets. A frame is written with
// one writev on the raw descriptor; when the socket does not take it all
// at once, the write blocks with the rank's drainers armed (drainGroup),
// so that a peer writing to this rank meanwhile is read.
type EagerSendConn struct {
	proto     protocols.Proto
	socks     []net.Conn
	rcs       []syscall.RawConn // per socket; nil: write through the net.Conn
	drain     *drainGroup
	peer      string
	stepBytes int    // FIFO bytes per step
	stage     []byte // NSteps slots' payload
	stageOff  int    // where the acquired slice starts in stage
	hdr       [headerSize]byte
	step, seq uint64
	cur       int

	// The state of one raw write, for writeFn (made once, so that a write
	// allocates nothing): the header, the payload and the padding, and how
	// much of the three the socket has taken.
	wa, wb, wc []byte
	woff       int
	wvec       iovecs
	werr       error
	wblock     bool
	writeFn    func(fd uintptr) bool

	mu   sync.Mutex
	err  error
	once sync.Once
}

func newEagerSendConn(p protocols.Proto, socks []net.Conn, stepBytes int, peer string, g *drainGroup) *EagerSendConn {
	c := &EagerSendConn{proto: p, socks: socks, peer: peer, stepBytes: stepBytes, drain: g,
		stage: make([]byte, protocols.NSteps*p.Payload(stepBytes)),
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
// receiver's FIFO provide the back-pressure. The buffer is the slice's own
// steps of the stage, as in a FIFO, not always its start: sending every
// slice from the same memory cost the kernel's copy into the socket about
// 3x per byte (perf, 3 ranks over TCP, LL128 all-reduce of 8 MiB: the
// staged quarter of the bytes took about as much of `_copy_from_iter`
// as the other three quarters sent from the user's buffers; the cause is
// not known), and rotating made reduce-scatters of 1-8 MiB between 3 fake
// hosts 0.77-0.82x the time. Since frames are aligned (see headerSize)
// the two are within 0.97-1.05x of each other there.
func (c *EagerSendConn) Acquire(nsteps int) ([]byte, error) {
	c.mu.Lock()
	err := c.err
	c.mu.Unlock()
	if err != nil {
		return nil, err
	}
	c.step = alignStep(c.step, nsteps)
	c.cur = nsteps
	pay := c.proto.Payload(c.stepBytes)
	off := int(c.step%protocols.NSteps) * pay
	if off+nsteps*pay > len(c.stage) {
		off = 0
	}
	c.stageOff = off
	return c.stage[off : off+nsteps*pay], nil
}

// Post implements engine.SendConn: write the first n bytes of the
// acquired staging buffer as one frame.
func (c *EagerSendConn) Post(n int) error { return c.send(c.stage[c.stageOff : c.stageOff+n]) }

// PostRef implements engine.RefSender: write b, the slice in the caller's
// memory, as one frame. The write has left b when PostRef returns.
func (c *EagerSendConn) PostRef(b []byte) error { return c.send(b) }

// Flush implements engine.RefSender: PostRef writes synchronously, so
// nothing is left in the caller's memory.
func (c *EagerSendConn) Flush() error { return nil }

// RefDoneOnReturn implements engine.SyncRefSender: PostRef writes
// synchronously, so the engine may send from memory it changes later.
func (c *EagerSendConn) RefDoneOnReturn() {}

// send writes payload b as the frame of the acquired slice.
func (c *EagerSendConn) send(b []byte) error {
	if room := c.cur * c.proto.Payload(c.stepBytes); len(b) > room {
		return fmt.Errorf("send to %s: a %s slice of %d bytes in %d steps holds at most %d", c.peer, c.proto, len(b), c.cur, room)
	}
	putHeader(&c.hdr, len(b), c.cur, c.step, c.seq)
	i := int(c.seq % uint64(len(c.socks)))
	c.step += uint64(c.cur)
	c.seq++
	if err := c.write(i, c.hdr[:], b, zeroPad[:padOf(len(b))]); err != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.err == nil {
			c.err = fmt.Errorf("send to %s: %w", c.peer, err)
		}
		return c.err
	}
	return nil
}

// write writes a, b and then pad to socket i: at once if the socket takes
// them, else blocking with the drainers armed.
func (c *EagerSendConn) write(i int, a, b, pad []byte) error {
	rc := c.rcs[i]
	if rc == nil {
		c.drain.arm(nil)
		defer c.drain.disarm(nil)
		for _, p := range [3][]byte{a, b, pad} {
			if _, err := c.socks[i].Write(p); err != nil {
				return err
			}
		}
		return nil
	}
	c.wa, c.wb, c.wc, c.woff, c.werr, c.wblock = a, b, pad, 0, nil, false
	err := rc.Write(c.writeFn)
	if err == nil && c.werr == nil && c.woff < len(a)+len(b)+len(pad) {
		c.wblock = true
		c.drain.arm(nil)
		err = rc.Write(c.writeFn)
		c.drain.disarm(nil)
	}
	if err == nil {
		err = c.werr
	}
	c.wa, c.wb, c.wc, c.wvec = nil, nil, nil, iovecs{} // hold on to no buffer
	return err
}

// writeRaw is the callback of one raw write: it writes what the socket
// takes; true ends the runtime's Write, false makes it wait until the
// socket is writable (only once the write blocks: wblock).
func (c *EagerSendConn) writeRaw(fd uintptr) bool {
	for c.woff < len(c.wa)+len(c.wb)+len(c.wc) {
		nv := c.wvec.set(c.wa, c.wb, c.wc, c.woff)
		n, err := rawWritev(fd, &c.wvec, nv)
		switch {
		case err == unix.EINTR:
			continue
		case err == unix.EAGAIN:
			return !c.wblock
		case err != nil:
			c.werr = err
			return true
		}
		c.woff += n
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
