package engine

import "github.com/seed-760dd1f1/cc/algos"

// Ops with a fan: NCCL's primitives with several peers (the tree's
// recvReduceSend from up to three children, its recvCopySend to up to three
// children, the root's recvReduceCopySend both ways).

// fanConns are the connections of one Op with a fan, without allocating.
type fanConns struct {
	recv [algos.MaxFan]RecvConn
	send [algos.MaxFan]SendConn
	ref  [algos.MaxFan]RefSender // send[k] by reference, or nil
	in   [algos.MaxFan][]byte    // the received slices
	out  [algos.MaxFan][]byte    // the acquired send slots
	nr   int
	ns   int
}

// runFanOp runs an Op with a fan slice by slice.
func runFanOp(t *Task, op *algos.Op, conns Conns, esize int, st *laneState) error {
	var fc fanConns
	fc.nr, fc.ns = op.NumRecvs(), op.NumSends()
	for k := range fc.nr {
		c, err := conns.RecvFrom(op.RecvPeer(k), int(op.Conn))
		if err != nil {
			return err
		}
		fc.recv[k] = c
	}
	for k := range fc.ns {
		c, err := conns.SendTo(op.SendPeer(k), int(op.Conn))
		if err != nil {
			return err
		}
		fc.send[k] = c
		if r := refSender(t, op, c); r != nil {
			fc.ref[k] = r
			st.addRef(r)
		}
	}
	step := sliceElems(t, op.Count, esize)
	for off := int64(0); off < op.Count; off += step {
		if err := fc.slice(t, op, off, min(step, op.Count-off), esize); err != nil {
			return err
		}
	}
	return nil
}

// slice performs one slice: wait for every receive, acquire every send
// slot, compute the value once, post it to every peer, release.
func (fc *fanConns) slice(t *Task, op *algos.Op, off, n int64, esize int) error {
	nb := int(n) * esize
	for k := range fc.nr {
		b, err := fc.recv[k].Wait(t.SliceSteps, nb)
		if err != nil {
			return err
		}
		fc.in[k] = b
	}
	for k := range fc.ns {
		b, err := fc.send[k].Acquire(t.SliceSteps)
		if err != nil {
			return err
		}
		fc.out[k] = b[:nb]
	}
	local := region(t, op.Src, op.SrcOff+off, n, esize)
	dst := region(t, op.Dst, op.DstOff+off, n, esize)

	// Where the value lives: in Output when the Op writes it; the local
	// operand itself when it is sent unchanged; else the first send slot
	// that is not sent by reference (refValue guarantees one exists).
	value := dst
	plain := fc.nr == 0 && !op.PostOp && !(op.Src == algos.Input && t.Fn != nil && t.Fn.HasPre())
	switch {
	case value != nil:
		fc.compute(t, op, value, local)
	case plain && local != nil:
		value = local
	default:
		for k := range fc.ns {
			if fc.ref[k] == nil {
				value = fc.out[k]
				break
			}
		}
		if value != nil {
			fc.compute(t, op, value, local)
		}
	}
	for k := range fc.nr {
		if err := fc.recv[k].Release(); err != nil {
			return err
		}
	}
	for k := range fc.ns {
		if fc.ref[k] != nil {
			if err := fc.ref[k].PostRef(value); err != nil {
				return err
			}
			continue
		}
		if !sameMemory(fc.out[k], value) {
			copy(fc.out[k], value)
		}
		if err := fc.send[k].Post(nb); err != nil {
			return err
		}
	}
	return nil
}

// compute writes the value of a slice into target, post-operation included.
func (fc *fanConns) compute(t *Task, op *algos.Op, target, local []byte) {
	fc.combine(t, op, target, local)
	if op.PostOp && t.Fn != nil && t.Fn.HasPost() {
		t.Fn.Post(target, target)
	}
}

// combine computes the value of a slice into target: the local operand
// (with the pre-operation on Input) reduced with every received slice. The
// local operand is read first, by the first kernel: target may be the
// local operand's memory (Output of an in-place call).
func (fc *fanConns) combine(t *Task, op *algos.Op, target, local []byte) {
	pre := op.Src == algos.Input && t.Fn != nil && t.Fn.HasPre()
	switch {
	case fc.nr == 0:
		if pre {
			t.Fn.Pre(target, local)
		} else if !sameMemory(target, local) {
			copy(target, local)
		}
		return
	case !op.Reduce:
		copy(target, fc.in[0])
		return
	case local != nil && pre:
		t.Fn.ReducePre(target, fc.in[0], local)
	case local != nil:
		t.Fn.Reduce(target, fc.in[0], local)
	default:
		t.Fn.Reduce(target, fc.in[0], fc.in[1])
	}
	first := 1
	if local == nil {
		first = 2
	}
	for k := first; k < fc.nr; k++ {
		t.Fn.Reduce(target, target, fc.in[k])
	}
}
