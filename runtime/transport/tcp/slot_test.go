package tcp

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/protocols"
)

// slotNoise is random bytes; step k's content is a window of it starting
// at an offset that depends on k, so that neighbouring steps differ.
var slotNoise = func() []byte {
	b := make([]byte, 1<<20+8192)
	rand.NewChaCha8([32]byte{7}).Read(b)
	return b
}()

// slotData is the content of step k: stepBytes bytes, of which the first
// slotSize(k, stepBytes) are sent.
func slotData(k, stepBytes int) []byte {
	off := k * 97 % 8192
	return slotNoise[off : off+stepBytes]
}

// slotSize is the size step k is posted with: 0 to stepBytes.
func slotSize(k, stepBytes int) int { return k * 7919 % (stepBytes + 1) }

// hangGuard is how long a test waits for something that must happen
// before it calls it a hang; it bounds failures, never the expected path.
const hangGuard = 20 * time.Second

// returns runs f and fails the test if it has not returned within
// hangGuard; otherwise it returns f's error.
func returns(t *testing.T, what string, f func() error) error {
	t.Helper()
	errc := make(chan error, 1)
	go func() { errc <- f() }()
	select {
	case err := <-errc:
		return err
	case <-time.After(hangGuard):
		t.Fatalf("%s still blocked after %v (hang guard)", what, hangGuard)
		return nil
	}
}

// TestSlotWriteAheadReadAhead: the sender writes the slots of each round
// of 8 steps ahead 7 down to 0, then goes over them again, reading back
// what it wrote and completing it (an accumulation), and posts them in
// order with sizes that vary per step; the receiver reads ahead (slot 3
// before slot 0, every slot before the first release), reads slots again,
// and releases in order. Several rounds wrap the FIFO; over 1 and 3
// sockets. Finally a slot never passed to SendSlot is posted: it carries
// what its memory held, the step 8 before it.
func TestSlotWriteAheadReadAhead(t *testing.T) {
	for _, nsocks := range []int{1, 3} {
		t.Run(fmt.Sprint(nsocks), func(t *testing.T) {
			a, b, _ := pair(t, nsocks, nil)
			const stepBytes, rounds, tail = 1024, 5, 300
			s, r := connect(t, a, b, stepBytes)
			errc := make(chan error, 1)
			go func() {
				err := slotRounds(s, stepBytes, rounds, tail)
				if err != nil {
					r.Fail(err) // wake the receiver
				}
				errc <- err
			}()
			check := func(step, ahead, n int, want []byte) {
				t.Helper()
				got, err := r.RecvSlot(ahead, n)
				if err != nil {
					t.Fatalf("step %d (ahead %d): %v", step, ahead, err)
				}
				if len(got) != n || cap(got) != n || !bytes.Equal(got, want) {
					t.Fatalf("step %d (ahead %d): got %d bytes (cap %d), want %d; equal: %v", step, ahead, len(got), cap(got), n, bytes.Equal(got, want))
				}
			}
			slot := func(step, ahead int) {
				t.Helper()
				n := slotSize(step, stepBytes)
				check(step, ahead, n, slotData(step, stepBytes)[:n])
			}
			for round := range rounds {
				base := round * protocols.NSteps
				for _, ahead := range []int{3, 7, 0, 5, 1, 6, 2, 4} {
					slot(base+ahead, ahead)
				}
				for i := range protocols.NSteps {
					slot(base+i, 0)
					if last := protocols.NSteps - 1 - i; last > 0 {
						slot(base+protocols.NSteps-1, last) // the round's last slot, again
					}
					if err := r.ReleaseSlot(); err != nil {
						t.Fatalf("step %d: release: %v", base+i, err)
					}
				}
			}
			step := rounds * protocols.NSteps
			check(step, 0, tail, slotData(step-protocols.NSteps, stepBytes)[:tail])
			if err := r.ReleaseSlot(); err != nil {
				t.Fatal(err)
			}
			if err := returns(t, "sender", func() error { return <-errc }); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// slotRounds is TestSlotWriteAheadReadAhead's sender.
func slotRounds(s *SendConn, stepBytes, rounds, tail int) error {
	const mask = 0xa5
	var mem [protocols.NSteps]*byte
	for round := range rounds {
		base := round * protocols.NSteps
		for ahead := protocols.NSteps - 1; ahead >= 0; ahead-- {
			buf, err := s.SendSlot(ahead)
			if err != nil {
				return fmt.Errorf("step %d: %w", base+ahead, err)
			}
			if len(buf) != stepBytes || cap(buf) != stepBytes {
				return fmt.Errorf("step %d: slot of %d bytes (cap %d), want %d", base+ahead, len(buf), cap(buf), stepBytes)
			}
			mem[ahead] = &buf[0]
			for j, x := range slotData(base+ahead, stepBytes) {
				buf[j] = x ^ mask
			}
		}
		for ahead := range protocols.NSteps {
			buf, err := s.SendSlot(ahead)
			if err != nil {
				return fmt.Errorf("step %d again: %w", base+ahead, err)
			}
			if &buf[0] != mem[ahead] {
				return fmt.Errorf("step %d: SendSlot(%d) again returned other memory", base+ahead, ahead)
			}
			for j, x := range slotData(base+ahead, stepBytes) {
				if buf[j] != x^mask {
					return fmt.Errorf("step %d: byte %d read back as %#x, wrote %#x", base+ahead, j, buf[j], x^mask)
				}
				buf[j] ^= mask
			}
		}
		for i := range protocols.NSteps {
			if err := s.PostSlot(slotSize(base+i, stepBytes)); err != nil {
				return fmt.Errorf("step %d: post: %w", base+i, err)
			}
		}
	}
	return s.PostSlot(tail)
}

// creditBlocked connects a Simple pair with 1 MiB steps and socket buffers
// far smaller than a step, and posts 16 full slots that the receiver does
// not release: 8 fill the receiver's FIFO, the 9th stays in the sockets,
// half written, and 7 more wait behind it in the sender's FIFO. A slot is
// free again once its frame has been written out (Acquire's rule), so the
// sender has no free slot left: SendSlot for step 16 must wait for the
// receiver to release one.
func creditBlocked(t *testing.T) (*SendConn, *RecvConn) {
	t.Helper()
	a, b, _ := pair(t, 1, nil)
	const stepBytes = 1 << 20
	s, r := connect(t, a, b, stepBytes)
	if err := s.socks[0].(*net.TCPConn).SetWriteBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	if err := r.socks[0].(*net.TCPConn).SetReadBuffer(128 << 10); err != nil {
		t.Fatal(err)
	}
	err := returns(t, "posting 16 slots", func() error {
		for k := range 2 * protocols.NSteps {
			buf, err := s.SendSlot(0)
			if err != nil {
				return fmt.Errorf("step %d: %w", k, err)
			}
			copy(buf, slotData(k, stepBytes))
			if err := s.PostSlot(stepBytes); err != nil {
				return fmt.Errorf("step %d: %w", k, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, r
}

// TestSlotCredit: with every slot taken (creditBlocked), SendSlot for the
// next step has not returned 50 ms later; once the receiver releases one
// step, it returns that step's slot; then every step arrives intact.
func TestSlotCredit(t *testing.T) {
	s, r := creditBlocked(t)
	const stepBytes = 1 << 20
	type result struct {
		buf []byte
		err error
	}
	got := make(chan result, 1)
	go func() { buf, err := s.SendSlot(0); got <- result{buf, err} }()
	select {
	case res := <-got:
		t.Fatalf("SendSlot for step 16 returned (%d bytes, %v) with no free slot: the receiver released nothing", len(res.buf), res.err)
	case <-time.After(50 * time.Millisecond):
	}
	recv := func(k int) {
		t.Helper()
		b, err := r.RecvSlot(0, stepBytes)
		if err != nil {
			t.Fatalf("step %d: %v", k, err)
		}
		if !bytes.Equal(b, slotData(k, stepBytes)) {
			t.Fatalf("step %d differs", k)
		}
		if err := r.ReleaseSlot(); err != nil {
			t.Fatalf("step %d: %v", k, err)
		}
	}
	recv(0)
	var res result
	select {
	case res = <-got:
	case <-time.After(hangGuard):
		t.Fatal("SendSlot still blocked after the receiver released a step (hang guard)")
	}
	if res.err != nil || len(res.buf) != stepBytes {
		t.Fatalf("SendSlot after a release: %d bytes, %v", len(res.buf), res.err)
	}
	copy(res.buf, slotData(16, stepBytes))
	if err := s.PostSlot(stepBytes); err != nil {
		t.Fatal(err)
	}
	for k := 1; k <= 2*protocols.NSteps; k++ {
		recv(k)
	}
}

// TestSlotErrors: out-of-range ahead and sizes, a slot of another size
// (the error names both sizes and consumes nothing) and the slot API on
// LL and LL128 connections.
func TestSlotErrors(t *testing.T) {
	a, b, _ := pair(t, 1, nil)
	const stepBytes = 256
	s, r := connect(t, a, b, stepBytes)
	recvErr := func(ahead, n int) error {
		t.Helper()
		return returns(t, fmt.Sprintf("RecvSlot(%d, %d)", ahead, n), func() error { _, err := r.RecvSlot(ahead, n); return err })
	}
	for _, ahead := range []int{-1, protocols.NSteps} {
		if _, err := s.SendSlot(ahead); err == nil {
			t.Errorf("SendSlot(%d) succeeded", ahead)
		}
		if err := recvErr(ahead, 1); err == nil {
			t.Errorf("RecvSlot(%d, 1) succeeded", ahead)
		}
	}
	for _, n := range []int{-1, stepBytes + 1} {
		if err := s.PostSlot(n); err == nil {
			t.Errorf("PostSlot(%d) succeeded with %d-byte slots", n, stepBytes)
		}
		if err := recvErr(0, n); err == nil {
			t.Errorf("RecvSlot(0, %d) succeeded with %d-byte slots", n, stepBytes)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	buf, err := s.SendSlot(0)
	if err != nil {
		t.Fatal(err)
	}
	copy(buf, slotData(0, stepBytes))
	if err := s.PostSlot(100); err != nil {
		t.Fatal(err)
	}
	err = recvErr(0, 64)
	if err == nil || !strings.Contains(err.Error(), "100 bytes") || !strings.Contains(err.Error(), "64 bytes") {
		t.Fatalf("RecvSlot(0, 64) of a 100-byte slot: got %v, want an error naming 100 and 64 bytes", err)
	}
	got, err := r.RecvSlot(0, 100)
	if err != nil || !bytes.Equal(got, slotData(0, stepBytes)[:100]) {
		t.Fatalf("RecvSlot(0, 100) after the mismatch: %d bytes, %v", len(got), err)
	}
	if err := r.ReleaseSlot(); err != nil {
		t.Fatal(err)
	}

	for _, p := range []protocols.Proto{protocols.LL, protocols.LL128} {
		ls, lr := connectProto(t, a, b, p, 1024)
		errs := map[string]error{}
		_, errs["SendSlot"] = ls.SendSlot(0)
		errs["PostSlot"] = ls.PostSlot(0)
		_, errs["RecvSlot"] = lr.RecvSlot(0, 0)
		errs["ReleaseSlot"] = lr.ReleaseSlot()
		for call, err := range errs {
			if err == nil || !strings.Contains(err.Error(), "needs the Simple protocol") {
				t.Errorf("%s on %s: got %v, want the Simple protocol error", call, p, err)
			}
		}
	}
}

// TestSlotMixedWithSlices: slices (Acquire/Post, Wait/Release) of 1 and 2
// steps, then rounds of slots, then slices again (aligned after an odd
// step), on one connection over 2 sockets, every byte checked; the slot
// API while a slice is acquired or waited for, the slice API while slots
// are open, and a slot read where the sender sent a slice are errors that
// leave the connection usable.
func TestSlotMixedWithSlices(t *testing.T) {
	a, b, _ := pair(t, 2, nil)
	const stepBytes = 128
	s, r := connect(t, a, b, stepBytes)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mustFail := func(what string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s succeeded", what)
		}
	}
	ks, kr := 0, 0 // next slice content on each side
	send := func(nsteps int, check func()) {
		t.Helper()
		buf, err := s.Acquire(nsteps)
		must(err)
		if check != nil {
			check()
		}
		p := payload(ks, nsteps*stepBytes)
		copy(buf, p)
		must(s.Post(len(p)))
		ks++
	}
	recv := func(nsteps int, check func()) {
		t.Helper()
		want := payload(kr, nsteps*stepBytes)
		got, err := r.Wait(nsteps, len(want))
		must(err)
		if !bytes.Equal(got, want) {
			t.Fatalf("slice %d differs", kr)
		}
		if check != nil {
			check()
		}
		must(r.Release())
		kr++
	}
	sendSlot := func(k, ahead int) {
		t.Helper()
		buf, err := s.SendSlot(ahead)
		must(err)
		copy(buf, slotData(k, stepBytes))
	}
	recvSlot := func(k, ahead int) {
		t.Helper()
		n := slotSize(k, stepBytes)
		got, err := r.RecvSlot(ahead, n)
		must(err)
		if !bytes.Equal(got, slotData(k, stepBytes)[:n]) {
			t.Fatalf("slot %d (ahead %d) differs", k, ahead)
		}
	}

	// Slices of 1 and 2 steps (steps 0, 2-3, 4, 5); slots are errors
	// while one is acquired or waited for.
	send(1, nil)
	send(2, nil)
	send(1, nil)
	send(1, func() {
		_, err := s.SendSlot(0)
		mustFail("SendSlot with a slice acquired", err)
		mustFail("PostSlot with a slice acquired", s.PostSlot(1))
	})
	for _, n := range []int{1, 2, 1, 1} {
		recv(n, func() {
			_, err := r.RecvSlot(0, 1)
			mustFail("RecvSlot with a slice waited for", err)
			mustFail("ReleaseSlot with a slice waited for", r.ReleaseSlot())
		})
	}

	// Three rounds of slots (steps 6-29); slices are errors while slots
	// are open.
	for round := range 3 {
		base := 100 + 8*round
		for _, ahead := range []int{2, 0, 7, 1, 3, 6, 5, 4} {
			sendSlot(base+ahead, ahead)
			if ahead == 3 && round == 1 {
				_, err := s.Acquire(1)
				mustFail("Acquire with slots open", err)
				mustFail("Post with slots open", s.Post(1))
				mustFail("PostRef with slots open", s.PostRef([]byte{1}))
			}
		}
		for i := range 8 {
			must(s.PostSlot(slotSize(base+i, stepBytes)))
		}
		for i := range 8 {
			if i%3 == 0 && i+2 < 8 {
				recvSlot(base+i+2, 2)
			}
			recvSlot(base+i, 0)
			if i == 4 && round == 1 {
				_, err := r.Wait(1, 1)
				mustFail("Wait with slots open", err)
				mustFail("Release with slots open", r.Release())
			}
			must(r.ReleaseSlot())
		}
	}
	// A slot the receiver releases without reading it (step 30).
	sendSlot(200, 0)
	must(s.PostSlot(5))
	must(r.ReleaseSlot())

	// Slices again: a 2-step slice aligns past the odd step 31. A receiver
	// expecting a slot instead gets an error, and the slice is still
	// there for Wait.
	send(2, nil)
	send(1, nil)
	send(2, nil)
	_, err := r.RecvSlot(0, stepBytes)
	if err == nil || !strings.Contains(err.Error(), "in 2 steps") {
		t.Fatalf("RecvSlot of a 2-step slice: got %v, want an error naming its 2 steps", err)
	}
	// Reading ahead past it too, rather than waiting for a slot that may
	// never come.
	err = returns(t, "RecvSlot(7) behind a 2-step slice", func() error { _, err := r.RecvSlot(7, 1); return err })
	if err == nil || !strings.Contains(err.Error(), "in 2 steps") {
		t.Fatalf("RecvSlot(7) behind a 2-step slice: got %v, want an error naming its 2 steps", err)
	}
	recv(2, nil)
	recv(1, nil)
	recv(2, nil)

	// And slots after them.
	for i := range 3 {
		sendSlot(300+i, i)
	}
	for i := range 3 {
		must(s.PostSlot(slotSize(300+i, stepBytes)))
	}
	for i := range 3 {
		recvSlot(300+i, 0)
		must(r.ReleaseSlot())
	}
}

// TestSlotStress: a sender and a receiver on their own goroutines pick
// random slots within the next 8, write each in two passes (the second
// checks the first) or read it, and post or release a random number of
// the finished ones, over 1 and 3 sockets.
func TestSlotStress(t *testing.T) {
	for _, nsocks := range []int{1, 3} {
		t.Run(fmt.Sprint(nsocks), func(t *testing.T) {
			a, b, _ := pair(t, nsocks, nil)
			const stepBytes, n = 512, 4000
			s, r := connect(t, a, b, stepBytes)
			errc := make(chan error, 1)
			go func() {
				err := stressSend(s, n, stepBytes, rand.New(rand.NewPCG(1, uint64(nsocks))))
				if err != nil {
					r.Fail(err)
				}
				errc <- err
			}()
			if err := stressRecv(r, n, stepBytes, rand.New(rand.NewPCG(2, uint64(nsocks)))); err != nil {
				t.Fatal(err)
			}
			if err := returns(t, "sender", func() error { return <-errc }); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// pick is a random slot of the next w, the oldest half of the time.
func pick(rng *rand.Rand, w int) int {
	if rng.IntN(2) == 0 {
		return 0
	}
	return rng.IntN(w)
}

func stressSend(s *SendConn, n, stepBytes int, rng *rand.Rand) error {
	const mask = 0x5a
	var state [protocols.NSteps]int // from step k: 0 untouched, 1 masked, 2 written
	for k := 0; k < n; {
		ahead := pick(rng, min(protocols.NSteps, n-k))
		buf, err := s.SendSlot(ahead)
		if err != nil {
			return fmt.Errorf("step %d: %w", k+ahead, err)
		}
		want := slotData(k+ahead, stepBytes)[:slotSize(k+ahead, stepBytes)]
		switch state[ahead] {
		case 0:
			for j, x := range want {
				buf[j] = x ^ mask
			}
		case 1:
			for j, x := range want {
				if buf[j] != x^mask {
					return fmt.Errorf("step %d: byte %d read back as %#x, wrote %#x", k+ahead, j, buf[j], x^mask)
				}
				buf[j] = x
			}
		default:
			if !bytes.Equal(buf[:len(want)], want) {
				return fmt.Errorf("step %d: slot changed between calls", k+ahead)
			}
		}
		state[ahead] = min(state[ahead]+1, 2)
		done := 0
		for done < protocols.NSteps && state[done] == 2 {
			done++
		}
		if done == 0 {
			continue
		}
		for range 1 + rng.IntN(done) {
			if err := s.PostSlot(slotSize(k, stepBytes)); err != nil {
				return fmt.Errorf("step %d: post: %w", k, err)
			}
			k++
			copy(state[:], state[1:])
			state[protocols.NSteps-1] = 0
		}
	}
	return nil
}

func stressRecv(r *RecvConn, n, stepBytes int, rng *rand.Rand) error {
	var seen [protocols.NSteps]bool // from step k
	for k := 0; k < n; {
		ahead := pick(rng, min(protocols.NSteps, n-k))
		size := slotSize(k+ahead, stepBytes)
		got, err := r.RecvSlot(ahead, size)
		if err != nil {
			return fmt.Errorf("step %d (ahead %d): %w", k+ahead, ahead, err)
		}
		if !bytes.Equal(got, slotData(k+ahead, stepBytes)[:size]) {
			return fmt.Errorf("step %d (ahead %d): %d bytes differ", k+ahead, ahead, size)
		}
		seen[ahead] = true
		done := 0
		for done < protocols.NSteps && seen[done] {
			done++
		}
		if done == 0 {
			continue
		}
		for range 1 + rng.IntN(done) {
			if err := r.ReleaseSlot(); err != nil {
				return fmt.Errorf("step %d: release: %w", k, err)
			}
			k++
			copy(seen[:], seen[1:])
			seen[protocols.NSteps-1] = false
		}
	}
	return nil
}

// TestSlotPeerFailure: a blocked RecvSlot returns an error naming the
// peer when the sender dies; a blocked SendSlot returns one when the
// receiver closes, or when the connection is failed locally.
func TestSlotPeerFailure(t *testing.T) {
	t.Run("RecvSlot", func(t *testing.T) {
		a, b, _ := pair(t, 2, nil)
		s, r := connect(t, a, b, 128)
		errc := make(chan error, 1)
		go func() { _, err := r.RecvSlot(2, 1); errc <- err }()
		for _, sock := range s.socks {
			sock.(*net.TCPConn).SetLinger(0) // reset, like a killed process
		}
		s.Close()
		err := returns(t, "RecvSlot after the sender died", func() error { return <-errc })
		if err == nil || !strings.Contains(err.Error(), "rank 0") {
			t.Fatalf("got %v, want an error naming rank 0", err)
		}
	})
	t.Run("SendSlot", func(t *testing.T) {
		s, r := creditBlocked(t)
		errc := make(chan error, 1)
		go func() { _, err := s.SendSlot(0); errc <- err }()
		time.Sleep(10 * time.Millisecond) // let it block (the test passes either way)
		r.Close()
		err := returns(t, "SendSlot after the receiver closed", func() error { return <-errc })
		if err == nil || !strings.Contains(err.Error(), "rank 1") {
			t.Fatalf("got %v, want an error naming rank 1", err)
		}
	})
	t.Run("Fail", func(t *testing.T) {
		s, _ := creditBlocked(t)
		errc := make(chan error, 1)
		go func() { _, err := s.SendSlot(0); errc <- err }()
		time.Sleep(10 * time.Millisecond)
		abort := errors.New("aborted")
		s.Fail(abort)
		if err := returns(t, "SendSlot after Fail", func() error { return <-errc }); !errors.Is(err, abort) {
			t.Fatalf("got %v, want %v", err, abort)
		}
	})
}

// TestSlotNoAllocs: a round of slots, written ahead, posted, read ahead
// and released, allocates nothing.
func TestSlotNoAllocs(t *testing.T) {
	a, b, _ := pair(t, 1, nil)
	s, r := connect(t, a, b, 256)
	var err error
	keep := func(e error) {
		if err == nil {
			err = e
		}
	}
	allocs := testing.AllocsPerRun(50, func() {
		for ahead := 3; ahead >= 0; ahead-- {
			_, e := s.SendSlot(ahead)
			keep(e)
		}
		for range 4 {
			keep(s.PostSlot(100))
		}
		for i := range 4 {
			_, e := r.RecvSlot(3-i, 100)
			keep(e)
			_, e = r.RecvSlot(0, 100)
			keep(e)
			keep(r.ReleaseSlot())
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if allocs != 0 {
		t.Fatalf("%v allocations per round of 4 slots, want 0", allocs)
	}
}
