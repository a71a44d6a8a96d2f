package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// asRankError checks that err carries a *RankError for rank with how.
func asRankError(t *testing.T, who string, err error, rank int, how Failure) *RankError {
	t.Helper()
	var re *RankError
	if !errors.As(err, &re) || re.Rank != rank || re.How != how {
		t.Errorf("%s: got %v, want rank %d %s", who, err, rank, how)
		return nil
	}
	if want := fmt.Sprintf("rank %d (host %s, pid %d) %s", rank, info(rank).Host, info(rank).Pid, how); !strings.Contains(err.Error(), want) {
		t.Errorf("%s: %q does not contain %q", who, err, want)
	}
	return re
}

func TestRankVanishes(t *testing.T) {
	const n, victim = 4, 2
	tr := startRoot(t, n)
	clients := joinAll(t, tr.Addr(), n)
	guard := ctxGuard(t)
	// The others wait in a barrier the victim never joins.
	errs := make(chan error, n)
	for r, c := range clients {
		if r != victim {
			go func() { errs <- c.Barrier(guard) }()
		}
	}
	clients[victim].conn.Close() // abrupt: no leave message
	for r, c := range clients {
		if r == victim {
			continue
		}
		err := waitDone(t, r, c)
		asRankError(t, fmt.Sprintf("rank %d Err", r), err, victim, Lost)
	}
	for range n - 1 {
		select {
		case err := <-errs:
			asRankError(t, "pending barrier", err, victim, Lost)
		case <-time.After(hangGuard):
			t.Fatal("a pending barrier did not return")
		}
	}
	// Later calls fail at once with the same cause.
	_, err := clients[0].AllGather(guard, []byte("x"))
	asRankError(t, "later allgather", err, victim, Lost)

	for _, c := range clients {
		c.Close()
	}
	tr.Close()
	var kinds []EventKind
	for _, ev := range tr.events() {
		if ev.Kind == EventLost || ev.Kind == EventAborted {
			kinds = append(kinds, ev.Kind)
			asRankError(t, "event "+ev.Kind.String(), ev.Err, victim, Lost)
		}
	}
	if len(kinds) != 2 || kinds[0] != EventLost || kinds[1] != EventAborted {
		t.Errorf("events %v, want [lost aborted]", kinds)
	}
	if lines := tr.log.matching("job aborted"); len(lines) != 1 {
		t.Errorf("log %q, want one line saying the job aborted", tr.log.snapshot())
	}
}

func TestAbortReachesAll(t *testing.T) {
	const n, culprit = 5, 3
	tr := startRoot(t, n)
	clients := joinAll(t, tr.Addr(), n)
	guard := ctxGuard(t)
	errs := eachRank(clients, func(r int, c *Client) error {
		if r == culprit {
			c.Abort(errors.New("disk on fire"))
			return c.Err()
		}
		return c.Barrier(guard)
	})
	for r, err := range errs {
		if re := asRankError(t, fmt.Sprintf("rank %d", r), err, culprit, Failed); re != nil && re.Cause != "disk on fire" {
			t.Errorf("rank %d: cause %q, want %q", r, re.Cause, "disk on fire")
		}
	}
	for r, c := range clients {
		asRankError(t, fmt.Sprintf("rank %d Err", r), waitDone(t, r, c), culprit, Failed)
	}
}

func TestRootLost(t *testing.T) {
	const n = 3
	tr := startRoot(t, n)
	clients := joinAll(t, tr.Addr(), n)
	guard := ctxGuard(t)
	errs := make(chan error, n)
	for _, c := range clients {
		go func() { errs <- c.Barrier(guard) }()
	}
	// Not a full barrier: rank 0..2 all call it, so it may complete before the root goes.
	// Either way, after Close every Done must close with the root named.
	tr.Close()
	want := fmt.Sprintf("bootstrap root %s lost", tr.Addr())
	for r, c := range clients {
		err := waitDone(t, r, c)
		var rl *RootLostError
		if !errors.As(err, &rl) || !strings.Contains(err.Error(), want) {
			t.Errorf("rank %d: got %v, want %q", r, err, want)
		}
	}
	for range n {
		if err := <-errs; err != nil && !strings.Contains(err.Error(), want) {
			t.Errorf("barrier: got %v, want nil or %q", err, want)
		}
	}
}

func TestRootLostDuringBarrier(t *testing.T) {
	tr := startRoot(t, 2)
	clients := joinAll(t, tr.Addr(), 2)
	guard := ctxGuard(t)
	errc := make(chan error, 1)
	go func() { errc <- clients[0].Barrier(guard) }() // rank 1 never comes
	tr.Close()
	select {
	case err := <-errc:
		var rl *RootLostError
		if !errors.As(err, &rl) || rl.Addr != tr.Addr() {
			t.Errorf("got %v, want the root %s lost", err, tr.Addr())
		}
	case <-time.After(hangGuard):
		t.Fatal("barrier did not return after the root closed")
	}
}

func TestUnreachableRoot(t *testing.T) {
	addr := freeAddr(t)
	_, err := Join(ctxGuard(t), addr, testJob, info(0), 2, 2, time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "3 attempts") {
		t.Errorf("got %v, want an error naming %s and 3 attempts", err, addr)
	}
}

func TestMismatchedCalls(t *testing.T) {
	tr := startRoot(t, 2)
	clients := joinAll(t, tr.Addr(), 2)
	guard := ctxGuard(t)
	errs := eachRank(clients, func(r int, c *Client) error {
		if r == 0 {
			return c.Barrier(guard)
		}
		_, err := c.AllGather(guard, []byte("x"))
		return err
	})
	for r, err := range errs {
		var re *RankError
		if !errors.As(err, &re) || re.How != Failed || !strings.Contains(re.Cause, "barrier") || !strings.Contains(re.Cause, "allgather") {
			t.Errorf("rank %d: got %v, want a mismatch naming barrier and allgather", r, err)
		}
	}
}

func TestLeftEarly(t *testing.T) {
	for _, closeFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("close first %v", closeFirst), func(t *testing.T) {
			tr := startRoot(t, 2)
			clients := joinAll(t, tr.Addr(), 2)
			guard := ctxGuard(t)
			if closeFirst {
				clients[1].Close()
			}
			errc := make(chan error, 1)
			go func() { errc <- clients[0].Barrier(guard) }()
			if !closeFirst {
				clients[1].Close()
			}
			select {
			case err := <-errc:
				asRankError(t, "rank 0", err, 1, LeftEarly)
			case <-time.After(hangGuard):
				t.Fatal("barrier did not return after its peer left")
			}
		})
	}
}

func TestJoinCancelled(t *testing.T) {
	tr := startRoot(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for ev := range tr.Events() {
			if ev.Kind == EventJoined {
				cancel()
				return
			}
		}
	}()
	_, err := Join(ctx, tr.Addr(), testJob, info(0), 2, 3, time.Millisecond)
	cancel()
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
}

// A rank that joins after the job was aborted learns why instead of waiting.
func TestJoinAfterAbort(t *testing.T) {
	tr := startRoot(t, 3)
	ctx, cancel := context.WithCancel(ctxGuard(t))
	// Rank 1 joins and is cancelled while waiting: its connection drops, which aborts the job.
	go func() {
		for ev := range tr.Events() {
			if ev.Kind == EventJoined {
				cancel()
			}
			if ev.Kind == EventAborted {
				return
			}
		}
	}()
	if _, err := Join(ctx, tr.Addr(), testJob, info(1), 3, 0, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("rank 1: got %v, want context.Canceled", err)
	}
	// The root may not have seen the drop yet; Join of rank 0 either waits for the abort
	// message or gets it at once. Either way it must fail naming rank 1.
	_, err := Join(ctxGuard(t), tr.Addr(), testJob, info(0), 3, 0, 0)
	asRankError(t, "rank 0 join", err, 1, Lost)
}
