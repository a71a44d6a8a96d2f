package bootstrap

import (
	"errors"
	"fmt"
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
