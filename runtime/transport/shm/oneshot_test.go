//go:build linux

package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestOneShotSlots: ranks that write their slot (or their inline bytes),
// post, await and read every other rank's see exactly what the other
// wrote for that call,
// over many calls that reuse both slots, with more ranks than the test
// machine's cores (the waits yield and sleep).
func TestOneShotSlots(t *testing.T) {
	for _, n := range []int{2, 3, 5} {
		t.Run(fmt.Sprintf("n%d", n), func(t *testing.T) {
			const calls = 500
			runOneShotGroup(t, n, calls)
		})
	}
}

// TestOneShotSleepers: with every wait going straight to its futex sleep
// and no sleep timing out, no wake-up is lost: Post stores without a
// fence and Await wakes the sleepers only after its own wait, so a lost
// wake-up would leave a rank asleep and the test hanging until go test's
// -timeout fails it.
func TestOneShotSleepers(t *testing.T) {
	setFutexTimeout(t, time.Hour)
	old := yieldFor
	yieldFor = 0
	t.Cleanup(func() { yieldFor = old })
	for _, n := range []int{2, 3, 5} {
		t.Run(fmt.Sprintf("n%d", n), func(t *testing.T) {
			runOneShotGroup(t, n, 300) // the waits yield (here: not at all), then sleep
		})
	}
}

// runOneShotGroup runs calls one-shot calls on n ranks of one segment,
// each on its own goroutine, every rank sharing one core (waits yield,
// then sleep).
func runOneShotGroup(t *testing.T, n, calls int) {
	t.Helper()
	o := testOptions(t, n)
	o.OneShotBytes = 256
	o.Cores = 1
	segs := openGroup(t, o)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = oneShotCalls(segs[r].OneShot(), r, n, calls)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func oneShotCalls(os *OneShot, me, n, calls int) error {
	if os == nil {
		return errors.New("no one-shot area")
	}
	if os.SlotBytes() != 256 {
		return fmt.Errorf("slot of %d bytes, want 256", os.SlotBytes())
	}
	word := func(r int, k uint64, i int) uint64 { return k<<32 | uint64(r)<<16 | uint64(i) }
	if len(os.Inline(me, 1)) != OneShotInline || os.InlineBytes() != OneShotInline {
		return fmt.Errorf("inline bytes %d (InlineBytes %d), want %d", len(os.Inline(me, 1)), os.InlineBytes(), OneShotInline)
	}
	for k := uint64(1); k <= uint64(calls); k++ {
		// odd calls stage in the slots, even ones in the inline bytes
		stage := os.Slot
		if k%2 == 0 {
			stage = os.Inline
		}
		mine := stage(me, k)
		for i := 0; i+8 <= len(mine); i += 8 {
			binary.LittleEndian.PutUint64(mine[i:], word(me, k, i))
		}
		os.Post(k)
		if err := os.Await(k); err != nil {
			return err
		}
		for r := range n {
			b := stage(r, k)
			for i := 0; i+8 <= len(b); i += 8 {
				if got, want := binary.LittleEndian.Uint64(b[i:]), word(r, k, i); got != want {
					return fmt.Errorf("local rank %d, call %d: staging bytes of local rank %d at %d hold %#x, want %#x", me, k, r, i, got, want)
				}
			}
		}
	}
	return nil
}

// TestOneShotAwaitFails: a rank waiting for a rank that never posts
// returns the segment's failure, naming the rank it waited for.
func TestOneShotAwaitFails(t *testing.T) {
	o := testOptions(t, 3)
	o.OneShotBytes = 128
	segs := openGroup(t, o)
	done := make(chan error, 1)
	segs[1].OneShot().Post(1)
	go func() {
		os := segs[0].OneShot()
		os.Post(1)
		done <- os.Await(1)
	}()
	segs[0].Fail(errors.New("rank 2 is gone"))
	if err := <-done; err == nil || !strings.Contains(err.Error(), "rank 2 is gone") || !strings.Contains(err.Error(), "waiting for local rank 2") {
		t.Errorf("Await: %v, want the failure, naming local rank 2", err)
	}
}

// TestOneShotBadSize: a slot size that is not a multiple of 128 bytes is
// an Open error naming CC_ONESHOT_BYTES; none (0) means no area.
func TestOneShotBadSize(t *testing.T) {
	o := testOptions(t, 2)
	o.OneShotBytes = 100
	_, errs, _ := openAll(t, o, nil, nil)
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "CC_ONESHOT_BYTES") {
		t.Errorf("Open with a 100-byte slot: %v, want an error naming CC_ONESHOT_BYTES", errs[0])
	}
	o.OneShotBytes = 0
	segs := openGroup(t, o)
	if segs[0].OneShot() != nil {
		t.Error("OneShot() with OneShotBytes 0: want nil")
	}
}

// TestOneShotDirTooSmall: a one-shot area that does not fit the directory
// fails Open with a message naming CC_ONESHOT_BYTES, not a SIGBUS later.
func TestOneShotDirTooSmall(t *testing.T) {
	dir := mountTmpfs(t, 0, "size=1m")
	o := testOptions(t, 2)
	o.Dir = dir
	o.OneShotBytes = 1 << 20 // two ranks x two slots: 4 MiB
	_, errs, _ := openAll(t, o, nil, nil)
	if errs[0] == nil || !strings.Contains(errs[0].Error(), "CC_ONESHOT_BYTES=1048576") {
		t.Errorf("local rank 0: Open = %v, want an error naming CC_ONESHOT_BYTES", errs[0])
	}
	if got := listDir(t, dir); len(got) != 0 {
		t.Errorf("dir: %v, want empty", got)
	}
}
