// Package engine executes algos schedules over FIFO connections.
//
// A schedule (package algos) says, per channel and per rank, which primitive
// to perform on which element range, in one or more lanes. The engine turns
// each Op into slices and moves them through the connections a transport
// provides, NCCL-style:
//
//   - every connection has a FIFO of protocols.NSteps (NCCL_STEPS = 8)
//     slots; a slot carries StepPayload bytes of data (buffSize/8 for
//     Simple; less for LL and LL128, whose lines carry flags);
//   - a chunk is ChunkSteps slots, a slice SliceSteps slots, as in NCCL's
//     collectives.h (the algorithm table in algos says which per protocol);
//   - an Op of nelem elements is cut into slices of
//     max(divUp(nelem, 16*slicePerChunk)*16, stepElems*SliceSteps/32)
//     elements (NCCL prims_simple.h), each occupying SliceSteps slots;
//   - a sender acquires free slots (head/tail flow control), fills them and
//     posts; a receiver waits for the posted slice, consumes it and releases;
//   - an Op with a fan waits for a slice from every peer it receives from,
//     reduces them in peer order with the local operand, and posts the one
//     value to every peer it sends to;
//   - the lanes of a schedule run concurrently: lane 0 on the caller's
//     goroutine, the others on a Runner's long-lived goroutines; a Wait
//     holds a lane until another has completed enough Ops.
//
// The engine knows nothing of sockets or shared memory: SendConn and RecvConn
// are declared here and satisfied by runtime/transport/*. It knows nothing of
// algorithms either: it runs whatever schedule it is given.
package engine

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// SendConn is the sending end of one FIFO connection to a peer.
type SendConn interface {
	// Acquire waits until nsteps consecutive slots are free and returns
	// their memory (nsteps*stepBytes bytes). It returns an error when the
	// connection or the communicator has failed.
	Acquire(nsteps int) ([]byte, error)
	// Post publishes the first n bytes of the acquired slots as one slice.
	Post(n int) error
}

// RecvConn is the receiving end of one FIFO connection from a peer.
type RecvConn interface {
	// Wait waits for the next slice, which the sender posted with nsteps
	// slots and which holds nbytes (both sides run the same schedule, so the
	// receiver knows), and returns its bytes; they stay valid until Release.
	// A slice of another size is an error.
	Wait(nsteps, nbytes int) ([]byte, error)
	// Release frees the slots of the slice returned by Wait.
	Release() error
}

// RefSender is a SendConn that can send a slice straight from the caller's
// memory instead of the acquired slots (which it still holds, so that flow
// control and the receiver see the same steps). The memory must not change
// until Flush returns.
type RefSender interface {
	SendConn
	PostRef(b []byte) error
	// Flush waits until every posted slice has left the caller's memory.
	Flush() error
}

// SyncRefSender is a RefSender whose PostRef has written b out when it
// returns (TCP's LL and LL128, whose frames the engine's goroutine writes
// itself). It may send from user memory that the task changes later, such
// as the Input of an in-place call: what goes out is what is there at the
// call, as a copy into the FIFO would have taken.
type SyncRefSender interface {
	RefSender
	// RefDoneOnReturn marks the type; it does nothing.
	RefDoneOnReturn()
}

// DirectReceiver is a RecvConn that can receive a slice straight into the
// caller's memory, without the engine copying it out of the FIFO (TCP: the
// payload goes from the socket into dst when it is still there).
type DirectReceiver interface {
	// WaitInto receives the next slice, of len(dst) bytes in nsteps
	// slots, into dst, and releases its slots: Wait, copy and Release in
	// one call.
	WaitInto(nsteps int, dst []byte) error
}

// SlotSender is a SendConn used slot by slot, as PAT's schedules need
// (Simple protocol only): several FIFO slots open at once, written in any
// order, posted in FIFO order one slot at a time. It shares the
// connection's step counters with Acquire/Post, so the two may follow each
// other, but never overlap (no slot API call while a slice is acquired).
type SlotSender interface {
	// SendSlot waits until the slot ahead steps after the oldest unposted
	// one is free (shm: the receiver released the step NSteps before it;
	// TCP: that step's frame has left for the socket, the receiver's own
	// ring holding back the rest) and returns its whole memory (one step's
	// payload). 0 <= ahead < NSteps.
	// Calling it again for the same slot returns the same memory, with
	// what was written into it.
	SendSlot(ahead int) ([]byte, error)
	// PostSlot publishes the oldest unposted slot holding its first nbytes
	// and advances by one step.
	PostSlot(nbytes int) error
}

// SlotReceiver is a RecvConn used slot by slot (PAT, Simple only).
type SlotReceiver interface {
	// RecvSlot waits until the slot ahead steps after the oldest
	// unreleased one has been posted and returns its bytes, valid until
	// that slot is released. 0 <= ahead < NSteps. A slot posted with a
	// size other than nbytes is an error naming both sizes.
	RecvSlot(ahead, nbytes int) ([]byte, error)
	// ReleaseSlot frees the oldest unreleased slot.
	ReleaseSlot() error
}

// Conns gives the engine the connections of one channel: to and from a
// peer, on connection index conn (NCCL's connIndex, 0 or 1).
type Conns interface {
	SendTo(peer, conn int) (SendConn, error)
	RecvFrom(peer, conn int) (RecvConn, error)
}

// Task is one collective's (or one point-to-point transfer's) work on one
// channel of one rank.
type Task struct {
	Sched algos.Schedule
	In    []byte // the Input buffer
	Out   []byte // the Output buffer (may be the same memory as In)
	Type  reduce.DataType
	Fn    *reduce.Func // the reduction; nil for collectives that do not reduce

	StepPayload int // payload bytes one FIFO slot carries
	ChunkSteps  int // slots per chunk
	SliceSteps  int // slots per slice

	// OutOnce says that, during the task, every element of Out is written
	// at most once (a schedule whose algorithm writes Output once, in or
	// out of place): a slice's value, once in Out, stays there, and may be
	// sent from there directly, without a copy into the FIFO.
	OutOnce bool

	// Stable says that, besides, In is not modified (OutOnce in a call
	// that is not in place, or an in-place all-gather or broadcast, where
	// In's only write is its own value): a slice of In may be sent from
	// there directly too.
	Stable bool

	// PeerIn is, by rank, the Input of the other ranks of this host whose
	// registered buffers this rank reads in place (algos.Fan.Direct), mapped
	// into this process; nil for a call without direct Ops. Direct reads
	// apply no pre-operation: the runtime takes the direct path only for
	// reductions that have none.
	PeerIn [][]byte
}

// Run executes t over conns with a Runner of its own (whose lane goroutines
// end with it). A communicator keeps a Runner per channel instead.
func Run(t *Task, conns Conns) error {
	r := NewRunner(nil)
	defer r.Close()
	return r.Run(t, conns)
}

// checkGeometry validates the FIFO geometry of a task.
func checkGeometry(t *Task) error {
	if t.StepPayload < t.Type.Size() || t.SliceSteps < 1 || t.ChunkSteps < t.SliceSteps || t.SliceSteps > protocols.NSteps {
		return fmt.Errorf("engine: bad task geometry: step %d bytes, chunk %d steps, slice %d steps", t.StepPayload, t.ChunkSteps, t.SliceSteps)
	}
	return nil
}

// sliceElems is the engine's slice for an Op of nelem elements: the rule
// shared with the timed simulator, algos.SliceElems.
func sliceElems(t *Task, nelem int64, esize int) int64 {
	g := algos.Geometry{ChunkSteps: t.ChunkSteps, SliceSteps: t.SliceSteps}
	return algos.SliceElems(g, t.StepPayload, nelem, esize)
}

// runOp runs one Op with at most one peer each way, slice by slice. It
// returns the connection it sent on by reference, if any, which must be
// flushed before the task returns.
func runOp(t *Task, op *algos.Op, conns Conns, esize int) (RefSender, error) {
	var send SendConn
	var recv RecvConn
	var err error
	if op.SendTo != algos.NoPeer {
		if send, err = conns.SendTo(op.SendTo, int(op.Conn)); err != nil {
			return nil, err
		}
	}
	if op.RecvFrom != algos.NoPeer {
		if recv, err = conns.RecvFrom(op.RecvFrom, int(op.Conn)); err != nil {
			return nil, err
		}
	}
	ref := refSender(t, op, send)
	step := sliceElems(t, op.Count, esize)
	for off := int64(0); off < op.Count; off += step {
		n := min(step, op.Count-off)
		if err := runSlice(t, op, send, ref, recv, off, n, esize); err != nil {
			return ref, err
		}
	}
	return ref, nil
}

// refSender returns send as a RefSender when op's slices may be sent
// from user memory over it, else nil.
func refSender(t *Task, op *algos.Op, send SendConn) RefSender {
	r, ok := send.(RefSender)
	if !ok {
		return nil
	}
	if _, sync := send.(SyncRefSender); refValue(t, op, sync) {
		return r
	}
	return nil
}

// refValue reports whether an Op's value ends up in user memory that can be
// sent from directly: its destination, where Out is written once, or its
// unmodified local operand, where In is stable too; either, whatever the
// task, over a connection that has sent it when PostRef returns (sync).
func refValue(t *Task, op *algos.Op, sync bool) bool {
	if op.Dst != algos.None {
		return sync || t.OutOnce || t.Stable
	}
	plainLocal := op.RecvFrom == algos.NoPeer && op.Src != algos.None && !op.PostOp
	return (sync || t.Stable) && plainLocal && !(op.Src == algos.Input && t.Fn != nil && t.Fn.HasPre())
}

// runSlice performs one slice of an Op: receive, combine with the local
// operand, write to the destination, send.
func runSlice(t *Task, op *algos.Op, send SendConn, ref RefSender, recv RecvConn, off, n int64, esize int) error {
	nb := int(n) * esize
	local := region(t, op.Src, op.SrcOff+off, n, esize)
	dst := region(t, op.Dst, op.DstOff+off, n, esize)
	if d, ok := recv.(DirectReceiver); ok && dst != nil && (!op.Reduce || local == nil) {
		// The slice's value is the received data: receive it in place.
		if err := d.WaitInto(t.SliceSteps, dst); err != nil {
			return err
		}
		return finishSlice(t, op, send, ref, dst, nb)
	}
	var in []byte
	if recv != nil {
		b, err := recv.Wait(t.SliceSteps, nb)
		if err != nil {
			return err
		}
		in = b
	}
	var out []byte
	if send != nil {
		b, err := send.Acquire(t.SliceSteps)
		if err != nil {
			return err
		}
		out = b[:nb]
	}

	var sent []byte // the value in user memory, when sent by reference
	target := dst
	switch {
	case target != nil:
	case ref != nil:
		sent = local // a plain local operand, sent as it is
	default:
		target = out
	}
	if target != nil {
		combine(t, op, target, in, local)
		if op.PostOp && t.Fn != nil && t.Fn.HasPost() {
			t.Fn.Post(target, target)
		}
		if out != nil {
			if ref != nil {
				sent = dst
			} else if dst != nil {
				copy(out, dst)
			}
		}
	}
	if recv != nil {
		if err := recv.Release(); err != nil {
			return err
		}
	}
	if ref != nil {
		return ref.PostRef(sent)
	}
	if send != nil {
		return send.Post(nb)
	}
	return nil
}

// finishSlice completes a slice whose received value WaitInto has put in
// dst: the post-operation, then the send, from dst.
func finishSlice(t *Task, op *algos.Op, send SendConn, ref RefSender, dst []byte, nb int) error {
	if op.PostOp && t.Fn != nil && t.Fn.HasPost() {
		t.Fn.Post(dst, dst)
	}
	if send == nil {
		return nil
	}
	out, err := send.Acquire(t.SliceSteps)
	if err != nil {
		return err
	}
	if ref != nil {
		return ref.PostRef(dst)
	}
	return send.Post(copy(out[:nb], dst))
}

// combine computes the value of one slice into target: the received data,
// the local operand, or their reduction. The pre-operation (premulsum's
// scalar, a floating average's 1/nranks) applies to data read from Input.
func combine(t *Task, op *algos.Op, target, in, local []byte) {
	if !op.Reduce && in != nil {
		local = nil
	}
	combineFrom(t, op.Src, target, in, local)
}

// combineFrom writes into target in ⊕ local, or whichever is not nil,
// applying the pre-operation to local when it was read from Input (src).
func combineFrom(t *Task, src algos.Buf, target, in, local []byte) {
	pre := src == algos.Input && t.Fn != nil && t.Fn.HasPre()
	switch {
	case in != nil && local != nil:
		if pre {
			t.Fn.ReducePre(target, in, local)
		} else {
			t.Fn.Reduce(target, in, local)
		}
	case in != nil:
		copy(target, in)
	case local != nil:
		if pre {
			t.Fn.Pre(target, local)
		} else if !sameMemory(target, local) {
			copy(target, local)
		}
	}
}

func region(t *Task, b algos.Buf, off, n int64, esize int) []byte {
	var buf []byte
	switch b {
	case algos.None:
		return nil
	case algos.Input:
		buf = t.In
	case algos.Output:
		buf = t.Out
	}
	lo := off * int64(esize)
	return buf[lo : lo+n*int64(esize)]
}

func sameMemory(a, b []byte) bool {
	return len(a) > 0 && len(b) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b)
}

func divUp(a, b int64) int64 { return (a + b - 1) / b }

// ErrClosed is returned by connections used after their communicator closed.
var ErrClosed = errors.New("connection closed")
