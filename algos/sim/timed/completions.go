package timed

// completions holds the activities' completions at their current rates,
// to be taken in the order of (time, seq), which is unique: the order they
// were scheduled in at equal times.
//
// A saturated core pool gives all its stages a new rate whenever one
// starts or ends, so most changes move every completion of one group of
// activities. Each group (the activities whose first resource is the same,
// Sim.group) has a heap of its own, and a heap of the groups holds each
// group's first: a move sifts through a heap of a pool's stages, not of
// every stage of the cluster, and the group's place changes only when its
// first does. Both heaps are indexed (ordered), so that a new rate moves a
// completion instead of leaving a stale one behind.
type completions struct {
	top    ordered   // the first completion of every group that has one; id: the group
	groups []ordered // by group
	gslot  []int32   // by group: 1 + its place in top (0: none)
	slot   []int32   // by activity id: 1 + its place in its group (0: none)
	group  []int32   // by activity id
}

// completion is a completion at time t: of activity id in a group's heap,
// of group id's first in top.
type completion struct {
	t   float64
	seq int64
	id  int32
}

func (e *completion) before(o *completion) bool {
	return e.t < o.t || (e.t == o.t && e.seq < o.seq)
}

// init makes the groups 0 to n-1.
func (q *completions) init(n int) {
	q.groups, q.gslot = make([]ordered, n), make([]int32, n)
}

// add makes room for a new activity, the next id; its group is set apart.
func (q *completions) add() {
	q.slot = append(q.slot, 0)
	q.group = append(q.group, 0)
}

// first is the earliest completion (its id is a group's), or nil.
func (q *completions) first() *completion {
	if len(q.top) == 0 {
		return nil
	}
	return &q.top[0]
}

// pop takes the earliest completion out.
func (q *completions) pop() completion {
	g := q.top[0].id
	e := q.groups[g].remove(0, q.slot)
	q.refresh(g)
	return e
}

func (q *completions) push(t float64, seq int64, id int32) {
	g := q.group[id]
	q.groups[g].push(completion{t: t, seq: seq, id: id}, q.slot)
	q.refresh(g)
}

// remove takes activity id's completion out.
func (q *completions) remove(id int32) {
	g := q.group[id]
	q.groups[g].remove(int(q.slot[id])-1, q.slot)
	q.refresh(g)
}

// move gives activity id's completion a new time and order.
func (q *completions) move(id int32, t float64, seq int64) {
	g := q.group[id]
	h := q.groups[g]
	i := int(q.slot[id]) - 1
	h.fix(i, completion{t: t, seq: seq, id: id}, q.slot)
	q.refresh(g)
}

// refresh gives group g's place in top its first completion.
func (q *completions) refresh(g int32) {
	h, at := q.groups[g], int(q.gslot[g])-1
	switch {
	case len(h) == 0 && at >= 0:
		q.top.remove(at, q.gslot)
	case len(h) == 0:
	case at < 0:
		q.top.push(completion{t: h[0].t, seq: h[0].seq, id: g}, q.gslot)
	case q.top[at].t != h[0].t || q.top[at].seq != h[0].seq:
		q.top.fix(at, completion{t: h[0].t, seq: h[0].seq, id: g}, q.gslot)
	}
}

// ordered is an indexed binary heap of completions, earliest first:
// slot[id] is 1 + the place of id's entry (0: none).
type ordered []completion

// fix puts e at place i, or above or below it where it belongs, moving
// the entries it passes into the hole.
func (h ordered) fix(i int, e completion, slot []int32) {
	up := false
	for i > 0 {
		p := (i - 1) / 2
		if !e.before(&h[p]) {
			break
		}
		h[i] = h[p]
		slot[h[i].id] = int32(i + 1)
		i, up = p, true
	}
	for n := len(h); !up; {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && h[r].before(&h[l]) {
			m = r
		}
		if !h[m].before(&e) {
			break
		}
		h[i] = h[m]
		slot[h[i].id] = int32(i + 1)
		i = m
	}
	h[i] = e
	slot[e.id] = int32(i + 1)
}

func (h *ordered) push(e completion, slot []int32) {
	*h = append(*h, completion{})
	h.fix(len(*h)-1, e, slot)
}

// remove takes the entry at place i out.
func (h *ordered) remove(i int, slot []int32) completion {
	q := *h
	e, last := q[i], len(q)-1
	end := q[last]
	*h = q[:last]
	slot[e.id] = 0
	if i < last {
		h.fix(i, end, slot)
	}
	return e
}
