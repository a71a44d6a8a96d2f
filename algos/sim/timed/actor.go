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
	for a.slice == 0 && a.opened != a.op && a.op < a.nops && a.segCount == 0 {
		a.advance()
		s.wakeSiblings(a)
	}
	if a.op == a.nops {
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
		if s.actors[w.sib].done < w.done+a.op-w.at {
			return false
		}
	}
	return true
}

// advance moves actor a past its Op op, which it has completed.
func (a *actor) advance() {
	a.op++
	a.done++
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
	a.beta = s.p.Intra.Beta
	if inter {
		a.beta = s.p.Inter.Beta
	}
	a.copies = int64(len(a.send)+max(0, len(a.recv)-1)) + int64(sg.direct)
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
		a.advance()
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
