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
// An Op may also receive from and send to several peers, as NCCL's
// primitives with a fan do (the tree's up and down halves): Fan lists the
// peers beyond RecvFrom and SendTo. Every received message is then reduced
// into the value, and the one value goes to every send peer. Conn picks
// which of the two connections between a pair of ranks an Op uses (NCCL's
// connIndex), so that two streams between the same ranks stay apart.
//
// A rank's work on one channel is a Schedule: one or more Lanes, each a
// sequence of Ops, running concurrently (NCCL's thread groups: the tree's up
// and down halves run at once so that large buffers pipeline). A Wait holds
// an Op of one lane until another lane of the same rank and channel has
// completed a number of Ops.
//
// Offsets and counts are in elements, never bytes: a schedule knows nothing of
// data types, protocols, sockets or clocks. The engine (runtime/engine) runs a
// schedule over real connections, cutting each Op into FIFO slices; the
// simulator (algos/sim) runs every rank's schedule in memory to check results,
// find deadlocks and count steps. The algorithm table (Algorithms, Lookup)
// says which generator makes the schedules of each (algorithm, collective),
// with the peers it talks to, its FIFO geometry per protocol and the
// properties the engine relies on.
//
// Vocabulary, as in NCCL: rank (0..nranks-1), peer (another rank), host (the
// ranks that share memory), channel (an independent slice of the buffers
// with its own connections), chunk (the elements one algorithm step moves per
// loop), slice (the unit of one FIFO post), lane (one op stream of a
// channel), connection index (which of a pair's connections).
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
	Conn     uint8 // connection index of every peer of the Op: 0, or 1 for a second stream
	Fan      *Fan  // further peers, or nil (every ring Op); shared, never modified
}

// Fan lists the peers of an Op beyond RecvFrom and SendTo: NCCL's
// primitives with several peers (FanAsymmetric<3,1> for the tree's way up,
// <1,3> for its way down). Recv needs RecvFrom and Send needs SendTo.
type Fan struct {
	// Recv are further peers received from: the value is the reduction of
	// the messages from RecvFrom, Recv[0], Recv[1], ... and the local
	// operand, so an Op with Recv must Reduce.
	Recv []int
	// Send are further peers the value goes to, after SendTo.
	Send []int

	// SendOff, when not nil, makes the Op a scatter (NCCL's prims.scatter):
	// its k-th send peer (0 is SendTo) gets Src[SrcOff+SendOff[k], +Count)
	// instead of one common value. A scatter neither receives nor writes
	// Dst; it has one entry per send peer.
	SendOff []int64
	// RecvOff, when not nil, makes the Op a gather (prims.gather): the
	// message of its k-th receive peer (0 is RecvFrom) is written to
	// Dst[DstOff+RecvOff[k], +Count). A gather neither reduces, reads Src
	// nor sends; it has one entry per receive peer.
	RecvOff []int64

	// Direct lists ranks of the same host whose Input the Op reads in
	// place, through their registered buffers (NVLS with registered
	// buffers: no scatter through a FIFO). Without DirectOff, every one's
	// Input[SrcOff, +Count) is reduced into the value after the received
	// messages and the local operand, so the Op must Reduce from Src
	// Input. With DirectOff (one entry per Direct rank) the Op is a direct
	// gather: Direct[k]'s Input[SrcOff, +Count) is written to
	// Dst[DstOff+DirectOff[k], +Count); it neither receives, reduces nor
	// sends. The reads apply each owner's pre-operation.
	Direct    []int
	DirectOff []int64
}

// MaxConns is the number of connections between an ordered pair of ranks
// on one channel and protocol (NCCL_MAX_CONNS): Op.Conn is 0 or 1.
const MaxConns = 2

// MaxFan is the number of peers one Op may have each way (RecvFrom or
// SendTo plus the fan) that the engine keeps without its lane's spare
// lists: NCCL's NCCL_MAX_TREE_ARITY is 3.
const MaxFan = 8

// MaxPeers bounds the peers of one Op each way: NVLS's load-reduce, scatter
// and gather talk to every other rank of a host at once (NCCL's
// NCCL_MAX_NVLS_ARITY is 32; 64 here, so that a host of 64 ranks runs it).
const MaxPeers = 64

// McastPeer is the virtual peer of head's multicast region (NCCL's NVLS
// virtual peers, nranks+1+head): an Op of head that sends to it stores its
// value once for every reader of the host; an Op that receives from it
// reads what head stored. Peer nranks itself is left to a network
// element (NCCL's collnet peer).
func McastPeer(nranks, head int) int { return nranks + 1 + head }

// McastHead returns the head whose multicast region peer names, if it
// names one.
func McastHead(nranks, peer int) (head int, ok bool) {
	if peer > nranks && peer <= 2*nranks {
		return peer - nranks - 1, true
	}
	return 0, false
}

// NumRecvs is the number of peers the Op receives from.
func (o *Op) NumRecvs() int {
	switch {
	case o.RecvFrom == NoPeer:
		return 0
	case o.Fan == nil:
		return 1
	}
	return 1 + len(o.Fan.Recv)
}

// RecvPeer returns the i-th peer the Op receives from (0 is RecvFrom).
func (o *Op) RecvPeer(i int) int {
	if i == 0 {
		return o.RecvFrom
	}
	return o.Fan.Recv[i-1]
}

// NumSends is the number of peers the Op sends to.
func (o *Op) NumSends() int {
	switch {
	case o.SendTo == NoPeer:
		return 0
	case o.Fan == nil:
		return 1
	}
	return 1 + len(o.Fan.Send)
}

// SendPeer returns the i-th peer the Op sends to (0 is SendTo).
func (o *Op) SendPeer(i int) int {
	if i == 0 {
		return o.SendTo
	}
	return o.Fan.Send[i-1]
}

// Recvs returns the peers the Op receives from, in reduction order.
func (o *Op) Recvs() []int {
	if o.RecvFrom == NoPeer {
		return nil
	}
	if o.Fan == nil || len(o.Fan.Recv) == 0 {
		return []int{o.RecvFrom}
	}
	return append([]int{o.RecvFrom}, o.Fan.Recv...)
}

// Sends returns the peers the Op sends to.
func (o *Op) Sends() []int {
	if o.SendTo == NoPeer {
		return nil
	}
	if o.Fan == nil || len(o.Fan.Send) == 0 {
		return []int{o.SendTo}
	}
	return append([]int{o.SendTo}, o.Fan.Send...)
}

// Name returns NCCL's name for the primitive this Op performs.
func (o Op) Name() string {
	switch {
	case o.Fan != nil && o.Fan.SendOff != nil:
		return "scatter"
	case o.Fan != nil && o.Fan.RecvOff != nil:
		return "gather"
	case o.Fan != nil && o.Fan.DirectOff != nil:
		return "directGather"
	}
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
		s += " from=" + peerList(o.Recvs())
	}
	if o.SendTo != NoPeer {
		s += " to=" + peerList(o.Sends())
	}
	if o.Conn != 0 {
		s += fmt.Sprintf(" conn=%d", o.Conn)
	}
	if o.Fan != nil && o.Fan.Direct != nil {
		s += " direct=" + peerList(o.Fan.Direct)
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

func peerList(ps []int) string {
	s := ""
	for i, p := range ps {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprint(p)
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
