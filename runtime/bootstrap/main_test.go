package bootstrap

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seed-760dd1f1/cc/runtime/wire"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// hangGuard bounds every wait in these tests; it is a safety net, never a speed check.
const hangGuard = 20 * time.Second

var testJob = wire.Job{ID: "test-job", Secret: []byte("test-secret")}

// logBook collects the root's log lines.
type logBook struct {
	mu    sync.Mutex
	lines []string
}

func (l *logBook) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logBook) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.lines...)
}

// matching returns the lines containing s.
func (l *logBook) matching(s string) []string {
	var out []string
	for _, line := range l.snapshot() {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

type testRoot struct {
	*Root
	log      *logBook
	serveErr chan error
}

// startRoot serves an nranks root on loopback until the test ends.
func startRoot(t *testing.T, nranks int) *testRoot {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &testRoot{log: &logBook{}, serveErr: make(chan error, 1)}
	tr.Root = NewRoot(ln, nranks, testJob, tr.log.logf)
	go func() { tr.serveErr <- tr.Serve(context.Background()) }()
	t.Cleanup(func() {
		tr.Close()
		if err := <-tr.serveErr; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return tr
}

// events drains the root's events after it has stopped.
func (tr *testRoot) events() []Event {
	var out []Event
	for ev := range tr.Events() {
		out = append(out, ev)
	}
	return out
}

func info(rank int) RankInfo {
	return RankInfo{Rank: rank, Addr: fmt.Sprintf("10.0.0.%d:4000", rank), HostID: "host-id", Host: fmt.Sprintf("node%02d", rank), Pid: 1000 + rank,
		Machine: fmt.Sprintf("5a3c8f0e-1b2d-4c6e-9f70-8a1b2c3d4e5%d", rank%2), CPUs: fmt.Sprintf("%d,8-11", rank)}
}

func ctxGuard(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

// joinAll joins ranks 0..nranks-1 concurrently and returns their clients.
func joinAll(t *testing.T, addr string, nranks int) []*Client {
	t.Helper()
	ctx := ctxGuard(t)
	clients := make([]*Client, nranks)
	errs := make([]error, nranks)
	var wg sync.WaitGroup
	for r := range nranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			clients[r], errs[r] = Join(ctx, addr, testJob, info(r), nranks, 3, 10*time.Millisecond)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	t.Cleanup(func() {
		for _, c := range clients {
			c.Close()
		}
	})
	return clients
}

// eachRank runs f for every rank concurrently and returns the errors, index = rank.
func eachRank(clients []*Client, f func(r int, c *Client) error) []error {
	errs := make([]error, len(clients))
	var wg sync.WaitGroup
	for r, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = f(r, c)
		}()
	}
	wg.Wait()
	return errs
}

// waitDone waits for c.Done within the hang guard.
func waitDone(t *testing.T, r int, c *Client) error {
	t.Helper()
	select {
	case <-c.Done():
		return c.Err()
	case <-time.After(hangGuard):
		t.Fatalf("rank %d: Done did not close within %v", r, hangGuard)
		return nil
	}
}

// freeAddr returns a loopback address where nothing listens (it was just released).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
