//go:build linux

package shm

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestSetYield: waits spin long only while neither the local ranks
// outnumber the cores nor SetYield is on.
func TestSetYield(t *testing.T) {
	for _, c := range []struct {
		ranks, cores int
		yield, long  bool
	}{
		{2, 2, false, true},
		{2, 2, true, false},
		{3, 2, false, false}, // the ranks alone outnumber the cores
	} {
		o := testOptions(t, c.ranks)
		o.Cores = c.cores
		s, err := newSegment(o)
		if err != nil {
			t.Fatal(err)
		}
		s.SetYield(c.yield)
		if got := s.spinsLong(); got != c.long {
			t.Errorf("%d ranks, %d cores, yield %v: spins long %v, want %v", c.ranks, c.cores, c.yield, got, c.long)
		}
	}
}

// TestStreamYield streams both ways between two goroutine ranks with
// SetYield on: every wait polls a few times, then yields and sleeps, and
// no data is lost.
func TestStreamYield(t *testing.T) {
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
		segs[r].SetYield(true)
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
