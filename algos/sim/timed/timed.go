// Package timed replays the schedules of every rank of a collective on a
// simulated clock: the same Ops the engine runs (package algos), cut into
// the engine's slices (algos.SliceElems), moved through FIFOs of
// protocols.NSteps slots with NCCL's credits, each slice paying a CPU
// stage and, between hosts, a network transfer. It moves no data: the
// round simulator (algos/sim) checks values; this one says how long.
//
// Usage:
//
//	p := &timed.Params{Topo: topo, Geometry: g, StepPayload: step, ElemSize: 4,
//		Intra: timed.Class{Alpha: 600, Beta: 3.68}, Inter: timed.Class{Alpha: 36500, Beta: 1.39}}
//	res, err := timed.Run(p, channels) // channels[c][r]: rank r's schedule on channel c
//	fmt.Println(res.Time)               // ns
//
// The model. Every (channel, rank, lane) is an actor that runs its Ops in
// order, each Op slice by slice. A slice starts when the Waits holding its
// Op are met, a slice has arrived from every peer it receives from, and
// every connection it sends on has SliceSteps free slots (the sender's
// credits). It then runs its CPU stage: bytes x (send peers + receive
// peers beyond the first + direct reads) / Beta of its class (Inter when a
// peer is on another host), as one activity capped at one core and sharing
// its host's core pool, if there is one. When the stage ends, the slots it
// received in are freed (the credit reaches the producer Alpha later) and
// the slice is posted: between ranks of a host it arrives Alpha later;
// between hosts its wire bytes queue on the connection's flow (one TCP
// stream), and it arrives Alpha after the flow has drained it. Flows share
// each host's uplink and downlink (and a leaf's uplink to the spine) by
// max-min fairness, each at most FlowCap. With a Bucket a host link is a
// token bucket: what it saved while below its rate it spends at up to the
// bucket's peak, and the call is replayed twice so that it starts with
// the tokens the call before it left, as calls back to back do.
//
// Beta is the calibration's bus bandwidth (runtime/tune: what one channel
// of a ring streams per link): a ring rank's stages then take exactly its
// sent bytes over Beta, so that a 2-rank ring all-reduce on unlimited
// links takes Start + 2 Alpha + bytes/Beta, the tuner's closed form. What
// the closed form cannot show, the replay does: pipeline fill, credits,
// fan-in, shared cores, shared and slow links, late ranks.
//
// Time is float64 ns; events at equal times run in the order they were
// scheduled, and nothing iterates a map while the clock runs: identical
// input gives identical output.
package timed

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/algos/sim"
	"github.com/seed-760dd1f1/cc/protocols"
)

// Class is the cost of one kind of link: between ranks of a host (Intra)
// or between hosts (Inter).
type Class struct {
	Alpha float64 // ns from a post to the peer seeing it (and for a credit back)
	Beta  float64 // bytes per ns of a slice's CPU stage (GB/s); 0 means free
	// CPU is ns of core time an Op that sends spends besides its bytes,
	// in its first slice's CPU stage (system calls, waking the peer): the
	// part of a hop that needs a core. On a core of its own it is latency
	// like Alpha; where ranks outnumber a pool's cores the stages share
	// them and it grows.
	CPU float64
}

// SlowLink divides the rate of every flow between hosts A and B (either
// way) by Factor.
type SlowLink struct {
	A, B   int
	Factor float64
}

// LeafSpine is a two-level fabric: hosts in leaves of HostsPerLeaf, each
// leaf's uplink to the spine (and downlink from it) carrying
// HostsPerLeaf x Uplink / Oversub.
type LeafSpine struct {
	HostsPerLeaf int
	Oversub      float64
}

// Bucket is a token bucket on every host's uplink and downlink, as a
// shaper (Linux tbf) or a cloud's egress limit has: a link that has run
// below its rate saves the difference, up to Size bytes, and spends it at
// up to Peak. A link starts the call with what the same call before it
// left (Run). Without one a link never exceeds its rate, and a transfer
// that fits a shaper's bucket, or follows a link's idle phase, is
// predicted slower than it goes.
type Bucket struct {
	Size float64 // bytes
	Peak float64 // bytes per ns while the bucket holds tokens, above the link's rate
}

// Params are what a Run is given.
type Params struct {
	Topo        *algos.Topo
	Geometry    algos.Geometry // the row's geometry for the protocol
	StepPayload int            // payload bytes of one FIFO slot
	ElemSize    int            // bytes per element

	Intra, Inter Class
	// Start is the call's cost before any rank's first Op, in ns (the
	// calibration's gamma and the algorithm's lane latency).
	Start float64
	// LateStart, when not nil, delays each rank's start further, in ns.
	LateStart []float64
	// SlowHost, when not nil, multiplies each host's CPU stages.
	SlowHost []float64
	// Cores is each host's core pool (0: none, every actor has a core of
	// its own); SharedCores, when not 0, is one pool for all hosts (hosts
	// that share a machine, as the testbed's).
	Cores, SharedCores int

	// Uplink and Downlink are each host's NIC rates in bytes per ns
	// (GB/s); 0 means unlimited. FlowCap bounds one connection's flow
	// (0: unlimited).
	Uplink, Downlink, FlowCap float64
	// Bucket, when not nil, gives the uplinks and downlinks a token bucket.
	Bucket    *Bucket
	SlowLinks []SlowLink
	Fabric    *LeafSpine // nil: a non-blocking fabric

	// Wrap says that Topo is one host standing for every host of a ring
	// rotated by one host (a folded replay): a connection from a rank to a
	// rank not above it (the last rank's send to the first) leaves for
	// the next host, over the host's uplink and the downlink that stands
	// for the next host's.
	Wrap bool
}

// Traffic is what crossed one connection.
type Traffic struct {
	Messages int64 // Ops that sent on it (the round simulator's messages)
	Elements int64
	Slices   int64
}

// Result is what a Run found.
type Result struct {
	Time   float64 // ns until the last actor finished
	Links  map[sim.Link]Traffic
	Events int64
	// Bottleneck names the busiest resource and how busy it was over Time:
	// a host's uplink or downlink, a core pool, a leaf's uplink, or the
	// CPU stages of the busiest actor.
	Bottleneck string
	Busy       float64 // that resource's busy fraction
}

// conn is one FIFO connection.
type conn struct {
	// What the clock reads at every slice comes first.
	arrived       int // slices arrived and not yet taken
	credits       int // free slots as the producer sees them
	producer      int // actor index
	consumer      int
	inter         bool
	flow          *flow
	traffic       Traffic
	link          sim.Link
	srcHost, dstH int
}

// flow is the network stream of one connection between hosts. A slice
// joins it when its sender's CPU stage starts (the socket streams what
// the stage produces: cut-through, not store-and-forward) and arrives
// alpha after both its stage has ended and the flow has drained it.
type flow struct {
	c       *conn
	pending []float64 // wire bytes of each posted slice not yet drained
	act     *activity
	res     []int
	cap     float64
	// produced and drained count the slices whose CPU stage has ended
	// and those the flow has carried; slice j arrives once both pass j.
	produced, drained int64
}

type actor struct {
	// What try reads at every wake-up comes first, to share cache lines.
	op       int // next Op
	slice    int64
	opened   int   // the Op recv, send, count, step, nslices, beta and copies are of (-1: none)
	waitAt   int   // the first Op of runs[wait] (MaxInt: none)
	nops     int   // Ops of the lane
	segEnd   int   // segs[seg].end
	segCount int64 // segs[seg].count
	count    int64
	step     int64
	nslices  int64
	recv     []*conn // the connections of Op op
	send     []*conn
	beta     float64 // of the Op's class
	over     float64 // the Op's class's CPU (0 for an Op that sends nothing)
	copies   int64   // bytes a CPU stage moves per byte of its slice
	host     int
	cpu      float64 // ns spent in CPU stages

	seg            int // the segment of Op op
	loaded         int // the segment count..copies were computed from (-1: none)
	wait           int // first of runs not before Op op
	runs           []waitRun
	segs           []segment
	siblings       []int // actor index of each lane of the rank and channel
	ch, rank, lane int
	ops            []algos.Op // the lane's Ops, for a deadlock's message
	end            float64
}

// laneState is what a wake-up and a sibling's Waits read of an actor,
// apart from the actors (Sim.lanes, 16 bytes each) so that a wake-up that
// cannot start anything touches no actor.
type laneState struct {
	done     int  // Ops completed
	started  bool // its call has started (Start and its late start have passed)
	busy     bool // in a CPU stage
	finished bool
	// held says a Wait held Op op at the last try and no lane of the
	// rank and channel has completed an Op since: it still holds.
	held bool
}

// segment is a run of a lane's consecutive Ops that the clock cannot tell
// apart: the same count, connections and direct reads. The clock reads
// its segments, not the Ops, so that what it touches per Op fits in the
// actor (a tree's lane is one segment of full chunks and one of the last).
type segment struct {
	end        int // the Op after its last
	count      int64
	direct     int // direct reads (Fan.Direct)
	recv, send []*conn
}

// waitRun is a run of a lane's Waits: Op at+j waits until actor sib has
// completed done+j Ops, for at+j before end. A tree's down lane waits for
// its up lane at every Op: one run.
type waitRun struct {
	at, end, sib, done int
}

// event is something that happens at a time: an arrival, a credit, a
// start or a bucket running dry.
type event struct {
	t    float64
	seq  int64
	c    *conn
	a    int // actor index; evBucket: resource index
	kind int
}

const (
	evStart = iota
	evArrive
	evCredit
	evBucket // a token bucket runs dry
)

// timeline is a heap of things that happen at a time, in the order they
// were scheduled at equal times. Every (t, seq) is unique, so the order
// of pops does not depend on how the heap is kept.
type timeline []event

func (e *event) before(o *event) bool { return e.t < o.t || (e.t == o.t && e.seq < o.seq) }

func (h *timeline) push(e event) {
	*h = append(*h, e)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if !q[i].before(&q[p]) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *timeline) pop() event {
	q := *h
	e, last := q[0], len(q)-1
	q[0], q[last] = q[last], event{}
	q = q[:last]
	*h = q
	for i := 0; ; {
		l := 2*i + 1
		if l >= len(q) {
			break
		}
		m := l
		if r := l + 1; r < len(q) && q[r].before(&q[l]) {
			m = r
		}
		if !q[m].before(&q[i]) {
			break
		}
		q[i], q[m] = q[m], q[i]
		i = m
	}
	return e
}

// Sim is the state of one Run.
type Sim struct {
	p       *Params
	now     float64
	seq     int64
	heap    timeline // starts
	hops    [2]fifo  // arrivals and credits between ranks of a host, between hosts
	actors  []actor
	lanes   []laneState // of each actor
	conns   []*conn
	res     []resource
	names   []string       // of each resource
	buckets []*tokenBucket // of each resource (nil: none); nil without Params.Bucket
	done    completions    // of the activities
	byID    []*activity    // every activity made, by id
	touched []*activity    // activities whose component needs a new solve
	free    []*activity    // finished, to reuse
	stamp   int
	work    []int
	pool    []int   // resource of each host's core pool, or -1
	poolRes [][]int // the resources of a CPU stage on each host
	nev     int64
	// component's scratch
	acts []*activity
	comp []int
	old  []float64
}

// Run replays channels[c][r], rank r's schedule on channel c, for every
// rank and channel, and returns when the last Op ends.
//
// With a Bucket the call is replayed twice: the first starts with empty
// buckets (a call before it spent them), the second with what the first
// left, as calls back to back find them; the second's is the Result.
func Run(p *Params, channels [][]algos.Schedule) (Result, error) {
	if err := check(p); err != nil {
		return Result{}, err
	}
	if p.Bucket == nil {
		r, _, err := run(p, channels, nil)
		return r, err
	}
	_, left, err := run(p, channels, nil)
	if err != nil {
		return Result{}, err
	}
	r, _, err := run(p, channels, left)
	return r, err
}

// run replays the call once, its links' buckets starting with tokens
// (by resource; nil: empty), and returns the tokens they hold at its end
// (nil without buckets).
func run(p *Params, channels [][]algos.Schedule, tokens []float64) (Result, []float64, error) {
	s := &Sim{p: p}
	if err := s.build(channels); err != nil {
		return Result{}, nil, err
	}
	s.done.init(len(s.res) + 1) // Sim.group
	for ri, t := range tokens {
		if s.buckets[ri] != nil {
			s.buckets[ri].tokens = t
			s.setCapacity(ri)
		}
	}
	for i := range s.actors {
		late := 0.0
		if p.LateStart != nil {
			late = p.LateStart[s.actors[i].rank]
		}
		s.at(p.Start+late, evStart, nil, i)
	}
	if err := s.loop(); err != nil {
		return Result{}, nil, err
	}
	r := s.result()
	var left []float64
	if s.buckets != nil {
		left = make([]float64, len(s.buckets))
	}
	for i, b := range s.buckets {
		if b != nil {
			// Idle since it was settled: it refills until the call ends.
			left[i] = min(b.size, b.tokens+b.rate*(r.Time-s.res[i].t0))
		}
	}
	return r, left, nil
}

func check(p *Params) error {
	n := p.Topo.NRanks
	switch {
	case p.ElemSize < 1 || p.StepPayload < p.ElemSize:
		return fmt.Errorf("step payload %d bytes, element %d bytes: need a step of at least one element", p.StepPayload, p.ElemSize)
	case p.Geometry.SliceSteps < 1 || p.Geometry.ChunkSteps < p.Geometry.SliceSteps || p.Geometry.SliceSteps > protocols.NSteps:
		return fmt.Errorf("geometry %+v: need 1 <= slice steps <= chunk steps and slice steps <= %d", p.Geometry, protocols.NSteps)
	case p.LateStart != nil && len(p.LateStart) != n:
		return fmt.Errorf("late starts for %d ranks: need one per rank (%d)", len(p.LateStart), n)
	case p.SlowHost != nil && len(p.SlowHost) != p.Topo.NHosts():
		return fmt.Errorf("slow hosts for %d hosts: need one per host (%d)", len(p.SlowHost), p.Topo.NHosts())
	case p.Fabric != nil && (p.Fabric.HostsPerLeaf < 1 || p.Fabric.Oversub < 1 || p.Uplink <= 0):
		return fmt.Errorf("leaf/spine fabric %+v: need at least 1 host per leaf, oversubscription at least 1 and a host uplink rate", *p.Fabric)
	case p.Bucket != nil && !(p.Bucket.Size > 0 && p.Bucket.Peak > max(p.Uplink, p.Downlink) && max(p.Uplink, p.Downlink) > 0 && !math.IsInf(p.Bucket.Peak, 1)):
		return fmt.Errorf("token bucket %+v: need a host link rate, a size above 0 and a finite peak above the link rate", *p.Bucket)
	}
	return nil
}

func (s *Sim) at(t float64, kind int, c *conn, a int) {
	s.seq++
	s.heap.push(event{t: t, seq: s.seq, kind: kind, c: c, a: a})
}

// fifo is a queue of events scheduled in the order they happen.
type fifo struct {
	q    []event
	head int
}

func (f *fifo) push(e event) {
	if f.head > 0 && f.head == len(f.q) {
		f.q, f.head = f.q[:0], 0
	} else if f.head >= 4096 && 2*f.head >= len(f.q) {
		f.q = f.q[:copy(f.q, f.q[f.head:])]
		f.head = 0
	}
	f.q = append(f.q, e)
}

// first is the queue's next event, or nil.
func (f *fifo) first() *event {
	if f.head == len(f.q) {
		return nil
	}
	return &f.q[f.head]
}

func (f *fifo) pop() event {
	e := f.q[f.head]
	f.q[f.head] = event{}
	f.head++
	return e
}

// next is the earliest scheduled event, from the heap (src -1) or the
// hop queue src; nil when none is left.
func (s *Sim) next() (e *event, src int) {
	src = -1
	if len(s.heap) > 0 {
		e = &s.heap[0]
	}
	for i := range s.hops {
		if h := s.hops[i].first(); h != nil && (e == nil || h.before(e)) {
			e, src = h, i
		}
	}
	return e, src
}

// take removes the event next found at src.
func (s *Sim) take(src int) event {
	if src < 0 {
		return s.heap.pop()
	}
	return s.hops[src].pop()
}

func (s *Sim) addResource(name string, capacity float64) int {
	s.res = append(s.res, resource{capacity: capacity})
	s.names = append(s.names, name)
	return len(s.res) - 1
}

// loop runs the clock until no event and no activity is left.
func (s *Sim) loop() error {
	s.stamp = 1
	for {
		for len(s.work) > 0 || len(s.touched) > 0 {
			for len(s.work) > 0 {
				a := s.work[len(s.work)-1]
				s.work = s.work[:len(s.work)-1]
				s.try(a)
			}
			s.resolve()
		}
		first, src := s.next()
		switch {
		case s.done.first() != nil && (first == nil || s.done.first().t < first.t):
			c := s.done.pop()
			s.now = max(s.now, c.t)
			s.nev++
			s.finish(s.byID[c.id])
			continue
		case first == nil:
			for i := range s.res {
				s.settleRes(i)
			}
			return s.deadlock()
		}
		e := s.take(src)
		s.now = max(s.now, e.t)
		s.nev++
		switch e.kind {
		case evStart:
			s.lanes[e.a].started = true
			s.work = append(s.work, e.a)
		case evArrive:
			e.c.arrived++
			s.wake(e.c.consumer)
		case evCredit:
			e.c.credits += s.p.Geometry.SliceSteps
			s.wake(e.c.producer)
		case evBucket:
			s.bucketDry(e.a, e.seq)
		}
	}
}

// deadlock reports the actors left with Ops when the clock stopped.
func (s *Sim) deadlock() error {
	var b strings.Builder
	n := 0
	for i := range s.actors {
		a := &s.actors[i]
		if s.lanes[i].finished {
			continue
		}
		if n < 8 {
			fmt.Fprintf(&b, "\n\tchannel %d rank %d lane %d op %d/%d (%v)", a.ch, a.rank, a.lane, a.op, a.nops, a.ops[a.op])
		}
		n++
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("deadlock at %.0f ns: %d lanes blocked%s", s.now, n, b.String())
}

func (s *Sim) result() Result {
	r := Result{Links: map[sim.Link]Traffic{}, Events: s.nev}
	for i := range s.actors {
		r.Time = max(r.Time, s.actors[i].end)
	}
	for _, c := range s.conns {
		if c.traffic.Messages > 0 {
			r.Links[c.link] = c.traffic
		}
	}
	if r.Time <= 0 {
		r.Bottleneck = "none"
		return r
	}
	for i := range s.res {
		if f := s.res[i].busy / r.Time; f > r.Busy+1e-9 {
			r.Busy, r.Bottleneck = f, s.names[i]
		}
	}
	for i := range s.actors {
		a := &s.actors[i]
		if f := a.cpu / r.Time; f > r.Busy+1e-9 {
			r.Busy, r.Bottleneck = f, fmt.Sprintf("cpu of rank %d channel %d lane %d", a.rank, a.ch, a.lane)
		}
	}
	return r
}

var errNoRanks = errors.New("no ranks: need at least 1")
