//go:build linux

package shm

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/engine"
)

// Connection states. A connection is busy while one of its calls runs,
// while the engine holds a Simple slice (Acquire to Post, Wait to Release)
// and while it holds slots of the slot API (see slot.go); Close unmaps only
// when it can move every connection from idle to closed.
const (
	stateIdle int32 = iota
	stateBusy
	stateClosed
)

// conn is what both ends of a FIFO share: its place in the segment and the
// step counter of this end.
type conn struct {
	seg  *Segment
	p    protocols.Proto
	key  connKey
	peer int // the other end's local rank

	tail, head         *uint64 // steps posted (by the sender), steps freed (by the receiver)
	tailWait, headWait *uint32 // the receiver, the sender announces it sleeps
	tailSeq, headSeq   *uint32 // the futex words they sleep on
	sizes              *[protocols.NSteps]uint64

	fifo        []byte   // Simple: NSteps slots of stepBytes
	words       []uint64 // LL, LL128: the same memory as lines
	stepBytes   int      // one slot in the FIFO
	stepPayload int      // payload bytes per step
	stepWords   int      // one slot in words

	state atomic.Int32

	// The engine's side, one goroutine at a time.
	step    uint64 // the next slice's first step (Simple: rounded up to its nsteps); for the slot API, the oldest step not posted (released)
	cur     int    // steps of the slice acquired or received, 0 when none
	slotEnd uint64 // slot API: one past the last step opened; slots are held while slotEnd > step
	cache   uint64 // last head (sender) or tail (receiver) seen
	staging []byte // LL, LL128: payload before encoding or after decoding
	// sent is the size word the sender last stored in each slot: an
	// unchanged one is not stored again (it is still there, published by
	// an earlier tail or flag), which keeps a store to a line the receiver
	// reads off the common path of equal slices.
	sent [protocols.NSteps]uint64
}

func (s *Segment) newConn(k connKey, peer int) (*conn, error) {
	if s.closed {
		return nil, fmt.Errorf("shm: %s: %w", s.name, engine.ErrClosed)
	}
	g := &s.geo
	if err := g.check(k.ch, k.from, k.to, k.p); err != nil {
		return nil, fmt.Errorf("shm: %w", err)
	}
	c := &conn{seg: s, p: k.p, key: k, peer: peer}
	base := g.ctl(k.ch, k.from, k.to, k.p)
	c.tail, c.tailWait, c.tailSeq = s.u64(base+cTail), s.u32(base+cTailWait), s.u32(base+cTailSeq)
	c.head, c.headWait, c.headSeq = s.u64(base+cHead), s.u32(base+cHeadWait), s.u32(base+cHeadSeq)
	c.sizes = (*[protocols.NSteps]uint64)(unsafe.Pointer(&s.mem[base+cSizes]))
	c.stepBytes = g.stepBytes[k.p]
	c.stepPayload = k.p.Payload(c.stepBytes)
	c.stepWords = c.stepBytes / 8
	off := g.fifo(k.ch, k.from, k.to, k.p)
	n := int64(protocols.NSteps * c.stepBytes)
	what := fmt.Sprintf("%v FIFO of local ranks %d -> %d, connection set %d (%s)", k.p, k.from, k.to, k.ch, protoKnob[k.p])
	if err := s.reserve(off, int64(g.fifoBytes[k.p]), what); err != nil {
		return nil, err
	}
	c.fifo = s.mem[off : off+n : off+n]
	if k.p != protocols.Simple {
		c.words = unsafe.Slice((*uint64)(unsafe.Pointer(&c.fifo[0])), len(c.fifo)/8)
	}
	return c, nil
}

func (c *conn) errorf(format string, args ...any) error {
	k := c.key
	return fmt.Errorf("shm %v channel %d, local rank %d -> %d: %s", k.p, k.ch, k.from, k.to, fmt.Sprintf(format, args...))
}

func (c *conn) wrap(err error) error {
	k := c.key
	return fmt.Errorf("shm %v channel %d, local rank %d -> %d: %w", k.p, k.ch, k.from, k.to, err)
}

// enter marks the connection busy, or says why it cannot be used.
func (c *conn) enter() error {
	if !c.state.CompareAndSwap(stateIdle, stateBusy) {
		if c.state.Load() == stateClosed {
			return c.wrap(engine.ErrClosed)
		}
		return c.errorf("used by two goroutines at once")
	}
	if err := c.seg.err(); err != nil {
		c.state.Store(stateIdle)
		return c.wrap(err)
	}
	return nil
}

func (c *conn) exit() { c.state.Store(stateIdle) }

func (c *conn) checkSteps(nsteps int) error {
	if nsteps < 1 || nsteps > protocols.NSteps {
		return c.errorf("slice of %d steps: want 1..%d", nsteps, protocols.NSteps)
	}
	if c.p == protocols.Simple && protocols.NSteps%nsteps != 0 {
		return c.errorf("slice of %d steps: Simple slices must divide the %d-step FIFO (1, 2, 4 or 8)", nsteps, protocols.NSteps)
	}
	return nil
}

func (c *conn) stage() []byte {
	if c.staging == nil {
		c.staging = make([]byte, protocols.NSteps*c.stepPayload)
	}
	return c.staging
}

// slot returns the lines of step.
func (c *conn) slot(step uint64) []uint64 {
	i := int(step % protocols.NSteps)
	return c.words[i*c.stepWords : (i+1)*c.stepWords]
}

// part is the payload that step k of a slice of n bytes carries.
func (c *conn) part(b []byte, k int) []byte {
	n := len(b)
	return b[min(k*c.stepPayload, n):min((k+1)*c.stepPayload, n)]
}

// publish stores a step counter and wakes the other side if it announced
// that it sleeps (see await).
func (c *conn) publish(word *uint64, waitFlag, seq *uint32, v uint64) {
	atomic.StoreUint64(word, v)
	c.wake(waitFlag, seq)
}

// wake bumps seq and wakes its sleeper if one announced itself. It must
// follow, in this goroutine, an atomic store of what the sleeper waits for.
func (c *conn) wake(waitFlag, seq *uint32) {
	if atomic.LoadUint32(waitFlag) != 0 {
		atomic.AddUint32(seq, 1)
		futexWake(seq)
	}
}

// sizeWord describes the slice that starts in a slot.
func sizeWord(nbytes, nsteps int) uint64 { return uint64(nbytes)<<4 | uint64(nsteps) }

// SendConn is the sending end of a FIFO. It implements engine.SendConn.
type SendConn struct{ *conn }

var _ engine.SendConn = (*SendConn)(nil)

// Acquire implements engine.SendConn. For Simple it waits for nsteps free
// slots and returns them; for LL and LL128 it returns a private staging
// buffer of nsteps steps' payload at once, and Post waits for the slots.
func (c *SendConn) Acquire(nsteps int) ([]byte, error) {
	if err := c.checkSteps(nsteps); err != nil {
		return nil, err
	}
	if c.cur != 0 {
		return nil, c.errorf("Acquire of %d steps while %d acquired steps are not posted", nsteps, c.cur)
	}
	if c.slotEnd > c.step {
		return nil, c.errorf("Acquire of %d steps while %d slots from SendSlot are not posted", nsteps, c.slotEnd-c.step)
	}
	if c.p != protocols.Simple {
		if err := c.seg.err(); err != nil {
			return nil, c.wrap(err)
		}
		c.cur = nsteps
		return c.stage()[:nsteps*c.stepPayload], nil
	}
	return c.acquireSimple(nsteps, c.waitCredit)
}

// acquireSimple marks the connection busy, waits with credit until the
// nsteps Simple slots from the next aligned step are free, and returns
// them.
func (c *conn) acquireSimple(nsteps int, credit func(end uint64) error) ([]byte, error) {
	if err := c.enter(); err != nil {
		return nil, err
	}
	step := alignUp(c.step, nsteps)
	if err := credit(step + uint64(nsteps)); err != nil {
		c.exit()
		return nil, err
	}
	c.step, c.cur = step, nsteps
	i := int(step % protocols.NSteps)
	return c.fifo[i*c.stepBytes : (i+nsteps)*c.stepBytes : (i+nsteps)*c.stepBytes], nil
}

// Post implements engine.SendConn: it publishes the first n bytes of the
// acquired steps.
func (c *SendConn) Post(n int) error {
	ns := c.cur
	if ns == 0 {
		return c.errorf("Post without Acquire")
	}
	c.cur = 0
	if n < 0 || n > ns*c.stepPayload {
		if c.p == protocols.Simple {
			c.exit()
		}
		return c.errorf("Post of %d bytes: the %d acquired steps hold %d", n, ns, ns*c.stepPayload)
	}
	end := c.step + uint64(ns)
	if c.p == protocols.Simple {
		c.storeSize(n, ns)
		c.publish(c.tail, c.tailWait, c.tailSeq, end) // release: the data before the tail
		c.step = end
		c.exit()
		return nil
	}
	if err := c.enter(); err != nil {
		return err
	}
	defer c.exit()
	if err := c.waitCredit(end); err != nil {
		return err
	}
	c.storeSize(n, ns) // first: a receiver reads it after the first line's flag
	src := c.staging[:n]
	for k := 0; k < ns; k++ {
		c.writeStep(c.step+uint64(k), c.part(src, k), k == 0)
	}
	// LL and LL128 need no tail: the flags publish the data. A receiver
	// that announced a sleep is woken (the last line store above is
	// sequentially consistent, which await's argument needs).
	c.wake(c.tailWait, c.tailSeq)
	c.step = end
	return nil
}

// storeSize records the size of the slice starting at c.step, unless its
// slot already holds that size word.
func (c *SendConn) storeSize(n, nsteps int) {
	i := c.step % protocols.NSteps
	if w := sizeWord(n, nsteps); c.sent[i] != w {
		atomic.StoreUint64(&c.sizes[i], w)
		c.sent[i] = w
	}
}

// writeStep encodes one step's payload into its slot. The first step of a
// slice always writes at least one line, so that an empty slice is seen.
func (c *SendConn) writeStep(step uint64, b []byte, first bool) {
	slot := c.slot(step)
	switch c.p {
	case protocols.LL:
		flag := protocols.LLFlag(step)
		protocols.LLEncode(slot, b, flag)
		lines := protocols.LLLines(len(b))
		if lines == 0 && first {
			protocols.LLFill(slot[:protocols.LLLineWords], flag)
			lines = 1
		}
		if protocols.LLClean(step) {
			protocols.LLFill(slot[lines*protocols.LLLineWords:], flag)
		}
	case protocols.LL128:
		flag := protocols.LL128Flag(step)
		protocols.LL128Encode(slot, b, flag)
		if len(b) == 0 && first {
			atomic.StoreUint64(&slot[protocols.LL128FlagWord], flag)
		}
	}
}

// waitCredit waits until the receiver has freed every step below end-NSteps.
func (c *SendConn) waitCredit(end uint64) error {
	if c.cache+protocols.NSteps >= end {
		return nil
	}
	return c.await(c.headWait, c.headSeq, func() bool {
		c.cache = atomic.LoadUint64(c.head)
		return c.cache+protocols.NSteps >= end
	})
}

// RecvConn is the receiving end of a FIFO. It implements engine.RecvConn.
type RecvConn struct{ *conn }

var _ engine.RecvConn = (*RecvConn)(nil)

// Wait implements engine.RecvConn. For Simple it returns the slots
// themselves; for LL and LL128 it decodes the lines into a private buffer
// and frees the slots at once.
func (c *RecvConn) Wait(nsteps, nbytes int) ([]byte, error) {
	if err := c.checkSteps(nsteps); err != nil {
		return nil, err
	}
	if c.cur != 0 {
		return nil, c.errorf("Wait while the previous slice is not released")
	}
	if c.slotEnd > c.step {
		return nil, c.errorf("Wait while %d slots from RecvSlot are not released", c.slotEnd-c.step)
	}
	if nbytes < 0 || nbytes > nsteps*c.stepPayload {
		return nil, c.errorf("slice of %d bytes in %d steps: at most %d", nbytes, nsteps, nsteps*c.stepPayload)
	}
	if err := c.enter(); err != nil {
		return nil, err
	}
	if c.p == protocols.Simple {
		step := alignUp(c.step, nsteps)
		size, err := c.waitTail(step, step+uint64(nsteps))
		if err == nil {
			err = c.checkSize(size, nsteps, nbytes)
		}
		if err != nil {
			c.exit()
			return nil, err
		}
		c.step, c.cur = step, nsteps
		i := int(step % protocols.NSteps)
		return c.fifo[i*c.stepBytes:][:nbytes:nbytes], nil
	}
	defer c.exit()
	buf := c.stage()[:nbytes]
	if err := c.recvLines(buf, nsteps); err != nil {
		return nil, err
	}
	end := c.step + uint64(nsteps)
	c.publish(c.head, c.headWait, c.headSeq, end)
	c.step, c.cur = end, nsteps
	return buf, nil
}

// Release implements engine.RecvConn.
func (c *RecvConn) Release() error {
	ns := c.cur
	if ns == 0 {
		return c.errorf("Release without Wait")
	}
	c.cur = 0
	if c.p == protocols.Simple {
		end := c.step + uint64(ns)
		c.publish(c.head, c.headWait, c.headSeq, end)
		c.step = end
		c.exit()
	}
	return nil
}

// checkSize compares the size word of a slice with what the engine expects.
func (c *RecvConn) checkSize(v uint64, nsteps, nbytes int) error {
	if got, gotSteps := int(v>>4), int(v&15); got != nbytes || gotSteps != nsteps {
		return c.errorf("local rank %d sent a slice of %d bytes in %d steps, want %d bytes in %d (do all ranks use the same NCCL_* settings?)", c.peer, got, gotSteps, nbytes, nsteps)
	}
	return nil
}

// waitTail waits until the sender has posted every step below end, and
// returns the size word of the slice starting at step. It loads the size
// word right after tail in each poll, so that both cache misses overlap.
func (c *RecvConn) waitTail(step, end uint64) (size uint64, err error) {
	sizes := &c.sizes[step%protocols.NSteps]
	if c.cache >= end {
		return atomic.LoadUint64(sizes), nil
	}
	err = c.await(c.tailWait, c.tailSeq, func() bool {
		c.cache = atomic.LoadUint64(c.tail)
		size = atomic.LoadUint64(sizes)
		return c.cache >= end
	})
	return size, err
}

// recvLines decodes a slice of nsteps steps into buf as the sender's flags
// appear. The first line of the slice is always written; its flag also
// publishes the slice's size, checked before anything else. Then, step by
// step, it waits for the step's last line before decoding: the sender
// writes a step's lines in order, each flag with a release store, so the
// others are ready by then, and polling the line the sender writes last
// keeps the two cores from fighting over the lines in between. Decoding
// still checks every line's flag (and waits for any that is not ready).
func (c *RecvConn) recvLines(buf []byte, nsteps int) error {
	lp := c.p.LinePayload()
	for k := 0; k < nsteps; k++ {
		step := c.step + uint64(k)
		if k == 0 {
			size, err := c.awaitFirst(step)
			if err != nil {
				return err
			}
			if err := c.checkSize(size, nsteps, len(buf)); err != nil {
				return err
			}
		}
		part := c.part(buf, k)
		if last := c.p.Lines(len(part)) - 1; last > 0 {
			if err := c.awaitLine(step, last); err != nil {
				return err
			}
		}
		for done := 0; ; {
			done += c.decode(part[done:], step, done/lp)
			if done == len(part) {
				break
			}
			if err := c.awaitLine(step, done/lp); err != nil {
				return err
			}
		}
	}
	return nil
}

// decode copies the ready lines of step from line on into dst.
func (c *RecvConn) decode(dst []byte, step uint64, line int) int {
	lines := c.slot(step)[line*c.p.LineBytes()/8:]
	if c.p == protocols.LL {
		return protocols.LLDecode(dst, lines, protocols.LLFlag(step))
	}
	return protocols.LL128Decode(dst, lines, protocols.LL128Flag(step))
}

// awaitFirst waits for the first line of a slice starting at step and
// returns the slice's size word. It loads the size word right after the
// line in each poll, so that both cache misses overlap; the sender stores
// the size before the line, so a ready line comes with its size.
func (c *RecvConn) awaitFirst(step uint64) (size uint64, err error) {
	l := c.slot(step)
	sizes := &c.sizes[step%protocols.NSteps]
	if c.p == protocols.LL {
		flag := protocols.LLFlag(step)
		err = c.await(c.tailWait, c.tailSeq, func() bool {
			ready := protocols.LLReady(l, flag)
			size = atomic.LoadUint64(sizes)
			return ready
		})
		return size, err
	}
	flag := protocols.LL128Flag(step)
	err = c.await(c.tailWait, c.tailSeq, func() bool {
		ready := protocols.LL128Ready(l, flag)
		size = atomic.LoadUint64(sizes)
		return ready
	})
	return size, err
}

// awaitLine waits until a line of step carries the step's flag. The sender
// wakes a sleeper after writing a slice's lines.
func (c *RecvConn) awaitLine(step uint64, line int) error {
	l := c.slot(step)[line*c.p.LineBytes()/8:]
	if c.p == protocols.LL {
		flag := protocols.LLFlag(step)
		return c.await(c.tailWait, c.tailSeq, func() bool { return protocols.LLReady(l, flag) })
	}
	flag := protocols.LL128Flag(step)
	return c.await(c.tailWait, c.tailSeq, func() bool { return protocols.LL128Ready(l, flag) })
}

func alignUp(step uint64, n int) uint64 {
	m := uint64(n)
	return (step + m - 1) / m * m
}
