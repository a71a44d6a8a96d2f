package engine

import "github.com/seed-760dd1f1/cc/algos"

// Wide Ops: NVLS's scatter (Fan.SendOff: each send peer gets its own range
// of the local operand), gather (Fan.RecvOff: each received slice goes to
// its own range of Dst) and fans of more than algos.MaxFan peers (a
// head's load-reduce over every other rank of its host), and NVLS's Ops
// over registered buffers (Fan.Direct: other ranks' Input read in place
// through Task.PeerIn, by a load-reduce or a direct gather). Their connection
// lists live in the lane's wideConns, which grow to the widest Op once and
// are reused, so a repeated call allocates nothing. They never send by
// reference.

// wideConns are the connections and slices of one wide Op.
type wideConns struct {
	recv []RecvConn
	send []SendConn
	in   [][]byte
	out  [][]byte
}

// isWide reports whether op runs as a wide Op.
func isWide(op *algos.Op) bool {
	f := op.Fan
	return f.SendOff != nil || f.RecvOff != nil || f.Direct != nil || op.NumRecvs() > algos.MaxFan || op.NumSends() > algos.MaxFan
}

// open fills w with op's connections.
func (w *wideConns) open(op *algos.Op, conns Conns) error {
	nr, ns := op.NumRecvs(), op.NumSends()
	if cap(w.recv) < nr {
		w.recv, w.in = make([]RecvConn, nr), make([][]byte, nr)
	}
	if cap(w.send) < ns {
		w.send, w.out = make([]SendConn, ns), make([][]byte, ns)
	}
	w.recv, w.in, w.send, w.out = w.recv[:nr], w.in[:nr], w.send[:ns], w.out[:ns]
	for k := range nr {
		c, err := conns.RecvFrom(op.RecvPeer(k), int(op.Conn))
		if err != nil {
			return err
		}
		w.recv[k] = c
	}
	for k := range ns {
		c, err := conns.SendTo(op.SendPeer(k), int(op.Conn))
		if err != nil {
			return err
		}
		w.send[k] = c
	}
	return nil
}

// runWideOp runs a wide Op slice by slice.
func runWideOp(t *Task, op *algos.Op, conns Conns, esize int, w *wideConns) error {
	if err := w.open(op, conns); err != nil {
		return err
	}
	defer clear(w.recv)
	defer clear(w.send)
	step := sliceElems(t, op.Count, esize)
	for off := int64(0); off < op.Count; off += step {
		if err := w.slice(t, op, off, min(step, op.Count-off), esize); err != nil {
			return err
		}
	}
	return nil
}

// slice performs one slice: wait for every receive, acquire every send
// slot, fill them, post and release.
func (w *wideConns) slice(t *Task, op *algos.Op, off, n int64, esize int) error {
	nb := int(n) * esize
	for k, c := range w.recv {
		b, err := c.Wait(t.SliceSteps, nb)
		if err != nil {
			return err
		}
		w.in[k] = b
	}
	for k, c := range w.send {
		b, err := c.Acquire(t.SliceSteps)
		if err != nil {
			return err
		}
		w.out[k] = b[:nb]
	}
	switch f := op.Fan; {
	case f.DirectOff != nil: // direct gather: other ranks' Input, in place
		for k, p := range f.Direct {
			copy(region(t, op.Dst, op.DstOff+f.DirectOff[k]+off, n, esize), peerRegion(t, p, op.SrcOff+off, n, esize))
		}
	case f.RecvOff != nil: // gather
		for k, b := range w.in {
			copy(region(t, op.Dst, op.DstOff+f.RecvOff[k]+off, n, esize), b)
		}
	case f.SendOff != nil: // scatter
		for k, b := range w.out {
			combineFrom(t, op.Src, b, nil, region(t, op.Src, op.SrcOff+f.SendOff[k]+off, n, esize))
		}
	default:
		w.reduce(t, op, off, n, esize)
	}
	for _, c := range w.recv {
		if err := c.Release(); err != nil {
			return err
		}
	}
	for _, c := range w.send {
		if err := c.Post(nb); err != nil {
			return err
		}
	}
	return nil
}

// reduce computes the value of a wide fan's slice (every received slice
// reduced with the local operand, then the post-operation) into Dst, or
// the first send slot, and copies it into the other send slots.
func (w *wideConns) reduce(t *Task, op *algos.Op, off, n int64, esize int) {
	local := region(t, op.Src, op.SrcOff+off, n, esize)
	value := region(t, op.Dst, op.DstOff+off, n, esize)
	if value == nil {
		value = w.out[0]
	}
	first := 0
	switch {
	case len(w.in) == 0 || !op.Reduce:
		in := []byte(nil)
		if len(w.in) > 0 {
			in, local = w.in[0], nil
		}
		combineFrom(t, op.Src, value, in, local)
		first = len(w.in)
	case local != nil:
		combineFrom(t, op.Src, value, w.in[0], local)
		first = 1
	default:
		t.Fn.Reduce(value, w.in[0], w.in[1])
		first = 2
	}
	for k := first; k < len(w.in); k++ {
		t.Fn.Reduce(value, value, w.in[k])
	}
	for _, p := range op.Fan.Direct { // a direct load-reduce
		t.Fn.Reduce(value, value, peerRegion(t, p, op.SrcOff+off, n, esize))
	}
	if op.PostOp && t.Fn != nil && t.Fn.HasPost() {
		t.Fn.Post(value, value)
	}
	for _, b := range w.out {
		if !sameMemory(b, value) {
			copy(b, value)
		}
	}
}

// peerRegion is elements [off, off+n) of the Input of rank peer, read in
// place through its registered buffer (Task.PeerIn).
func peerRegion(t *Task, peer int, off, n int64, esize int) []byte {
	lo := off * int64(esize)
	return t.PeerIn[peer][lo : lo+n*int64(esize)]
}
