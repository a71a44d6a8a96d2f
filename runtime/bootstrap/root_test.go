package bootstrap

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/seed-760dd1f1/cc/runtime/wire"
)

func TestJoinAllGatherBarrier(t *testing.T) {
	for _, n := range []int{1, 2, 5, 16} {
		t.Run(fmt.Sprintf("%d ranks", n), func(t *testing.T) {
			tr := startRoot(t, n)
			clients := joinAll(t, tr.Addr(), n)
			guard := ctxGuard(t)
			want := make([]RankInfo, n)
			for r := range n {
				want[r] = info(r)
			}
			for r, c := range clients {
				if diff := cmp.Diff(want, c.Peers()); diff != "" {
					t.Fatalf("rank %d peers (-want +got):\n%s", r, diff)
				}
			}
			const rounds = 4
			errs := eachRank(clients, func(r int, c *Client) error {
				ctx := guard
				for round := range rounds {
					// Sizes differ per rank and round, including empty.
					data := bytes.Repeat([]byte{byte(r)}, (r*7+round*13)%40)
					got, err := c.AllGather(ctx, data)
					if err != nil {
						return err
					}
					for p := range n {
						want := bytes.Repeat([]byte{byte(p)}, (p*7+round*13)%40)
						if !bytes.Equal(got[p], want) {
							return fmt.Errorf("round %d: part %d = %v, want %v", round, p, got[p], want)
						}
					}
					if err := c.Barrier(ctx); err != nil {
						return err
					}
				}
				return nil
			})
			for r, err := range errs {
				if err != nil {
					t.Errorf("rank %d: %v", r, err)
				}
			}
			for _, c := range clients {
				if err := c.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
				if !errors.Is(c.Err(), ErrClosed) {
					t.Errorf("after Close, Err() = %v, want ErrClosed", c.Err())
				}
			}
			tr.Close()
			counts := map[EventKind]int{}
			evs := tr.events()
			for _, ev := range evs {
				counts[ev.Kind]++
			}
			wantCounts := map[EventKind]int{EventJoined: n, EventAllJoined: 1, EventLeft: n, EventAllLeft: 1}
			if diff := cmp.Diff(wantCounts, counts); diff != "" {
				t.Errorf("event counts (-want +got):\n%s", diff)
			}
			if last := evs[len(evs)-1].Kind; last != EventAllLeft {
				t.Errorf("last event %s, want %s", last, EventAllLeft)
			}
			if lines := tr.log.snapshot(); len(lines) != 0 {
				t.Errorf("healthy job logged %q", lines)
			}
		})
	}
}

func TestManyBarrierRounds(t *testing.T) {
	tr := startRoot(t, 3)
	clients := joinAll(t, tr.Addr(), 3)
	guard := ctxGuard(t)
	errs := eachRank(clients, func(r int, c *Client) error {
		for i := range 200 {
			if err := c.Barrier(guard); err != nil {
				return fmt.Errorf("barrier %d: %w", i, err)
			}
		}
		return nil
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

func TestAllGatherPayloadCap(t *testing.T) {
	tr := startRoot(t, 2)
	clients := joinAll(t, tr.Addr(), 2)
	guard := ctxGuard(t)
	if _, err := clients[0].AllGather(guard, make([]byte, MaxPayload+1)); err == nil ||
		!strings.Contains(err.Error(), fmt.Sprint(MaxPayload)) {
		t.Errorf("oversized AllGather: got %v, want an error naming the cap", err)
	}
	// The cap itself works, and the failed call did not consume a round.
	errs := eachRank(clients, func(r int, c *Client) error {
		got, err := c.AllGather(guard, bytes.Repeat([]byte{byte(r + 1)}, MaxPayload))
		if err == nil && (len(got[1-r]) != MaxPayload || got[1-r][0] != byte(2-r)) {
			err = fmt.Errorf("peer's part is wrong")
		}
		return err
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// A cancelled AllGather leaves the round counter consistent: its data was sent, the round
// completes for the others, and the next round works for everyone.
func TestAllGatherCancelled(t *testing.T) {
	tr := startRoot(t, 2)
	c := joinAll(t, tr.Addr(), 2)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c[0].AllGather(ctx, []byte("r0 round0"))
		errc <- err
	}()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		// Either the call was cancelled before it took a round, or after sending.
		t.Fatalf("got %v, want context.Canceled", err)
	}
	// Rank 0 may or may not have taken round 0; rank 1 catches up with barriers until the
	// next AllGather of both lines up. Simplest consistent check: both run two more rounds.
	if c[0].round.Load() == 1 {
		got, err := c[1].AllGather(ctxGuard(t), []byte("r1 round0"))
		if err != nil || string(got[0]) != "r0 round0" {
			t.Fatalf("rank 1 round 0: %q, %v", got, err)
		}
	}
	errs := eachRank(c, func(r int, cl *Client) error {
		got, err := cl.AllGather(ctxGuard(t), []byte{byte(r)})
		if err == nil && (got[0][0] != 0 || got[1][0] != 1) {
			err = fmt.Errorf("got %v", got)
		}
		return err
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
}

// stranger dials the root, runs open on the connection, then waits for the root to hang
// up, which it does right after logging. It returns the address the root saw.
func stranger(t *testing.T, addr string, open func(c net.Conn)) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	open(c)
	c.SetReadDeadline(time.Now().Add(hangGuard))
	io.Copy(io.Discard, c)
	return c.LocalAddr().String()
}

func hello(t *testing.T, c net.Conn, job wire.Job, h wire.Hello) {
	t.Helper()
	var nonce [wire.NonceSize]byte
	f, err := wire.EncodeHello(job, h, nonce)
	if err != nil {
		t.Fatal(err)
	}
	c.Write(f[:])
	io.ReadFull(c, make([]byte, wire.AckSize)) // there is an ack only when the hello was good
}

func TestStrangersAreDroppedAndJobCompletes(t *testing.T) {
	const n = 3
	tr := startRoot(t, n)
	ctx := ctxGuard(t)
	type res struct {
		c   *Client
		err error
	}
	joined := make(chan res, n)
	for r := range n - 1 { // rank 2 joins after the strangers
		go func() {
			c, err := Join(ctx, tr.Addr(), testJob, info(r), n, 3, 10*time.Millisecond)
			joined <- res{c, err}
		}()
	}
	// Ranks 0 and 1 are in before the strangers come.
	for joinedSoFar := 0; joinedSoFar < n-1; {
		select {
		case ev := <-tr.Events():
			if ev.Kind == EventJoined {
				joinedSoFar++
			}
		case <-ctx.Done():
			t.Fatal("ranks 0 and 1 did not join")
		}
	}
	bs := wire.Hello{Kind: wire.KindBootstrap, Rank: 1}
	strangers := []struct {
		name string
		open func(c net.Conn)
		want string
	}{
		{"garbage", func(c net.Conn) { c.Write([]byte("GET / HTTP/1.1\r\n\r\n")) }, "bad magic"},
		{"wrong secret", func(c net.Conn) { hello(t, c, wire.Job{ID: testJob.ID, Secret: []byte("guess")}, bs) }, "authenticator"},
		{"wrong job", func(c net.Conn) { hello(t, c, wire.Job{ID: "another-job", Secret: testJob.Secret}, bs) }, "another-job"},
		{"data stream", func(c net.Conn) { hello(t, c, testJob, wire.Hello{Kind: wire.KindData, Rank: 1}) }, "data stream"},
		{"garbage join", func(c net.Conn) { hello(t, c, testJob, bs); c.Write([]byte("\xff\x00\x00\x00\x00\x00\x00\x00")) }, "unknown message"},
		{"huge join", func(c net.Conn) { hello(t, c, testJob, bs); c.Write([]byte("\x01\x00\x00\x00\x7f\x00\x00\x00")) }, "at most"},
		{"nranks mismatch", func(c net.Conn) { hello(t, c, testJob, bs); c.Write(encodeJoin(7, info(1))) }, "the job has 7 ranks"},
		{"rank out of range", func(c net.Conn) {
			hello(t, c, testJob, wire.Hello{Kind: wire.KindBootstrap, Rank: 5})
			c.Write(encodeJoin(n, info(5)))
		}, "out of range"},
	}
	for _, s := range strangers {
		addr := stranger(t, tr.Addr(), s.open)
		lines := tr.log.matching(addr)
		if len(lines) != 1 || !strings.Contains(lines[0], s.want) {
			t.Errorf("%s: log lines naming %s: %q, want one containing %q", s.name, addr, lines, s.want)
		}
	}
	// A second rank 0 is refused; the first keeps its place.
	if _, err := Join(ctx, tr.Addr(), testJob, info(0), n, 0, 0); err == nil || !strings.Contains(err.Error(), "already joined") {
		t.Errorf("duplicate rank 0: got %v, want a refusal saying it already joined", err)
	}
	c2, err := Join(ctx, tr.Addr(), testJob, info(2), n, 3, 10*time.Millisecond)
	if err != nil {
		t.Fatalf("rank 2: %v", err)
	}
	clients := []*Client{nil, nil, c2}
	for range n - 1 {
		r := <-joined
		if r.err != nil {
			t.Fatalf("join: %v", r.err)
		}
		clients[r.c.me.Rank] = r.c
	}
	t.Cleanup(func() {
		for _, c := range clients {
			c.Close()
		}
	})
	errs := eachRank(clients, func(r int, c *Client) error {
		got, err := c.AllGather(ctx, []byte{byte(r)})
		if err == nil && !bytes.Equal(bytes.Join(got, nil), []byte{0, 1, 2}) {
			err = fmt.Errorf("got %v", got)
		}
		return err
	})
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	// The root answers the duplicate before it logs the refusal: wait for the
	// line (a bound against hangs, not a speed check).
	for deadline := time.Now().Add(20 * time.Second); len(tr.log.matching("already joined")) == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if got := len(tr.log.matching("already joined")); got != 1 {
		t.Errorf("%d log lines about the duplicate, want 1", got)
	}
	if got, want := len(tr.log.snapshot()), len(strangers)+1; got != want {
		t.Errorf("%d log lines, want %d (one per stranger and the duplicate):\n%s", got, want, strings.Join(tr.log.snapshot(), "\n"))
	}
}

// A stranger that connects and says nothing neither blocks the job nor delays shutdown
// until its handshake deadline.
func TestSilentStranger(t *testing.T) {
	tr := startRoot(t, 2)
	silent, err := net.Dial("tcp", tr.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	clients := joinAll(t, tr.Addr(), 2)
	guard := ctxGuard(t)
	errs := eachRank(clients, func(r int, c *Client) error { return c.Barrier(guard) })
	for r, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v", r, err)
		}
	}
	for _, c := range clients {
		c.Close()
	}
	tr.Close()
	silent.SetReadDeadline(time.Now().Add(hangGuard))
	if n, err := io.Copy(io.Discard, silent); n != 0 || err != nil {
		t.Errorf("silent stranger read %d bytes, %v; want a plain close", n, err)
	}
	if lines := tr.log.matching(silent.LocalAddr().String()); len(lines) != 1 {
		t.Errorf("log lines naming the stranger: %q, want one", lines)
	}
}

func TestServeStopsWithCtx(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := NewRoot(ln, 2, testJob, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Serve(ctx) }()
	c, err := net.Dial("tcp", r.Addr()) // a connection in progress is closed too
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve: %v", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("Serve did not return after ctx ended")
	}
	if _, ok := <-r.Events(); ok {
		t.Error("events channel still open after Serve returned")
	}
	if err := r.Serve(context.Background()); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("second Serve: got %v, want an error", err)
	}
	r.Close()
}

func TestServeBadNRanks(t *testing.T) {
	for _, n := range []int{0, -1, MaxRanks + 1} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		r := NewRoot(ln, n, testJob, nil)
		if err := r.Serve(context.Background()); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("nranks %d", n)) {
			t.Errorf("nranks %d: got %v, want an error naming it", n, err)
		}
		r.Close()
	}
}

func TestCloseBeforeServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := NewRoot(ln, 1, testJob, nil)
	r.Close()
	if err := r.Serve(context.Background()); err != nil {
		t.Errorf("Serve after Close: %v", err)
	}
	if _, ok := <-r.Events(); ok {
		t.Error("events channel open after Close")
	}
}

// BenchmarkBarrier measures one bootstrap barrier round of 4 ranks through the root.
func BenchmarkBarrier(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	root := NewRoot(ln, 4, testJob, nil)
	done := make(chan error, 1)
	go func() { done <- root.Serve(context.Background()) }()
	defer func() { root.Close(); <-done }()
	clients := make([]*Client, 4)
	errs := make(chan error, 4)
	for r := range 4 {
		go func() {
			var err error
			clients[r], err = Join(context.Background(), root.Addr(), testJob, info(r), 4, 3, time.Millisecond)
			errs <- err
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	b.ResetTimer()
	for r := 1; r < 4; r++ {
		go func() {
			for i := 0; i < b.N; i++ {
				if err := clients[r].Barrier(context.Background()); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for i := 0; i < b.N; i++ {
		if err := clients[0].Barrier(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	for range 3 {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
}
