//go:build linux

package shm

import (
	"fmt"
	"sync/atomic"
)

// The one-shot area: the staging slots of the one-shot collectives
// (algos.Flat). Every local rank has a sequence line, the only memory it
// writes there besides its slots, and two slots of Options.OneShotBytes:
//
//	line 0 | line 1 | ... (128 bytes each)      slot 0/0 | slot 0/1 | slot 1/0 | slot 1/1 | ...
//	line r = seq of parity 0 (8) | inline 0 (56) | seq of parity 1 (8) | inline 1 (56)
//
// For call k (1, 2, ... the same on every local rank) a rank fills its
// slot k%2, or its inline bytes k%2 for a call that fits them, stores its
// seq of parity k%2 = k, waits until every local rank's seq of parity k%2
// is >= k and reads the slots (or the inline bytes). No reset and no
// second barrier: a rank writes slot (and inline bytes) k%2 only after it
// saw every rank's seq >= k-1, so every rank has finished call k-2, the
// last reader of that slot. A call that fits the inline bytes moves one
// 64-byte cache line from each writer to each reader and nothing else:
// the data rides with its sequence number. A rank that sleeps uses its
// descriptor entry's futex words (desc.go), which Fail bumps and every
// Post wakes.
const (
	oneShotLine  = 128 // a rank's two (seq, inline bytes) halves: one writer each
	oneShotHalf  = 64  // one parity's seq and inline bytes: one cache line
	oneShotAlign = 128 // a slot's size is a multiple of this
)

// OneShotInline is the number of bytes of a call that ride in the same
// cache line as its sequence number (OneShot.Inline).
const OneShotInline = oneShotHalf - 8

// OneShot is this rank's view of the one-shot area. Its methods are not
// safe for concurrent use: one call at a time, as a communicator runs them.
type OneShot struct {
	s       *Segment
	me      int
	seqs    [2][]*uint64 // by parity, then local rank
	inline  [2][][]byte  // by parity, then local rank
	slots   [2][][]byte  // by parity, then local rank
	waiters []conn       // by local rank: the words of its sleeps, and who it waits for
	fence   uint32       // the target of wake's fence (a locked add)
}

// OneShot returns the one-shot area, or nil when the segment has none
// (Options.OneShotBytes 0, or a single local rank).
func (s *Segment) OneShot() *OneShot {
	g := &s.geo
	if g.oneShotSlot == 0 || s.mem == nil {
		return nil
	}
	o := &OneShot{s: s, me: s.o.LocalRank}
	for r := range g.nranks {
		for q := range 2 {
			line := int(g.oneShotOff) + r*oneShotLine + q*oneShotHalf
			o.seqs[q] = append(o.seqs[q], s.u64(line))
			o.inline[q] = append(o.inline[q], s.mem[line+8:line+oneShotHalf:line+oneShotHalf])
			off := g.oneShotSlotOff(r, q)
			o.slots[q] = append(o.slots[q], s.mem[off:off+int64(g.oneShotSlot):off+int64(g.oneShotSlot)])
		}
		e := s.entry(r)
		o.waiters = append(o.waiters, conn{seg: s, peer: r, key: connKey{from: o.me, to: r}, tailWait: s.u32(e + eWait), tailSeq: s.u32(e + eSeq)})
	}
	return o
}

// SlotBytes is the size of one slot.
func (o *OneShot) SlotBytes() int { return o.s.geo.oneShotSlot }

// Slot returns local rank r's slot for call k.
func (o *OneShot) Slot(r int, k uint64) []byte { return o.slots[k%2][r] }

// Inline returns local rank r's OneShotInline bytes for call k: they
// share the cache line of the sequence number Post stores, so that a call
// whose data fits them costs one line transfer from each writer to each
// reader. A call uses its slot or its inline bytes, as it likes: the same
// rules hold for both.
func (o *OneShot) Inline(r int, k uint64) []byte { return o.inline[k%2][r] }

// Stages returns every local rank's inline bytes (inline) or slot for
// call k, by local rank: engine.FlatArea's view of Inline and Slot.
func (o *OneShot) Stages(k uint64, inline bool) [][]byte {
	if inline {
		return o.inline[k%2]
	}
	return o.slots[k%2]
}

// InlineBytes is OneShotInline.
func (o *OneShot) InlineBytes() int { return OneShotInline }

// Post publishes this rank's slot of call k: everything written to it
// before is visible to a rank whose Await(k) returned. It does not wait
// for the store to reach the other cores (storeRelease): the line's
// transfer overlaps this rank's own wait in Await, which also wakes the
// local ranks that sleep.
func (o *OneShot) Post(k uint64) { storeRelease(o.seqs[k%2][o.me], k) }

// Await waits until every local rank has posted call k. It polls, yields
// and sleeps as the FIFOs' waits do (CC_SHM_SPIN_US), except that with
// the local ranks outnumbering the cores it calls sched_yield at once,
// where a FIFO's wait polls a few times first. It ends with the
// segment's failure, or with an error naming a local rank whose process is
// gone. Then it wakes the local ranks that sleep waiting for this rank's
// Post. That this comes last delays no one: a rank waits for every Post of
// call k, and every rank posts before it waits, so a rank sleeping on this
// one's Post still waits for the Posts this Await waits for; and two ranks
// never sleep on each other, since the one that sleeps first has posted.
func (o *OneShot) Await(k uint64) error {
	me := &o.waiters[o.me]
	long := o.s.spinsLong()
	for r, seq := range o.seqs[k%2] {
		if long && posted(seq, k) || atomic.LoadUint64(seq) >= k {
			continue
		}
		// With the local ranks outnumbering the cores, the rank this one
		// waits for may need this core: yield it at once rather than
		// poll (Open MPI's mpi_yield_when_idle polls once, then yields).
		if err := o.waiters[r].awaitPolls(me.tailWait, me.tailSeq, func() bool { return atomic.LoadUint64(seq) >= k }, 0); err != nil {
			o.wake()
			return fmt.Errorf("shm %s: one-shot call %d, waiting for local rank %d: %w", o.s.name, k, r, err)
		}
	}
	o.wake()
	return nil
}

// tightPolls is how many times Await polls a rank's sequence number,
// unless the local ranks outnumber the cores, before it waits as the
// FIFOs do (conn.await, whose polls are PAUSE
// apart): PAUSE takes 37-58 ns on this machine's EPYC (go test -bench of
// a loop of it, 2026-11-27), which a 2-rank call of about 0.3 us, waiting
// about one cache-line transfer for its peer, pays on average half of. A
// poll is one load, a few ns while the line stays in this core's cache,
// so the tight polls last well under a microsecond.
const tightPolls = 128

// posted reports whether *seq has reached k, polling tightPolls times.
func posted(seq *uint64, k uint64) bool {
	for range tightPolls {
		if atomic.LoadUint64(seq) >= k {
			return true
		}
	}
	return false
}

// wake wakes the local ranks that sleep in Await. The fence orders Post's
// store before the loads of their sleep flags (conn.await's protocol:
// either a sleeper sees the sequence number or this rank sees its flag);
// by the time it runs the store has usually drained, so it costs little.
func (o *OneShot) wake() {
	atomic.AddUint32(&o.fence, 0)
	for r := range o.waiters {
		if r != o.me {
			w := &o.waiters[r]
			w.wake(w.tailWait, w.tailSeq)
		}
	}
}
