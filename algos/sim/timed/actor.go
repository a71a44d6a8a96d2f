package timed

import (
	"math"

	"github.com/seed-760dd1f1/cc/algos"
)

// try starts actor i's next slice if it can.
func (s *Sim) try(i int) {
	a := &s.actors[i]
	if !a.started || a.finished || a.busy {
		return
	}
	for a.slice == 0 && a.opened != a.op && a.op < len(a.ops) && a.ops[a.op].Count == 0 {
		a.op++
		a.done++
		s.wakeSiblings(a)
	}
	if a.op == len(a.ops) {
		a.finished, a.end = true, s.now
		return
	}
	if a.waitAt <= a.op && (a.held || !s.waited(a)) {
		a.held = true
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
	a.busy = true
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
	s.start(s.activity(activity{remaining: work, cap: 1, res: s.poolRes[a.host], actor: i, elems: elems}))
}

// waited reports whether the Waits holding actor a's Op are met.
func (s *Sim) waited(a *actor) bool {
	for a.wait < len(a.waits) && a.waits[a.wait].At < a.op {
		a.wait++ // waits are sorted by Op (Schedule.CheckLanes)
	}
	a.waitAt = math.MaxInt
	if a.wait < len(a.waits) {
		a.waitAt = a.waits[a.wait].At
	}
	for _, w := range a.waits[a.wait:] {
		if w.At != a.op {
			break
		}
		if s.actors[a.siblings[w.Lane]].done < w.Done {
			return false
		}
	}
	return true
}

// open makes actor a's next Op, of at least one element, its current
// one: its slices, its connections and what its CPU stages cost.
func (s *Sim) open(a *actor) {
	o := &a.ops[a.op]
	a.opened, a.count = a.op, o.Count
	a.step = algos.SliceElems(s.p.Geometry, s.p.StepPayload, o.Count, s.p.ElemSize)
	a.nslices = (o.Count + a.step - 1) / a.step
	at := a.at[2*a.op:]
	a.recv, a.send = a.conns[at[0]:at[1]:at[1]], a.conns[at[1]:at[2]:at[2]]
	inter := false
	for _, c := range a.recv {
		inter = inter || c.inter
	}
	for _, c := range a.send {
		inter = inter || c.inter
	}
	a.beta = s.p.Intra.Beta
	if inter {
		a.beta = s.p.Inter.Beta
	}
	a.copies = int64(len(a.send) + max(0, len(a.recv)-1))
	if o.Fan != nil {
		a.copies += int64(len(o.Fan.Direct))
	}
}

// cpuWork is the ns a slice's CPU stage takes on a free core: bytes times
// (send peers + receive peers beyond the first + direct reads) over the
// Beta of its class, slowed by its host's factor.
func (s *Sim) cpuWork(a *actor, elems int64) float64 {
	if a.beta <= 0 {
		return 0
	}
	w := float64(elems*int64(s.p.ElemSize)*a.copies) / a.beta
	if s.p.SlowHost != nil {
		w *= s.p.SlowHost[a.host]
	}
	return w
}

// stageDone ends actor i's CPU stage of a slice of elems elements: the
// slots it received in go back, the slice is posted, the actor moves on.
func (s *Sim) stageDone(i int, elems int64) {
	a := &s.actors[i]
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
	a.busy = false
	a.slice++
	if a.slice == a.nslices {
		a.slice = 0
		a.op++
		a.done++
		s.wakeSiblings(a)
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
	f.act = s.activity(activity{remaining: f.pending[0], cap: f.cap, res: f.res, flow: f})
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

// wakeSiblings tells the lanes of a's rank and channel that a has
// completed an Op: the only change that can release a Wait.
func (s *Sim) wakeSiblings(a *actor) {
	for _, b := range a.siblings {
		s.actors[b].held = false
	}
	s.work = append(s.work, a.siblings...)
}
