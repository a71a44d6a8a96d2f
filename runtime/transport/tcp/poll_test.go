package tcp

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/protocols"
)

// fill is n bytes that depend on seed.
func fill(seed, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(seed + j*13)
	}
	return b
}

// listen opens a transport of rank on loopback, closed at the end.
func listen(t *testing.T, rank int) *Transport {
	t.Helper()
	tr, err := Listen(Options{Rank: rank, Job: testJob, ListenAddr: "127.0.0.1:0", NSocks: 1, RetryCnt: 3, RetrySleep: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

// awaitAll takes n results from errc, failing the test at the first
// error, or when one has not come within hangGuard (hang names the
// likely cause).
func awaitAll(t *testing.T, errc <-chan error, n int, hang string) {
	t.Helper()
	for range n {
		select {
		case err := <-errc:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(hangGuard):
			t.Fatalf("still waiting after %v (hang guard): %s", hangGuard, hang)
		}
	}
}

// eachInline runs f as a subtest for LL and LL128 (the protocols whose
// one-socket receives read inline) with each spin.
func eachInline(t *testing.T, spins []time.Duration, f func(t *testing.T, p protocols.Proto, spin time.Duration)) {
	for _, p := range []protocols.Proto{protocols.LL, protocols.LL128} {
		for _, spin := range spins {
			t.Run(fmt.Sprintf("%s/spin=%v", p, spin), func(t *testing.T) { f(t, p, spin) })
		}
	}
}

// receiveWays are the two ways the engine receives a slice: Wait (the
// slice in the FIFO, then Release) and WaitInto (into the caller's
// memory). Each returns the slice's bytes.
var receiveWays = []struct {
	name string
	recv func(r Receiver, nsteps, n int) ([]byte, error)
}{
	{"Wait", func(r Receiver, nsteps, n int) ([]byte, error) {
		b, err := r.Wait(nsteps, n)
		if err != nil {
			return nil, err
		}
		b = bytes.Clone(b)
		return b, r.Release()
	}},
	{"WaitInto", func(r Receiver, nsteps, n int) ([]byte, error) {
		b := make([]byte, n)
		return b, r.WaitInto(nsteps, b)
	}},
}

// eachReceive runs f as a subtest for each of receiveWays.
func eachReceive(t *testing.T, f func(t *testing.T, recv func(r Receiver, nsteps, n int) ([]byte, error))) {
	for _, w := range receiveWays {
		t.Run(w.name, func(t *testing.T) { f(t, w.recv) })
	}
}

// sendOne posts payload pl as a one-step slice on s.
func sendOne(s Sender, pl []byte) error {
	buf, err := s.Acquire(1)
	if err != nil {
		return err
	}
	return s.Post(copy(buf, pl))
}

// recvOne waits for a one-step slice of want's length on r, checks its
// bytes and releases it.
func recvOne(r Receiver, want []byte) error {
	got, err := r.Wait(1, len(want))
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("%d bytes differ", len(want))
	}
	return r.Release()
}

// TestPingPongEverySize: two ranks exchange slices of every size from 1
// byte to a full step, both directions, each receive reading its frame on
// the caller's goroutine (polling, and not). The receiving ends' drainers
// never read: no goroutine of either rank blocks in a write or a Simple
// wait, so nothing arms them, and every frame is read by the receive that
// wants it, with no wake-up of another goroutine. (Before drainGroup, the
// drainer woke up for nearly every frame: a goroutine and thread wake-up
// per small message, which made LL128's small all-gathers over TCP stall
// behind LL's on a loaded 2-core machine.)
func TestPingPongEverySize(t *testing.T) {
	eachInline(t, []time.Duration{0, 50 * time.Microsecond}, func(t *testing.T, p protocols.Proto, spin time.Duration) {
		a, b, _ := pair(t, 1, nil)
		a.SetSpin(spin)
		b.SetSpin(spin)
		const stepBytes = 2048
		sab, rab := connectProto(t, a, b, p, stepBytes)
		sba, rba := connectProto(t, b, a, p, stepBytes)
		max := p.Payload(stepBytes)
		errc := make(chan error, 1)
		go func() { // rank b: receive, then answer
			for n := 1; n <= max; n++ {
				if err := recvOne(rab, fill(n, n)); err != nil {
					errc <- fmt.Errorf("b, slice of %d bytes: %w", n, err)
					return
				}
				if err := sendOne(sba, fill(-n, n)); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
		for n := 1; n <= max; n++ {
			if err := sendOne(sab, fill(n, n)); err != nil {
				t.Fatal(err)
			}
			if err := recvOne(rba, fill(-n, n)); err != nil {
				t.Fatalf("a, slice of %d bytes: %v", n, err)
			}
		}
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		for name, r := range map[string]Receiver{"a->b": rab, "b->a": rba} {
			if n := r.(*RecvConn).peeks.Load(); n != 0 {
				t.Errorf("%s: the drainer found %d of %d frames first, want 0", name, n, max)
			}
			// Each frame is one write of at most a step and its header,
			// which loopback delivers whole: Wait reads it with one read.
			if n := r.(*RecvConn).reads.Load(); n != uint64(max) {
				t.Errorf("%s: %d reads returned data for %d frames, want one per frame", name, n, max)
			}
		}
	})
}

// TestBlockedReceiveDrainsOthers: rank b waits for rank c, which waits
// for rank a, which first sends b more than the sockets hold. a's write
// only completes if b reads it while b waits for c: b's receive, blocked,
// arms b's other drainers, which read a's frames into b's FIFO.
func TestBlockedReceiveDrainsOthers(t *testing.T) {
	for _, p := range []protocols.Proto{protocols.LL, protocols.LL128} {
		t.Run(p.String(), func(t *testing.T) {
			a, b, c := listen(t, 0), listen(t, 1), listen(t, 2)
			stepBytes := 1 << 21 // a slice holds more than the sockets
			sab, rab := connectProto(t, a, b, p, stepBytes)
			sac, rac := connectProto(t, a, c, p, stepBytes)
			scb, rcb := connectProto(t, c, b, p, stepBytes)
			max := p.Payload(stepBytes)
			const n = 4
			errc := make(chan error, 3)
			go func() { // a: n full slices to b, then a note to c
				for i := range n {
					if err := sendOne(sab, fill(i, max)); err != nil {
						errc <- err
						return
					}
				}
				errc <- sendOne(sac, []byte("go"))
			}()
			go func() { // c: wait for a, then tell b
				if err := recvOne(rac, []byte("go")); err != nil {
					errc <- err
					return
				}
				errc <- sendOne(scb, []byte("done"))
			}()
			go func() { // b: wait for c, then read a's slices
				if err := recvOne(rcb, []byte("done")); err != nil {
					errc <- err
					return
				}
				for i := range n {
					if err := recvOne(rab, fill(i, max)); err != nil {
						errc <- err
						return
					}
				}
				errc <- nil
			}()
			awaitAll(t, errc, 3, "nothing drained b's socket from a")
		})
	}
}

// TestPeerClosesMidFrame: a peer that closes its socket partway through
// a frame (before a byte, in its header, halfway through its payload) fails
// the receive that reads it, polling or not, with an error naming the
// peer, instead of leaving it waiting.
func TestPeerClosesMidFrame(t *testing.T) {
	eachInline(t, []time.Duration{0, time.Minute}, func(t *testing.T, p protocols.Proto, spin time.Duration) {
		const n = 1000
		wn := n // frames carry the payload as it is
		for _, cut := range []int{0, headerSize / 2, headerSize + wn/2} {
			t.Run(fmt.Sprintf("cut=%d", cut), func(t *testing.T) {
				eachReceive(t, func(t *testing.T, recv func(r Receiver, nsteps, n int) ([]byte, error)) {
					a, b := listen(t, 0), listen(t, 1)
					b.SetSpin(spin)
					s, r := connectProto(t, a, b, p, 4096)
					frame := make([]byte, headerSize+wn)
					putHeader((*[headerSize]byte)(frame), wn, 1, 0, 0)
					go func() {
						s.(*EagerSendConn).socks[0].Write(frame[:cut])
						s.Close()
					}()
					err := returns(t, "a receive of a frame cut short", func() error { _, err := recv(r, 1, n); return err })
					if err == nil || !strings.Contains(err.Error(), "closed by the peer") || !strings.Contains(err.Error(), "rank 0") {
						t.Fatalf("receive: %v, want the connection from rank 0 closed by the peer", err)
					}
				})
			})
		}
	})
}

// TestInlineFrameMismatch: a peer whose frame is not the one Wait expects
// (another size or step count: other settings; another step or sequence
// number: a broken stream) fails the receive with an error saying so,
// polling or not, also when the frame is shorter than the one expected
// and nothing follows it (Wait reads one frame's worth at once: it must
// stop at the header instead of waiting for bytes that never come).
func TestInlineFrameMismatch(t *testing.T) {
	eachInline(t, []time.Duration{0, time.Minute}, func(t *testing.T, p protocols.Proto, spin time.Duration) {
		const n = 200
		wn := n // frames carry the payload as it is
		line := p.LineBytes()
		for _, tc := range []struct {
			name         string
			size, nsteps int
			step, seq    uint64
			want         string
			dirty        bool // a byte of the header's unused part set
		}{
			{"shorter", wn - line, 1, 0, 0, "same NCCL_* settings", false},
			{"longer", wn + line, 1, 0, 0, "same NCCL_* settings", false},
			{"more steps", wn, 2, 0, 0, "same NCCL_* settings", false},
			{"step", wn, 1, 1, 0, "protocol error", false},
			{"seq", wn, 1, 0, 1, "protocol error", false},
			{"unused header bytes", wn, 1, 0, 0, "not zero", true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				eachReceive(t, func(t *testing.T, recv func(r Receiver, nsteps, n int) ([]byte, error)) {
					a, b := listen(t, 0), listen(t, 1)
					b.SetSpin(spin)
					s, r := connectProto(t, a, b, p, 4096)
					frame := make([]byte, headerSize+tc.size+padOf(tc.size))
					putHeader((*[headerSize]byte)(frame), tc.size, tc.nsteps, tc.step, tc.seq)
					if tc.dirty {
						frame[headerSize-1] = 1
					}
					if _, err := s.(*EagerSendConn).socks[0].Write(frame); err != nil {
						t.Fatal(err)
					}
					err := returns(t, "a receive of a mismatched frame", func() error { _, err := recv(r, 1, n); return err })
					if err == nil || !strings.Contains(err.Error(), tc.want) {
						t.Fatalf("receive: %v, want an error containing %q", err, tc.want)
					}
				})
			})
		}
	})
}

// TestFailDuringPoll: Fail ends a receive that is polling its socket (a
// minute's spin) at once, with Fail's error.
func TestFailDuringPoll(t *testing.T) {
	for _, p := range []protocols.Proto{protocols.LL, protocols.LL128} {
		t.Run(p.String(), func(t *testing.T) {
			eachReceive(t, func(t *testing.T, recv func(r Receiver, nsteps, n int) ([]byte, error)) {
				testFailDuringPoll(t, p, time.Minute, recv)
			})
		})
	}
}

// TestFailWhileBlocked: Fail ends a receive that does not poll (no spin),
// which waits in its socket's ppoll: the eventfd Fail signals wakes it.
func TestFailWhileBlocked(t *testing.T) {
	for _, p := range []protocols.Proto{protocols.LL, protocols.LL128} {
		t.Run(p.String(), func(t *testing.T) {
			eachReceive(t, func(t *testing.T, recv func(r Receiver, nsteps, n int) ([]byte, error)) {
				testFailDuringPoll(t, p, 0, recv)
			})
		})
	}
}

func testFailDuringPoll(t *testing.T, p protocols.Proto, spin time.Duration, recv func(r Receiver, nsteps, n int) ([]byte, error)) {
	a, b := listen(t, 0), listen(t, 1)
	b.SetSpin(spin)
	_, r := connectProto(t, a, b, p, 4096)
	rc := r.(*RecvConn)
	errc := make(chan error, 1)
	go func() { _, err := recv(r, 1, 8); errc <- err }()
	// The receive polls once it holds the socket's read lock
	// (nothing arms the drainer, which would take it too).
	returns(t, "the receive to start polling", func() error {
		for rc.rmu.TryLock() {
			rc.rmu.Unlock()
			runtime.Gosched()
		}
		return nil
	})
	abort := errors.New("job aborted")
	r.Fail(abort)
	err := returns(t, "a polling receive after Fail", func() error { return <-errc })
	if !errors.Is(err, abort) {
		t.Fatalf("receive: %v, want %v", err, abort)
	}
}

// BenchmarkPingPong8B: one 8-byte LL slice each way between two ranks of
// this process (a round trip per op), the receive polling its socket for
// CC_TCP_SPIN_US's default, or blocking in the poller at once.
func BenchmarkPingPong8B(b *testing.B) {
	for _, spin := range []time.Duration{0, 50 * time.Microsecond} {
		b.Run(fmt.Sprintf("spin=%v", spin), func(b *testing.B) {
			x, y := benchListen(b, 0), benchListen(b, 1)
			x.SetSpin(spin)
			y.SetSpin(spin)
			sxy, rxy := benchConnect(b, x, y)
			syx, ryx := benchConnect(b, y, x)
			msg := fill(1, 8)
			done := make(chan error, 1)
			go func() {
				for range b.N {
					if err := recvOne(rxy, msg); err != nil {
						done <- err
						return
					}
					if err := sendOne(syx, msg); err != nil {
						done <- err
						return
					}
				}
				done <- nil
			}()
			b.ResetTimer()
			for range b.N {
				if err := sendOne(sxy, msg); err != nil {
					b.Fatal(err)
				}
				if err := recvOne(ryx, msg); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}

func benchListen(b *testing.B, rank int) *Transport {
	tr, err := Listen(Options{Rank: rank, Job: testJob, ListenAddr: "127.0.0.1:0", NSocks: 1, RetryCnt: 3, RetrySleep: 10 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { tr.Close() })
	return tr
}

func benchConnect(b *testing.B, x, y *Transport) (Sender, Receiver) {
	var s Sender
	var serr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		s, serr = x.Connect(b.Context(), y.o.Rank, y.Addr(), 7, protocols.LL, 4096)
	}()
	r, err := y.Accept(b.Context(), x.o.Rank, 7, protocols.LL, 4096)
	<-done
	if serr != nil || err != nil {
		b.Fatalf("connect: %v / accept: %v", serr, err)
	}
	return s, r
}
