package tcp

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/protocols"
)

// TestEagerEverySize: two ranks send each other LL and LL128 slices of
// every size from 0 bytes to a full slice (of 1 step, as the engine posts
// them, and of 2 and 8), both directions at once, alternately staged
// (Acquire, Post) and by reference (PostRef from the caller's buffer,
// which the test overwrites as soon as PostRef returns: the frame must
// have left it), received alternately with Wait and WaitInto. Every byte
// must arrive as sent, over 1 socket (inline receives) and 2 (reader
// goroutines).
func TestEagerEverySize(t *testing.T) {
	for _, p := range []protocols.Proto{protocols.LL, protocols.LL128} {
		for _, nsocks := range []int{1, 2} {
			for _, nsteps := range []int{1, 2, 8} {
				t.Run(fmt.Sprintf("%s/socks=%d/steps=%d", p, nsocks, nsteps), func(t *testing.T) {
					testEagerEverySize(t, p, nsocks, nsteps)
				})
			}
		}
	}
}

func testEagerEverySize(t *testing.T, p protocols.Proto, nsocks, nsteps int) {
	a, b, _ := pair(t, nsocks, nil)
	const stepBytes = 1024
	sa, rb := connectProto(t, a, b, p, stepBytes)
	sb, ra := connectProto(t, b, a, p, stepBytes)
	type slice struct{ nsteps, size int }
	var plan []slice
	for size := 0; size <= nsteps*p.Payload(stepBytes); size += 1 + size/7 {
		plan = append(plan, slice{nsteps, size})
	}
	run := func(seed int, s Sender, r Receiver, peerSeed int) error {
		own := make([]byte, 8*p.Payload(stepBytes))
		for i, sl := range plan {
			buf, err := s.Acquire(sl.nsteps)
			if err != nil {
				return err
			}
			pl := fill(seed+i, sl.size)
			if i%2 == 0 {
				err = s.Post(copy(buf, pl))
			} else {
				ref := own[:copy(own, pl)]
				err = s.(*EagerSendConn).PostRef(ref)
				clear(ref) // the frame has left the caller's memory
			}
			if err != nil {
				return fmt.Errorf("send slice %d (%d steps, %d bytes): %w", i, sl.nsteps, sl.size, err)
			}
			want := fill(peerSeed+i, sl.size)
			way := receiveWays[i/2%len(receiveWays)]
			got, err := way.recv(r, sl.nsteps, sl.size)
			if err != nil {
				return fmt.Errorf("receive slice %d (%d steps, %d bytes) with %s: %w", i, sl.nsteps, sl.size, way.name, err)
			}
			if !bytes.Equal(got, want) {
				return fmt.Errorf("slice %d (%d steps, %d bytes) received with %s differs", i, sl.nsteps, sl.size, way.name)
			}
		}
		return nil
	}
	errc := make(chan error, 2)
	go func() { errc <- run(1, sa, ra, 2) }()
	go func() { errc <- run(2, sb, rb, 1) }()
	awaitAll(t, errc, 2, "an exchange of slices both ways")
}

// TestEagerSendTooBig: a slice larger than the steps acquired for it fails
// the send, naming the sizes, instead of overrunning the peer's FIFO slot.
func TestEagerSendTooBig(t *testing.T) {
	a, b, _ := pair(t, 1, nil)
	s, _ := connectProto(t, a, b, protocols.LL128, 1024)
	if _, err := s.Acquire(1); err != nil {
		t.Fatal(err)
	}
	room := protocols.LL128.Payload(1024)
	err := s.(*EagerSendConn).PostRef(make([]byte, room+1))
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("holds at most %d", room)) {
		t.Fatalf("PostRef of %d bytes into 1 step: %v, want an error saying it holds at most %d", room+1, err, room)
	}
}

// TestEagerPeerGone: a send by reference to a peer that has closed its
// end fails with an error naming the peer once the socket says so, instead
// of blocking: the slices are larger than the sockets hold, so a write
// that nobody reads would block forever.
func TestEagerPeerGone(t *testing.T) {
	a, b, _ := pair(t, 1, nil)
	stepBytes := 1 << 21
	s, r := connectProto(t, a, b, protocols.LL128, stepBytes)
	r.Close()
	big := make([]byte, protocols.LL128.Payload(stepBytes))
	err := returns(t, "sends to a closed peer", func() error {
		for {
			if _, err := s.Acquire(1); err != nil {
				return err
			}
			if err := s.(*EagerSendConn).PostRef(big); err != nil {
				return err
			}
		}
	})
	if !strings.Contains(err.Error(), "send to") || !strings.Contains(err.Error(), "rank 1") {
		t.Fatalf("send to a closed peer: %v, want an error naming the send to rank 1", err)
	}
}

// TestWaitIntoDirect: on an inline connection, a slice still in the socket
// goes straight into WaitInto's buffer (no FIFO slot, no copy), in every
// size up to a full step, and the slices after it (through WaitInto or
// Wait) find the FIFO as a Release would have left it; with 2 sockets
// (reader goroutines) WaitInto copies from the FIFO.
func TestWaitIntoDirect(t *testing.T) {
	for _, nsocks := range []int{1, 2} {
		t.Run(fmt.Sprintf("socks=%d", nsocks), func(t *testing.T) {
			a, b, _ := pair(t, nsocks, nil)
			const stepBytes = 1024
			s, r := connectProto(t, a, b, protocols.LL128, stepBytes)
			max := protocols.LL128.Payload(stepBytes)
			for i := 0; i <= max; i += 1 + i/5 {
				want := fill(i, i)
				if err := sendOne(s, want); err != nil {
					t.Fatal(err)
				}
				way := receiveWays[i%len(receiveWays)]
				got, err := way.recv(r, 1, len(want))
				if err != nil {
					t.Fatalf("%d bytes with %s: %v", i, way.name, err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%d bytes with %s differ", i, way.name)
				}
			}
			into := 0
			for i := 0; i <= max; i += 1 + i/5 {
				if receiveWays[i%len(receiveWays)].name == "WaitInto" {
					into++
				}
			}
			got := int(r.(*RecvConn).directs.Load())
			want := 0
			if nsocks == 1 {
				want = into // nothing else reads the socket: every WaitInto reads it
			}
			if got != want {
				t.Fatalf("%d of %d WaitInto calls read straight into the caller's buffer, want %d", got, into, want)
			}
		})
	}
}

// TestEagerStageRotates: successive staged slices of one step each go
// through successive steps of the stage, as through a FIFO, and wrap
// after protocols.NSteps (see Acquire for why).
func TestEagerStageRotates(t *testing.T) {
	a, b, _ := pair(t, 1, nil)
	s, r := connectProto(t, a, b, protocols.LL128, 1024)
	seen := map[*byte]int{}
	var first *byte
	for i := range protocols.NSteps + 1 {
		buf, err := s.Acquire(1)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = &buf[0]
		}
		if j, ok := seen[&buf[0]]; ok && i < protocols.NSteps {
			t.Fatalf("slice %d is staged where slice %d was", i, j)
		}
		if i == protocols.NSteps && &buf[0] != first {
			t.Errorf("slice %d is not staged where slice 0 was: the stage does not wrap", i)
		}
		seen[&buf[0]] = i
		if err := s.Post(copy(buf, fill(i, 100))); err != nil {
			t.Fatal(err)
		}
		got, err := r.Wait(1, 100)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, fill(i, 100)) {
			t.Fatalf("slice %d arrived changed", i)
		}
		if err := r.Release(); err != nil {
			t.Fatal(err)
		}
	}
}
