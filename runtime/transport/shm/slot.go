//go:build linux

package shm

import (
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/engine"
)

// The slot API (engine.SlotSender, engine.SlotReceiver) works on the same
// step counters as Acquire/Post and Wait/Release, one step per slot, with
// no alignment: a Simple slice that follows rounds its first step up as
// usual, on both ends alike.
//
// c.step is the oldest unposted (sender) or unreleased (receiver) step,
// and c.slotEnd is one past the last step SendSlot or RecvSlot returned.
// While slotEnd > step the engine holds slots: the connection stays busy
// (so Close does not unmap memory the engine may still touch), and every
// step below slotEnd has its credit (sender) or has been posted
// (receiver), since a wait for one step covers all those before it.

var (
	_ engine.SlotSender   = (*SendConn)(nil)
	_ engine.SlotReceiver = (*RecvConn)(nil)
)

// slotCheck says why op cannot use the slot API now: another protocol than
// Simple, a slice of Acquire or Wait still held (pending says what it is
// waiting for), or ahead out of 0..NSteps-1.
func (c *conn) slotCheck(op string, ahead int, pending string) error {
	if c.p != protocols.Simple {
		return c.errorf("%s: the slot API needs the Simple protocol", op)
	}
	if c.cur != 0 {
		return c.errorf("%s while %d %s", op, c.cur, pending)
	}
	if ahead < 0 || ahead >= protocols.NSteps {
		return c.errorf("%s: ahead %d: want 0..%d", op, ahead, protocols.NSteps-1)
	}
	return nil
}

// slotEnter marks the connection busy, unless the engine already holds
// slots (held), in which case it only checks for a failure.
func (c *conn) slotEnter() (held bool, err error) {
	if c.slotEnd > c.step {
		if err := c.seg.err(); err != nil {
			return true, c.wrap(err)
		}
		return true, nil
	}
	return false, c.enter()
}

// slotMem returns the first n bytes of step's slot, capped.
func (c *conn) slotMem(step uint64, n int) []byte {
	i := int(step % protocols.NSteps)
	return c.fifo[i*c.stepBytes:][:n:n]
}

// SendSlot implements engine.SlotSender: it waits until the receiver has
// released the step NSteps before step s+ahead, where s is the oldest
// unposted step, and returns that slot's whole payload. The slot stays
// writable until PostSlot has posted it.
func (c *SendConn) SendSlot(ahead int) ([]byte, error) {
	if err := c.slotCheck("SendSlot", ahead, "acquired steps are not posted"); err != nil {
		return nil, err
	}
	held, err := c.slotEnter()
	if err != nil {
		return nil, err
	}
	step := c.step + uint64(ahead)
	if err := c.waitCredit(step + 1); err != nil {
		if !held {
			c.exit()
		}
		return nil, err
	}
	c.slotEnd = max(c.slotEnd, step+1)
	return c.slotMem(step, c.stepPayload), nil
}

// PostSlot implements engine.SlotSender: it publishes the oldest unposted
// slot as a one-step slice of nbytes (0..one step's payload) and advances
// by one step. A slot SendSlot did not return is legal (it carries what
// the slot holds); PostSlot then first waits for its credit.
func (c *SendConn) PostSlot(nbytes int) error {
	if err := c.slotCheck("PostSlot", 0, "acquired steps are not posted"); err != nil {
		return err
	}
	if nbytes < 0 || nbytes > c.stepPayload {
		return c.errorf("PostSlot of %d bytes: a slot holds %d", nbytes, c.stepPayload)
	}
	s := c.step
	if c.slotEnd <= s {
		if err := c.enter(); err != nil {
			return err
		}
		if err := c.waitCredit(s + 1); err != nil {
			c.exit()
			return err
		}
	}
	c.storeSize(nbytes, 1)
	c.publish(c.tail, c.tailWait, c.tailSeq, s+1) // release: the data before the tail
	c.step = s + 1
	if c.slotEnd <= c.step {
		c.exit()
	}
	return nil
}

// RecvSlot implements engine.SlotReceiver: it waits until the sender has
// posted step r+ahead, where r is the oldest unreleased step, checks that
// it is a one-step slice of nbytes, and returns those bytes, valid until
// ReleaseSlot releases that step. Slots may be read in any order and any
// number of times.
func (c *RecvConn) RecvSlot(ahead, nbytes int) ([]byte, error) {
	if err := c.slotCheck("RecvSlot", ahead, "received steps are not released"); err != nil {
		return nil, err
	}
	if nbytes < 0 || nbytes > c.stepPayload {
		return nil, c.errorf("RecvSlot of %d bytes: a slot holds at most %d", nbytes, c.stepPayload)
	}
	held, err := c.slotEnter()
	if err != nil {
		return nil, err
	}
	step := c.step + uint64(ahead)
	size, err := c.waitTail(step, step+1)
	if err == nil {
		err = c.checkSize(size, 1, nbytes)
	}
	if err != nil {
		if !held {
			c.exit()
		}
		return nil, err
	}
	c.slotEnd = max(c.slotEnd, step+1)
	return c.slotMem(step, nbytes), nil
}

// ReleaseSlot implements engine.SlotReceiver: it frees the oldest
// unreleased step. That step must have been received, by RecvSlot of it or
// of a later step (so that the sender has posted it).
func (c *RecvConn) ReleaseSlot() error {
	if err := c.slotCheck("ReleaseSlot", 0, "received steps are not released"); err != nil {
		return err
	}
	r := c.step
	if c.slotEnd <= r {
		return c.errorf("ReleaseSlot without RecvSlot: step %d was not received", r)
	}
	c.publish(c.head, c.headWait, c.headSeq, r+1)
	c.step = r + 1
	if c.slotEnd <= c.step {
		c.exit()
	}
	return nil
}
