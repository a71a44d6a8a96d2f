// Package measure is the runner of `cc-perf fabric`: it measures, over a
// job of one rank per host, the rounds a fabric Plan asks for, and hands
// the Measurements back to it (the judging is package fabric's).
//
//	hosts, err := measure.Hosts(ctx, c)   // every rank: who is who
//	res, err := measure.Run(ctx, c, len(hosts), measure.Options{Plan: plan, ...}, onRound)
//
// One round, on every rank of the job (c, one rank per host, host i =
// rank i):
//
//	rank 0: round := Plan.Next(every measurement so far)
//	        broadcast the round (encoded) over c
//	all:    comm.Split per phase of the round (color = test index, no
//	        color when the rank has no test in that phase): each test gets
//	        a communicator of its own, its own failure domain
//	        measure every test of this rank at once (a directed round
//	        has a rank in two: the pair it sends in, the pair it receives in)
//	        an expired --pair-timeout aborts that test's communicator only
//	all:    all-gather the results (and --counters deltas) over c; rank 0
//	        merges them into one Measurement per test
//
// A rank or host that dies fails c: Run returns the runtime's error, which
// names the first failure, and the rounds finished before it are the ones
// onRound has seen.
package measure

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/fabric"
	"github.com/seed-760dd1f1/cc/runtime/comm"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// Planner hands out rounds: the next one given every measurement so far,
// false when the run is over. *fabric.Plan is one.
type Planner interface {
	Next(done []fabric.Measurement) (fabric.Round, bool)
}

// Options say what Run measures and how.
type Options struct {
	// Plan is rank 0's planner; the other ranks' is unused (nil).
	Plan Planner
	// Size is the bandwidth size (bytes per direction); LatSize the
	// latency size, 0 for none.
	Size, LatSize int64
	// PairTime is the time a test's iterations at one size may take once
	// ItersMin are done; ItersMax bounds them.
	PairTime           time.Duration
	ItersMin, ItersMax int
	// PairTimeout aborts a test's communicator when the test has not
	// finished by then (0: never); the test ends StatusTimeout.
	PairTimeout time.Duration
	// Op is what an undirected pair runs: "sendrecv" (Send and Recv in
	// one group on both ranks; "" too) or "all_reduce". Directed pairs
	// send one way; groups all-reduce.
	Op string
	// Check verifies every received byte (-c): a wrong one is
	// StatusError.
	Check bool
	// Counters reads every host's TCP and interface counters around each
	// round (--counters).
	Counters bool

	// delay is a test hook: an extra wait inside every timed iteration of
	// the tests host takes part in (nil: none), cut short by the test's
	// timeout.
	delay func(host int) time.Duration
	// skew is a test hook: time added to every timed iteration of the
	// tests host takes part in, without waiting (nil: none), as if its
	// link took that much longer: judge tests on real ranks whose numbers
	// a busy machine cannot blur.
	skew func(host int) time.Duration
	// corrupt is a test hook: host's received data gets a wrong byte
	// after every call when it returns true.
	corrupt func(host int) bool
}

// Result is what rank 0 has measured so far.
type Result struct {
	Measurements []fabric.Measurement
	Counters     []fabric.Counters
}

// step is one broadcast of rank 0: a round to run, or the end (Done), with
// why when it is a failure (Err).
type step struct {
	Round fabric.Round `json:"round"`
	Done  bool         `json:"done,omitempty"`
	Err   string       `json:"err,omitempty"`
}

// report is one rank's share of a round: its part of each of its tests
// and its counter deltas.
type report struct {
	Parts    []part           `json:"parts"`
	Counters *fabric.Counters `json:"counters,omitempty"`
}

// Run measures the rounds rank 0's Plan hands out, over c (every rank of
// the job calls it, one rank per host, nhosts ranks). On rank 0, onRound
// (nil: none) sees each round with what it measured, after the round; an
// error from it ends the run on every rank. Rank 0's Result holds every
// measurement; the other ranks' is empty. The end of ctx ends the run on
// every rank (the job is aborted), with ctx's cause.
func Run(ctx context.Context, c *comm.Comm, nhosts int, o Options, onRound func(fabric.Round, *Result) error) (*Result, error) {
	res, err := run(ctx, c, nhosts, o, onRound)
	var agreed agreedStop
	switch {
	case errors.As(err, &agreed):
		err = agreed.err // every rank knows: no abort, which could overtake the last messages
	case err == nil:
	case ctx.Err() != nil:
		err = context.Cause(ctx)
	case c.Err() == nil:
		c.Abort(err) // a failure of this rank alone (its counters): the others must not wait for it
	}
	return res, err
}

func run(ctx context.Context, c *comm.Comm, nhosts int, o Options, onRound func(fabric.Round, *Result) error) (*Result, error) {
	if c.NRanks() != nhosts {
		return nil, fmt.Errorf("rank %d: %d ranks for %d hosts: want one rank per host", c.Rank(), c.NRanks(), nhosts)
	}
	// The end of ctx (a signal) aborts the job, and so every rank's run.
	stop := context.AfterFunc(ctx, func() { c.Abort(context.Cause(ctx)) })
	defer stop()
	res := &Result{}
	var iface string
	if o.Counters {
		var err error
		if iface, err = ifaceOf(c); err != nil {
			return nil, fmt.Errorf("rank %d: --counters: %w", c.Rank(), err)
		}
	}
	var stopErr error // rank 0: why the run stops early
	for {
		var msg []byte
		if c.Rank() == 0 {
			s := step{Done: true}
			if stopErr != nil {
				s.Err = stopErr.Error()
			} else if r, ok := o.Plan.Next(res.Measurements); ok {
				s = step{Round: r}
			}
			msg = marshal(s)
		}
		msg, err := broadcast(c, msg)
		if err != nil {
			return res, err
		}
		var s step
		if err := json.Unmarshal(msg, &s); err != nil {
			return res, fmt.Errorf("rank %d: rank 0's round %q: %w", c.Rank(), msg, err)
		}
		if s.Done {
			if s.Err != "" {
				if stopErr != nil {
					return res, agreedStop{stopErr}
				}
				return res, agreedStop{fmt.Errorf("rank 0 stopped the run: %s", s.Err)}
			}
			return res, nil
		}
		if err := checkRound(s.Round, nhosts); err != nil {
			return res, fmt.Errorf("rank %d: round %d: %w", c.Rank(), s.Round.Index, err)
		}
		var rep report
		var before counterSample
		if o.Counters {
			if before, err = readCounters(iface); err != nil {
				return res, fmt.Errorf("rank %d: --counters: %w", c.Rank(), err)
			}
		}
		if rep.Parts, err = runRound(ctx, c, s.Round, o); err != nil {
			return res, err
		}
		if o.Counters {
			after, err := readCounters(iface)
			if err != nil {
				return res, fmt.Errorf("rank %d: --counters: %w", c.Rank(), err)
			}
			d := after.since(before)
			rep.Counters = &fabric.Counters{Host: c.Rank(), Round: s.Round.Index, Iface: iface,
				RetransSegs: d.retrans, RxErrors: d.rxErrors, TxErrors: d.txErrors, RxDropped: d.rxDropped, TxDropped: d.txDropped}
		}
		b := marshal(rep)
		all, err := allGather(c, b)
		if err != nil {
			return res, err
		}
		if c.Rank() != 0 {
			continue
		}
		reps := make([]report, len(all))
		for r, b := range all {
			if err := json.Unmarshal(b, &reps[r]); err != nil {
				return res, fmt.Errorf("rank 0: rank %d's results %q: %w", r, b, err)
			}
		}
		ms, cs := merge(s.Round, reps)
		res.Measurements = append(res.Measurements, ms...)
		res.Counters = append(res.Counters, cs...)
		if onRound != nil {
			stopErr = onRound(s.Round, res)
		}
	}
}

// agreedStop is an end of the run that rank 0 has told every rank.
type agreedStop struct{ err error }

func (e agreedStop) Error() string { return e.err.Error() }

// checkRound refuses a round naming a host out of range, or a host twice
// in a role (a pair's rank 0 would wait for a partner that is elsewhere).
func checkRound(r fabric.Round, nhosts int) error {
	if len(r.Tests) == 0 {
		return errors.New("no tests")
	}
	for i, t := range r.Tests {
		for _, h := range members(t) {
			if h < 0 || h >= nhosts {
				return fmt.Errorf("test %d names host %d of %d", i, h, nhosts)
			}
		}
		if t.Group == nil && t.A == t.B {
			return fmt.Errorf("test %d pairs host %d with itself", i, t.A)
		}
	}
	if _, err := phases(r.Tests, nhosts); err != nil {
		return err
	}
	return nil
}

// Share gives every rank rank 0's refusal of the run ("" to go on): rank
// 0's problem with a file only it reads becomes every rank's reason to
// stop. Every rank calls it, like a collective; what the other ranks pass
// is ignored. The error is the runtime's.
func Share(c *comm.Comm, refusal string) (string, error) {
	var msg []byte
	if c.Rank() == 0 {
		msg = []byte(refusal)
	}
	got, err := broadcast(c, msg)
	return string(got), err
}

// broadcast sends rank 0's b to every rank over c's control path: its
// length, then its bytes.
func broadcast(c *comm.Comm, b []byte) ([]byte, error) {
	ctl := c.Control()
	n := make([]byte, 8)
	binary.LittleEndian.PutUint64(n, uint64(len(b)))
	if err := ctl.Broadcast(n, n, 1, reduce.Int64, 0); err != nil {
		return nil, err
	}
	size := int(binary.LittleEndian.Uint64(n))
	if size == 0 {
		return nil, nil
	}
	buf := make([]byte, size)
	if c.Rank() == 0 {
		copy(buf, b)
	}
	if err := ctl.Broadcast(buf, buf, size, reduce.Uint8, 0); err != nil {
		return nil, err
	}
	return buf, nil
}

// allGather gives every rank every rank's b, by rank, over c's control
// path: the lengths, then the buffers padded to the longest.
func allGather(c *comm.Comm, b []byte) ([][]byte, error) {
	ctl, n := c.Control(), c.NRanks()
	lens := make([]byte, 8*n)
	mine := make([]byte, 8)
	binary.LittleEndian.PutUint64(mine, uint64(len(b)))
	if err := ctl.AllGather(mine, lens, 1, reduce.Int64); err != nil {
		return nil, err
	}
	longest := 0
	for r := range n {
		longest = max(longest, int(binary.LittleEndian.Uint64(lens[8*r:])))
	}
	if longest == 0 {
		return make([][]byte, n), nil
	}
	send := make([]byte, longest)
	copy(send, b)
	all := make([]byte, longest*n)
	if err := ctl.AllGather(send, all, longest, reduce.Uint8); err != nil {
		return nil, err
	}
	out := make([][]byte, n)
	for r := range n {
		out[r] = all[r*longest : r*longest+int(binary.LittleEndian.Uint64(lens[8*r:]))]
	}
	return out, nil
}
