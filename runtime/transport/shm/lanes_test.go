//go:build linux

package shm

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestSetLanes: waits spin long only while the local ranks' lanes do not
// outnumber the cores.
func TestSetLanes(t *testing.T) {
	for _, c := range []struct {
		ranks, cores, lanes int
		long                bool
	}{
		{2, 2, 1, true},  // the ring on 2 cores
		{2, 2, 0, true},  // no lanes counts as one
		{2, 2, 2, false}, // NVLS reduce-scatter: 4 lanes on 2 cores
		{2, 2, 4, false}, // CollNet Direct all-reduce
		{2, 8, 4, true},
		{3, 2, 1, false}, // the ranks alone outnumber the cores
	} {
		o := testOptions(t, c.ranks)
		o.Cores = c.cores
		s, err := newSegment(o)
		if err != nil {
			t.Fatal(err)
		}
		s.SetLanes(c.lanes)
		if got := s.spinsLong(); got != c.long {
			t.Errorf("%d ranks, %d cores, %d lanes: spins long %v, want %v", c.ranks, c.cores, c.lanes, got, c.long)
		}
	}
}

// TestStreamCrowded streams both ways between two goroutine ranks while
// the segment counts more lanes than cores: every wait polls a few times,
// then yields and sleeps, and no data is lost.
func TestStreamCrowded(t *testing.T) {
	count := 2000
	if testing.Short() {
		count = 200
	}
	o := testOptions(t, 2)
	o.Cores, o.Spin = 2, time.Millisecond
	segs := openGroup(t, o)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for r := range segs {
		segs[r].SetLanes(4)
		wg.Add(1)
		go func() { defer wg.Done(); errs[r] = runRing(segs[r], r, 2, count) }()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Error(fmt.Errorf("local rank %d: %w", r, err))
		}
	}
}
