package sim

// The rounds of the model (see the package doc): every schedule's progress,
// the FIFOs between ranks, and the arithmetic of one Op.

import (
	"fmt"

	"github.com/seed-760dd1f1/cc/algos"
)

// state is one Run: the ranks' buffers, the FIFOs and every schedule's
// progress.
type state struct {
	ranks  []Rank
	red    Reduction
	slots  int
	fifos  map[Link]*fifo
	actors []*actor
	free   [][]int64 // value slices no message holds any more
	rounds int
	ops    int64

	// smallest[b] is the rank with the fewest elements in buffer b, which
	// bounds every Op's range in b.
	smallest [algos.Output + 1]struct {
		rank int
		size int64
	}
}

// message is what one Op sends: its values and, for error messages, which
// Op sent it.
type message struct {
	data  []int64
	index int
	op    algos.Op
}

// fifo is one Link's queue: a ring of slots messages.
type fifo struct {
	buf     []message
	head, n int
	traffic Traffic
}

func (q *fifo) front() *message { return &q.buf[q.head] }

func (q *fifo) push(m message) {
	q.buf[(q.head+q.n)%len(q.buf)] = m
	q.n++
	q.traffic.Messages++
	q.traffic.Elements += int64(len(m.data))
}

func (q *fifo) pop() message {
	m := q.buf[q.head]
	q.buf[q.head] = message{}
	q.head = (q.head + 1) % len(q.buf)
	q.n--
	return m
}

// actor is one rank's progress through its schedule on one channel.
type actor struct {
	ch, rank int
	ops      []algos.Op
	pc       int
	holding  bool    // the current Op has taken its message: held
	held     message // valid when holding

	// The FIFOs of the last peers, since schedules mostly talk to the same
	// ones: from inPeer and to outPeer (NoPeer-1 before the first lookup).
	inPeer, outPeer int
	in, out         *fifo
}

// move is what one actor does in a round.
type move struct {
	a        *actor
	recv     bool  // take the message at the head of the input FIFO
	complete bool  // finish the Op
	sent     *fifo // where it was sent, once applied
}

// fifo returns the FIFO of a link, empty when first used.
func (s *state) fifo(ch, src, dst int) *fifo {
	l := Link{Channel: ch, Src: src, Dst: dst}
	q := s.fifos[l]
	if q == nil {
		q = &fifo{buf: make([]message, s.slots)}
		s.fifos[l] = q
	}
	return q
}

// inFifo and outFifo return a's FIFO from or to peer.
func (s *state) inFifo(a *actor, peer int) *fifo {
	if a.inPeer != peer {
		a.inPeer, a.in = peer, s.fifo(a.ch, peer, a.rank)
	}
	return a.in
}

func (s *state) outFifo(a *actor, peer int) *fifo {
	if a.outPeer != peer {
		a.outPeer, a.out = peer, s.fifo(a.ch, a.rank, peer)
	}
	return a.out
}

// run plays rounds until every schedule is done or nothing can progress.
func (s *state) run() error {
	var moves []move
	for {
		moves = moves[:0]
		live := false
		for _, a := range s.actors {
			for a.pc < len(a.ops) && a.ops[a.pc].Count == 0 {
				a.pc++
			}
			if a.pc == len(a.ops) {
				continue
			}
			live = true
			m, err := s.plan(a)
			if err != nil {
				return err
			}
			if m.recv || m.complete {
				moves = append(moves, m)
			}
		}
		if !live {
			return s.leftovers()
		}
		if len(moves) == 0 {
			return s.deadlock()
		}
		// Each FIFO has one producer and one consumer, each doing at most one
		// push or pop per round, so applying the moves in any order gives
		// the same result as applying them at once.
		for i := range moves {
			s.apply(&moves[i])
		}
		for _, m := range moves {
			if q := m.sent; q != nil {
				q.traffic.MaxDepth = max(q.traffic.MaxDepth, q.n)
			}
		}
		s.rounds++
	}
}

// plan decides what actor a can do this round, looking only at FIFO state.
func (s *state) plan(a *actor) (move, error) {
	op := a.ops[a.pc]
	m := move{a: a}
	if op.RecvFrom != algos.NoPeer && !a.holding {
		q := s.inFifo(a, op.RecvFrom)
		if q.n == 0 {
			return m, nil
		}
		if got := q.front(); int64(len(got.data)) != op.Count {
			return m, fmt.Errorf("channel %d: rank %d op %d (%v) receives the message of rank %d op %d (%v): count %d, want %d",
				a.ch, a.rank, a.pc, op, op.RecvFrom, got.index, got.op, len(got.data), op.Count)
		}
		m.recv = true
	}
	if op.SendTo != algos.NoPeer && s.outFifo(a, op.SendTo).n >= s.slots {
		return m, nil
	}
	m.complete = true
	return m, nil
}

func (s *state) apply(m *move) {
	a := m.a
	op := a.ops[a.pc]
	if m.recv {
		a.held = s.inFifo(a, op.RecvFrom).pop()
		a.holding = true
	}
	if !m.complete {
		return
	}
	val := s.compute(a.rank, op, a.held.data)
	if op.Dst != algos.None {
		copy(s.buf(a.rank, op.Dst)[op.DstOff:], val)
	}
	if op.SendTo != algos.NoPeer {
		m.sent = s.outFifo(a, op.SendTo)
		m.sent.push(message{data: val, index: a.pc, op: op})
	} else if len(s.free) < maxFree {
		s.free = append(s.free, val)
	}
	a.pc++
	a.holding, a.held = false, message{}
	s.ops++
}

// maxFree bounds the free list of value slices.
const maxFree = 64

// alloc returns a slice of n elements, from the free list if its last entry
// is big enough. Values are recycled when an Op ends a message's life
// (writes it without sending it), so a run allocates about as many slices as
// there are messages in flight.
func (s *state) alloc(n int64) []int64 {
	if k := len(s.free); k > 0 && int64(cap(s.free[k-1])) >= n {
		b := s.free[k-1]
		s.free = s.free[:k-1]
		return b[:n]
	}
	return make([]int64, n)
}

// compute returns the value of op (see the algos package doc): the received
// data, the local operand, or received ⊕ local; then the post-operation.
// It reuses the received slice, which nobody else holds.
func (s *state) compute(rank int, op algos.Op, received []int64) []int64 {
	val := received
	if op.Src != algos.None {
		local := s.buf(rank, op.Src)[op.SrcOff : op.SrcOff+op.Count]
		pre := op.Src == algos.Input && s.red.Pre != nil
		if val == nil {
			val = s.alloc(op.Count)
		}
		for i, x := range local {
			if pre {
				x = s.red.Pre(rank, x)
			}
			if op.Reduce {
				x = s.red.Op(val[i], x)
			}
			val[i] = x
		}
	}
	if op.PostOp && s.red.Post != nil {
		for i, x := range val {
			val[i] = s.red.Post(x)
		}
	}
	return val
}

func (s *state) buf(rank int, b algos.Buf) []int64 {
	if b == algos.Input {
		return s.ranks[rank].In
	}
	return s.ranks[rank].Out
}
