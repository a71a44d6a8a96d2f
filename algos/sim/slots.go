package sim

// The slot-level model: schedules of algos.SlotOp (PAT), which keep
// several FIFO slots of a connection open, write ahead of their posts,
// accumulate into an outgoing slot and read ahead of their releases.

import (
	"errors"
	"fmt"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
)

// poison marks a slot element nobody wrote since the slot was last
// released: reading it is an error.
const poison = -1 << 62

// slotFifo is one Link's FIFO of protocols.NSteps slots of stepElems
// elements: posted and released count steps; size[i] is what the step in
// slot i was posted with.
type slotFifo struct {
	mem              [][]int64
	size             []int64
	posted, released int64
	// The counts at the start of the round: what the other side sees.
	seenPosted, seenReleased int64
	traffic                  Traffic
}

// slot returns the memory of a step's slot, grown (with poison) to hold at
// least n elements: slots take only the memory their writes need.
func (q *slotFifo) slot(step, n int64) []int64 {
	i := step % protocols.NSteps
	m := q.mem[i]
	for int64(len(m)) < n {
		m = append(m, poison)
	}
	q.mem[i] = m
	return m
}

// slotActor is one rank's slot program on one channel.
type slotActor struct {
	ch, rank   int
	ops        []algos.SlotOp
	recv, send []*slotFifo // the FIFO of each op's Recv and Send, or nil
	pc         int
}

type slotState struct {
	ranks     []Rank
	red       Reduction
	stepElems int64
	fifos     map[Link]*slotFifo
	list      []*slotFifo // fifos, in creation order
	actors    []*slotActor
	rounds    int
	ops       int64
	writes    writeCounter
}

// RunSlots runs slot-level schedules (channels[c][r] is rank r's schedule
// on channel c; each must have Slots) over FIFOs of protocols.NSteps slots
// of stepElems elements, and returns what crossed every link. The model:
// a rank's SlotOps run in order; in each round every rank tries its next
// SlotOp, which runs if the slot it reads has been posted and the slot it
// writes has been released, as seen at the start of the round (so a post
// or release is seen in the next round, like a credit round trip). A
// slot's elements are poisoned when it is released: reading one that was
// not written since is an error, as is reading beyond the size the slot
// was posted with or a size other than the one a SlotOp expects. A round
// without progress is a deadlock; a posted slot never released is an error.
// Stats count a message per post.
func RunSlots(ranks []Rank, channels [][]algos.Schedule, red Reduction, stepElems int64) (Stats, error) {
	if len(ranks) == 0 {
		return Stats{}, errors.New("no ranks: need at least 1")
	}
	if stepElems < 1 {
		return Stats{}, fmt.Errorf("slot of %d elements: need at least 1", stepElems)
	}
	s := &slotState{ranks: ranks, red: red, stepElems: stepElems, fifos: map[Link]*slotFifo{}, writes: newWriteCounter(ranks)}
	for c, scheds := range channels {
		if len(scheds) != len(ranks) {
			return Stats{}, fmt.Errorf("channel %d: %d schedules for %d ranks: need one per rank", c, len(scheds), len(ranks))
		}
		for r, sched := range scheds {
			if len(sched.Lanes) > 0 {
				return Stats{}, fmt.Errorf("channel %d rank %d: a schedule with lanes: RunSlots runs slot schedules", c, r)
			}
			if err := sched.CheckLanes(); err != nil {
				return Stats{}, fmt.Errorf("channel %d rank %d: %w", c, r, err)
			}
			a := &slotActor{ch: c, rank: r, ops: sched.Slots,
				recv: make([]*slotFifo, len(sched.Slots)), send: make([]*slotFifo, len(sched.Slots))}
			for i, op := range sched.Slots {
				if op.Recv != algos.NoPeer {
					a.recv[i] = s.fifo(c, op.Recv, r)
				}
				if op.Send != algos.NoPeer {
					a.send[i] = s.fifo(c, r, op.Send)
				}
			}
			s.actors = append(s.actors, a)
		}
	}
	err := s.run()
	st := Stats{Rounds: s.rounds, Ops: s.ops, Links: map[Link]Traffic{}, Rewrites: s.writes.rewrites}
	for l, q := range s.fifos {
		if q.traffic.Messages > 0 {
			st.Links[l] = q.traffic
		}
	}
	return st, err
}

func (s *slotState) fifo(ch, src, dst int) *slotFifo {
	l := Link{Channel: ch, Src: src, Dst: dst}
	q := s.fifos[l]
	if q == nil {
		q = &slotFifo{mem: make([][]int64, protocols.NSteps), size: make([]int64, protocols.NSteps)}
		s.fifos[l] = q
		s.list = append(s.list, q)
	}
	return q
}

func (s *slotState) run() error {
	for {
		for _, q := range s.list {
			q.seenPosted, q.seenReleased = q.posted, q.released
		}
		progress, left := false, false
		for _, a := range s.actors {
			if a.pc == len(a.ops) {
				continue
			}
			left = true
			ok, err := s.step(a)
			if err != nil {
				return err
			}
			progress = progress || ok
		}
		if !left {
			break
		}
		if !progress {
			return s.deadlock()
		}
		s.rounds++
	}
	var errs []error
	for l, q := range s.fifos {
		if q.posted != q.released {
			errs = append(errs, fmt.Errorf("channel %d: %d slots from rank %d to rank %d posted and never released", l.Channel, q.posted-q.released, l.Src, l.Dst))
		}
	}
	return errors.Join(errs...)
}

// ready says whether a's next SlotOp can run this round, and if not what
// it waits for.
func (s *slotState) ready(a *slotActor) (bool, string) {
	op := &a.ops[a.pc]
	if q := a.recv[a.pc]; q != nil {
		if step := q.released + int64(op.RecvAhead); step >= q.seenPosted {
			return false, fmt.Sprintf("step %d from rank %d to be posted (%d posted)", step, op.Recv, q.seenPosted)
		}
	}
	if q := a.send[a.pc]; q != nil {
		if step := q.posted + int64(op.SendAhead); step >= q.seenReleased+protocols.NSteps {
			return false, fmt.Sprintf("slot of step %d to rank %d to be free (%d released)", step, op.Send, q.seenReleased)
		}
	}
	return true, ""
}

// step runs a's next SlotOp if it can.
func (s *slotState) step(a *slotActor) (bool, error) {
	if ok, _ := s.ready(a); !ok {
		return false, nil
	}
	op := &a.ops[a.pc]
	fail := a.fail
	var recv, out []int64
	var in, sendq *slotFifo
	if op.Recv != algos.NoPeer {
		in = a.recv[a.pc]
		step := in.released + int64(op.RecvAhead)
		if size := in.size[step%protocols.NSteps]; size != op.RecvSize {
			return false, fail("step %d from rank %d was posted with %d elements, want %d", step, op.Recv, size, op.RecvSize)
		}
		if op.RecvOff < 0 || op.RecvOff+op.Count > op.RecvSize {
			return false, fail("reads [%d,%d) of a slot posted with %d elements", op.RecvOff, op.RecvOff+op.Count, op.RecvSize)
		}
		recv = in.slot(step, op.RecvOff+op.Count)[op.RecvOff : op.RecvOff+op.Count]
		for i, x := range recv {
			if x == poison {
				return false, fail("reads element %d of step %d from rank %d, which was never written", op.RecvOff+int64(i), step, op.Recv)
			}
		}
	}
	if op.Send != algos.NoPeer {
		sendq = a.send[a.pc]
		if op.SendOff < 0 || op.SendOff+op.Count > s.stepElems {
			return false, fail("writes [%d,%d) of a %d-element slot", op.SendOff, op.SendOff+op.Count, s.stepElems)
		}
		out = sendq.slot(sendq.posted+int64(op.SendAhead), op.SendOff+op.Count)[op.SendOff : op.SendOff+op.Count]
	}
	var local []int64
	pre := false
	switch {
	case op.Acc:
		if out == nil {
			return false, fail("accumulates without a slot to send")
		}
		local = out
	case op.Src != algos.None:
		b := s.buf(a.rank, op.Src)
		if op.SrcOff < 0 || op.SrcOff+op.Count > int64(len(b)) {
			return false, fail("local operand [%d,%d) of %s with %d elements", op.SrcOff, op.SrcOff+op.Count, op.Src, len(b))
		}
		local = b[op.SrcOff : op.SrcOff+op.Count]
		pre = op.Src == algos.Input && s.red.Pre != nil
	}
	var dst []int64
	if op.Dst != algos.None {
		b := s.buf(a.rank, op.Dst)
		if op.DstOff < 0 || op.DstOff+op.Count > int64(len(b)) {
			return false, fail("writes [%d,%d) of %s with %d elements", op.DstOff, op.DstOff+op.Count, op.Dst, len(b))
		}
		dst = b[op.DstOff : op.DstOff+op.Count]
		if op.Dst == algos.Output {
			s.writes.count(a.rank, op.DstOff, op.Count)
		}
	}
	if op.Count > 0 && recv == nil && local == nil {
		return false, fail("has no value: it neither receives nor reads a local operand")
	}
	for i := range op.Count {
		var v int64
		switch {
		case local != nil:
			v = local[i]
			if v == poison && op.Acc {
				return false, fail("accumulates into element %d of its slot, which was never written", op.SendOff+i)
			}
			if pre {
				v = s.red.Pre(a.rank, v)
			}
			if recv != nil {
				if s.red.Op == nil {
					return false, fail("reduces without a reduction")
				}
				v = s.red.Op(recv[i], v)
			}
		default:
			v = recv[i]
		}
		if op.PostOp && s.red.Post != nil {
			v = s.red.Post(v)
		}
		if out != nil {
			out[i] = v
		}
		if dst != nil {
			dst[i] = v
		}
	}
	if op.Post > 0 {
		if op.Send == algos.NoPeer || op.Post > s.stepElems {
			return false, fail("posts %d elements (slots hold %d)", op.Post, s.stepElems)
		}
		sendq.size[sendq.posted%protocols.NSteps] = op.Post
		sendq.posted++
		sendq.traffic.Messages++
		sendq.traffic.Elements += op.Post
		sendq.traffic.MaxDepth = max(sendq.traffic.MaxDepth, int(sendq.posted-sendq.released))
	}
	for range op.Release {
		if in == nil || in.released >= in.posted {
			return false, fail("releases a slot it does not hold")
		}
		i := in.released % protocols.NSteps
		for k := range in.mem[i] {
			in.mem[i][k] = poison
		}
		in.released++
	}
	a.pc++
	s.ops++
	return true, nil
}

// fail reports an error of a's current SlotOp.
func (a *slotActor) fail(format string, args ...any) error {
	return fmt.Errorf("channel %d rank %d slot op %d/%d (%v): %s", a.ch, a.rank, a.pc, len(a.ops), a.ops[a.pc], fmt.Sprintf(format, args...))
}

func (s *slotState) buf(rank int, b algos.Buf) []int64 {
	if b == algos.Input {
		return s.ranks[rank].In
	}
	return s.ranks[rank].Out
}

func (s *slotState) deadlock() error {
	e := &DeadlockError{Round: s.rounds + 1}
	for _, a := range s.actors {
		if a.pc == len(a.ops) {
			continue
		}
		_, why := s.ready(a)
		op := a.ops[a.pc]
		e.Blocked = append(e.Blocked, Blocked{Channel: a.ch, Rank: a.rank, Index: a.pc, Len: len(a.ops),
			Slot: &op, Waiting: why, Lanes: 1})
	}
	return e
}
