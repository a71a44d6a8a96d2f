//go:build linux

package shm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sync"

	"github.com/seed-760dd1f1/cc/protocols"
)

// sliceShape draws the next slice of a stream: 1 or 2 steps and 1..max
// bytes, with many tiny slices, many of any size and some full ones.
func sliceShape(r *rand.Rand, payload int) (nsteps, n int) {
	nsteps = 1 + r.IntN(2)
	limit := nsteps * payload
	switch x := r.IntN(10); {
	case x < 4:
		n = 1 + r.IntN(min(64, limit))
	case x < 8:
		n = 1 + r.IntN(limit)
	case x < 9:
		n = limit
	default:
		n = limit - r.IntN(min(8, limit))
	}
	return nsteps, n
}

// fillSlice writes slice i of a stream: a pattern of the stream, the
// slice and the position, so a stale or misplaced byte shows.
func fillSlice(b []byte, seed uint64, i int) {
	key := seed*0x9e3779b97f4a7c15 ^ uint64(i)*0xbf58476d1ce4e5b9
	for j := range b {
		b[j] = byte(key>>(8*(j&7))) + byte(j>>3)
	}
}

func checkSlice(b []byte, seed uint64, i int) error {
	want := make([]byte, len(b))
	fillSlice(want, seed, i)
	for j := range b {
		if b[j] != want[j] {
			return fmt.Errorf("slice %d (%d bytes): byte %d = %#x, want %#x", i, len(b), j, b[j], want[j])
		}
	}
	return nil
}

// sendStream posts count slices of stream seed.
func sendStream(c *SendConn, seed uint64, count int) error {
	r := rand.New(rand.NewPCG(seed, 1))
	for i := 0; i < count; i++ {
		nsteps, n := sliceShape(r, c.stepPayload)
		b, err := c.Acquire(nsteps)
		if err != nil {
			return fmt.Errorf("slice %d: %w", i, err)
		}
		if len(b) != nsteps*c.stepPayload {
			return fmt.Errorf("slice %d: Acquire(%d) returned %d bytes, want %d", i, nsteps, len(b), nsteps*c.stepPayload)
		}
		fillSlice(b[:n], seed, i)
		if err := c.Post(n); err != nil {
			return fmt.Errorf("slice %d: %w", i, err)
		}
	}
	return nil
}

// recvStream receives and checks count slices of stream seed.
func recvStream(c *RecvConn, seed uint64, count int) error {
	r := rand.New(rand.NewPCG(seed, 1))
	for i := 0; i < count; i++ {
		nsteps, n := sliceShape(r, c.stepPayload)
		b, err := c.Wait(nsteps, n)
		if err != nil {
			return fmt.Errorf("slice %d: %w", i, err)
		}
		if len(b) != n {
			return fmt.Errorf("slice %d: Wait returned %d bytes, want %d", i, len(b), n)
		}
		if err := checkSlice(b, seed, i); err != nil {
			return err
		}
		if err := c.Release(); err != nil {
			return fmt.Errorf("slice %d: %w", i, err)
		}
	}
	return nil
}

func streamSeed(from int, p protocols.Proto) uint64 { return uint64(from)*16 + uint64(p) + 1 }

// runRing runs local rank r's part of a ring over every protocol at once:
// it streams to r+1 and from r-1 on channel p for protocol p, each end in
// its own goroutine.
func runRing(s *Segment, r, n, count int) error {
	var wg sync.WaitGroup
	errs := make([]error, 2*protocols.NumProtos)
	next, prev := (r+1)%n, (r+n-1)%n
	for p := protocols.Proto(0); int(p) < protocols.NumProtos; p++ {
		send, err := s.Send(int(p), r, next, p)
		if err != nil {
			return err
		}
		recv, err := s.Recv(int(p), prev, r, p)
		if err != nil {
			return err
		}
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := sendStream(send, streamSeed(r, p), count); err != nil {
				errs[2*p] = fmt.Errorf("%v send to %d: %w", p, next, err)
			}
		}()
		go func() {
			defer wg.Done()
			if err := recvStream(recv, streamSeed(prev, p), count); err != nil {
				errs[2*p+1] = fmt.Errorf("%v receive from %d: %w", p, prev, err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// childMain is a local rank in its own process; the test drives it over
// stdio (see child).
func childMain(mode string) int {
	cfg, err := readChildConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "config:", err)
		return 2
	}
	in := bufio.NewReader(os.Stdin)
	barrier := func(ctx context.Context) error {
		fmt.Println("barrier")
		line, err := in.ReadString('\n')
		if err != nil {
			return fmt.Errorf("barrier: %w", err)
		}
		if line != "go\n" {
			return fmt.Errorf("barrier: told %q", line)
		}
		return nil
	}
	s, err := Open(context.Background(), cfg.options(barrier))
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 3
	}
	defer s.Close()
	switch mode {
	case "ring":
		err = runRing(s, cfg.rank, cfg.nranks, cfg.count)
		if err == nil {
			fmt.Println("ok")
		}
	case "idle": // until killed or stdin closes
		fmt.Println("ready")
		io.Copy(io.Discard, in)
	case "echo":
		err = benchEcho(s, in)
	case "sink":
		err = benchSink(s, in)
	case "oneshot":
		err = benchOneShotPeer(s, in)
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, mode+":", err)
		return 4
	}
	return 0
}
