package sim

// The rounds of the model (see the package doc): every lane's progress, the
// FIFOs between ranks, and the arithmetic of one Op.

import (
	"fmt"

	"github.com/seed-760dd1f1/cc/algos"
)

// state is one Run: the ranks' buffers, the FIFOs and every lane's progress.
type state struct {
	ranks  []Rank
	red    Reduction
	slots  int
	fifos  map[Link]*fifo
	actors []*actor
	free   [][]int64 // value slices no message holds any more
	rounds int
	ops    int64
	sent   []*fifo // FIFOs pushed to in this round
	writes writeCounter
	// readers[channel][head] are the ranks that read head's multicast
	// region (algos.McastPeer) on the channel, from their schedules.
	readers     map[[2]int][]int
	mcastWrites int64
	directElems int64

	// smallest[b] is the rank with the fewest elements in buffer b, which
	// bounds every Op's range in b.
	smallest [algos.Output + 1]struct {
		rank int
		size int64
	}
}

// message is what one Op sends to one peer: its values and, for error
// messages, which Op sent it.
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

// actor is one lane of one rank on one channel.
type actor struct {
	ch, rank, lane int
	ops            []algos.Op
	waits          []algos.Wait
	wi             int       // waits[:wi] are satisfied
	siblings       []*actor  // the lanes of this rank and channel, by lane index
	pc             int       // ops[:pc] are complete
	held           []message // by receive peer, as many as the lane's widest Op has
	holding        uint64    // bit k: the current Op holds the message of its k-th receive peer

	// FIFOs this lane used, so that schedules that talk to the same few
	// peers do not look them up in the map every round.
	cache []cached
	one   [1]*fifo // sendFifos' answer for a real peer
	mcast []*fifo  // the FIFOs to the readers of this rank's multicast region
}

type cached struct {
	peer int
	conn uint8
	send bool
	q    *fifo
}

// laneName is " lane N" in messages about a rank with several lanes, and
// nothing for a single lane.
func (a *actor) laneName() string { return laneName(a.lane, len(a.siblings)) }

func laneName(lane, lanes int) string {
	if lanes == 1 {
		return ""
	}
	return fmt.Sprintf(" lane %d", lane)
}

// waitsOK reports whether every Wait at or before the lane's position is
// satisfied, advancing past those that are (sibling lanes only progress,
// so a satisfied Wait stays satisfied).
func (a *actor) waitsOK() bool {
	for a.wi < len(a.waits) && a.waits[a.wi].At <= a.pc {
		w := a.waits[a.wi]
		if a.siblings[w.Lane].pc < w.Done {
			return false
		}
		a.wi++
	}
	return true
}

// move is what one actor does in a round.
type move struct {
	a        *actor
	take     uint64 // receive peers whose head message it takes
	complete bool   // finish the Op
}

// fifo returns the FIFO of a link, empty when first used. A receive from
// a multicast region is the FIFO from its head on ConnMcast.
func (s *state) fifo(a *actor, peer int, conn uint8, send bool) *fifo {
	if h, ok := algos.McastHead(len(s.ranks), peer); ok && !send {
		peer, conn = h, ConnMcast
	}
	for _, c := range a.cache {
		if c.peer == peer && c.conn == conn && c.send == send {
			return c.q
		}
	}
	l := Link{Channel: a.ch, Src: peer, Dst: a.rank, Conn: conn}
	if send {
		l.Src, l.Dst = a.rank, peer
	}
	q := s.fifos[l]
	if q == nil {
		q = &fifo{buf: make([]message, s.slots)}
		s.fifos[l] = q
	}
	a.cache = append(a.cache, cached{peer, conn, send, q})
	return q
}

// run plays rounds until every lane is done or nothing can progress.
func (s *state) run() error {
	var moves []move
	for {
		moves = moves[:0]
		live := false
		for _, a := range s.actors {
			for a.pc < len(a.ops) && a.ops[a.pc].Count == 0 && a.waitsOK() {
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
			if m.take != 0 || m.complete {
				moves = append(moves, m)
			}
		}
		if !live {
			return s.leftovers()
		}
		if len(moves) == 0 {
			return s.deadlock()
		}
		// Each FIFO has one producer and one consumer lane (CheckLanes),
		// each doing at most one push or pop per round on it, and Waits read
		// progress as it was at the start of the round (plan runs before any
		// apply), so applying the moves in any order gives the same result
		// as applying them at once.
		for i := range moves {
			s.apply(&moves[i])
		}
		for _, q := range s.sent {
			q.traffic.MaxDepth = max(q.traffic.MaxDepth, q.n)
		}
		s.sent = s.sent[:0]
		s.rounds++
	}
}

// plan decides what actor a can do this round, looking only at the state
// at the start of the round.
func (s *state) plan(a *actor) (move, error) {
	m := move{a: a}
	if !a.waitsOK() {
		return m, nil
	}
	op := &a.ops[a.pc]
	all := true
	for k := range op.NumRecvs() {
		if a.holding&(1<<k) != 0 {
			continue
		}
		peer := op.RecvPeer(k)
		q := s.fifo(a, peer, op.Conn, false)
		if q.n == 0 {
			all = false
			continue
		}
		if got := q.front(); int64(len(got.data)) != op.Count {
			return m, fmt.Errorf("channel %d: rank %d%s op %d (%v) receives the message of rank %d op %d (%v): count %d, want %d",
				a.ch, a.rank, a.laneName(), a.pc, *op, peer, got.index, got.op, len(got.data), op.Count)
		}
		m.take |= 1 << k
	}
	if !all {
		return m, nil
	}
	for k := range op.NumSends() {
		for _, q := range s.sendFifos(a, op.SendPeer(k), op.Conn) {
			if q.n >= s.slots {
				return m, nil
			}
		}
	}
	m.complete = true
	return m, nil
}

// sendFifos are the FIFOs a send to peer fills: the link's, or for the
// rank's multicast region one FIFO to every reader, on ConnMcast (one
// write that every reader sees; a slot is free when every reader has
// taken the message in it).
func (s *state) sendFifos(a *actor, peer int, conn uint8) []*fifo {
	if _, ok := algos.McastHead(len(s.ranks), peer); !ok {
		a.one[0] = s.fifo(a, peer, conn, true)
		return a.one[:]
	}
	if a.mcast == nil {
		for _, r := range s.readers[[2]int{a.ch, a.rank}] {
			a.mcast = append(a.mcast, s.fifo(a, r, ConnMcast, true))
		}
		if a.mcast == nil {
			a.mcast = []*fifo{}
		}
	}
	return a.mcast
}

func (s *state) apply(m *move) {
	a := m.a
	op := &a.ops[a.pc]
	for k := range op.NumRecvs() {
		if m.take&(1<<k) != 0 {
			a.held[k] = s.fifo(a, op.RecvPeer(k), op.Conn, false).pop()
			a.holding |= 1 << k
		}
	}
	if !m.complete {
		return
	}
	if op.Fan != nil && (op.Fan.SendOff != nil || op.Fan.RecvOff != nil || op.Fan.DirectOff != nil) {
		s.scatterGather(a, op)
		s.done(a)
		return
	}
	val := s.compute(a, op)
	if op.Dst != algos.None {
		copy(s.buf(a.rank, op.Dst)[op.DstOff:], val)
		if op.Dst == algos.Output {
			s.writes.count(a.rank, op.DstOff, op.Count)
		}
	}
	sends := op.NumSends()
	for k := range sends {
		data := val
		if k < sends-1 {
			data = s.alloc(op.Count) // every receiver owns its message
			copy(data, val)
		}
		s.send(a, op, k, data)
	}
	if sends == 0 && len(s.free) < maxFree {
		s.free = append(s.free, val)
	}
	s.done(a)
}

// send pushes data, which the receivers own, to the k-th send peer of op.
func (s *state) send(a *actor, op *algos.Op, k int, data []int64) {
	qs := s.sendFifos(a, op.SendPeer(k), op.Conn)
	if _, ok := algos.McastHead(len(s.ranks), op.SendPeer(k)); ok {
		s.mcastWrites++
	}
	for i, q := range qs {
		d := data
		if i < len(qs)-1 {
			d = s.alloc(int64(len(data)))
			copy(d, data)
		}
		q.push(message{data: d, index: a.pc, op: *op})
		s.sent = append(s.sent, q)
	}
}

// done completes a's current Op.
func (s *state) done(a *actor) {
	a.pc++
	a.holding = 0
	clear(a.held)
	s.ops++
}

// scatterGather performs a scatter (each send peer gets its own range of
// the local operand) or a gather (each received message goes to its own
// range of Dst).
func (s *state) scatterGather(a *actor, op *algos.Op) {
	if op.Fan.DirectOff != nil {
		s.directGather(a, op)
		return
	}
	if op.Fan.RecvOff != nil {
		for k := range op.NumRecvs() {
			off := op.DstOff + op.Fan.RecvOff[k]
			copy(s.buf(a.rank, op.Dst)[off:], a.held[k].data)
			if op.Dst == algos.Output {
				s.writes.count(a.rank, off, op.Count)
			}
			if len(s.free) < maxFree {
				s.free = append(s.free, a.held[k].data)
			}
		}
		return
	}
	pre := op.Src == algos.Input && s.red.Pre != nil
	for k := range op.NumSends() {
		off := op.SrcOff + op.Fan.SendOff[k]
		data := s.alloc(op.Count)
		for i, x := range s.buf(a.rank, op.Src)[off : off+op.Count] {
			if pre {
				x = s.red.Pre(a.rank, x)
			}
			data[i] = x
		}
		s.send(a, op, k, data)
	}
}

// writeCounter counts the writes of every rank's Out, to find rewrites.
type writeCounter struct {
	ranks    []Rank
	writes   [][]uint8 // writes[r][e]: how often rank r's Out[e] was written (saturating)
	rewrites int64
}

func newWriteCounter(ranks []Rank) writeCounter {
	return writeCounter{ranks: ranks, writes: make([][]uint8, len(ranks))}
}

// count records a write of Out[off, off+n) of rank.
func (c *writeCounter) count(rank int, off, n int64) {
	w := c.writes[rank]
	if w == nil {
		w = make([]uint8, len(c.ranks[rank].Out))
		c.writes[rank] = w
	}
	for i := off; i < off+n; i++ {
		if w[i] > 0 {
			c.rewrites++
		}
		if w[i] < 255 {
			w[i]++
		}
	}
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

// compute returns the value of the current Op of a (see the algos package
// doc): the received messages reduced in peer order, then the local
// operand; then the post-operation. It reuses the first received slice,
// which nobody else holds.
func (s *state) compute(a *actor, op *algos.Op) []int64 {
	nrecv := op.NumRecvs()
	var val []int64
	if nrecv > 0 {
		val = a.held[0].data
		for k := 1; k < nrecv; k++ {
			for i, x := range a.held[k].data {
				val[i] = s.red.Op(val[i], x)
			}
			if len(s.free) < maxFree {
				s.free = append(s.free, a.held[k].data)
			}
		}
	}
	if op.Src != algos.None {
		local := s.buf(a.rank, op.Src)[op.SrcOff : op.SrcOff+op.Count]
		pre := op.Src == algos.Input && s.red.Pre != nil
		reduce := val != nil && op.Reduce
		if val == nil {
			val = s.alloc(op.Count)
		}
		for i, x := range local {
			if pre {
				x = s.red.Pre(a.rank, x)
			}
			if reduce {
				x = s.red.Op(val[i], x)
			}
			val[i] = x
		}
	}
	if op.Fan != nil {
		s.directReads(val, op)
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

// directReads reduces into val the Input of every rank a direct
// load-reduce reads in place (Fan.Direct), each with its owner's
// pre-operation, and counts them.
func (s *state) directReads(val []int64, op *algos.Op) {
	for _, p := range op.Fan.Direct {
		for i, x := range s.ranks[p].In[op.SrcOff : op.SrcOff+op.Count] {
			if s.red.Pre != nil {
				x = s.red.Pre(p, x)
			}
			val[i] = s.red.Op(val[i], x)
		}
		s.directElems += op.Count
	}
}

// directGather copies the Input of every rank Fan.Direct names into its
// range of a's Dst, and counts them.
func (s *state) directGather(a *actor, op *algos.Op) {
	f := op.Fan
	for k, p := range f.Direct {
		off := op.DstOff + f.DirectOff[k]
		copy(s.buf(a.rank, op.Dst)[off:off+op.Count], s.ranks[p].In[op.SrcOff:op.SrcOff+op.Count])
		if op.Dst == algos.Output {
			s.writes.count(a.rank, off, op.Count)
		}
		s.directElems += op.Count
	}
}
