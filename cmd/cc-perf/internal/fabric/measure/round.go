package measure

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/fabric"
	"github.com/seed-760dd1f1/cc/runtime/comm"
)

// A round's tests get their communicators from comm.Split, where each
// rank passes one color. A host in two tests of a round (a directed
// round: the pair it sends in and the pair it receives in) needs two
// Splits, and its two tests must fall in different ones. phases cuts a
// round into the fewest Splits a greedy pass finds: each test goes to the
// first phase where none of its hosts is taken. A shifted round (i sends
// to i+t) is made of cycles: 2 phases, 3 when a cycle is odd.
//
//	round 0->1 1->2 2->0 (one odd cycle):  phase 0: 0->1   phase 1: 1->2   phase 2: 2->0
//	round 0->1 1->2 2->3 3->0:             phase 0: 0->1 2->3   phase 1: 1->2 3->0
//
// Undirected rounds have each host in one test: one phase.

// phases returns the test indices of each phase of tests over nhosts
// hosts; an error when a host is in two tests that may not share a
// round (two undirected ones, or two where it has the same direction).
func phases(tests []fabric.Test, nhosts int) ([][]int, error) {
	send := make([]int, nhosts) // count of tests where the host sends (or takes part, undirected)
	recv := make([]int, nhosts)
	var out [][]int
	var used []map[int]bool // by phase: hosts taken
	for i, t := range tests {
		for _, h := range members(t) {
			if t.Dir && h == t.B {
				recv[h]++
			} else {
				send[h]++
			}
			if !t.Dir {
				recv[h]++
			}
			if send[h] > 1 || recv[h] > 1 {
				return nil, fmt.Errorf("host %d is in two tests of the round with the same role", h)
			}
		}
		p := slices.IndexFunc(used, func(u map[int]bool) bool {
			return !slices.ContainsFunc(members(t), func(h int) bool { return u[h] })
		})
		if p < 0 {
			p = len(used)
			used = append(used, map[int]bool{})
			out = append(out, nil)
		}
		for _, h := range members(t) {
			used[p][h] = true
		}
		out[p] = append(out[p], i)
	}
	return out, nil
}

// members are the hosts of a test, in the order they rank in its
// communicator: A then B for a pair (the sender first when directed), the
// group's order for a group.
func members(t fabric.Test) []int {
	if t.Group != nil {
		return t.Group
	}
	return []int{t.A, t.B}
}

// part is one host's share of one test: how it ended there, and the
// numbers its members agreed on.
type part struct {
	Test     int           `json:"test"` // index in the round
	Status   fabric.Status `json:"status"`
	Err      string        `json:"err,omitempty"`
	Bytes    int64         `json:"bytes,omitempty"`
	Iters    int           `json:"iters,omitempty"`
	TMedUS   float64       `json:"t_med_us,omitempty"`
	GBps     float64       `json:"gbps,omitempty"`
	LatBytes int64         `json:"lat_bytes,omitempty"`
	LatIters int           `json:"lat_iters,omitempty"`
	LatUS    float64       `json:"lat_us,omitempty"`
}

// runRound makes this rank's communicators of round r (one Split per
// phase, on every rank) and measures its tests at once. An error is c's:
// the job is failing; a test's own failure is in its part.
func runRound(ctx context.Context, c *comm.Comm, r fabric.Round, o Options) ([]part, error) {
	me := c.Rank()
	ps, _ := phases(r.Tests, c.NRanks()) // checked by checkRound
	type mine struct {
		test int
		pc   *comm.Comm
	}
	var tests []mine
	fail := func(err error) ([]part, error) {
		for _, m := range tests {
			m.pc.Abort(err)
			m.pc.Close()
		}
		return nil, err
	}
	for _, phase := range ps {
		color, key := comm.SplitNoColor, 0
		for _, i := range phase {
			if k := slices.Index(members(r.Tests[i]), me); k >= 0 {
				color, key = i, k
			}
		}
		pc, err := c.Split(ctx, color, key)
		if err != nil {
			return fail(err)
		}
		if pc != nil {
			tests = append(tests, mine{color, pc})
		}
	}
	parts := make([]part, len(tests))
	var wg sync.WaitGroup
	for k, m := range tests {
		wg.Go(func() {
			parts[k] = measureTest(ctx, m.pc, r.Tests[m.test], me, o)
			parts[k].Test = m.test
			m.pc.Close() // after an abort, without waiting for the peer
		})
	}
	wg.Wait()
	return parts, nil
}

// merge makes one Measurement per test of r from every rank's parts
// (reps, by rank): the numbers of the test's first member, the worst
// status of any (timeout, then error, then ok), the first error text.
func merge(r fabric.Round, reps []report) ([]fabric.Measurement, []fabric.Counters) {
	ms := make([]fabric.Measurement, len(r.Tests))
	seen := make([]bool, len(r.Tests))
	for i, t := range r.Tests {
		ms[i] = fabric.Measurement{Round: r.Index, Phase: r.Phase, Test: t, Status: fabric.StatusOK}
	}
	var cs []fabric.Counters
	worse := map[fabric.Status]int{fabric.StatusOK: 0, fabric.StatusError: 1, fabric.StatusTimeout: 2}
	for _, rep := range reps {
		if rep.Counters != nil {
			cs = append(cs, *rep.Counters)
		}
		for _, p := range rep.Parts {
			if p.Test < 0 || p.Test >= len(ms) {
				continue
			}
			m := &ms[p.Test]
			if !seen[p.Test] {
				seen[p.Test] = true
				m.Bytes, m.Iters, m.TMedUS, m.GBps = p.Bytes, p.Iters, p.TMedUS, p.GBps
				m.LatBytes, m.LatIters, m.LatUS = p.LatBytes, p.LatIters, p.LatUS
			}
			if worse[p.Status] > worse[m.Status] {
				m.Status = p.Status
			}
			if m.Err == "" {
				m.Err = p.Err
			}
		}
	}
	return ms, cs
}
