package engine

import (
	"fmt"

	"github.com/seed-760dd1f1/cc/algos"
)

// Slot-level schedules (algos.SlotOp, PAT): several FIFO slots of a
// connection open at once, written ahead of their posts, accumulated into,
// read ahead of their releases. They run on the calling goroutine, one
// SlotOp after the other, through the transports' SlotSender and
// SlotReceiver.

// runSlots runs t's slot schedule.
func runSlots(t *Task, conns Conns) error {
	esize := t.Type.Size()
	for i := range t.Sched.Slots {
		if err := runSlotOp(t, &t.Sched.Slots[i], conns, esize); err != nil {
			return err
		}
	}
	return nil
}

// runSlotOp performs one SlotOp (see its doc in algos).
func runSlotOp(t *Task, op *algos.SlotOp, conns Conns, esize int) error {
	var rc SlotReceiver
	var sc SlotSender
	var recv, out []byte
	if op.Recv != algos.NoPeer {
		c, err := conns.RecvFrom(op.Recv, 0)
		if err != nil {
			return err
		}
		var ok bool
		if rc, ok = c.(SlotReceiver); !ok {
			return fmt.Errorf("engine: the connection from rank %d (%T) has no slot API", op.Recv, c)
		}
		if op.Count > 0 {
			b, err := rc.RecvSlot(op.RecvAhead, int(op.RecvSize)*esize)
			if err != nil {
				return err
			}
			lo, hi := int(op.RecvOff)*esize, int(op.RecvOff+op.Count)*esize
			if hi > len(b) {
				return fmt.Errorf("engine: slot op reads bytes [%d,%d) of a %d-byte slot from rank %d", lo, hi, len(b), op.Recv)
			}
			recv = b[lo:hi:hi]
		}
	}
	if op.Send != algos.NoPeer {
		c, err := conns.SendTo(op.Send, 0)
		if err != nil {
			return err
		}
		var ok bool
		if sc, ok = c.(SlotSender); !ok {
			return fmt.Errorf("engine: the connection to rank %d (%T) has no slot API", op.Send, c)
		}
		if op.Count > 0 {
			b, err := sc.SendSlot(op.SendAhead)
			if err != nil {
				return err
			}
			lo, hi := int(op.SendOff)*esize, int(op.SendOff+op.Count)*esize
			if hi > len(b) {
				return fmt.Errorf("engine: slot op writes bytes [%d,%d) of a %d-byte slot to rank %d", lo, hi, len(b), op.Send)
			}
			out = b[lo:hi:hi]
		}
	}
	if op.Count > 0 {
		local := region(t, op.Src, op.SrcOff, op.Count, esize)
		if op.Acc {
			local = out
		}
		dst := region(t, op.Dst, op.DstOff, op.Count, esize)
		target := out
		if target == nil {
			target = dst
		}
		combineFrom(t, op.Src, target, recv, local)
		if op.PostOp && t.Fn != nil && t.Fn.HasPost() {
			t.Fn.Post(target, target)
		}
		if out != nil && dst != nil && !sameMemory(dst, out) {
			copy(dst, out)
		}
	}
	if op.Post > 0 {
		if err := sc.PostSlot(int(op.Post) * esize); err != nil {
			return err
		}
	}
	for range op.Release {
		if err := rc.ReleaseSlot(); err != nil {
			return err
		}
	}
	return nil
}
