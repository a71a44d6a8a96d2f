//go:build linux

package shm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/protocols"
)

// runProcessRing runs n local ranks as OS processes in a ring, every
// protocol at once, and checks that all finish with every byte intact and
// that the segment was unlinked.
func runProcessRing(t *testing.T, n, count int, buff [protocols.NumProtos]int, spin time.Duration) {
	dir := t.TempDir()
	cfg := childConfig{dir: dir, job: "ring", nranks: n, count: count, buff: buff, spin: spin}
	ranks := make([]int, n)
	for i := range ranks {
		ranks[i] = i
	}
	kids := startChildren(t, "ring", cfg, ranks)
	for i := 0; i < 2; i++ { // Open's two barriers
		if err := barrierAll(kids); err != nil {
			t.Fatalf("barrier %d: %v", i+1, err)
		}
	}
	for _, k := range kids {
		if err := k.expect("ok"); err != nil {
			t.Error(err)
		}
	}
	for _, k := range kids {
		if err := k.exit(); err != nil {
			t.Error(err)
		}
	}
	if got := listDir(t, dir); len(got) != 0 { // unlinked during the run
		t.Errorf("dir after the run: %v, want empty", got)
	}
}

// TestProcessRing: 2..8 processes on this 2-core machine, each streaming
// to the next and from the previous over all three protocols at once.
// From 3 processes on, local ranks outnumber cores and waits barely spin.
func TestProcessRing(t *testing.T) {
	for _, n := range []int{2, 3, 4, 5, 8} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			count := 6000 / n
			if testing.Short() {
				count = 600 / n
			}
			runProcessRing(t, n, count, smallBuff, 20*time.Microsecond)
		})
	}
}

// TestProcessDefaultSizes streams with NCCL's buffer sizes (4 MiB Simple,
// 512 KiB LL, 4915200 B LL128) between two processes.
func TestProcessDefaultSizes(t *testing.T) {
	count := 200
	if testing.Short() {
		count = 30
	}
	runProcessRing(t, 2, count, ncclBuff, 50*time.Microsecond)
}

// TestKilledPeer: local rank 1 (a child process) is killed while this
// process (local rank 0) waits for its data and for a free slot in its
// FIFO, for every protocol. Either the wait notices the dead process by
// itself, or Fail (as the communicator calls it when the bootstrap reports
// the death) ends it; nothing hangs and no file is left.
func TestKilledPeer(t *testing.T) {
	for _, withFail := range []bool{false, true} {
		t.Run(fmt.Sprintf("fail=%v", withFail), func(t *testing.T) {
			if withFail {
				setFutexTimeout(t, time.Hour) // only Fail can end the waits
			}
			dir := t.TempDir()
			cfg := childConfig{dir: dir, job: "killed", nranks: 2, buff: smallBuff}
			kids := startChildren(t, "idle", cfg, []int{1})
			o := cfg.options(func(context.Context) error { return barrierAll(kids) })
			s, err := Open(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if err := kids[0].expect("ready"); err != nil {
				t.Fatal(err)
			}
			if got := listDir(t, dir); len(got) != 0 {
				t.Errorf("dir: %v, want empty", got)
			}
			type result struct {
				what string
				err  error
			}
			results := make(chan result, 2*protocols.NumProtos)
			for _, p := range allProtos {
				recv, err := s.Recv(int(p), 1, 0, p)
				if err != nil {
					t.Fatal(err)
				}
				send, err := s.Send(int(p), 0, 1, p)
				if err != nil {
					t.Fatal(err)
				}
				for i := 0; i < protocols.NSteps; i++ { // fill the FIFO: nobody reads it
					if _, err := send.Acquire(1); err != nil {
						t.Fatal(err)
					}
					if err := send.Post(1); err != nil {
						t.Fatal(err)
					}
				}
				go func() {
					_, err := recv.Wait(1, 1)
					results <- result{p.String() + " Wait", err}
				}()
				go func() {
					_, err := send.Acquire(1)
					if err == nil {
						err = send.Post(1)
					}
					results <- result{p.String() + " send", err}
				}()
			}
			kids[0].cmd.Process.Kill()
			kids[0].exit()
			cause := errors.New("bootstrap: rank 1 died")
			if withFail {
				s.Fail(cause)
			}
			for i := 0; i < 2*protocols.NumProtos; i++ {
				select {
				case r := <-results:
					switch {
					case withFail && !errors.Is(r.err, cause):
						t.Errorf("%s = %v, want %v", r.what, r.err, cause)
					case !withFail && (r.err == nil || !strings.Contains(r.err.Error(), "local rank 1 (pid ") || !strings.Contains(r.err.Error(), "is gone")):
						t.Errorf("%s = %v, want an error saying local rank 1 is gone", r.what, r.err)
					}
				case <-time.After(hangGuard):
					t.Fatalf("a wait on the killed peer hangs")
				}
			}
		})
	}
}
