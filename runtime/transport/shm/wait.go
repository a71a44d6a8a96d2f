//go:build linux

package shm

import (
	"sync/atomic"
	"time"
)

// spinBatch is the number of polls between two looks at the clock and at
// Fail; with more local ranks than cores, a wait polls one batch and sleeps.
const spinBatch = 16

// yieldFor is how long an oversubscribed wait yields its core between
// polls before it sleeps on the futex.
var yieldFor = 2 * time.Millisecond

// futexTimeout bounds every futex sleep, so that a wait notices a dead
// peer even if nobody calls Fail. Tests change it.
var futexTimeout = 50 * time.Millisecond

// await waits until cond holds. cond reads the shared memory the other
// side writes before it publishes a step counter. It polls for
// Options.Spin (a few polls, then yields, when local ranks outnumber cores
// or SetYield is on), then sleeps
// on seq, a 32-bit futex word in the segment, with the lost-wakeup-safe
// protocol:
//
//	waiter: *waitFlag = 1; seen = *seq; if cond() || failed { return }; futex_wait(seq, seen)
//	poster: (make cond true: store a step counter or a flag); if *waitFlag != 0 { *seq++; futex_wake(seq) }
//	Fail:   (record the error); *seq++; futex_wake(seq)
//
// All these accesses are sequentially consistent atomics. If the poster
// reads the flag as 0, the flag was set after the counter (or flag) was stored, so
// the waiter's cond sees the data. Otherwise seq changes: before the
// waiter's load of seen (then cond, or the error check, sees the data or
// the error), or after it (then futex_wait returns at once or is woken).
// Every sleep is bounded by futexTimeout, after which the peer's process is
// checked.
func (c *conn) await(waitFlag, seq *uint32, cond func() bool) error {
	return c.awaitPolls(waitFlag, seq, cond, spinBatch)
}

// awaitPolls is await with polls polls in its first batch when the local
// ranks outnumber the cores, where await has spinBatch: 0 yields the core
// at once.
func (c *conn) awaitPolls(waitFlag, seq *uint32, cond func() bool, polls int) error {
	s := c.seg
	if cond() {
		return nil
	}
	var start time.Time // read only if the first batch of polls fails
	minimal := !s.spinsLong()
	batch := spinBatch
	if minimal {
		batch = polls
	}
	for {
		for i := 0; i < batch; i++ {
			pause()
			if cond() {
				return nil
			}
		}
		if err := s.err(); err != nil {
			return c.wrap(err)
		}
		if start.IsZero() {
			start = time.Now()
		}
		if minimal || time.Since(start) >= s.o.Spin {
			break
		}
	}
	if minimal {
		// More local ranks than cores (or SetYield): the rank that will make cond true
		// may be waiting for this core. Give it the core (sched_yield)
		// rather than burn it polling, and rather than sleep at once,
		// which costs a futex wake and a scheduler wake-up per message
		// (Open MPI's mpi_yield_when_idle). Bounded: a wait that lasts
		// longer sleeps.
		for time.Since(start) < yieldFor {
			yield()
			if cond() {
				return nil
			}
			if err := s.err(); err != nil {
				return c.wrap(err)
			}
		}
	}
	for {
		atomic.StoreUint32(waitFlag, 1)
		seen := atomic.LoadUint32(seq)
		if cond() {
			atomic.StoreUint32(waitFlag, 0)
			return nil
		}
		if err := s.err(); err != nil {
			atomic.StoreUint32(waitFlag, 0)
			return c.wrap(err)
		}
		timedOut := futexWait(seq, seen, futexTimeout)
		atomic.StoreUint32(waitFlag, 0)
		if cond() {
			return nil
		}
		if err := s.err(); err != nil {
			return c.wrap(err)
		}
		if timedOut {
			if err := c.peerGone(); err != nil {
				return err
			}
		}
	}
}

// peerGone returns an error if the other end's process has died.
func (c *conn) peerGone() error {
	s := c.seg
	e := hOwners + c.peer*ownerBytes
	pid := atomic.LoadUint64(s.u64(e + oPid))
	if pid == 0 {
		return nil
	}
	start := atomic.LoadUint64(s.u64(e + oStart))
	ns := atomic.LoadUint64(s.u64(e + oPidNS))
	if ownerLiveness(int(pid), start, ns, s.me.pidNS) == dead {
		return c.errorf("local rank %d (pid %d) is gone", c.peer, pid)
	}
	return nil
}
