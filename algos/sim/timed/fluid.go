package timed

import (
	"math"
)

// The fluid model: activities (a CPU stage, a network flow) progress at
// rates that max-min fair sharing of the resources they use decides
// (progressive filling, as SimGrid's lmm): every activity's rate rises
// together until a resource it uses is full or it reaches its own cap;
// those freeze and the rest keep rising. Rates stay constant between two
// changes of the set of activities, and a change re-solves only the
// activities connected to it through shared resources (SimGrid's lazy,
// selective update): a ring's flow never waits for the rest of the
// cluster's. Progress is settled lazily, when a rate changes.

// resource is a capacity shared by the activities that use it: cores of a
// CPU pool (in units of one core), or a link (bytes per ns).
type resource struct {
	capacity float64
	users    []*activity
	used     float64 // sum of the users' rates
	t0       float64 // busy is settled up to t0
	busy     float64 // integral of used/capacity over time
	left     float64 // solve's scratch
	count    int     // solve's scratch: unfrozen users
	mark     int     // component search's stamp
}

// tokenBucket is a link's token bucket (Params.Bucket, in Sim.buckets by
// resource, so that a resource without one stays as small as before): its
// resource's capacity is peak while tokens last, else rate. Tokens change
// at rate - used, which is constant between two settlings, and are settled
// with the resource's busy integral.
type tokenBucket struct {
	rate, peak, size float64
	tokens           float64 // at the resource's t0
	dry              int64   // seq of the evBucket event that stands; older ones are stale
}

// empty is how few tokens count as none: what float rounding leaves of a
// bucket that ran dry on time.
func (b *tokenBucket) empty() bool { return b.tokens <= b.size*1e-9 }

// bucketDry handles resource ri's bucket running dry, by the event of
// sequence number seq: its users are re-solved, at the link's rate.
func (s *Sim) bucketDry(ri int, seq int64) {
	if s.buckets[ri].dry != seq {
		return // solved again since: another event stands for it
	}
	s.settleRes(ri)
	s.touched = append(s.touched, s.res[ri].users...)
}

// setCapacity gives resource ri, if it has a bucket, its capacity for the
// solve that follows.
func (s *Sim) setCapacity(ri int) {
	if b := s.buckets[ri]; b != nil {
		if b.empty() {
			b.tokens, s.res[ri].capacity = 0, b.rate
		} else {
			s.res[ri].capacity = b.peak
		}
	}
}

// scheduleDry schedules, after a solve, when resource ri's bucket runs dry
// at its users' new rates.
func (s *Sim) scheduleDry(ri int) {
	r, b := &s.res[ri], s.buckets[ri]
	b.dry = 0
	if r.capacity == b.peak && r.used > b.rate {
		s.seq++
		b.dry = s.seq
		s.heap.push(event{t: s.now + b.tokens/(r.used-b.rate), seq: s.seq, kind: evBucket, a: ri})
	}
}

// activity is work in progress: remaining units at time t0, at most cap
// units per ns, on the resources it names.
type activity struct {
	remaining float64
	t0        float64
	cap       float64
	res       []int
	rate      float64
	id        int32 // its index in Sim.byID and Sim.done.slot
	mark      int
	frozen    bool
	finished  bool
	queued    bool // a completion at its current rate is in Sim.done
	// What ends when it completes: the transfer of flow's oldest slice,
	// or else actor's CPU stage of a slice of elems elements.
	flow  *flow
	actor int
	elems int64
}

// done is what happens when a completes.
func (a *activity) done(s *Sim) {
	if a.flow != nil {
		s.drained(a.flow)
		return
	}
	s.stageDone(a.actor, a.elems)
}

// settle brings a's remaining work up to now.
func (s *Sim) settle(a *activity) {
	a.remaining -= a.rate * (s.now - a.t0)
	a.t0 = s.now
}

// settleRes brings resource ri's busy integral, and its bucket's tokens,
// up to now.
func (s *Sim) settleRes(ri int) {
	r := &s.res[ri]
	if r.capacity > 0 {
		r.busy += r.used * (s.now - r.t0) / r.capacity
	}
	if s.buckets != nil {
		if b := s.buckets[ri]; b != nil {
			b.tokens = min(b.size, max(0, b.tokens+(b.rate-r.used)*(s.now-r.t0)))
		}
	}
	r.t0 = s.now
}

// start adds an activity; it takes no time when nothing limits it.
func (s *Sim) start(a *activity) {
	if len(a.res) == 0 && math.IsInf(a.cap, 1) {
		a.done(s)
		return
	}
	a.t0 = s.now
	for _, r := range a.res {
		s.res[r].users = append(s.res[r].users, a)
	}
	s.touched = append(s.touched, a)
}

// finish removes an activity that has completed and re-solves its
// neighbours.
func (s *Sim) finish(a *activity) {
	a.remaining, a.t0, a.finished = 0, s.now, true
	for _, ri := range a.res {
		r := &s.res[ri]
		s.settleRes(ri)
		r.used -= a.rate
		for i, u := range r.users {
			if u == a {
				last := len(r.users) - 1
				r.users[i], r.users[last] = r.users[last], nil
				r.users = r.users[:last]
				break
			}
		}
		s.touched = append(s.touched, r.users...)
	}
	a.rate = 0
	a.done(s)
	// Nothing refers to a any more: not the completions (its own was
	// taken), not a resource, not the touched list (filled after the
	// last solve from live users only).
	s.free = append(s.free, a)
}

// activity returns an activity of remaining units, at most cap units per
// ns, on the resources res, that ends the transfer of flow f's oldest
// slice or else actor's CPU stage of a slice of elems elements: a finished
// one reused, or a new one. Its fields are set one by one, not copied
// from a value: a copy of the whole activity runs the write barrier over
// all of it.
func (s *Sim) activity(remaining, cap float64, res []int, f *flow, actor int, elems int64) *activity {
	var a *activity
	if n := len(s.free); n > 0 {
		a = s.free[n-1]
		s.free = s.free[:n-1]
		a.t0, a.rate, a.mark, a.frozen, a.finished, a.queued = 0, 0, 0, false, false, false
	} else {
		a = &activity{id: int32(len(s.byID))}
		s.byID = append(s.byID, a)
		s.done.add()
	}
	a.remaining, a.cap, a.actor, a.elems = remaining, cap, actor, elems
	a.res, a.flow = res, f
	s.done.group[a.id] = s.group(res)
	return a
}

// group is the completions' group of an activity on resources res: its
// first resource's (a CPU stage's core pool, a flow's uplink), 0 for none.
func (s *Sim) group(res []int) int32 {
	if len(res) == 0 {
		return 0
	}
	return int32(res[0] + 1)
}

// resolve re-solves the components of the touched activities.
func (s *Sim) resolve() {
	for len(s.touched) > 0 {
		seed := s.touched[len(s.touched)-1]
		s.touched = s.touched[:len(s.touched)-1]
		if seed.mark == s.stamp || seed.finished {
			continue
		}
		s.component(seed)
	}
	s.stamp++
}

// component solves the activities connected to seed through resources.
func (s *Sim) component(seed *activity) {
	acts := append(s.acts[:0], seed)
	res := s.comp[:0]
	seed.mark = s.stamp
	for i := 0; i < len(acts); i++ {
		for _, ri := range acts[i].res {
			r := &s.res[ri]
			if r.mark == s.stamp {
				continue
			}
			r.mark = s.stamp
			res = append(res, ri)
			for _, u := range r.users {
				if u.mark != s.stamp {
					u.mark = s.stamp
					acts = append(acts, u)
				}
			}
		}
	}
	for _, a := range acts {
		s.settle(a)
	}
	for _, ri := range res {
		s.settleRes(ri)
		if s.buckets != nil {
			s.setCapacity(ri)
		}
	}
	old := s.old[:0]
	for _, a := range acts {
		old = append(old, a.rate)
	}
	s.acts, s.comp, s.old = acts, res, old
	if len(res) == 1 && alike(acts) {
		solveOne(&s.res[res[0]], acts)
	} else {
		solve(s.res, res, acts)
		for _, ri := range res {
			r := &s.res[ri]
			r.used = 0
			for _, u := range r.users {
				r.used += u.rate
			}
		}
	}
	for _, ri := range res {
		if s.buckets != nil && s.buckets[ri] != nil {
			s.scheduleDry(ri)
		}
	}
	for i, a := range acts {
		if a.queued && a.rate == old[i] {
			continue // same rate: its completion stands
		}
		a.queued = a.rate > 0
		queued := s.done.slot[a.id] > 0
		switch {
		case !a.queued && queued:
			s.done.remove(a.id)
		case !a.queued:
		case queued:
			s.seq++
			s.done.move(a.id, s.now+max(a.remaining, 0)/a.rate, s.seq)
		default:
			s.seq++
			s.done.push(s.now+max(a.remaining, 0)/a.rate, s.seq, a.id)
		}
	}
}

// alike reports whether the activities of a component of one resource
// use only it and share one cap: a core pool's CPU stages.
func alike(acts []*activity) bool {
	for _, a := range acts {
		if len(a.res) != 1 || a.cap != acts[0].cap {
			return false
		}
	}
	return true
}

// solveOne is solve, and the sum of the rates (r.used), for the users of
// r when they are alike: they all rise and freeze together, so the
// same steps as solve's, made once, give every one its rate, to the bit.
func solveOne(r *resource, acts []*activity) {
	n, c := float64(len(acts)), acts[0].cap
	level, left := 0.0, r.capacity
	for {
		step := min(math.Inf(1), left/n, c-level)
		level += step
		left -= step * n
		if !math.IsInf(c, 1) && c-level <= c*1e-12 || left <= r.capacity*1e-12 {
			break
		}
	}
	r.used = 0
	for _, a := range acts {
		a.rate, a.frozen = level, true
		r.used += level
	}
}

// solve gives every activity of acts (whose resources are res) its
// max-min fair rate.
func solve(all []resource, res []int, acts []*activity) {
	for _, ri := range res {
		all[ri].left, all[ri].count = all[ri].capacity, len(all[ri].users)
	}
	for _, a := range acts {
		a.rate, a.frozen = 0, false
	}
	unfrozen := len(acts)
	level := 0.0
	for unfrozen > 0 {
		// The smallest rise that fills a resource or reaches a cap.
		step := math.Inf(1)
		for _, ri := range res {
			if r := &all[ri]; r.count > 0 {
				step = min(step, r.left/float64(r.count))
			}
		}
		for _, a := range acts {
			if !a.frozen {
				step = min(step, a.cap-level)
			}
		}
		level += step
		for _, ri := range res {
			if r := &all[ri]; r.count > 0 {
				r.left -= step * float64(r.count)
			}
		}
		// Freeze the activities at their cap or on a full resource.
		for _, a := range acts {
			if a.frozen {
				continue
			}
			full := !math.IsInf(a.cap, 1) && a.cap-level <= a.cap*1e-12
			for _, ri := range a.res {
				if r := &all[ri]; r.left <= r.capacity*1e-12 {
					full = true
				}
			}
			if full {
				a.frozen, a.rate = true, level
				unfrozen--
				for _, ri := range a.res {
					all[ri].count--
				}
			}
		}
	}
}
