//go:build linux

package shm

import (
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/seed-760dd1f1/cc/protocols"
)

// TestMcastOneWriterManyReaders: local rank 0 writes 100 slices of
// various sizes once each into its multicast region; ranks 1..4 read every
// one of them in order. The writer's credit is the slowest reader's: with
// NSteps slots it can never be more than NSteps slices ahead of any.
func TestMcastOneWriterManyReaders(t *testing.T) {
	const n, slices = 5, 100
	o := testOptions(t, n)
	o.McastStep = 1024
	segs := openGroup(t, o)
	w, err := segs[0].McastSend(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	read := make([]int, n) // slices each reader has released, for the credit check
	var mu sync.Mutex
	for r := 1; r < n; r++ {
		rc, err := segs[r].McastRecv(1, 0, r)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range slices {
				nb := 8 * (1 + i%128)
				b, err := rc.Wait(1, nb)
				if err != nil {
					errs[r] = err
					return
				}
				for k := 0; k < nb; k += 8 {
					if got := binary.LittleEndian.Uint64(b[k:]); got != uint64(i*1000+k) {
						errs[r] = fmt.Errorf("reader %d slice %d byte %d: %d, want %d", r, i, k, got, i*1000+k)
						return
					}
				}
				mu.Lock()
				read[r]++
				mu.Unlock()
				if err := rc.Release(); err != nil {
					errs[r] = err
					return
				}
			}
		}()
	}
	for i := range slices {
		b, err := w.Acquire(1)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		for r := 1; r < n; r++ {
			if i-read[r] > protocols.NSteps {
				t.Errorf("slice %d acquired while reader %d has released only %d", i, r, read[r])
			}
		}
		mu.Unlock()
		nb := 8 * (1 + i%128)
		for k := 0; k < nb; k += 8 {
			binary.LittleEndian.PutUint64(b[k:], uint64(i*1000+k))
		}
		if err := w.Post(nb); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Errorf("reader %d: %v", r, err)
		}
	}
}

// TestMcastRules: a rank writes only its own region, reads only others',
// a slice larger than a slot fails, and a segment without multicast
// regions says so.
func TestMcastRules(t *testing.T) {
	o := testOptions(t, 2)
	o.McastStep = 256
	segs := openGroup(t, o)
	if _, err := segs[0].McastSend(0, 1); err == nil || !strings.Contains(err.Error(), "writes only its own") {
		t.Errorf("McastSend of another rank's region: %v", err)
	}
	if _, err := segs[0].McastRecv(0, 0, 0); err == nil || !strings.Contains(err.Error(), "cannot read its own") {
		t.Errorf("McastRecv of its own region: %v", err)
	}
	w, err := segs[0].McastSend(0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Acquire(1); err != nil {
		t.Fatal(err)
	}
	if err := w.Post(257); err == nil || !strings.Contains(err.Error(), "Post of 257 bytes") {
		t.Errorf("Post beyond a slot: %v", err)
	}

	plain := openGroup(t, testOptions(t, 2))
	if _, err := plain[0].McastSend(0, 0); err == nil || !strings.Contains(err.Error(), "has no multicast regions") {
		t.Errorf("McastSend without regions: %v", err)
	}
}

// TestMcastDirTooSmall: a multicast region that does not fit in the
// directory fails when it is opened, naming NCCL_NVLS_CHUNKSIZE, instead
// of a SIGBUS on first touch.
func TestMcastDirTooSmall(t *testing.T) {
	dir := mountTmpfs(t, 0, "size=1m")
	o := testOptions(t, 2)
	o.Dir = dir
	o.McastStep = 256 << 10 // 2 MiB regions
	segs := openGroup(t, o)
	_, err := segs[0].McastSend(0, 0)
	if err == nil || !strings.Contains(err.Error(), "cannot hold the 2.0 MiB of multicast region of local rank 0") ||
		!strings.Contains(err.Error(), "NCCL_NVLS_CHUNKSIZE") {
		t.Errorf("McastSend of a 2 MiB region in 1 MiB: %v, want an error naming the region and NCCL_NVLS_CHUNKSIZE", err)
	}
	if _, err := segs[1].McastRecv(0, 0, 1); err == nil || !strings.Contains(err.Error(), "NCCL_NVLS_CHUNKSIZE") {
		t.Errorf("McastRecv of a 2 MiB region in 1 MiB: %v", err)
	}
}
