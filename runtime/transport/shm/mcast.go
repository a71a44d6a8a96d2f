//go:build linux

package shm

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/engine"
)

// Multicast regions: NVLS's multimem store made real. Every local rank (a
// head) has one region per channel, a FIFO of protocols.NSteps slots with
// one writer and every other local rank as a reader: the head writes a
// slice once and posts it with one tail; each reader waits for the tail,
// reads the slice in place and frees it with its own head counter; the
// writer's credit is the smallest of the readers' heads. Simple protocol
// only, as NCCL's NVLS.
//
//	control block of head h, channel c      slots (NSteps x McastStep)
//	 tail | headWait headSeq | sizes[8]      [0] [1] ... [7]
//	 reader 0: head | tailWait tailSeq
//	 reader 1: head | tailWait tailSeq ...
//
// A reader is an ordinary RecvConn whose tail and size words are the
// region's and whose head and futex words are its own entry; the writer
// wakes every reader that sleeps after each post.

// McastSendConn is the writing end of a head's multicast region. It
// implements engine.SendConn.
type McastSendConn struct {
	*conn
	heads   []*uint64 // every reader's steps freed
	readers []*conn   // every reader's sleep words (tailWait, tailSeq)
}

var _ engine.SendConn = (*McastSendConn)(nil)

// McastSend returns the writing end of local rank head's multicast region
// on channel ch; head must be this rank. Asking twice returns the same
// connection.
func (s *Segment) McastSend(ch, head int) (*McastSendConn, error) {
	if head != s.o.LocalRank {
		return nil, fmt.Errorf("shm: multicast region of local rank %d asked of local rank %d: a rank writes only its own", head, s.o.LocalRank)
	}
	k := connKey{ch: ch, from: head, to: head, p: protocols.Simple, mcast: true}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.mcasts[k]; c != nil {
		return c, nil
	}
	c, err := s.newMcast(k, (head+1)%s.geo.nranks)
	if err != nil {
		return nil, err
	}
	mc := &McastSendConn{conn: c}
	base := s.geo.mcastCtl(ch, head)
	for r := range s.geo.nranks {
		if r == head {
			continue
		}
		e := base + mReaders + r*readerBytes
		mc.heads = append(mc.heads, s.u64(e+rHead))
		mc.readers = append(mc.readers, &conn{tailWait: s.u32(e + rTailWait), tailSeq: s.u32(e + rTailSeq)})
	}
	s.mcasts[k] = mc
	return mc, nil
}

// McastRecv returns local rank reader's end (this rank) of local rank
// head's multicast region on channel ch. Asking twice returns the same
// connection.
func (s *Segment) McastRecv(ch, head, reader int) (*RecvConn, error) {
	if reader != s.o.LocalRank {
		return nil, fmt.Errorf("shm: multicast reader %d asked of local rank %d", reader, s.o.LocalRank)
	}
	if head == reader {
		return nil, fmt.Errorf("shm: local rank %d cannot read its own multicast region", head)
	}
	k := connKey{ch: ch, from: head, to: reader, p: protocols.Simple, mcast: true}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.recvs[k]; c != nil {
		return c, nil
	}
	c, err := s.newMcast(k, head)
	if err != nil {
		return nil, err
	}
	e := s.geo.mcastCtl(ch, head) + mReaders + reader*readerBytes
	c.head, c.tailWait, c.tailSeq = s.u64(e+rHead), s.u32(e+rTailWait), s.u32(e+rTailSeq)
	rc := &RecvConn{conn: c}
	s.recvs[k] = rc
	return rc, nil
}

// newMcast maps the region of k.from on channel k.ch, allocating its
// slots (a full /dev/shm is an error naming NCCL_NVLS_CHUNKSIZE, not a
// SIGBUS), with the writer's words; peer is the other end's local rank.
func (s *Segment) newMcast(k connKey, peer int) (*conn, error) {
	if s.closed {
		return nil, fmt.Errorf("shm: %s: %w", s.name, engine.ErrClosed)
	}
	g := &s.geo
	switch {
	case g.nmcast() == 0:
		return nil, fmt.Errorf("shm: segment %s has no multicast regions (NVLS is disabled, or a single local rank)", s.name)
	case k.ch < 0 || k.ch >= g.channels:
		return nil, fmt.Errorf("shm: channel %d: want 0..%d", k.ch, g.channels-1)
	case k.from < 0 || k.from >= g.nranks || k.to < 0 || k.to >= g.nranks:
		return nil, fmt.Errorf("shm: multicast region of local rank %d read by %d: want 0..%d", k.from, k.to, g.nranks-1)
	}
	c := &conn{seg: s, p: protocols.Simple, key: k, peer: peer}
	base := g.mcastCtl(k.ch, k.from)
	c.tail, c.headWait, c.headSeq = s.u64(base+mTail), s.u32(base+mHeadWait), s.u32(base+mHeadSeq)
	c.sizes = (*[protocols.NSteps]uint64)(unsafe.Pointer(&s.mem[base+mSizes]))
	c.stepBytes, c.stepPayload = g.mcastStep, g.mcastStep
	off := g.mcastFifo(k.ch, k.from)
	what := fmt.Sprintf("multicast region of local rank %d, connection set %d (%d slots of NCCL_NVLS_CHUNKSIZE = %d bytes)", k.from, k.ch, protocols.NSteps, g.mcastStep)
	if err := s.reserve(off, g.mcastBytes, what); err != nil {
		return nil, err
	}
	n := int64(protocols.NSteps * c.stepBytes)
	c.fifo = s.mem[off : off+n : off+n]
	return c, nil
}

// Acquire implements engine.SendConn: it waits until every reader has
// freed the nsteps slots and returns them.
func (c *McastSendConn) Acquire(nsteps int) ([]byte, error) {
	if err := c.checkSteps(nsteps); err != nil {
		return nil, err
	}
	if c.cur != 0 {
		return nil, c.errorf("Acquire of %d steps while %d acquired steps are not posted", nsteps, c.cur)
	}
	return c.acquireSimple(nsteps, c.waitCredit)
}

// Post implements engine.SendConn: one tail for every reader, and a wake
// for each that sleeps.
func (c *McastSendConn) Post(n int) error {
	ns := c.cur
	if ns == 0 {
		return c.errorf("Post without Acquire")
	}
	c.cur = 0
	defer c.exit()
	if n < 0 || n > ns*c.stepPayload {
		return c.errorf("Post of %d bytes: the %d acquired steps hold %d", n, ns, ns*c.stepPayload)
	}
	end := c.step + uint64(ns)
	(&SendConn{c.conn}).storeSize(n, ns)
	atomic.StoreUint64(c.tail, end) // release: the data before the tail
	for _, r := range c.readers {
		c.wake(r.tailWait, r.tailSeq)
	}
	c.step = end
	return nil
}

// waitCredit waits until every reader has freed every step below
// end-NSteps.
func (c *McastSendConn) waitCredit(end uint64) error {
	if c.cache+protocols.NSteps >= end {
		return nil
	}
	return c.await(c.headWait, c.headSeq, func() bool {
		least := ^uint64(0)
		for _, h := range c.heads {
			least = min(least, atomic.LoadUint64(h))
		}
		c.cache = least
		return least+protocols.NSteps >= end
	})
}
