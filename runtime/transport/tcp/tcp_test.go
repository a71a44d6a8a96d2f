package tcp

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/wire"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(exchangePeerEnv); addr != "" {
		os.Exit(exchangePeer(addr))
	}
	goleak.VerifyTestMain(m)
}

var testJob = wire.Job{ID: "tcp-test", Secret: []byte("s3cret")}

type logSink struct {
	mu    sync.Mutex
	lines []string
}

func (l *logSink) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

func (l *logSink) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

func pair(t *testing.T, nsocks int, onError func(error)) (*Transport, *Transport, *logSink) {
	t.Helper()
	logs := &logSink{}
	mk := func(rank int) *Transport {
		tr, err := Listen(Options{Rank: rank, Job: testJob, ListenAddr: "127.0.0.1:0", NSocks: nsocks, RetryCnt: 3, RetrySleep: 10 * time.Millisecond, Logf: logs.logf, OnError: onError})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tr.Close() })
		return tr
	}
	return mk(0), mk(1), logs
}

func connect(t *testing.T, a, b *Transport, stepBytes int) (*SendConn, *RecvConn) {
	t.Helper()
	s, r := connectProto(t, a, b, protocols.Simple, stepBytes)
	return s.(*SendConn), r.(*RecvConn)
}

func connectProto(t *testing.T, a, b *Transport, p protocols.Proto, stepBytes int) (Sender, Receiver) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var s Sender
	var serr error
	done := make(chan struct{})
	go func() { defer close(done); s, serr = a.Connect(ctx, b.o.Rank, b.Addr(), 7, p, stepBytes) }()
	r, err := b.Accept(ctx, a.o.Rank, 7, p, stepBytes)
	<-done
	if serr != nil || err != nil {
		t.Fatalf("connect: %v / accept: %v", serr, err)
	}
	return s, r
}

// payload is slice i's content: its length and bytes depend on i.
func payload(i, max int) []byte {
	n := (i*7919)%max + 1
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(i + j*13)
	}
	return b
}

// TestSlicesInOrderOverManySockets sends slices of 1 and 2 steps (so step
// alignment leaves gaps) over 1 and 3 sockets; the receiver must see every
// slice intact and in order, with flow control keeping at most 8 slots busy.
func TestSlicesInOrderOverManySockets(t *testing.T) {
	for _, nsocks := range []int{1, 3} {
		t.Run(fmt.Sprint(nsocks), func(t *testing.T) {
			a, b, _ := pair(t, nsocks, nil)
			const stepBytes, n = 256, 2000
			s, r := connect(t, a, b, stepBytes)
			errc := make(chan error, 1)
			go func() {
				for i := 0; i < n; i++ {
					nsteps := 1 + (i/3)%2
					buf, err := s.Acquire(nsteps)
					if err != nil {
						errc <- err
						return
					}
					p := payload(i, nsteps*stepBytes)
					copy(buf, p)
					if err := s.Post(len(p)); err != nil {
						errc <- err
						return
					}
				}
				errc <- s.Flush()
			}()
			for i := 0; i < n; i++ {
				nsteps := 1 + (i/3)%2
				want := payload(i, nsteps*stepBytes)
				got, err := r.Wait(nsteps, len(want))
				if err != nil {
					t.Fatalf("slice %d: %v", i, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("slice %d: got %d bytes %x..., want %d bytes %x...", i, len(got), got[:min(8, len(got))], len(want), want[:8])
				}
				r.Release()
			}
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestMismatchedSteps: a receiver expecting another slice geometry gets an
// error that points at mismatched settings.
func TestMismatchedSteps(t *testing.T) {
	a, b, _ := pair(t, 1, nil)
	s, r := connect(t, a, b, 128)
	buf, _ := s.Acquire(2)
	copy(buf, "x")
	s.Post(1)
	if _, err := r.Wait(1, 1); err == nil || !strings.Contains(err.Error(), "same NCCL_* settings") {
		t.Fatalf("got %v, want a settings mismatch error", err)
	}
}

// TestStrangersDropped: garbage and a wrong secret on the listener are
// dropped with one log line each; a good connection still works afterwards.
func TestStrangersDropped(t *testing.T) {
	a, b, logs := pair(t, 1, nil)
	c, err := net.Dial("tcp", b.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("SSH-2.0-OpenSSH_9.2\r\n" + strings.Repeat("x", 200)))
	c.Close()
	bad := wire.Job{ID: testJob.ID, Secret: []byte("wrong")}
	if c, err := wire.Dial(context.Background(), b.Addr(), bad, wire.Hello{Kind: wire.KindData}, 0, 0); err == nil {
		c.Close()
		t.Fatal("wrong secret accepted")
	}
	s, r := connect(t, a, b, 128)
	buf, _ := s.Acquire(1)
	copy(buf, "hello")
	s.Post(5)
	got, err := r.Wait(1, 5)
	if err != nil || string(got) != "hello" {
		t.Fatalf("after strangers: got %q, %v", got, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(logs.all(), "dropped connection") < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := strings.Count(logs.all(), "dropped connection"); n != 2 {
		t.Fatalf("want 2 log lines for 2 strangers, got %d:\n%s", n, logs.all())
	}
}

// TestPeerDeath: the sender vanishing makes a waiting receiver fail with an
// error naming the peer, and OnError hears about it.
func TestPeerDeath(t *testing.T) {
	reported := make(chan error, 4)
	a, b, _ := pair(t, 2, func(err error) { reported <- err })
	s, r := connect(t, a, b, 128)
	waitErr := make(chan error, 1)
	go func() { _, err := r.Wait(1, 1); waitErr <- err }()
	for _, sock := range s.socks {
		sock.(*net.TCPConn).SetLinger(0) // reset, like a killed process
	}
	s.Close()
	select {
	case err := <-waitErr:
		if err == nil || !strings.Contains(err.Error(), "rank 0") {
			t.Fatalf("got %v, want an error naming rank 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("receiver still waiting 20s after its peer died (hang guard)")
	}
	select {
	case err := <-reported:
		if !strings.Contains(err.Error(), "rank 0") {
			t.Fatalf("OnError got %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("OnError not called (hang guard)")
	}
}

// TestStreamID pins the handshake's channel field: channel<<2 | 0, 1 or 2
// for Simple, LL and LL128 (handshake versions 1 and 2).
func TestStreamID(t *testing.T) {
	for _, tc := range []struct {
		channel int
		p       protocols.Proto
		want    int32
	}{
		{0, protocols.Simple, 0}, {0, protocols.LL, 1}, {0, protocols.LL128, 2},
		{3, protocols.Simple, 12}, {3, protocols.LL, 13}, {3, protocols.LL128, 14},
	} {
		if got := streamID(tc.channel, tc.p); got != tc.want {
			t.Errorf("streamID(%d, %v) = %d, want %d", tc.channel, tc.p, got, tc.want)
		}
	}
}

// TestCloseWhileAccepting: Close ends an Accept that no peer will satisfy.
func TestCloseWhileAccepting(t *testing.T) {
	_, b, _ := pair(t, 1, nil)
	errc := make(chan error, 1)
	go func() { _, err := b.Accept(context.Background(), 5, 0, protocols.Simple, 128); errc <- err }()
	time.Sleep(20 * time.Millisecond)
	b.Close()
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("Accept returned no error after Close")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Accept still blocked after Close (hang guard)")
	}
}

// TestProtocolsRoundTrip sends slices of every size from 1 byte to a full
// step through each protocol's connection over 1 and 2 sockets: every byte
// must arrive.
func TestProtocolsRoundTrip(t *testing.T) {
	for _, p := range []protocols.Proto{protocols.Simple, protocols.LL, protocols.LL128} {
		for _, nsocks := range []int{1, 2} {
			t.Run(fmt.Sprintf("%s/%d", p, nsocks), func(t *testing.T) {
				a, b, _ := pair(t, nsocks, nil)
				const stepBytes = 1024
				s, r := connectProto(t, a, b, p, stepBytes)
				streamSlices(t, s, r, 600, p.Payload(stepBytes), nil, nil)
			})
		}
	}
}

// TestInlineReceive: with one socket, LL and LL128 receives read frames on the
// caller's goroutine. The receiver and the sender pause at random, so that
// frames wait in the socket and receives wait for frames, in every
// protocol, polling and not; every slice must arrive intact and in order.
func TestInlineReceive(t *testing.T) {
	eachInline(t, []time.Duration{0, 20 * time.Microsecond}, func(t *testing.T, p protocols.Proto, spin time.Duration) {
		a, b, _ := pair(t, 1, nil)
		b.SetSpin(spin)
		const stepBytes, n = 1024, 3000
		s, r := connectProto(t, a, b, p, stepBytes)
		if !r.(*RecvConn).inline {
			t.Fatal("a one-socket LL/LL128 connection does not read inline")
		}
		streamSlices(t, s, r, n, p.Payload(stepBytes), func(i int) {
			if i%97 == 0 {
				time.Sleep(50 * time.Microsecond) // the receiver polls, then blocks
			}
		}, func(i int) {
			if i%89 == 0 {
				time.Sleep(200 * time.Microsecond) // frames wait in the socket
			}
		})
	})
}

// streamSlices sends n one-step slices of payload(i, max) from s on its own
// goroutine and receives them on r, checking every byte; afterSend(i) runs
// after the sender posts slice i, beforeRecv(i) before the receiver waits
// for it (either may be nil).
func streamSlices(t *testing.T, s Sender, r Receiver, n, max int, afterSend, beforeRecv func(i int)) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		for i := 0; i < n; i++ {
			buf, err := s.Acquire(1)
			if err != nil {
				errc <- err
				return
			}
			pl := payload(i, max)
			copy(buf, pl)
			if err := s.Post(len(pl)); err != nil {
				errc <- err
				return
			}
			if afterSend != nil {
				afterSend(i)
			}
		}
		errc <- nil
	}()
	for i := 0; i < n; i++ {
		if beforeRecv != nil {
			beforeRecv(i)
		}
		want := payload(i, max)
		got, err := r.Wait(1, len(want))
		if err != nil {
			t.Fatalf("slice %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("slice %d: %d bytes differ", i, len(want))
		}
		r.Release()
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestBothWriteFirst: two ranks each send more than the sockets hold
// before either receives, staged and by reference. With the sender writing on its own goroutine
// (LL, LL128), nothing would read the sockets while both write: the
// drainer does, into the FIFO, so both finish.
func TestBothWriteFirst(t *testing.T) {
	for _, p := range []protocols.Proto{protocols.LL, protocols.LL128} {
		t.Run(p.String(), func(t *testing.T) {
			a, b, _ := pair(t, 1, nil)
			stepBytes := 1 << 21 // 2 MiB of wire per slice: the FIFO holds more than the sockets
			sa, rb := connectProto(t, a, b, p, stepBytes)
			sb, ra := connectProto(t, b, a, p, stepBytes)
			const n = protocols.NSteps // the FIFO's worth: 16 MiB each way
			max := p.Payload(stepBytes)
			full := func(i int) []byte { return fill(i, max) } // a whole slot's payload
			run := func(s Sender, r Receiver) error {
				for i := 0; i < n; i++ {
					buf, err := s.Acquire(1)
					if err != nil {
						return err
					}
					if i%2 == 0 {
						err = s.Post(copy(buf, full(i)))
					} else {
						err = s.(*EagerSendConn).PostRef(full(i)) // from the caller's memory
					}
					if err != nil {
						return err
					}
				}
				for i := 0; i < n; i++ {
					want := full(i)
					got, err := r.Wait(1, len(want))
					if err != nil {
						return err
					}
					if !bytes.Equal(got, want) {
						return fmt.Errorf("slice %d differs", i)
					}
					r.Release()
				}
				return nil
			}
			errc := make(chan error, 2)
			go func() { errc <- run(sa, ra) }()
			go func() { errc <- run(sb, rb) }()
			awaitAll(t, errc, 2, "both ranks still writing: nothing drained the sockets")
		})
	}
}
