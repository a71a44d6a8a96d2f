//go:build linux

package shm

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/engine"
)

// slotSize is the size of the slice the slot tests send at step: full,
// empty, anything, or small, different for neighbouring steps.
func slotSize(step uint64, payload int) int {
	h := step * 0x9e3779b97f4a7c15 >> 32
	switch h % 8 {
	case 0:
		return payload
	case 1:
		return 0
	case 2, 3:
		return int(h>>3) % (payload + 1)
	}
	return 1 + int(h>>3)%min(256, payload)
}

// checkCounters checks that both ends of a drained connection are at step.
func checkCounters(t *testing.T, send *SendConn, recv *RecvConn, step uint64) {
	t.Helper()
	if send.step != step || recv.step != step {
		t.Errorf("sender at step %d, receiver at step %d, want %d", send.step, recv.step, step)
	}
	if tail, head := atomic.LoadUint64(send.tail), atomic.LoadUint64(recv.head); tail != step || head != step {
		t.Errorf("tail %d, head %d, want %d", tail, head, step)
	}
}

// TestSlotOutOfOrder: the sender writes the 8 slots of a round backwards,
// reads them back, and posts them in order; the receiver reads them in
// another order, then each once more before releasing it. Four rounds
// wrap the FIFO four times.
func TestSlotOutOfOrder(t *testing.T) {
	segs := openGroup(t, testOptions(t, 2))
	send, recv := pairConns(t, segs, protocols.Simple)
	payload := send.stepPayload
	const seed, rounds = 11, 4
	readOrder := []int{3, 0, 7, 5, 1, 6, 2, 4}
	for round := 0; round < rounds; round++ {
		base := uint64(round * protocols.NSteps)
		for ahead := protocols.NSteps - 1; ahead >= 0; ahead-- {
			b, err := send.SendSlot(ahead)
			if err != nil {
				t.Fatalf("round %d: SendSlot(%d): %v", round, ahead, err)
			}
			if len(b) != payload || cap(b) != payload {
				t.Fatalf("round %d: SendSlot(%d) returned len %d cap %d, want %d", round, ahead, len(b), cap(b), payload)
			}
			step := base + uint64(ahead)
			fillSlice(b[:slotSize(step, payload)], seed, int(step))
		}
		for ahead := 0; ahead < protocols.NSteps; ahead++ { // as an accumulating sender reads back
			b, err := send.SendSlot(ahead)
			if err != nil {
				t.Fatalf("round %d: SendSlot(%d) again: %v", round, ahead, err)
			}
			step := base + uint64(ahead)
			if err := checkSlice(b[:slotSize(step, payload)], seed, int(step)); err != nil {
				t.Fatalf("round %d: SendSlot(%d) again: %v", round, ahead, err)
			}
		}
		for k := uint64(0); k < protocols.NSteps; k++ {
			if err := send.PostSlot(slotSize(base+k, payload)); err != nil {
				t.Fatalf("round %d: PostSlot #%d: %v", round, k, err)
			}
		}
		for _, ahead := range readOrder {
			step := base + uint64(ahead)
			n := slotSize(step, payload)
			b, err := recv.RecvSlot(ahead, n)
			if err != nil {
				t.Fatalf("round %d: RecvSlot(%d, %d): %v", round, ahead, n, err)
			}
			if len(b) != n || cap(b) != n {
				t.Fatalf("round %d: RecvSlot(%d, %d) returned len %d cap %d", round, ahead, n, len(b), cap(b))
			}
			if err := checkSlice(b, seed, int(step)); err != nil {
				t.Fatalf("round %d: RecvSlot(%d): %v", round, ahead, err)
			}
		}
		for k := uint64(0); k < protocols.NSteps; k++ {
			n := slotSize(base+k, payload)
			b, err := recv.RecvSlot(0, n)
			if err != nil {
				t.Fatalf("round %d: RecvSlot(0, %d) of step %d: %v", round, n, base+k, err)
			}
			if err := checkSlice(b, seed, int(base+k)); err != nil {
				t.Fatalf("round %d: RecvSlot(0) again: %v", round, err)
			}
			if err := recv.ReleaseSlot(); err != nil {
				t.Fatalf("round %d: ReleaseSlot #%d: %v", round, k, err)
			}
		}
	}
	checkCounters(t, send, recv, rounds*protocols.NSteps)
}

type slotResult struct {
	b   []byte
	err error
}

// goSendSlot calls SendSlot(ahead) in a goroutine.
func goSendSlot(c *SendConn, ahead int) chan slotResult {
	ch := make(chan slotResult, 1)
	go func() {
		b, err := c.SendSlot(ahead)
		ch <- slotResult{b, err}
	}()
	return ch
}

// notYet checks that a call that should wait has not returned within 50 ms.
func notYet(t *testing.T, ch chan slotResult, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s returned (error %v) when it should wait", what, r.err)
	case <-time.After(50 * time.Millisecond):
	}
}

// result waits (bounded) for a blocked call.
func result(t *testing.T, ch chan slotResult, what string) slotResult {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(hangGuard):
		t.Fatalf("%s did not return within %v", what, hangGuard)
		return slotResult{}
	}
}

// releaseSlots receives and releases n one-byte slots, checking that
// their byte is their step.
func releaseSlots(t *testing.T, recv *RecvConn, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		step := recv.step
		b, err := recv.RecvSlot(0, 1)
		if err != nil {
			t.Fatal(err)
		}
		if b[0] != byte(step) {
			t.Fatalf("step %d holds %d", step, b[0])
		}
		if err := recv.ReleaseSlot(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestSlotWriteAheadBlocks: a slot whose step is NSteps or more past the
// oldest unreleased one waits for the receiver's release, in SendSlot or,
// for a slot SendSlot did not return, in PostSlot; a slot not posted yet
// waits for the sender's post. Waiters sleep on the futex at once and only
// a wake ends their sleep.
func TestSlotWriteAheadBlocks(t *testing.T) {
	setFutexTimeout(t, time.Hour)
	o := testOptions(t, 2)
	o.Spin = 0
	segs := openGroup(t, o)
	send, recv := pairConns(t, segs, protocols.Simple)
	for k := 0; k < protocols.NSteps; k++ {
		b, err := send.SendSlot(0)
		if err != nil {
			t.Fatal(err)
		}
		b[0] = byte(k)
		if err := send.PostSlot(1); err != nil {
			t.Fatal(err)
		}
	}
	slotAt := func(i int) *byte { return &send.fifo[i*send.stepBytes] }

	// Step 8 needs step 0 released; no slot is held.
	ch := goSendSlot(send, 0)
	notYet(t, ch, "SendSlot(0) of step 8")
	releaseSlots(t, recv, 1)
	r := result(t, ch, "SendSlot(0) of step 8")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if unsafe.SliceData(r.b) != slotAt(0) {
		t.Fatalf("SendSlot(0) of step 8 did not return slot 0")
	}
	r.b[0] = 8

	// Step 12 needs step 4 released; step 8 is held.
	ch = goSendSlot(send, 4)
	releaseSlots(t, recv, 3)
	notYet(t, ch, "SendSlot(4) of step 12 with steps up to 3 released")
	releaseSlots(t, recv, 1)
	r = result(t, ch, "SendSlot(4) of step 12")
	if r.err != nil {
		t.Fatal(r.err)
	}
	if unsafe.SliceData(r.b) != slotAt(4) {
		t.Fatalf("SendSlot(4) of step 12 did not return slot 4")
	}
	for k := 8; k <= 12; k++ {
		if k > 8 {
			b, err := send.SendSlot(0)
			if err != nil {
				t.Fatal(err)
			}
			b[0] = byte(k)
		}
		if err := send.PostSlot(1); err != nil {
			t.Fatal(err)
		}
	}
	releaseSlots(t, recv, 13-5)
	checkCounters(t, send, recv, 13)

	post := func() { // one slot holding its step number
		t.Helper()
		b, err := send.SendSlot(0)
		if err != nil {
			t.Fatal(err)
		}
		b[0] = byte(send.step)
		if err := send.PostSlot(1); err != nil {
			t.Fatal(err)
		}
	}

	// PostSlot of a slot SendSlot did not return waits for its credit,
	// then sends what the slot holds.
	for send.step < 21 {
		post()
	}
	ch = make(chan slotResult, 1)
	go func() { ch <- slotResult{err: send.PostSlot(1)} }()
	notYet(t, ch, "PostSlot of step 21 with steps up to 12 released")
	releaseSlots(t, recv, 1)
	if r := result(t, ch, "PostSlot of step 21"); r.err != nil {
		t.Fatal(r.err)
	}
	releaseSlots(t, recv, 21-14)
	if b, err := recv.RecvSlot(0, 1); err != nil || b[0] != 13 {
		t.Fatalf("RecvSlot(0, 1) of step 21 = %v, %v; want the byte of step 13, 13", b, err)
	}
	if err := recv.ReleaseSlot(); err != nil {
		t.Fatal(err)
	}

	// RecvSlot of a step not posted waits for its post, whether or not
	// the receiver holds slots.
	for _, ahead := range []int{0, 3} { // steps 22, then 25 with 22 held
		target := recv.step + uint64(ahead)
		ch = make(chan slotResult, 1)
		go func() { b, err := recv.RecvSlot(ahead, 1); ch <- slotResult{b, err} }()
		for send.step < target {
			post()
		}
		what := fmt.Sprintf("RecvSlot(%d, 1) of step %d with steps up to %d posted", ahead, target, target-1)
		notYet(t, ch, what)
		post()
		r := result(t, ch, what)
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.b[0] != byte(target) {
			t.Fatalf("%s holds %d", what, r.b[0])
		}
	}
	releaseSlots(t, recv, 4) // 22..25
	checkCounters(t, send, recv, 26)
}

// TestSlotErrors: sizes that differ from the posted one, arguments out of
// range and other protocols are errors that change nothing.
func TestSlotErrors(t *testing.T) {
	segs := openGroup(t, testOptions(t, 2))
	send, recv := pairConns(t, segs, protocols.Simple)
	payload := send.stepPayload
	want := func(what string, err error, text string) { t.Helper(); wantErr(t, what, err, text) }

	if _, err := send.Acquire(2); err != nil {
		t.Fatal(err)
	}
	if err := send.Post(100); err != nil {
		t.Fatal(err)
	}
	_, err := recv.RecvSlot(0, 100)
	want("RecvSlot(0, 100) of a 2-step slice", err, "local rank 0 sent a slice of 100 bytes in 2 steps, want 100 bytes in 1")
	if _, err := recv.Wait(2, 100); err != nil {
		t.Fatal(err)
	}
	if err := recv.Release(); err != nil {
		t.Fatal(err)
	}

	if err := send.PostSlot(100); err != nil { // no SendSlot: legal
		t.Fatal(err)
	}
	_, err = recv.RecvSlot(0, 64)
	want("RecvSlot(0, 64) of 100 bytes", err, "sent a slice of 100 bytes in 1 steps, want 64 bytes in 1")

	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"SendSlot(-1)", func() error { _, err := send.SendSlot(-1); return err }, "SendSlot: ahead -1: want 0..7"},
		{"SendSlot(8)", func() error { _, err := send.SendSlot(8); return err }, "SendSlot: ahead 8: want 0..7"},
		{"RecvSlot(-1, 100)", func() error { _, err := recv.RecvSlot(-1, 100); return err }, "RecvSlot: ahead -1: want 0..7"},
		{"RecvSlot(8, 100)", func() error { _, err := recv.RecvSlot(8, 100); return err }, "RecvSlot: ahead 8: want 0..7"},
		{"RecvSlot(0, -1)", func() error { _, err := recv.RecvSlot(0, -1); return err }, fmt.Sprintf("RecvSlot of -1 bytes: a slot holds at most %d", payload)},
		{"RecvSlot(0, max+1)", func() error { _, err := recv.RecvSlot(0, payload+1); return err }, fmt.Sprintf("RecvSlot of %d bytes: a slot holds at most %d", payload+1, payload)},
		{"PostSlot(-1)", func() error { return send.PostSlot(-1) }, fmt.Sprintf("PostSlot of -1 bytes: a slot holds %d", payload)},
		{"PostSlot(max+1)", func() error { return send.PostSlot(payload + 1) }, fmt.Sprintf("PostSlot of %d bytes: a slot holds %d", payload+1, payload)},
		{"ReleaseSlot first", func() error { return recv.ReleaseSlot() }, "ReleaseSlot without RecvSlot: step 2 was not received"},
	} {
		want(tc.name, tc.call(), tc.want)
	}

	// None of that changed anything: the slice of 100 bytes is there.
	b, err := recv.RecvSlot(0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 100 {
		t.Fatalf("RecvSlot(0, 100) returned %d bytes", len(b))
	}
	if err := recv.ReleaseSlot(); err != nil {
		t.Fatal(err)
	}
	checkCounters(t, send, recv, 3)

	for _, p := range []protocols.Proto{protocols.LL, protocols.LL128} {
		send, recv := pairConns(t, segs, p)
		const text = "the slot API needs the Simple protocol"
		_, err := send.SendSlot(0)
		want(p.String()+" SendSlot", err, text)
		want(p.String()+" PostSlot", send.PostSlot(0), text)
		_, err = recv.RecvSlot(0, 0)
		want(p.String()+" RecvSlot", err, text)
		want(p.String()+" ReleaseSlot", recv.ReleaseSlot(), text)
	}
}

// TestSlotMixing: ring slices, slots and ring slices again on one
// connection, with data checked, and the two APIs refused while the other
// holds memory.
func TestSlotMixing(t *testing.T) {
	segs := openGroup(t, testOptions(t, 2))
	send, recv := pairConns(t, segs, protocols.Simple)
	payload := send.stepPayload
	const seed = 21
	i := 0 // the slice or slot number, for its pattern
	ring := func(nsteps, n int) {
		t.Helper()
		b, err := send.Acquire(nsteps)
		if err != nil {
			t.Fatal(err)
		}
		fillSlice(b[:n], seed, i)
		if err := send.Post(n); err != nil {
			t.Fatal(err)
		}
		got, err := recv.Wait(nsteps, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := checkSlice(got, seed, i); err != nil {
			t.Fatalf("ring slice of %d steps: %v", nsteps, err)
		}
		if err := recv.Release(); err != nil {
			t.Fatal(err)
		}
		i++
	}
	// slots sends count slots written backwards and read forwards with
	// read-ahead.
	slots := func(count int) {
		t.Helper()
		for a := count - 1; a >= 0; a-- {
			b, err := send.SendSlot(a)
			if err != nil {
				t.Fatal(err)
			}
			fillSlice(b[:100+a], seed, i+a)
		}
		for a := 0; a < count; a++ {
			if err := send.PostSlot(100 + a); err != nil {
				t.Fatal(err)
			}
		}
		for a := count - 1; a >= 0; a-- {
			b, err := recv.RecvSlot(a, 100+a)
			if err != nil {
				t.Fatal(err)
			}
			if err := checkSlice(b, seed, i+a); err != nil {
				t.Fatalf("slot %d: %v", a, err)
			}
		}
		for a := 0; a < count; a++ {
			if err := recv.ReleaseSlot(); err != nil {
				t.Fatal(err)
			}
		}
		i += count
	}

	ring(2, 5000)
	ring(2, 2*payload)
	ring(1, 7) // steps 0..4
	slots(3)   // 5..7
	slots(3)   // 8..10
	ring(4, 3*payload+1)
	checkCounters(t, send, recv, 16) // the slice started at 12, rounded up from 11
	slots(5)
	ring(2, 1) // 22..23
	ring(8, 8*payload)
	slots(1)
	checkCounters(t, send, recv, 33)

	want := func(what string, err error, text string) { t.Helper(); wantErr(t, what, err, text) }
	// A ring slice is held: no slot calls.
	if _, err := send.Acquire(1); err != nil {
		t.Fatal(err)
	}
	_, err := send.SendSlot(0)
	want("SendSlot while acquired", err, "SendSlot while 1 acquired steps are not posted")
	want("PostSlot while acquired", send.PostSlot(0), "PostSlot while 1 acquired steps are not posted")
	if err := send.Post(3); err != nil {
		t.Fatal(err)
	}
	if _, err := recv.Wait(1, 3); err != nil {
		t.Fatal(err)
	}
	_, err = recv.RecvSlot(0, 3)
	want("RecvSlot while received", err, "RecvSlot while 1 received steps are not released")
	want("ReleaseSlot while received", recv.ReleaseSlot(), "ReleaseSlot while 1 received steps are not released")
	if err := recv.Release(); err != nil {
		t.Fatal(err)
	}

	// Slots are held: no ring calls until the last is posted or released.
	for _, ahead := range []int{1, 0} {
		if _, err := send.SendSlot(ahead); err != nil {
			t.Fatal(err)
		}
	}
	_, err = send.Acquire(1)
	want("Acquire while slots are held", err, "Acquire of 1 steps while 2 slots from SendSlot are not posted")
	want("Post while slots are held", send.Post(0), "Post without Acquire")
	if err := send.PostSlot(4); err != nil {
		t.Fatal(err)
	}
	_, err = send.Acquire(1)
	want("Acquire while a slot is held", err, "Acquire of 1 steps while 1 slots from SendSlot are not posted")
	if err := send.PostSlot(4); err != nil {
		t.Fatal(err)
	}
	for _, ahead := range []int{1, 0} {
		if _, err := recv.RecvSlot(ahead, 4); err != nil {
			t.Fatal(err)
		}
	}
	_, err = recv.Wait(1, 4)
	want("Wait while slots are held", err, "Wait while 2 slots from RecvSlot are not released")
	want("Release while slots are held", recv.Release(), "Release without Wait")
	if err := recv.ReleaseSlot(); err != nil {
		t.Fatal(err)
	}
	_, err = recv.Wait(1, 4)
	want("Wait while a slot is held", err, "Wait while 1 slots from RecvSlot are not released")
	if err := recv.ReleaseSlot(); err != nil {
		t.Fatal(err)
	}
	ring(2, 10) // 36..37
	checkCounters(t, send, recv, 38)
}

// TestSlotStress runs a sender and a receiver goroutine over many steps,
// each with random ahead up to a bound; the bounds add up to at most 7, as
// they must for both not to wait on each other (a sender waiting for a
// release while the receiver waits for a slot the sender has not posted).
func TestSlotStress(t *testing.T) {
	steps := uint64(1500)
	if testing.Short() {
		steps = 300
	}
	for _, maxSend := range []int{0, 3, 5, 7} {
		t.Run(fmt.Sprintf("sendAhead=%d", maxSend), func(t *testing.T) {
			segs := openGroup(t, testOptions(t, 2))
			send, recv := pairConns(t, segs, protocols.Simple)
			payload := send.stepPayload
			seed := uint64(40 + maxSend)
			fail := func(err error) error { // stop the other side
				segs[0].Fail(err)
				segs[1].Fail(err)
				return err
			}
			var wg sync.WaitGroup
			var sendErr, recvErr error
			wg.Add(2)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, 1))
				var written [protocols.NSteps]bool
				for s := uint64(0); s < steps; {
					a := min(rng.IntN(maxSend+1), int(steps-1-s))
					b, err := send.SendSlot(a)
					if err != nil {
						sendErr = fail(fmt.Errorf("step %d: SendSlot(%d): %w", s, a, err))
						return
					}
					step := s + uint64(a)
					n := slotSize(step, payload)
					if w := &written[step%protocols.NSteps]; !*w {
						fillSlice(b[:n], seed, int(step))
						*w = true
					} else if err := checkSlice(b[:n], seed, int(step)); err != nil {
						sendErr = fail(fmt.Errorf("SendSlot(%d) of step %d again: %w", a, step, err))
						return
					}
					for m := rng.IntN(3); m > 0 && written[s%protocols.NSteps]; m-- {
						if err := send.PostSlot(slotSize(s, payload)); err != nil {
							sendErr = fail(fmt.Errorf("step %d: PostSlot: %w", s, err))
							return
						}
						written[s%protocols.NSteps] = false
						s++
					}
				}
			}()
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(seed, 2))
				var read [protocols.NSteps]bool
				for r := uint64(0); r < steps; {
					a := min(rng.IntN(protocols.NSteps-maxSend), int(steps-1-r))
					step := r + uint64(a)
					n := slotSize(step, payload)
					b, err := recv.RecvSlot(a, n)
					if err == nil && len(b) != n {
						err = fmt.Errorf("%d bytes", len(b))
					}
					if err == nil {
						err = checkSlice(b, seed, int(step))
					}
					if err != nil {
						recvErr = fail(fmt.Errorf("step %d: RecvSlot(%d, %d): %w", r, a, n, err))
						return
					}
					read[step%protocols.NSteps] = true
					for m := rng.IntN(3); m > 0 && read[r%protocols.NSteps]; m-- {
						if err := recv.ReleaseSlot(); err != nil {
							recvErr = fail(fmt.Errorf("step %d: ReleaseSlot: %w", r, err))
							return
						}
						read[r%protocols.NSteps] = false
						r++
					}
				}
			}()
			wg.Wait()
			if sendErr != nil || recvErr != nil {
				t.Fatalf("sender: %v\nreceiver: %v", sendErr, recvErr)
			}
			checkCounters(t, send, recv, steps)
		})
	}
}

// TestSlotFailWakes: with futex sleeps of an hour, only the wake of Fail or
// Close can end a SendSlot or PostSlot waiting for a release and a RecvSlot
// waiting for a post, whether or not they already hold slots; later calls
// return the same error.
func TestSlotFailWakes(t *testing.T) {
	setFutexTimeout(t, time.Hour)
	for _, how := range []string{"Fail", "Close"} {
		// free: nothing held; held: the sender holds step 7 and the
		// receiver step 0; post: the sender waits in PostSlot (with the
		// FIFO full, the receiver has nothing to wait for).
		for _, mode := range []string{"free", "held", "post"} {
			t.Run(how+"/"+mode, func(t *testing.T) {
				o := testOptions(t, 2)
				o.Spin = 0
				segs := openGroup(t, o)
				send, recv := pairConns(t, segs, protocols.Simple)
				for k := 0; k < protocols.NSteps-1; k++ {
					if err := send.PostSlot(8); err != nil {
						t.Fatal(err)
					}
				}
				var sendCh, recvCh chan slotResult
				switch mode {
				case "free":
					sendCh = goSendSlot(send, 1) // step 8
				case "held":
					if _, err := send.SendSlot(0); err != nil {
						t.Fatal(err)
					}
					if _, err := recv.RecvSlot(0, 8); err != nil {
						t.Fatal(err)
					}
					sendCh = goSendSlot(send, 2) // step 9
				case "post":
					if err := send.PostSlot(8); err != nil {
						t.Fatal(err)
					}
					sendCh = make(chan slotResult, 1)
					go func() { sendCh <- slotResult{err: send.PostSlot(8)} }() // step 8
				}
				notYet(t, sendCh, "the sender")
				awaitFlag(t, send.headWait)
				if mode != "post" {
					recvCh = make(chan slotResult, 1)
					go func() { b, err := recv.RecvSlot(7, 8); recvCh <- slotResult{b, err} }() // step 7: not posted
					notYet(t, recvCh, "RecvSlot")
					awaitFlag(t, recv.tailWait)
				}
				if mode == "free" { // a waiting call keeps the connection busy
					const busy = "used by two goroutines at once"
					if _, err := send.SendSlot(0); err == nil || !strings.Contains(err.Error(), busy) {
						t.Errorf("SendSlot while another waits = %v, want an error containing %q", err, busy)
					}
					if _, err := recv.RecvSlot(0, 8); err == nil || !strings.Contains(err.Error(), busy) {
						t.Errorf("RecvSlot while another waits = %v, want an error containing %q", err, busy)
					}
				}
				cause, wantErr := errors.New("rank 5 died"), error(nil)
				for _, s := range segs {
					if how == "Fail" {
						s.Fail(cause)
						wantErr = cause
					} else {
						if err := s.Close(); err != nil {
							t.Fatal(err)
						}
						wantErr = engine.ErrClosed
					}
				}
				if r := result(t, sendCh, "the sender"); !errors.Is(r.err, wantErr) {
					t.Errorf("the sender after %s = %v, want %v", how, r.err, wantErr)
				}
				if recvCh != nil {
					if r := result(t, recvCh, "RecvSlot"); !errors.Is(r.err, wantErr) {
						t.Errorf("RecvSlot after %s = %v, want %v", how, r.err, wantErr)
					}
				}
				if _, err := send.SendSlot(0); !errors.Is(err, wantErr) {
					t.Errorf("a later SendSlot = %v, want %v", err, wantErr)
				}
				if mode == "post" {
					if err := send.PostSlot(8); !errors.Is(err, wantErr) {
						t.Errorf("a later PostSlot = %v, want %v", err, wantErr)
					}
				}
				if _, err := recv.RecvSlot(0, 8); !errors.Is(err, wantErr) {
					t.Errorf("a later RecvSlot = %v, want %v", err, wantErr)
				}
			})
		}
	}
}

// TestSlotNoAllocs: a slot round trip allocates nothing.
func TestSlotNoAllocs(t *testing.T) {
	segs := openGroup(t, testOptions(t, 2))
	send, recv := pairConns(t, segs, protocols.Simple)
	var err error
	allocs := testing.AllocsPerRun(100, func() {
		var b []byte
		if b, err = send.SendSlot(1); err != nil {
			return
		}
		b[0] = 1
		if err = send.PostSlot(64); err != nil {
			return
		}
		if err = send.PostSlot(64); err != nil {
			return
		}
		if _, err = recv.RecvSlot(1, 64); err != nil {
			return
		}
		if _, err = recv.RecvSlot(0, 64); err != nil {
			return
		}
		if err = recv.ReleaseSlot(); err != nil {
			return
		}
		err = recv.ReleaseSlot()
	})
	if err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Errorf("a slot round trip allocates %v times", allocs)
	}
}

// wantErr fails the test unless err is an error whose text contains text.
func wantErr(t *testing.T, what string, err error, text string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), text) {
		t.Fatalf("%s = %v, want an error containing %q", what, err, text)
	}
}
