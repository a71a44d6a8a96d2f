package fabric

import (
	"slices"
)

// Plan says which round runs next, from what the rounds so far measured.
// The runner asks Next for a round, cuts it with SplitRound, measures it,
// and asks again with every measurement so far, until Next says done:
//
//	plan, err := fabric.NewPlan(cfg, len(hosts))
//	for {
//		r, ok := plan.Next(ms)
//		if !ok {
//			break
//		}
//		for _, sub := range fabric.SplitRound(r, cfg.MaxConcurrent) {
//			ms = append(ms, measure(sub)...)
//		}
//	}
//
// The stages, by schedule:
//   - quick: the neighbour rounds; then, if some tests were slow, confirm
//     rounds: every host of a slow test (a suspect) meets Confirm distinct
//     hosts whose tests all passed, all suspects at once, no host twice in
//     a round; then retests of suspect links.
//   - full, directed, random: their rounds, then retests of suspect links
//     (a link is judged suspect only once a retest confirms it).
//   - bisect (more than 3 hosts): the whole set as one group; then both
//     halves of every failing group at once, recursing until a failing
//     group has at most 3 hosts, whose hosts are the suspects; then confirm
//     rounds as quick's, where the good hosts a round leaves idle meet each
//     other so the round also measures the fleet; then retests. A group
//     fails when its bandwidth is below the gate of a given reference
//     (--baseline, --expect), or, without one, below (1-tolerance) of its
//     other half (the whole set then always splits). So the runner reports
//     a group's bus bandwidth, comparable with a pair's. With 3 hosts or
//     fewer, bisect runs full's rounds.
//
// Round.Index counts rounds from 0 over the whole run. Next must be given
// every measurement of every round it returned before.
type Plan struct {
	cfg    Config
	n      int
	queue  [][]Test // rounds decided but not yet returned
	phase  Phase    // of the rounds in queue
	stage  int
	index  int // the next Round.Index
	bisect *bisection
}

// The stages of a plan.
const (
	stageSchedule = iota // the schedule's own rounds (bisect: the bisection)
	stageConfirm
	stageRetest
	stageDone
)

// NewPlan is the plan of cfg's schedule over n hosts; cfg is validated
// first.
func NewPlan(cfg Config, n int) (*Plan, error) {
	if err := cfg.Validate(n); err != nil {
		return nil, err
	}
	p := &Plan{cfg: cfg, n: n, phase: PhaseSchedule}
	switch cfg.Schedule {
	case "quick":
		p.queue = Neighbor(n)
	case "full":
		p.queue = Circle(n)
	case "directed":
		p.queue = Shift(n)
	case "random":
		p.queue = Random(n, cfg.Rounds, cfg.Seed)
	case "bisect":
		if n <= 3 {
			p.queue = Circle(n)
			break
		}
		all := make([]int, n)
		for i := range all {
			all[i] = i
		}
		p.bisect = &bisection{groups: [][]int{all}}
		p.queue, p.phase = [][]Test{{{A: -1, B: -1, Group: all}}}, PhaseBisect
	}
	return p, nil
}

// Next is the next round, or false when the run is done. done is every
// measurement so far, in order.
func (p *Plan) Next(done []Measurement) (Round, bool) {
	for len(p.queue) == 0 {
		if p.stage == stageDone {
			return Round{}, false
		}
		p.advance(done)
	}
	r := Round{Index: p.index, Phase: p.phase, Tests: p.queue[0]}
	p.queue = p.queue[1:]
	p.index++
	return r, true
}

// advance fills the queue with the rounds of the next step, or moves on to
// the next stage.
func (p *Plan) advance(done []Measurement) {
	switch p.stage {
	case stageSchedule:
		if p.bisect != nil && p.bisect.next(p, done) {
			return
		}
		p.stage = stageConfirm
		if p.cfg.Schedule != "quick" && p.bisect == nil {
			return
		}
		suspects, good := p.suspects(done)
		p.queue = confirmRounds(suspects, good, p.cfg.Confirm, p.bisect != nil, meetings(done))
		p.phase = PhaseConfirm
	case stageConfirm:
		p.stage = stageRetest
		p.queue = p.retests(done)
		p.phase = PhaseRetest
	case stageRetest:
		p.stage = stageDone
	}
}

// suspects are the hosts of the slow pair tests so far (bisect: the hosts
// of the failing groups of at most 3) and the good hosts, the others, both
// ascending. (In a bisection every host's last group either passed or is
// such a failing group: failing larger ones are split.)
func (p *Plan) suspects(done []Measurement) (suspects, good []int) {
	bad := make([]bool, p.n)
	if p.bisect != nil {
		for _, i := range p.bisect.suspects {
			bad[i] = true
		}
	} else {
		a := assess(p.n, done, p.cfg)
		for _, t := range a.tests {
			if t.slow() {
				bad[t.m.A], bad[t.m.B] = true, true
			}
		}
	}
	for i := range p.n {
		if bad[i] {
			suspects = append(suspects, i)
		} else {
			good = append(good, i)
		}
	}
	return suspects, good
}

// meetings is the set of pairs already measured together.
func meetings(done []Measurement) map[[2]int]bool {
	met := map[[2]int]bool{}
	for _, m := range done {
		if m.Group == nil {
			met[[2]int{min(m.A, m.B), max(m.A, m.B)}] = true
		}
	}
	return met
}

// confirmRounds pairs every suspect with k distinct good hosts it has not
// met yet, in as few rounds as the good hosts allow, each host in at most
// one test per round: in each round the suspects that need most partners
// take, in turn, the first good host free in that round they have not met. fill pairs the good hosts a round
// leaves idle with each other.
func confirmRounds(suspects, good []int, k int, fill bool, met map[[2]int]bool) [][]Test {
	if len(suspects) == 0 || len(good) == 0 || k == 0 {
		return nil
	}
	need := make(map[int]int, len(suspects))
	for _, s := range suspects {
		need[s] = k
	}
	var rounds [][]Test
	order := slices.Clone(suspects)
	for {
		// the suspects that need most first, so that no one is left
		// alone at the end (5 suspects, 2 good hosts: 5 rounds, not 6)
		slices.SortStableFunc(order, func(x, y int) int { return need[y] - need[x] })
		busy := map[int]bool{}
		var r []Test
		for _, s := range order {
			if need[s] == 0 {
				continue
			}
			for _, g := range good {
				key := [2]int{min(s, g), max(s, g)}
				if busy[g] || met[key] {
					continue
				}
				busy[g], met[key] = true, true
				need[s]--
				r = append(r, Test{A: min(s, g), B: max(s, g)})
				break
			}
		}
		if len(r) == 0 {
			return rounds // nobody could meet anybody new
		}
		if fill {
			var idle []int
			for _, g := range good {
				if !busy[g] {
					idle = append(idle, g)
				}
			}
			for i := 0; i+1 < len(idle); i += 2 {
				r = append(r, Test{A: idle[i], B: idle[i+1]})
			}
		}
		rounds = append(rounds, r)
	}
}

// retests are rounds measuring again every link the judge reads as slow
// and not yet retested, no host twice in a round.
func (p *Plan) retests(done []Measurement) [][]Test {
	a := assess(p.n, done, p.cfg)
	var links []Test
	for _, l := range a.links {
		if !l.retested && l.verdict != VerdictOK {
			links = append(links, Test{A: l.a, B: l.b, Dir: l.dir})
		}
	}
	var rounds [][]Test
	for len(links) > 0 {
		busy := map[int]bool{}
		var r, rest []Test
		for _, t := range links {
			if busy[t.A] || busy[t.B] {
				rest = append(rest, t)
				continue
			}
			busy[t.A], busy[t.B] = true, true
			r = append(r, t)
		}
		rounds = append(rounds, r)
		links = rest
	}
	return rounds
}

// bisection is the state of a bisect plan: the groups of the last round
// and the suspects found.
type bisection struct {
	round    int     // Round.Index of the last bisection round
	groups   [][]int // its groups, siblings next to each other (the whole set alone)
	suspects []int   // hosts of failing groups of at most 3, ascending
}

// next queues the next bisection round and says true, or says false when
// the bisection is over.
func (b *bisection) next(p *Plan, done []Measurement) bool {
	fails := b.judge(p, done)
	var next [][]int
	for i, g := range b.groups {
		switch {
		case !fails[i]:
		case len(g) <= 3:
			b.suspects = append(b.suspects, g...)
		default:
			x, y := Halves(g)
			next = append(next, x, y)
		}
	}
	slices.Sort(b.suspects)
	if len(next) == 0 {
		return false
	}
	var r []Test
	for _, g := range next {
		r = append(r, Test{A: -1, B: -1, Group: g})
	}
	p.queue, p.phase = [][]Test{r}, PhaseBisect
	b.round, b.groups = p.index, next
	return true
}

// judge says which groups of the last bisection round failed. A group
// with a timed-out or failed test fails. Against a given reference a
// group fails below its gate; without one the whole set always fails (it
// has nothing to be compared with) and a half fails below (1-tolerance) of
// its sibling. Without a reference, when neither half of a failing group
// fails, both do: the fault is in the group but the halves cannot tell
// where, so the search goes on in both (not for the whole set's halves:
// there nothing failed). With one, halves that pass stop the search (see
// Verdict.FullScaleOnly).
func (b *bisection) judge(p *Plan, done []Measurement) []bool {
	got := make([]*Measurement, len(b.groups))
	for i := range done {
		m := &done[i]
		if m.Round != b.round || m.Group == nil {
			continue
		}
		for j, g := range b.groups {
			if slices.Equal(m.Group, g) {
				got[j] = m
			}
		}
	}
	gate := 1 - p.cfg.Tolerance
	ref := 0.0
	switch {
	case p.cfg.Baseline != nil:
		ref = p.cfg.Baseline.GBps
	case p.cfg.Expect > 0:
		ref = p.cfg.Expect
	}
	bad := func(m *Measurement) bool { return m == nil || m.Status != StatusOK }
	fails := make([]bool, len(b.groups))
	if len(b.groups) == 1 {
		fails[0] = ref == 0 || bad(got[0]) || got[0].GBps < gate*ref
		return fails
	}
	for j := 0; j+1 < len(b.groups); j += 2 {
		x, y := got[j], got[j+1]
		if ref > 0 {
			fails[j] = bad(x) || x.GBps < gate*ref
			fails[j+1] = bad(y) || y.GBps < gate*ref
			continue
		}
		fails[j] = bad(x) || (!bad(y) && x.GBps < gate*y.GBps)
		fails[j+1] = bad(y) || (!bad(x) && y.GBps < gate*x.GBps)
		if !fails[j] && !fails[j+1] && len(b.groups[j])+len(b.groups[j+1]) < p.n {
			fails[j], fails[j+1] = true, true
		}
	}
	return fails
}
