package timed

import (
	"math"

	"github.com/seed-760dd1f1/cc/algos"
)

// try starts actor i's next slice if it can.
func (s *Sim) try(i int) {
	st := &s.lanes[i]
	if !st.started || st.finished || st.busy {
		return
	}
	a := &s.actors[i]
	for a.slice == 0 && a.opened != a.op && a.op < a.nops && a.segCount == 0 {
		s.advance(a, st)
		s.wakeSiblings(a, i)
	}
	if a.op == a.nops {
		st.finished, a.end = true, s.now
		return
	}
	if a.waitAt <= a.op && (st.held || !s.waited(a)) {
		st.held = true
		return
	}
	if a.slice == 0 && a.opened != a.op {
		s.open(a)
	}
	for _, c := range a.recv {
		if c.arrived == 0 {
			return
		}
	}
	for _, c := range a.send {
		if c.credits < s.p.Geometry.SliceSteps {
			return
		}
	}
	for _, c := range a.recv {
		c.arrived--
	}
	for _, c := range a.send {
		c.credits -= s.p.Geometry.SliceSteps
	}
	st.busy = true
	elems := min(a.step, a.count-a.slice*a.step)
	for _, c := range a.send {
		if c.flow != nil && !c.flow.instant() {
			s.enqueue(c.flow, elems)
		}
	}
	work := s.cpuWork(a, elems)
	a.cpu += work
	if work <= 0 {
		s.stageDone(i, elems)
		return
	}
	s.start(s.activity(work, 1, s.poolRes[a.host], nil, i, elems))
}

// waited reports whether the Waits holding actor a's Op are met.
func (s *Sim) waited(a *actor) bool {
	for a.wait < len(a.runs) && a.runs[a.wait].end <= a.op {
		a.wait++ // runs are sorted by Op and apart, or single Waits (build)
	}
	a.waitAt = math.MaxInt
	if a.wait < len(a.runs) {
		a.waitAt = a.runs[a.wait].at
	}
	for _, w := range a.runs[a.wait:] {
		if w.at > a.op {
			break
		}
		if s.lanes[w.sib].done < w.done+a.op-w.at {
			return false
		}
	}
	return true
}

// advance moves actor a, of state st, past its Op op, which it has
// completed.
func (s *Sim) advance(a *actor, st *laneState) {
	a.op++
	st.done++
	if a.op == a.segEnd && a.seg+1 < len(a.segs) {
		a.seg++
		a.segEnd, a.segCount = a.segs[a.seg].end, a.segs[a.seg].count
	}
}

// open makes actor a's next Op, of at least one element, its current
// one: its slices, its connections and what its CPU stages cost, which
// are its segment's.
func (s *Sim) open(a *actor) {
	a.opened = a.op
	if a.loaded == a.seg {
		return
	}
	a.loaded = a.seg
	sg := &a.segs[a.seg]
	a.count = sg.count
	a.step = algos.SliceElems(s.p.Geometry, s.p.StepPayload, sg.count, s.p.ElemSize)
	a.nslices = (sg.count + a.step - 1) / a.step
	a.recv, a.send = sg.recv, sg.send
	inter := false
	for _, c := range a.recv {
		inter = inter || c.inter
	}
	for _, c := range a.send {
		inter = inter || c.inter
	}
	a.beta, a.over = s.p.Intra.Beta, s.p.Intra.CPU
	if inter {
		a.beta, a.over = s.p.Inter.Beta, s.p.Inter.CPU
	}
	if len(a.send) == 0 {
		a.over = 0 // a hop's CPU is the sender's: a call of n hops in a row costs n x (CPU + Alpha)
	}
	a.copies = int64(len(a.send)+max(0, len(a.recv)-1)) + int64(sg.direct)
}

// cpuWork is the ns a slice's CPU stage takes on a free core: its
// class's CPU if it is the first slice of an Op that sends (one hop's
// system calls and wake-up; the slices after it stream), plus bytes
// times (send peers + receive peers beyond the first + direct reads)
// over the Beta of its class, all slowed by its host's factor.
func (s *Sim) cpuWork(a *actor, elems int64) float64 {
	w := 0.0
	if a.slice == 0 {
		w = a.over
	}
	if a.beta > 0 {
		w += float64(elems*int64(s.p.ElemSize)*a.copies) / a.beta
	}
	if w <= 0 {
		return 0
	}
	if s.p.SlowHost != nil {
		w *= s.p.SlowHost[a.host]
	}
	return w
}

// stageDone ends actor i's CPU stage of a slice of elems elements: the
// slots it received in go back, the slice is posted, the actor moves on.
func (s *Sim) stageDone(i int, elems int64) {
	a, st := &s.actors[i], &s.lanes[i]
	for _, c := range a.recv {
		s.hop(evCredit, c)
	}
	for _, c := range a.send {
		c.traffic.Slices++
		c.traffic.Elements += elems
		if a.slice == 0 {
			c.traffic.Messages++
		}
		if f := c.flow; f != nil && !f.instant() {
			f.produced++
			if f.drained >= f.produced {
				s.hop(evArrive, c)
			}
			continue
		}
		s.hop(evArrive, c)
	}
	st.busy = false
	a.slice++
	if a.slice == a.nslices {
		a.slice = 0
		s.advance(a, st)
		s.wakeSiblings(a, i)
	}
	s.work = append(s.work, i)
}

// hop schedules an arrival or a credit on c one alpha of its class from
// now. The clock never goes back and alpha is the class's for the whole
// Run, so each class's hops are scheduled in the order they happen: a
// queue per class keeps them, no heap.
func (s *Sim) hop(kind int, c *conn) {
	q, alpha := &s.hops[0], s.p.Intra.Alpha
	if c.inter {
		q, alpha = &s.hops[1], s.p.Inter.Alpha
	}
	s.seq++
	q.push(event{t: s.now + alpha, seq: s.seq, kind: kind, c: c})
}

// enqueue queues a slice's bytes on the flow f as its sender's CPU
// stage starts; it arrives alpha after the later of the stage's end
// (stageDone) and the flow's drain.
func (s *Sim) enqueue(f *flow, elems int64) {
	f.pending = append(f.pending, float64(elems*int64(s.p.ElemSize)))
	if f.act == nil {
		s.drain(f)
	}
}

// drain starts the transfer of f's oldest pending slice.
func (s *Sim) drain(f *flow) {
	f.act = s.activity(f.pending[0], f.cap, f.res, f, 0, 0)
	s.start(f.act)
}

// drained ends the transfer of f's oldest pending slice.
func (s *Sim) drained(f *flow) {
	f.pending = f.pending[1:]
	f.act = nil
	f.drained++
	if f.produced >= f.drained {
		s.hop(evArrive, f.c)
	}
	if len(f.pending) > 0 {
		s.drain(f)
	}
}

// instant reports whether f is unlimited: its slices take no time.
func (f *flow) instant() bool { return len(f.res) == 0 && math.IsInf(f.cap, 1) }

// wakeSiblings tells the lanes of a's rank and channel that a, actor
// self, has completed an Op: the only change that can release a Wait.
//
// Only the tries that can change something are queued. The work stack is
// last in, first out, and every change to an actor (an event for it, its
// stage's end, a sibling's Op) queues it, so an actor queued and then
// queued again is tried first for its latest change, and its earlier
// entry finds nothing new. Left out are: self, which its caller tries
// next (stageDone queues it, try goes on); a lane that cannot start
// (wake); and, when the stack is empty, a lane no Wait held: every lane
// has been tried since its last change, passed its Waits then (or had
// none), and only Waits see a sibling's Op.
func (s *Sim) wakeSiblings(a *actor, self int) {
	quiet := len(s.work) == 0
	for _, i := range a.siblings {
		b := &s.lanes[i]
		held := b.held
		b.held = false
		if i != self && (held || !quiet) {
			s.wake(i)
		}
	}
}

// wake queues a try of actor i unless it would return at once: i is in a
// CPU stage, finished, or not started. None of those changes before the
// work stack is empty (a stage's end, a start are events; a stage that
// takes no time never leaves try busy), so skipping it keeps the order
// of the tries that count.
func (s *Sim) wake(i int) {
	if b := &s.lanes[i]; b.started && !b.finished && !b.busy {
		s.work = append(s.work, i)
	}
}
