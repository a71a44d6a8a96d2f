// Package algos holds the pure schedule generators of cc's collectives.
//
// A schedule is the sequence of Ops one rank performs on one channel. Each Op
// is one of NCCL's primitives (send, recv, recvReduceSend, recvReduceCopy,
// recvCopySend, recvReduceCopySend, copySend, ...) expressed in a single shape:
//
//	value := local operand (Src at SrcOff), or the data received from RecvFrom,
//	         or, when Reduce is set, received ⊕ local
//	if PostOp: value = postOp(value)      (e.g. the divide of an integer average)
//	if Dst != None: write value to Dst at DstOff
//	if SendTo != NoPeer: send value to SendTo
//
// Offsets and counts are in elements, never bytes: a schedule knows nothing of
// data types, protocols, sockets or clocks. The engine (runtime/engine) runs a
// schedule over real connections, cutting each Op into FIFO slices; the
// simulator (algos/sim) runs every rank's schedule in memory to check results,
// find deadlocks and count steps.
//
// Vocabulary, as in NCCL: rank (0..nranks-1), peer (another rank), channel (an
// independent slice of the buffers with its own connections), chunk (the
// elements one ring step moves per loop), slice (the unit of one FIFO post).
package algos

import "fmt"

// NoPeer marks an Op that does not receive (RecvFrom) or does not send (SendTo).
const NoPeer = -1

// Buf names a rank's local buffer.
type Buf uint8

const (
	// None means no local buffer: the Op reads nothing locally or writes nothing.
	None Buf = iota
	// Input is the collective's send buffer (sendbuff). Reads from it apply the
	// reduction's pre-operation (e.g. premulsum's scalar) when the collective
	// reduces.
	Input
	// Output is the collective's receive buffer (recvbuff).
	Output
)

func (b Buf) String() string {
	switch b {
	case None:
		return "-"
	case Input:
		return "in"
	case Output:
		return "out"
	}
	return fmt.Sprintf("Buf(%d)", uint8(b))
}

// Op is one primitive of a schedule. See the package doc for its meaning.
type Op struct {
	RecvFrom int   // peer to receive Count elements from, or NoPeer
	SendTo   int   // peer to send the resulting Count elements to, or NoPeer
	Src      Buf   // local operand: None, Input or Output
	SrcOff   int64 // element offset into Src
	Dst      Buf   // where the result is written: None or Output (Input only for in-place tricks)
	DstOff   int64 // element offset into Dst
	Count    int64 // elements moved by this Op; 0 means the Op does nothing
	Reduce   bool  // combine the received data with the local operand
	PostOp   bool  // apply the reduction's post-operation to the result
}

// Name returns NCCL's name for the primitive this Op performs.
func (o Op) Name() string {
	recv := o.RecvFrom != NoPeer
	send := o.SendTo != NoPeer
	copyOut := o.Dst != None
	switch {
	case !recv && send && !copyOut:
		return "send"
	case !recv && send && copyOut:
		return "copySend"
	case !recv && !send && copyOut:
		return "copy"
	case recv && !send && !copyOut:
		return "recv(discard)"
	case recv && o.Reduce && send && copyOut:
		return "recvReduceCopySend"
	case recv && o.Reduce && send:
		return "recvReduceSend"
	case recv && o.Reduce && copyOut:
		return "recvReduceCopy"
	case recv && send && copyOut:
		return "recvCopySend"
	case recv && send:
		return "recvSend"
	case recv && copyOut:
		return "recv"
	}
	return "nop"
}

func (o Op) String() string {
	s := o.Name()
	if o.RecvFrom != NoPeer {
		s += fmt.Sprintf(" from=%d", o.RecvFrom)
	}
	if o.SendTo != NoPeer {
		s += fmt.Sprintf(" to=%d", o.SendTo)
	}
	if o.Src != None {
		s += fmt.Sprintf(" src=%s[%d]", o.Src, o.SrcOff)
	}
	if o.Dst != None {
		s += fmt.Sprintf(" dst=%s[%d]", o.Dst, o.DstOff)
	}
	s += fmt.Sprintf(" n=%d", o.Count)
	if o.PostOp {
		s += " post"
	}
	return s
}

// Part is the share of a collective that one channel handles: the element
// range [Offset, Offset+Count) of the buffer (all-reduce, broadcast, reduce)
// or of every rank's block (reduce-scatter, all-gather), moved in chunks of at
// most Chunk elements per ring step.
type Part struct {
	Offset int64
	Count  int64
	Chunk  int64
	// Align is the element multiple that shortened tail chunks are rounded up
	// to (NCCL: 16 bytes / sizeof(T)); 0 or 1 means no rounding.
	Align int64
}
