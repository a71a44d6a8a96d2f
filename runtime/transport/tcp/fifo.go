package tcp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/engine"
)

// A frame is one posted slice on the wire: a 64-byte header
//
//	[0:4]   payload size in bytes (little endian)
//	[4:8]   nsteps: FIFO slots the slice occupies
//	[8:16]  step: the FIFO step counter of its first slot
//	[16:24] seq: the frame's sequence number on this connection
//	[24:64] zero
//
// followed by the payload and then zero bytes up to a multiple of 64
// (padOf). Frames go round-robin over a connection's sockets (frame seq on
// socket seq % nsocks); step says where a frame lands in the receiver's
// FIFO, seq in which order the engine consumes it.
//
// Steps follow NCCL: a connection's step counter only grows, a slice of
// nsteps slots starts at a step aligned to nsteps (NCCL rounds conn->step up
// when a primitive starts), so a slice never wraps around the FIFO end.
//
// The header's size and the padding keep every payload at a multiple of
// 64 bytes from the start of the stream, so that the kernel's copies
// between the socket's buffers and the (64-byte aligned) caller's memory
// are aligned on both sides. Linux appends what a thread writes to TCP
// sockets at the end of a page fragment of that thread, so with a 24-byte
// header every payload began 24 bytes past a cache line there, and the
// send's copy into the socket (_copy_from_iter, `rep movsb` on this AMD
// EPYC) took about 3x the time per byte of an aligned one: perf, 2 ranks
// over TCP loopback, all-gather of 1 MiB, 3,000 calls each way: 3,954
// samples in _copy_from_iter against 1,376 with this layout, and
// _copy_to_iter (the receive) about the same in both. The cost is up to
// 103 more bytes per frame: nothing next to a system call.
const headerSize = frameAlign

// frameAlign is the alignment of frames and payloads in the stream.
const frameAlign = 64

// headerUsed is the bytes of a header that carry fields; the rest is zero.
const headerUsed = 24

// padOf is the padding after a payload of size bytes.
func padOf(size int) int { return -size & (frameAlign - 1) }

// zeroPad is the padding a sender writes (never written to).
var zeroPad [frameAlign]byte

// putHeader writes a frame's header; the bytes after headerUsed stay zero.
func putHeader(h *[headerSize]byte, size, nsteps int, step, seq uint64) {
	binary.LittleEndian.PutUint32(h[0:], uint32(size))
	binary.LittleEndian.PutUint32(h[4:], uint32(nsteps))
	binary.LittleEndian.PutUint64(h[8:], step)
	binary.LittleEndian.PutUint64(h[16:], seq)
}

// reservedZero reports whether a header's unused bytes are zero, as every
// sender writes them: anything else is not a frame of this build.
func reservedZero(h []byte) bool {
	var or uint64
	for i := headerUsed; i < headerSize; i += 8 {
		or |= binary.LittleEndian.Uint64(h[i:])
	}
	return or == 0
}

// reservedNote is what a protocol error adds about a header whose unused
// bytes are not zero.
func reservedNote(h []byte) string {
	if reservedZero(h) {
		return ""
	}
	return fmt.Sprintf(", header bytes %d-%d not zero (a peer of another build?)", headerUsed, headerSize-1)
}

// ring tracks up to NSteps outstanding frames by sequence number.
type ring struct {
	mu   sync.Mutex
	cond sync.Cond
	buf  []byte // NSteps slots of stepBytes
	step int    // stepBytes
	ent  [protocols.NSteps]entry
	head uint64 // end step of the last freed frame: slots below are free
	hseq uint64 // seq of the next frame to free
	err  error
}

type entry struct {
	ref         []byte // payload in the caller's memory instead of the slots
	seq         uint64
	step        uint64
	nsteps      int
	size        int
	done, valid bool
}

func newRing(stepBytes int) *ring {
	r := &ring{buf: make([]byte, stepBytes*protocols.NSteps), step: stepBytes}
	r.cond.L = &r.mu
	return r
}

// ready reports whether the next frame to consume has arrived.
func (r *ring) ready() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := &r.ent[r.hseq%protocols.NSteps]
	return e.valid && e.done && e.seq == r.hseq
}

// failed reports whether the ring has failed.
func (r *ring) failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err != nil
}

// errOr returns the ring's error, or err if it has none.
func (r *ring) errOr(err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	return err
}

// fail records the first error and wakes every waiter.
func (r *ring) fail(err error) {
	r.mu.Lock()
	if r.err == nil {
		r.err = err
	}
	r.cond.Broadcast()
	r.mu.Unlock()
}

func (r *ring) slot(step uint64, nsteps int) []byte {
	i := int(step % protocols.NSteps)
	return r.buf[i*r.step : (i+nsteps)*r.step]
}

// slot1 is the memory of step's slot, capped at its end so that an append
// cannot spill into the next slot.
func (r *ring) slot1(step uint64, n int) []byte {
	i := int(step%protocols.NSteps) * r.step
	return r.buf[i : i+n : i+n]
}

// fits reports whether slots [step, step+nsteps) are free. Called with mu.
// Written so that no step, however large, overflows into fitting.
func (r *ring) fits(step uint64, nsteps int) bool {
	return nsteps <= protocols.NSteps && step >= r.head && step-r.head <= uint64(protocols.NSteps-nsteps)
}

func alignStep(step uint64, nsteps int) uint64 {
	n := uint64(nsteps)
	return (step + n - 1) / n * n
}

// SendConn is the sending end of a connection: the engine fills FIFO slots
// and posts them; one writer goroutine per socket writes its frames out and
// frees their slots.
type SendConn struct {
	r      *ring
	socks  []net.Conn
	peer   string
	queues []chan entry
	drain  *drainGroup // armed while the engine waits for a slot
	closed bool        // guarded by r.mu
	wg     sync.WaitGroup
	once   sync.Once

	// engine side, one goroutine at a time
	next     uint64 // step of the next slice
	seq      uint64 // seq of the next frame
	cur      int    // nsteps of the acquired slice
	acquired bool   // Acquire returned a slice that is not posted yet
	slots    int    // steps [next, next+slots) were returned by SendSlot and are free
}

func newSendConn(socks []net.Conn, stepBytes int, peer string, g *drainGroup) *SendConn {
	c := &SendConn{r: newRing(stepBytes), socks: socks, peer: peer, drain: g}
	c.queues = make([]chan entry, len(socks))
	for i := range socks {
		c.queues[i] = make(chan entry, protocols.NSteps)
		c.wg.Add(1)
		go c.writer(i)
	}
	return c
}

// Acquire implements engine.SendConn.
func (c *SendConn) Acquire(nsteps int) ([]byte, error) {
	if c.slots > 0 {
		return nil, c.slotsOpen("Acquire")
	}
	r := c.r
	c.next = alignStep(c.next, nsteps)
	r.mu.Lock()
	defer r.mu.Unlock()
	c.waitLocked(func() bool { return r.fits(c.next, nsteps) })
	if r.err != nil {
		return nil, r.err
	}
	c.cur = nsteps
	c.acquired = true
	return r.slot(c.next, nsteps), nil
}

// Post implements engine.SendConn.
func (c *SendConn) Post(n int) error {
	if c.slots > 0 {
		return c.slotsOpen("Post")
	}
	return c.post(entry{size: n, nsteps: c.cur})
}

// slotsOpen is the error of a slice call while slots from SendSlot are
// not posted.
func (c *SendConn) slotsOpen(call string) error {
	return fmt.Errorf("send to %s: %s with %d slots from SendSlot not posted", c.peer, call, c.slots)
}

// PostRef implements engine.RefSender: the slice is written from b, which
// must not change until Flush returns.
func (c *SendConn) PostRef(b []byte) error {
	if c.slots > 0 {
		return c.slotsOpen("PostRef")
	}
	if len(b) > c.cur*c.r.step {
		return fmt.Errorf("slice of %d bytes exceeds its %d slots", len(b), c.cur)
	}
	return c.post(entry{size: len(b), nsteps: c.cur, ref: b})
}

// post queues e, a frame of e.nsteps slots from step c.next, for its
// socket's writer. Its slots must be free (Acquire or waitFree).
func (c *SendConn) post(e entry) error {
	e.seq, e.step, e.valid = c.seq, c.next, true
	c.next += uint64(e.nsteps)
	c.seq++
	c.acquired = false
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	r.ent[e.seq%protocols.NSteps] = e
	// At most NSteps frames are outstanding (each holds a slot), so the
	// queue never fills and this send does not block.
	c.queues[e.seq%uint64(len(c.queues))] <- e
	return nil
}

// SendSlot implements engine.SlotSender: it waits until the slot ahead
// steps after the oldest unposted one is free, by Acquire's rule (the frame
// that last used it has been written to its socket; the receiver's FIFO
// back-pressures through TCP), and returns its memory, one step's payload
// with its capacity capped there. The slot stays the caller's until it is
// posted: calling SendSlot again for it returns the same memory, with what
// was written into it.
func (c *SendConn) SendSlot(ahead int) ([]byte, error) {
	if ahead < 0 || ahead >= protocols.NSteps {
		return nil, fmt.Errorf("SendSlot(%d): ahead must be in [0, %d)", ahead, protocols.NSteps)
	}
	if c.acquired {
		return nil, fmt.Errorf("send to %s: SendSlot while an acquired slice is not posted", c.peer)
	}
	step := c.next + uint64(ahead)
	if ahead >= c.slots {
		// Slots are freed in step order: step free means every slot
		// before it is free too.
		if err := c.waitFree(step); err != nil {
			return nil, err
		}
		c.slots = ahead + 1
	}
	return c.r.slot1(step, c.r.step), nil
}

// PostSlot implements engine.SlotSender: it sends the oldest unposted slot
// as a frame of one step holding its first nbytes, as Post does for a
// slice of one step, and advances by one step. A slot SendSlot never
// returned is sent as it is, once it is free.
func (c *SendConn) PostSlot(nbytes int) error {
	if nbytes < 0 || nbytes > c.r.step {
		return fmt.Errorf("PostSlot(%d): a slot holds 0 to %d bytes", nbytes, c.r.step)
	}
	if c.acquired {
		return fmt.Errorf("send to %s: PostSlot while an acquired slice is not posted", c.peer)
	}
	if c.slots == 0 {
		if err := c.waitFree(c.next); err != nil {
			return err
		}
	} else {
		c.slots--
	}
	return c.post(entry{size: nbytes, nsteps: 1})
}

// waitFree waits until step's slot is free, or the connection fails.
func (c *SendConn) waitFree(step uint64) error {
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	c.waitLocked(func() bool { return r.fits(step, 1) })
	return r.err
}

// waitLocked waits, with r.mu held, until ok() or the connection fails,
// with the rank's drainers armed while it blocks.
func (c *SendConn) waitLocked(ok func() bool) {
	r := c.r
	if r.err != nil || ok() {
		return
	}
	c.drain.arm(nil)
	for r.err == nil && !ok() {
		r.cond.Wait()
	}
	c.drain.disarm(nil)
}

// writer writes socket i's frames in order; it exits when its queue is
// closed (Close) or a write fails.
func (c *SendConn) writer(i int) {
	defer c.wg.Done()
	sock := c.socks[i]
	r := c.r
	var hdr [headerSize]byte
	vec := new([3][]byte) // reused: a frame's write allocates nothing
	bufs := new(net.Buffers)
	for e := range c.queues[i] {
		putHeader(&hdr, e.size, e.nsteps, e.step, e.seq)
		data := e.ref
		if data == nil {
			data = r.slot(e.step, e.nsteps)[:e.size]
		}
		*vec = [3][]byte{hdr[:], data, zeroPad[:padOf(e.size)]}
		*bufs = vec[:]
		if _, err := bufs.WriteTo(sock); err != nil {
			r.fail(fmt.Errorf("send to %s: %w", c.peer, err))
			return
		}
		r.mu.Lock()
		r.ent[e.seq%protocols.NSteps].done = true
		r.ent[e.seq%protocols.NSteps].ref = nil
		// Sockets finish out of order: free the in-order prefix.
		for {
			h := &r.ent[r.hseq%protocols.NSteps]
			if !h.valid || !h.done || h.seq != r.hseq {
				break
			}
			r.head = h.step + uint64(h.nsteps)
			h.valid = false
			r.hseq++
		}
		r.cond.Broadcast()
		r.mu.Unlock()
	}
}

// Flush waits until every posted frame has been written to its socket.
func (c *SendConn) Flush() error {
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	c.waitLocked(func() bool { return r.hseq >= c.seq })
	if r.hseq < c.seq {
		return r.err
	}
	return nil
}

// Fail makes every pending and later call return err.
func (c *SendConn) Fail(err error) { c.r.fail(err) }

// Close stops the writers and closes the sockets. Unflushed frames are lost.
func (c *SendConn) Close() error {
	c.once.Do(func() {
		c.r.fail(engine.ErrClosed)
		c.r.mu.Lock()
		c.closed = true
		for _, q := range c.queues {
			close(q)
		}
		c.r.mu.Unlock()
		for _, s := range c.socks {
			s.Close()
		}
		c.wg.Wait()
	})
	return nil
}

// RecvConn is the receiving end: one reader goroutine per socket reads
// frames into free FIFO slots; the engine consumes them in sequence order,
// in place (frames of every protocol carry the payload as it is: see
// EagerSendConn).
type RecvConn struct {
	proto   protocols.Proto
	r       *ring
	socks   []net.Conn
	peer    string
	onError func(error)
	closing bool // guarded by r.mu
	wg      sync.WaitGroup
	once    sync.Once

	// The drainer reads only while the group says so (drainGroup); it
	// waits for wake meanwhile, and exits when quit is closed.
	drain     *drainGroup
	selfArmed int // receives of this connection blocked, guarded by drain.mu
	wake      chan struct{}
	quit      chan struct{}
	quitOnce  sync.Once
	rarmed    bool          // readSock armed the group, guarded by rmu
	draining  bool          // the drainer holds rmu to read, guarded by r.mu
	peeks     atomic.Uint64 // times the drainer found the socket readable (tests count them)

	// engine side, one goroutine at a time
	waited bool // Wait returned a slice that is not released yet
	slots  int  // frames [hseq, hseq+slots) were returned by RecvSlot

	// With one socket and LL or LL128, Wait reads a frame itself when none has arrived
	// (see waitInline), polling the socket for spin before it blocks, and
	// the reader goroutine only drains the socket while Wait is not
	// reading.
	inline bool
	spin   time.Duration
	rmu    sync.Mutex // held by whoever reads a frame from the socket
	raw    *rawSock   // the socket, out of the runtime's poller (inline)
	want   uint64     // seq of the next frame on the socket (inline), guarded by rmu

	// The state of one raw read, for readFn and peekFn (method values made
	// once, so that a read allocates nothing); guarded by rmu, and peek by
	// being the drainer's.
	hdr            [headerSize]byte
	pad            [frameAlign]byte // the padding's sink
	rvec           iovecs           // where the read puts its bytes
	rnvec          int              // buffers in rvec
	rn             int
	rerr           error
	rprobe, ragain bool
	rpolls         int // EAGAINs of this spin, to read the clock every few
	runtil         time.Time
	readFn, peekFn func(fd uintptr) bool
	peekBuf        [1]byte
	perr           error
	reads          atomic.Uint64 // reads that returned bytes (tests count them)
	directs        atomic.Uint64 // slices read straight into WaitInto's dst (tests count them)
}

func newRecvConn(p protocols.Proto, socks []net.Conn, stepBytes int, peer string, onError func(error), spin time.Duration, g *drainGroup) *RecvConn {
	c := &RecvConn{proto: p, r: newRing(stepBytes), socks: socks, peer: peer, onError: onError, spin: spin,
		drain: g, wake: make(chan struct{}, 1), quit: make(chan struct{})}
	// Inline for the small-message protocols: for Simple (large messages)
	// a reader goroutine reading the next slice while the engine reduces
	// this one is worth more than a saved hand-off (measured: reduce-scatter
	// of 2-64 MiB over TCP was 15-25% slower inline).
	if len(socks) == 1 && p != protocols.Simple {
		c.inline = c.setInline(socks[0])
	}
	if c.inline {
		if g != nil {
			g.add(c)
		}
		c.wg.Add(1)
		go c.drainer()
		return c
	}
	for i := range socks {
		c.wg.Add(1)
		go c.reader(i)
	}
	return c
}

// setInline prepares sock for inline reading: it takes the socket out of
// the runtime's poller (rawSock). It reports false if sock is not a socket
// (tests), and the reader goroutines are used.
func (c *RecvConn) setInline(sock net.Conn) bool {
	raw, ok := takeRaw(sock)
	if !ok {
		return false
	}
	c.raw = raw
	c.readFn, c.peekFn = c.readRaw, c.peekRaw
	return true
}

// readRaw is the callback of one raw read (readSock): true ends the
// runtime's Read, false makes it wait until the socket is readable.
func (c *RecvConn) readRaw(fd uintptr) bool {
	c.rn, c.rerr = rawReadv(fd, &c.rvec, c.rnvec)
	if c.rerr != unix.EAGAIN {
		if c.rerr == unix.EINTR {
			c.ragain = true
		}
		return true
	}
	switch {
	case c.rprobe:
		return true // nothing there: report it
	case !c.runtil.IsZero() && (c.rpolls%spinClockEvery != 0 || time.Now().Before(c.runtil)):
		// An EAGAIN read takes ~0.5 us; the clock is read every few.
		c.rpolls++
		if c.rpolls > spinYieldAfter {
			schedYield()
		}
		c.ragain = true
		return true // poll again, without blocking
	}
	if !c.rarmed { // this rank blocks: the other drainers read
		c.rarmed = true
		c.drain.arm(c)
	}
	return false // block until readable
}

// peekRaw is the drainer's callback: it ends the wait once a byte can be
// read, without reading it.
func (c *RecvConn) peekRaw(fd uintptr) bool {
	// recvfrom without an address: unix.Recvfrom would allocate one.
	_, _, errno := unix.Syscall6(unix.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&c.peekBuf[0])), 1,
		unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	c.perr = nil
	if errno != 0 {
		c.perr = errno
	}
	return c.perr != unix.EAGAIN
}

// reader reads socket i's frames; it exits on Close or on its first error,
// which it records and reports through onError unless the connection is
// closing.
func (c *RecvConn) reader(i int) {
	defer c.wg.Done()
	sock := c.socks[i]
	nsocks := uint64(len(c.socks))
	want := uint64(i) // next seq expected on this socket
	var hdr [headerSize]byte
	pad := make([]byte, frameAlign) // this reader's padding sink
	for {
		if _, err := io.ReadFull(sock, hdr[:]); err != nil {
			c.readFailed(err)
			return
		}
		if err := c.readPayload(hdr[:], want, sock, pad); err != nil {
			if c.r.failed() {
				return
			}
			c.readFailed(err)
			return
		}
		want += nsocks
	}
}

// readPayload checks a frame's header, waits for its slots, reads its
// payload and padding from sock (nil: the inline socket, with rmu held,
// padding into c.pad; else into pad) and publishes it to Wait.
func (c *RecvConn) readPayload(hdr []byte, want uint64, sock io.Reader, pad []byte) error {
	r := c.r
	size := int(binary.LittleEndian.Uint32(hdr[0:]))
	nsteps := int(binary.LittleEndian.Uint32(hdr[4:]))
	step := binary.LittleEndian.Uint64(hdr[8:])
	seq := binary.LittleEndian.Uint64(hdr[16:])
	r.mu.Lock()
	// A slice starts at a step aligned to its size and does not wrap the
	// FIFO's end.
	if nsteps < 1 || nsteps > protocols.NSteps || size > nsteps*r.step || step%uint64(nsteps) != 0 ||
		int(step%protocols.NSteps)+nsteps > protocols.NSteps || step < r.head || seq != want || !reservedZero(hdr) {
		r.mu.Unlock()
		return fmt.Errorf("protocol error: frame seq %d (want %d) step %d, %d steps, %d bytes%s", seq, want, step, nsteps, size, reservedNote(hdr))
	}
	for r.err == nil && (!r.fits(step, nsteps) || seq >= r.hseq+protocols.NSteps) {
		if seq == r.hseq {
			// Every frame before it is released: its slots are as free as
			// they will ever be. A sender only sends a slice whose slots
			// were free in its own FIFO, which is never ahead of this one.
			r.mu.Unlock()
			return fmt.Errorf("protocol error: frame seq %d: steps [%d, %d) lie outside the FIFO window [%d, %d)",
				seq, step, step+uint64(nsteps), r.head, r.head+protocols.NSteps)
		}
		r.cond.Wait()
	}
	if r.err != nil {
		r.mu.Unlock()
		return r.err
	}
	dst := r.slot(step, nsteps)[:size]
	r.mu.Unlock()
	var err error
	if p := padOf(size); sock != nil {
		if _, err = io.ReadFull(sock, dst); err == nil && p > 0 {
			_, err = io.ReadFull(sock, pad[:p])
		}
	} else {
		_, err = c.readSockV(dst, c.pad[:p], nil, 0, size+p, false, false)
	}
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.ent[seq%protocols.NSteps] = entry{seq: seq, step: step, nsteps: nsteps, size: size, done: true, valid: true}
	r.cond.Broadcast()
	r.mu.Unlock()
	return nil
}

// drainer reads frames into the FIFO while Wait is not reading them (an
// inline connection): when this rank is busy sending, the peer's frames
// still leave the socket, so two ranks that both write never wait on each
// other's full sockets, as with reader goroutines. It waits for the socket
// to be readable without reading (MSG_PEEK), then reads a frame if Wait
// has not taken it meanwhile. It exits on Close or the first error.
func (c *RecvConn) drainer() {
	defer c.wg.Done()
	for {
		if !c.drain.drains(c) {
			select {
			case <-c.wake:
			case <-c.quit:
				return
			}
			continue
		}
		err := c.raw.Read(c.peekFn)
		if err == nil && c.perr != nil {
			err = c.perr
		}
		if err != nil {
			if !c.r.failed() {
				c.readFailed(err)
			}
			return
		}
		c.peeks.Add(1)
		if !c.drain.drains(c) {
			continue // Wait reads it
		}
		c.rmu.Lock()
		c.setDraining(true)
		err = c.readFrame(false)
		c.rmu.Unlock()
		c.setDraining(false)
		if err != nil {
			if !c.r.failed() {
				c.readFailed(err)
			}
			return
		}
	}
}

// readFrame reads one frame of an inline connection into the FIFO, if one
// has begun to arrive; with rmu held. With poll it waits for it, polling
// the socket for c.spin before blocking; without, it returns at once when
// the socket has nothing.
func (c *RecvConn) readFrame(poll bool) error {
	hdr := c.hdr[:]
	got, err := c.readSock(hdr, poll, !poll)
	if err != nil || got == 0 {
		return err
	}
	if got < headerSize {
		if _, err := c.readSock(hdr[got:], false, false); err != nil {
			return err
		}
	}
	if err := c.readPayload(hdr, c.want, nil, nil); err != nil {
		return err
	}
	c.want++
	return nil
}

// spinClockEvery is how many EAGAIN polls a spinning read makes per look
// at the clock.
const spinClockEvery = 8

// spinYieldAfter is how many EAGAIN polls a spinning read makes before it
// yields its core between polls (sched_yield): on a machine with other
// runnable work, the peer the read waits for may be that work.
const spinYieldAfter = 4

// readNext reads the frame Wait wants, with rmu held and the FIFO empty
// (Wait found frame hseq missing, and every frame before c.want is in the
// FIFO: c.want == hseq, every earlier frame released). Its slots are the
// nsteps after the last released frame, as the sender placed them, so the
// header and the payload are read with one read, straight into the FIFO
// (readPlanned). Frames that do not fit one read's plan go through
// readFrame.
func (c *RecvConn) readNext(nsteps, wn int) error {
	r := c.r
	r.mu.Lock()
	step := alignStep(r.head, nsteps)
	plain := c.plannable(nsteps, wn, step)
	var dst []byte
	if plain {
		dst = r.slot(step, nsteps)[:wn]
	}
	r.mu.Unlock()
	if !plain {
		return c.readFrame(true)
	}
	if err := c.readPlanned(nsteps, step, dst); err != nil {
		return err
	}
	r.mu.Lock()
	r.ent[c.want%protocols.NSteps] = entry{seq: c.want, step: step, nsteps: nsteps, size: wn, done: true, valid: true}
	r.cond.Broadcast()
	r.mu.Unlock()
	c.want++
	return nil
}

// plannable reports whether the next frame, of wn bytes in nsteps steps,
// can be read with one read's plan: every frame before it is released
// (the FIFO is empty), and its slots, from step, lie inside the FIFO. With
// r.mu held.
func (c *RecvConn) plannable(nsteps, wn int, step uint64) bool {
	r := c.r
	return nsteps >= 1 && nsteps <= protocols.NSteps && wn <= nsteps*r.step &&
		int(step%protocols.NSteps)+nsteps <= protocols.NSteps && r.hseq == c.want
}

// readPlanned reads the next frame, expected to start at step with
// len(dst) bytes in nsteps steps, from the socket: its header into c.hdr
// and its payload into dst, with one read when the socket holds it all,
// polling for c.spin first; with rmu held. A header that says otherwise
// (a peer running other settings) ends the read before more is read.
func (c *RecvConn) readPlanned(nsteps int, step uint64, dst []byte) error {
	hdr := c.hdr[:]
	wn := len(dst)
	pad := c.pad[:padOf(wn)]
	got, err := c.readSockV(hdr, dst, pad, 0, headerSize, true, false)
	if err != nil {
		return err
	}
	size := int(binary.LittleEndian.Uint32(hdr[0:]))
	hsteps := int(binary.LittleEndian.Uint32(hdr[4:]))
	hstep := binary.LittleEndian.Uint64(hdr[8:])
	seq := binary.LittleEndian.Uint64(hdr[16:])
	switch {
	case size != wn || hsteps != nsteps:
		return fmt.Errorf("%s sent a %s slice of %d bytes in %d steps, want %d bytes in %d (do all ranks use the same NCCL_* settings?)", c.peer, c.proto, size, hsteps, wn, nsteps)
	case hstep != step || seq != c.want || !reservedZero(hdr):
		return fmt.Errorf("protocol error: frame seq %d (want %d) step %d (want %d)%s", seq, c.want, hstep, step, reservedNote(hdr))
	}
	if end := headerSize + wn + len(pad); got < end {
		if _, err := c.readSockV(hdr, dst, pad, got, end, false, false); err != nil {
			return err
		}
	}
	return nil
}

// WaitInto implements engine.DirectReceiver: it receives the next slice,
// of len(dst) bytes in nsteps steps, into dst and frees its slots. On an
// inline connection whose next frame is still in the socket, the frame's
// payload goes from the socket straight into dst (readInto); otherwise it
// is copied from the FIFO, as after Wait.
func (c *RecvConn) WaitInto(nsteps int, dst []byte) error {
	if c.slots > 0 {
		return c.slotsOpen("WaitInto")
	}
	if c.inline && !c.waited {
		if done, err := c.readInto(nsteps, dst); done || err != nil {
			return err
		}
	}
	b, err := c.Wait(nsteps, len(dst))
	if err != nil {
		return err
	}
	copy(dst, b)
	return c.Release()
}

// readInto reads the next frame's payload straight into dst if nobody has
// begun to read that frame: done reports whether it did. Not done, the
// frame is in the FIFO or on its way there (the drainer is reading).
func (c *RecvConn) readInto(nsteps int, dst []byte) (done bool, err error) {
	r := c.r
	if r.ready() || !c.rmu.TryLock() {
		return false, nil
	}
	defer c.rmu.Unlock()
	r.mu.Lock()
	step := alignStep(r.head, nsteps)
	plain := r.err == nil && c.plannable(nsteps, len(dst), step)
	r.mu.Unlock()
	if !plain {
		return false, nil
	}
	if err := c.readPlanned(nsteps, step, dst); err != nil {
		if !r.failed() {
			c.readFailed(err)
		}
		return true, r.errOr(err)
	}
	// Received and released at once: the frame never used its slots.
	r.mu.Lock()
	r.head = step + uint64(nsteps)
	r.hseq++
	r.cond.Broadcast()
	r.mu.Unlock()
	c.want++
	c.directs.Add(1)
	return true, nil
}

// readSock reads len(b) bytes from an inline connection's socket. With
// spin it first polls for c.spin; with probe it returns 0 bytes at once if
// nothing is there yet. Otherwise it blocks (rawSock's ppoll) until
// b is full or the socket fails (Fail, Close).
func (c *RecvConn) readSock(b []byte, spin, probe bool) (int, error) {
	return c.readSockV(b, nil, nil, 0, len(b), spin, probe)
}

// readSockV is readSock into a, b and then d, as one stream: it reads from
// byte off of the three until it has at least want bytes of them, each read
// taking as much of the rest as the socket holds. It returns the bytes of
// the three filled (up to their length).
func (c *RecvConn) readSockV(a, b, d []byte, off, want int, spin, probe bool) (int, error) {
	n, err := c.readSockArmed(a, b, d, off, want, spin, probe)
	if c.rarmed {
		c.rarmed = false
		c.drain.disarm(c)
	}
	return n, err
}

// readSockArmed is readSockV but for disarming the drainers it armed.
func (c *RecvConn) readSockArmed(a, b, d []byte, got, want int, spin, probe bool) (int, error) {
	c.runtil, c.rpolls = time.Time{}, 0
	if spin && c.spin > 0 {
		c.runtil = time.Now().Add(c.spin)
	}
	first := got
	for got < want {
		c.rnvec = c.rvec.set(a, b, d, got)
		c.rprobe, c.ragain = probe && got == first, false
		err := c.raw.Read(c.readFn)
		switch {
		case err != nil:
			return got, err
		case c.ragain:
			continue
		case c.rprobe && c.rerr == unix.EAGAIN:
			return got, nil
		case c.rerr != nil:
			return got, c.rerr
		case c.rn == 0:
			return got, io.EOF
		}
		c.reads.Add(1)
		got += c.rn
	}
	c.rvec = iovecs{} // hold on to no buffer
	return got, nil
}

func (c *RecvConn) readFailed(err error) {
	c.r.mu.Lock()
	closing := c.closing || c.r.err != nil
	c.r.mu.Unlock()
	if closing {
		return
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = fmt.Errorf("connection from %s closed by the peer", c.peer)
	} else {
		err = fmt.Errorf("receive from %s: %w", c.peer, err)
	}
	c.r.fail(err)
	if c.onError != nil {
		c.onError(err)
	}
}

// Wait implements engine.RecvConn.
func (c *RecvConn) Wait(nsteps, nbytes int) ([]byte, error) {
	if c.slots > 0 {
		return nil, c.slotsOpen("Wait")
	}
	if c.inline {
		if err := c.waitInline(nsteps, nbytes); err != nil {
			return nil, err
		}
	}
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	armed := false // this rank blocks: the drainers read
	defer func() {
		if armed {
			c.drain.disarm(nil)
		}
	}()
	for {
		e := &r.ent[r.hseq%protocols.NSteps]
		if e.valid && e.done && e.seq == r.hseq {
			if e.nsteps != nsteps || e.size != nbytes {
				return nil, fmt.Errorf("%s sent a %s slice of %d bytes in %d steps, want %d bytes in %d (do all ranks use the same NCCL_* settings?)", c.peer, c.proto, e.size, e.nsteps, nbytes, nsteps)
			}
			c.waited = true
			return r.slot(e.step, e.nsteps)[:e.size], nil
		}
		if r.err != nil {
			return nil, r.err
		}
		if !armed {
			armed = true
			c.drain.arm(nil)
		}
		r.cond.Wait()
	}
}

// waitInline makes sure the next frame, expected to hold wn wire bytes in
// nsteps steps, is in the FIFO: it is there, or Wait reads it itself
// (readNext), polling the socket for c.spin before it blocks, so that a
// small message costs no hand-off between goroutines; or the drainer is
// reading it and Wait waits for that.
func (c *RecvConn) waitInline(nsteps, wn int) error {
	r := c.r
	for {
		if r.ready() {
			return nil
		}
		if err := r.errOr(nil); err != nil {
			return err
		}
		if c.rmu.TryLock() {
			// The drainer may have published the frame between the check
			// above and the lock: reading now would wait for the next.
			if c.r.ready() {
				c.rmu.Unlock()
				return nil
			}
			err := c.readNext(nsteps, wn)
			c.rmu.Unlock()
			if err != nil {
				if !r.failed() {
					c.readFailed(err)
				}
				return r.errOr(err)
			}
			continue
		}
		// The drainer is reading: it publishes the frame under r.mu, or
		// finds none (Wait read it) and lets go; then try again. While
		// the drainer only holds the lock to begin or end reading, this
		// loops.
		r.mu.Lock()
		for r.err == nil && c.draining && !(r.ent[r.hseq%protocols.NSteps].valid && r.ent[r.hseq%protocols.NSteps].seq == r.hseq) {
			r.cond.Wait()
		}
		r.mu.Unlock()
	}
}

// setDraining records whether the drainer holds rmu to read, and wakes a
// Wait that waits for it to let go.
func (c *RecvConn) setDraining(on bool) {
	c.r.mu.Lock()
	c.draining = on
	if !on {
		c.r.cond.Broadcast()
	}
	c.r.mu.Unlock()
}

// Release implements engine.RecvConn.
func (c *RecvConn) Release() error {
	if c.slots > 0 {
		return c.slotsOpen("Release")
	}
	c.waited = false
	c.release()
	return nil
}

// release frees the oldest unreleased frame's slots.
func (c *RecvConn) release() {
	c.r.mu.Lock()
	c.releaseLocked()
	c.r.mu.Unlock()
}

// releaseLocked is release with r.mu held.
func (c *RecvConn) releaseLocked() {
	r := c.r
	e := &r.ent[r.hseq%protocols.NSteps]
	r.head = e.step + uint64(e.nsteps)
	e.valid = false
	r.hseq++
	r.cond.Broadcast()
}

// slotsOpen is the error of a slice call while slots from RecvSlot are
// not released.
func (c *RecvConn) slotsOpen(call string) error {
	return fmt.Errorf("receive from %s: %s with %d slots from RecvSlot not released", c.peer, call, c.slots)
}

// RecvSlot implements engine.SlotReceiver: it waits until the frame ahead
// after the oldest unreleased one has arrived, checks that it is a slot
// (a frame of one step) of nbytes, and returns its bytes, capped there;
// they stay valid until that slot is released. Simple connections only.
func (c *RecvConn) RecvSlot(ahead, nbytes int) ([]byte, error) {
	r := c.r
	switch {
	case c.proto != protocols.Simple:
		return nil, slotProtoErr(c.proto)
	case ahead < 0 || ahead >= protocols.NSteps:
		return nil, fmt.Errorf("RecvSlot(%d, %d): ahead must be in [0, %d)", ahead, nbytes, protocols.NSteps)
	case nbytes < 0 || nbytes > r.step:
		return nil, fmt.Errorf("RecvSlot(%d, %d): a slot holds 0 to %d bytes", ahead, nbytes, r.step)
	case c.waited:
		return nil, fmt.Errorf("receive from %s: RecvSlot while a waited slice is not released", c.peer)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e, err := c.waitSlot(ahead, nbytes)
	if err != nil {
		return nil, err
	}
	c.slots = max(c.slots, ahead+1)
	return r.slot1(e.step, nbytes), nil
}

// waitSlot waits, with r.mu held, until the frame ahead after the oldest
// unreleased one has arrived and returns its entry, if it is a slot of
// nbytes (of any size for nbytes < 0).
func (c *RecvConn) waitSlot(ahead, nbytes int) (*entry, error) {
	r := c.r
	seq := r.hseq + uint64(ahead)
	for {
		// A frame of more than one step before it (a peer running another
		// schedule) could keep it from ever arriving: report that too.
		for q := r.hseq; q <= seq; q++ {
			e := &r.ent[q%protocols.NSteps]
			if !e.valid || !e.done || e.seq != q {
				continue
			}
			switch {
			case e.nsteps != 1 && (q < seq || nbytes < 0):
				return nil, fmt.Errorf("%s sent a %s slice of %d bytes in %d steps, want slots of 1 step (do all ranks use the same NCCL_* settings?)", c.peer, c.proto, e.size, e.nsteps)
			case q == seq && (e.nsteps != 1 || nbytes >= 0 && e.size != nbytes):
				return nil, fmt.Errorf("%s sent a %s slice of %d bytes in %d steps, want %d bytes in 1 (do all ranks use the same NCCL_* settings?)", c.peer, c.proto, e.size, e.nsteps, nbytes)
			case q == seq:
				return e, nil
			}
		}
		if r.err != nil {
			return nil, r.err
		}
		r.cond.Wait()
	}
}

// ReleaseSlot implements engine.SlotReceiver: it frees the oldest
// unreleased slot, as Release frees a slice of one step, and advances by
// one step. A slot RecvSlot never returned is waited for, then freed.
func (c *RecvConn) ReleaseSlot() error {
	switch {
	case c.proto != protocols.Simple:
		return slotProtoErr(c.proto)
	case c.waited:
		return fmt.Errorf("receive from %s: ReleaseSlot while a waited slice is not released", c.peer)
	}
	r := c.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := c.waitSlot(0, -1); err != nil {
		return err
	}
	c.slots = max(c.slots-1, 0)
	c.releaseLocked()
	return nil
}

// wakeDrainer wakes the drainer if it waits to be armed; with drain.mu
// held.
func (c *RecvConn) wakeDrainer() {
	select {
	case c.wake <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// slotProtoErr is the slot API's error on LL and LL128 connections.
func slotProtoErr(p protocols.Proto) error {
	return fmt.Errorf("slot API needs the Simple protocol, not %s", p)
}

// Fail makes every pending and later call return err; a read blocked on
// the socket returns at once.
func (c *RecvConn) Fail(err error) {
	c.r.fail(err)
	c.quitOnce.Do(func() { close(c.quit) })
	if c.inline {
		c.raw.Fail()
	}
}

// SetClosing marks the connection as shutting down: the peer closing it
// from now on is expected and not reported.
func (c *RecvConn) SetClosing() {
	c.r.mu.Lock()
	c.closing = true
	c.r.mu.Unlock()
}

// Close stops the readers and closes the sockets.
func (c *RecvConn) Close() error {
	c.once.Do(func() {
		c.SetClosing()
		c.r.fail(engine.ErrClosed)
		c.quitOnce.Do(func() { close(c.quit) })
		for _, s := range c.socks {
			s.Close()
		}
		if c.raw != nil {
			c.raw.Close()
		}
		c.wg.Wait()
	})
	return nil
}
