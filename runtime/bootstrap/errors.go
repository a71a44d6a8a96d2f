package bootstrap

import (
	"errors"
	"fmt"
	"strings"

	"github.com/seed-760dd1f1/cc/hw"
)

// ErrClosed is the reason Done closed when the rank itself called Close.
var ErrClosed = errors.New("bootstrap client closed")

// Failure says how a rank brought the job down.
type Failure uint8

// Ways a rank fails.
const (
	// Failed: the rank called Abort with a cause, or the root caught it misusing the
	// bootstrap (for example calling Barrier where the other ranks called AllGather).
	Failed Failure = 1
	// Lost: the rank's connection to the root dropped without a clean Close; the process
	// died, was killed, or its host is unreachable.
	Lost Failure = 2
	// LeftEarly: the rank closed cleanly while other ranks still waited for it in a round.
	LeftEarly Failure = 3
)

// String returns "failed", "lost" or "left early".
func (f Failure) String() string {
	switch f {
	case Failed:
		return "failed"
	case Lost:
		return "lost"
	case LeftEarly:
		return "left early"
	}
	return fmt.Sprintf("failure(%d)", uint8(f))
}

// RankError is why a job was aborted: the first rank that failed, as the root saw it. Every
// rank's Client.Err and every pending AllGather or Barrier return it (wrapped).
type RankError struct {
	Rank  int
	Host  string
	Pid   int
	How   Failure
	Cause string // the rank's own error text, or what the root observed
}

// Error reads like "rank 3 (host node07, pid 4242) lost: connection dropped without a clean close: EOF".
func (e *RankError) Error() string {
	return fmt.Sprintf("rank %d (host %s, pid %d) %s: %s", e.Rank, e.Host, e.Pid, e.How, e.Cause)
}

// RootLostError is why Done closed when the connection to the bootstrap root broke: the
// launcher (ccrun) or the rank hosting the root died, or the network between them failed.
type RootLostError struct {
	Addr string
	Err  error
}

// Error reads like "bootstrap root 10.0.0.1:29500 lost: connection closed by the root".
func (e *RootLostError) Error() string {
	return fmt.Sprintf("bootstrap root %s lost: %v", e.Addr, e.Err)
}

// Unwrap returns the I/O error that revealed the loss.
func (e *RootLostError) Unwrap() error { return e.Err }

// MissingError is why a join ended before every rank of the job had joined: the wait ended
// (Err: the join's ctx ended, or the job was aborted) while only Joined had reached the root
// at Addr. The root tells every rank still connected who had joined when it aborts a job
// before all have (a rank whose ctx ends aborts the job, citing its ctx's cause).
type MissingError struct {
	Addr   string     // the bootstrap root
	NRanks int        // the job's rank count
	Joined []RankInfo // the ranks that had joined, in rank order; Rank and Host are set
	Err    error      // what ended the wait
}

// Missing returns the ranks that had not joined, in order.
func (e *MissingError) Missing() []int {
	var out []int
	next := 0
	for _, ri := range e.Joined {
		for ; next < ri.Rank; next++ {
			out = append(out, next)
		}
		next = ri.Rank + 1
	}
	for ; next < e.NRanks; next++ {
		out = append(out, next)
	}
	return out
}

// maxJoinedHosts bounds the hosts Summary names, so that a large job's message stays a line.
const maxJoinedHosts = 8

// Summary reads like "ranks 1,3 of 4 never joined the bootstrap root at 10.0.0.1:29500;
// joined: 0 (node01), 2 (node02)": the missing ranks (ranges for runs, as in "5-9"), then
// the ranks that had joined, grouped by host (at most maxJoinedHosts hosts, then a count).
func (e *MissingError) Summary() string {
	missing := e.Missing()
	who := "rank"
	if len(missing) != 1 {
		who = "ranks"
	}
	var hosts []string
	byHost := map[string][]int{}
	for _, ri := range e.Joined {
		if byHost[ri.Host] == nil {
			hosts = append(hosts, ri.Host)
		}
		byHost[ri.Host] = append(byHost[ri.Host], ri.Rank)
	}
	var joined []string
	for i, h := range hosts {
		if i == maxJoinedHosts {
			joined = append(joined, fmt.Sprintf("and %d more hosts", len(hosts)-i))
			break
		}
		joined = append(joined, fmt.Sprintf("%s (%s)", ranges(byHost[h]), h))
	}
	return fmt.Sprintf("%s %s of %d never joined the bootstrap root at %s; joined: %s",
		who, ranges(missing), e.NRanks, e.Addr, strings.Join(joined, ", "))
}

// Error reads like "context deadline exceeded: rank 1 of 2 never joined the bootstrap root
// at 10.0.0.1:29500; joined: 0 (node01)".
func (e *MissingError) Error() string { return e.Err.Error() + ": " + e.Summary() }

// Unwrap returns what ended the wait.
func (e *MissingError) Unwrap() error { return e.Err }

// ranges writes ascending ranks as a CPU list does: 0-3,8,10-11.
func ranges(ranks []int) string { return hw.CPUList(ranks).String() }
