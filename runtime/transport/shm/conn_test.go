//go:build linux

package shm

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/engine"
)

var allProtos = []protocols.Proto{protocols.Simple, protocols.LL, protocols.LL128}

// pairConns returns the ends of the FIFO 0 -> 1 on channel p.
func pairConns(t *testing.T, segs []*Segment, p protocols.Proto) (*SendConn, *RecvConn) {
	t.Helper()
	send, err := segs[0].Send(int(p), 0, 1, p)
	if err != nil {
		t.Fatal(err)
	}
	recv, err := segs[1].Recv(int(p), 0, 1, p)
	if err != nil {
		t.Fatal(err)
	}
	return send, recv
}

// TestStreamInProcess moves long streams both ways between two goroutine
// ranks, every protocol at once, with spinning, with futex sleeps only, and
// with yields (SetYield).
func TestStreamInProcess(t *testing.T) {
	count := 3000
	if testing.Short() {
		count = 300
	}
	for _, tc := range []struct {
		spin  time.Duration
		yield bool
	}{{20 * time.Microsecond, false}, {0, false}, {time.Millisecond, true}} {
		t.Run(fmt.Sprintf("spin=%v,yield=%v", tc.spin, tc.yield), func(t *testing.T) {
			o := testOptions(t, 2)
			o.Spin = tc.spin
			segs := openGroup(t, o)
			var wg sync.WaitGroup
			errs := make([]error, 2)
			for r := range segs {
				segs[r].SetYield(tc.yield)
				wg.Add(1)
				go func() { defer wg.Done(); errs[r] = runRing(segs[r], r, 2, count) }()
			}
			wg.Wait()
			for r, err := range errs {
				if err != nil {
					t.Errorf("local rank %d: %v", r, err)
				}
			}
		})
	}
}

func TestEmptySlice(t *testing.T) {
	segs := openGroup(t, testOptions(t, 2))
	for _, p := range allProtos {
		send, recv := pairConns(t, segs, p)
		for i := 0; i < 3*protocols.NSteps; i++ { // around the FIFO a few times
			if _, err := send.Acquire(1); err != nil {
				t.Fatal(err)
			}
			if err := send.Post(0); err != nil {
				t.Fatal(err)
			}
			b, err := recv.Wait(1, 0)
			if err != nil || len(b) != 0 {
				t.Fatalf("%v: Wait(1, 0) = %d bytes, %v; want 0 bytes", p, len(b), err)
			}
			if err := recv.Release(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestSizeMismatch: a receiver that expects another slice than the one
// sent gets an error naming both, for every protocol.
func TestSizeMismatch(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		sendSteps, sendBytes int
		wantSteps, wantBytes int
		want                 string
	}{
		{"bytes", 1, 10, 1, 11, "local rank 0 sent a slice of 10 bytes in 1 steps, want 11 bytes in 1"},
		{"steps", 2, 10, 1, 10, "sent a slice of 10 bytes in 2 steps, want 10 bytes in 1"},
	} {
		for _, p := range allProtos {
			t.Run(tc.name+"/"+p.String(), func(t *testing.T) {
				segs := openGroup(t, testOptions(t, 2))
				send, recv := pairConns(t, segs, p)
				if _, err := send.Acquire(tc.sendSteps); err != nil {
					t.Fatal(err)
				}
				if err := send.Post(tc.sendBytes); err != nil {
					t.Fatal(err)
				}
				_, err := recv.Wait(tc.wantSteps, tc.wantBytes)
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("Wait = %v, want an error containing %q", err, tc.want)
				}
			})
		}
	}
}

// TestMisuse: calls out of order or out of range are errors, not hangs.
func TestMisuse(t *testing.T) {
	segs := openGroup(t, testOptions(t, 3))
	if _, err := segs[0].Send(0, 1, 2, protocols.LL); err == nil || !strings.Contains(err.Error(), "belongs to local rank 1") {
		t.Errorf("Send of another rank's end = %v", err)
	}
	if _, err := segs[0].Recv(0, 1, 2, protocols.LL); err == nil || !strings.Contains(err.Error(), "belongs to local rank 2") {
		t.Errorf("Recv of another rank's end = %v", err)
	}
	if _, err := segs[0].Send(3, 0, 1, protocols.LL); err == nil || !strings.Contains(err.Error(), "channel 3: want 0..2") {
		t.Errorf("Send on channel 3 = %v", err)
	}
	if _, err := segs[0].Send(0, 0, 0, protocols.LL); err == nil || !strings.Contains(err.Error(), "cannot connect to itself") {
		t.Errorf("Send to itself = %v", err)
	}
	a, _ := segs[0].Send(0, 0, 1, protocols.LL)
	b, _ := segs[0].Send(0, 0, 1, protocols.LL)
	if a != b {
		t.Errorf("Send twice returned two connections")
	}
	for _, p := range allProtos {
		send, recv := pairConns(t, segs, p)
		max := 2 * send.stepPayload
		for _, tc := range []struct {
			name string
			call func() error
			want string
		}{
			{"Post first", func() error { return send.Post(1) }, "Post without Acquire"},
			{"Release first", func() error { return recv.Release() }, "Release without Wait"},
			{"Acquire 0", func() error { _, err := send.Acquire(0); return err }, "slice of 0 steps: want 1..8"},
			{"Acquire 9", func() error { _, err := send.Acquire(9); return err }, "slice of 9 steps: want 1..8"},
			{"Wait too big", func() error { _, err := recv.Wait(2, max+1); return err }, fmt.Sprintf("slice of %d bytes in 2 steps: at most %d", max+1, max)},
			{"Post too big", func() error {
				if _, err := send.Acquire(2); err != nil {
					return err
				}
				return send.Post(max + 1)
			}, fmt.Sprintf("Post of %d bytes: the 2 acquired steps hold %d", max+1, max)},
			{"Acquire twice", func() error {
				if _, err := send.Acquire(1); err != nil {
					return err
				}
				_, err := send.Acquire(1)
				send.Post(0)
				return err
			}, "while 1 acquired steps are not posted"},
		} {
			if err := tc.call(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v %s: %v, want an error containing %q", p, tc.name, err, tc.want)
			}
		}
		if p == protocols.Simple {
			if _, err := send.Acquire(3); err == nil || !strings.Contains(err.Error(), "Simple slices must divide the 8-step FIFO") {
				t.Errorf("Simple Acquire(3) = %v", err)
			}
		} else if _, err := send.Acquire(3); err != nil { // LL and LL128 slices need no alignment
			t.Errorf("%v Acquire(3) = %v", p, err)
		} else {
			send.Post(0)
		}
	}
}

// setFutexTimeout makes every futex sleep of the test last d unless woken.
func setFutexTimeout(t *testing.T, d time.Duration) {
	old := futexTimeout
	futexTimeout = d
	t.Cleanup(func() { futexTimeout = old })
}

// awaitFlag waits (bounded) until a waiter has announced its futex sleep.
func awaitFlag(t *testing.T, flag *uint32) {
	t.Helper()
	for i := 0; atomic.LoadUint32(flag) == 0; i++ {
		if i == int(hangGuard/time.Millisecond) {
			t.Fatal("the waiter never went to sleep")
		}
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond) // let it enter futex_wait
}

// TestFailWakesSleepers: with futex sleeps of an hour, only Fail's wake
// can end a receiver waiting for data and a sender waiting for a slot.
func TestFailWakesSleepers(t *testing.T) {
	setFutexTimeout(t, time.Hour)
	for _, p := range allProtos {
		t.Run(p.String(), func(t *testing.T) {
			o := testOptions(t, 2)
			o.Spin = 0
			segs := openGroup(t, o)
			send, recv := pairConns(t, segs, p)
			cause := errors.New("rank 5 died")

			waitErr := make(chan error, 1)
			go func() { _, err := recv.Wait(1, 8); waitErr <- err }()
			awaitFlag(t, recv.tailWait)
			segs[1].Fail(cause)
			if err := <-waitErr; !errors.Is(err, cause) {
				t.Errorf("Wait after Fail = %v, want %v", err, cause)
			}
			if _, err := recv.Wait(1, 8); !errors.Is(err, cause) {
				t.Errorf("a later Wait = %v, want %v", err, cause)
			}

			// Fill the FIFO; the next slice waits for a slot.
			for i := 0; i < protocols.NSteps; i++ {
				if _, err := send.Acquire(1); err != nil {
					t.Fatal(err)
				}
				if err := send.Post(8); err != nil {
					t.Fatal(err)
				}
			}
			sendErr := make(chan error, 1)
			go func() {
				_, err := send.Acquire(1)
				if err == nil {
					err = send.Post(8)
				}
				sendErr <- err
			}()
			awaitFlag(t, send.headWait)
			segs[0].Fail(cause)
			if err := <-sendErr; !errors.Is(err, cause) {
				t.Errorf("sender after Fail = %v, want %v", err, cause)
			}
		})
	}
}

// TestClose: Close is idempotent, fails later calls with ErrClosed, and a
// slice still held does not fault after it.
func TestClose(t *testing.T) {
	o := testOptions(t, 2)
	segs := openGroup(t, o)
	send, recv := pairConns(t, segs, protocols.Simple)
	held, err := send.Acquire(1)
	if err != nil {
		t.Fatal(err)
	}
	ll, _ := pairConns(t, segs, protocols.LL)
	for i := 0; i < 2; i++ {
		if err := segs[0].Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
	}
	held[0] = 1 // the mapping was replaced, not removed
	if err := send.Post(1); err != nil {
		t.Errorf("Post of the held slice after Close = %v, want nil (nothing to report)", err)
	}
	if _, err := send.Acquire(1); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("Acquire after Close = %v, want ErrClosed", err)
	}
	if _, err := ll.Acquire(1); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("LL Acquire after Close = %v, want ErrClosed", err)
	}
	// pairConns opened LL on channel int(LL) only: this one is new.
	if _, err := segs[0].Send(int(protocols.Simple), 0, 1, protocols.LL); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("Send of a new connection after Close = %v, want ErrClosed", err)
	}
	if err := segs[1].Close(); err != nil {
		t.Fatal(err)
	}
	if segs[1].mem != nil {
		t.Errorf("Close with no slice held kept the mapping")
	}
	if _, err := recv.Wait(1, 1); !errors.Is(err, engine.ErrClosed) {
		t.Errorf("Wait after Close = %v, want ErrClosed", err)
	}
}

// TestLLCleanWindow drives an LL connection through the steps where
// LLClean rewrites every slot (2^31-8 .. 2^31-1) and checks that afterwards
// no line of any slot holds a flag older than that window.
func TestLLCleanWindow(t *testing.T) {
	segs := openGroup(t, testOptions(t, 2))
	send, recv := pairConns(t, segs, protocols.LL)
	start := uint64(1<<31 - 40)
	send.step, send.cache, recv.step, recv.cache = start, start, start, start
	atomic.StoreUint64(send.head, start)
	atomic.StoreUint64(send.tail, start)
	var wg sync.WaitGroup
	var sendErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; i < 60; i++ { // single tiny slices: most lines are never written
			b, err := send.Acquire(1)
			if err != nil {
				sendErr = err
				return
			}
			b[0] = byte(i)
			if sendErr = send.Post(1); sendErr != nil {
				return
			}
		}
	}()
	for i := 0; i < 60; i++ {
		b, err := recv.Wait(1, 1)
		if err != nil {
			t.Fatal(err)
		}
		if b[0] != byte(i) {
			t.Fatalf("slice %d: got %d", i, b[0])
		}
		recv.Release()
	}
	wg.Wait()
	if sendErr != nil {
		t.Fatal(sendErr)
	}
	oldest := uint32(protocols.LLFlag(1<<31 - 8))
	for i, w := range recv.words {
		if _, f := protocols.LLSplit(w); f < oldest {
			t.Fatalf("word %d (slot %d) has flag %#x, older than the clean window's %#x", i, i/recv.stepWords, f, oldest)
		}
	}
}

// TestLLWrap streams across step 2^32, where LL flags wrap to 0, starting
// from the memory the clean window before it leaves.
func TestLLWrap(t *testing.T) {
	segs := openGroup(t, testOptions(t, 2))
	send, recv := pairConns(t, segs, protocols.LL)
	start := uint64(1<<32 - 100)
	for i := 0; i < protocols.NSteps; i++ { // as rewritten at steps 0xfffffff8-0x100000000+... one period earlier
		protocols.LLFill(recv.slot(uint64(i)), protocols.LLFlag(1<<31-8+uint64(i)))
	}
	send.step, send.cache, recv.step, recv.cache = start, start, start, start
	atomic.StoreUint64(send.head, start)
	atomic.StoreUint64(send.tail, start)
	var wg sync.WaitGroup
	var sendErr error
	wg.Add(1)
	go func() { defer wg.Done(); sendErr = sendStream(send, 9, 400) }()
	if err := recvStream(recv, 9, 400); err != nil {
		t.Error(err)
	}
	wg.Wait()
	if sendErr != nil {
		t.Error(sendErr)
	}
	if send.step < 1<<32+100 {
		t.Errorf("the stream ended at step %#x, before passing 2^32", send.step)
	}
}
