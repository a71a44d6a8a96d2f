//go:build linux

package shm

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// TestArriveDepart: four local ranks run many calls; in each every rank
// gets every rank's descriptor of that call (never the one of the call
// before or after), and no rank leaves Depart before every rank has
// entered it.
func TestArriveDepart(t *testing.T) {
	const n, calls = 4, 200
	segs := openGroup(t, testOptions(t, n))
	var departed [calls + 1]atomic.Int32
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var descs []Desc
			for q := uint64(1); q <= calls; q++ {
				d := Desc{Registered: (q+uint64(r))%3 != 0, Pool: [3]uint64{uint64(r), q, 7}, Off: q * 10, Size: uint64(r)}
				got, err := segs[r].Arrive(q, d, descs)
				if err != nil {
					errs[r] = err
					return
				}
				descs = got
				for p, g := range got {
					want := Desc{Registered: (q+uint64(p))%3 != 0, Pool: [3]uint64{uint64(p), q, 7}, Off: q * 10, Size: uint64(p)}
					if g != want {
						errs[r] = fmt.Errorf("call %d: descriptor of local rank %d: %+v, want %+v", q, p, g, want)
						return
					}
				}
				departed[q].Add(1)
				if err := segs[r].Depart(q); err != nil {
					errs[r] = err
					return
				}
				if got := departed[q].Load(); got != n {
					errs[r] = fmt.Errorf("call %d: left Depart when %d of %d ranks had entered it", q, got, n)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// TestArriveFails: a rank waiting in Arrive for a rank that never comes
// returns the segment's failure.
func TestArriveFails(t *testing.T) {
	segs := openGroup(t, testOptions(t, 2))
	done := make(chan error, 1)
	go func() {
		_, err := segs[0].Arrive(1, Desc{}, nil)
		done <- err
	}()
	segs[0].Fail(errors.New("rank 1 is gone"))
	if err := <-done; err == nil || !strings.Contains(err.Error(), "rank 1 is gone") || !strings.Contains(err.Error(), "arrive of local rank 1") {
		t.Errorf("Arrive: %v, want the failure, naming the arrive of local rank 1", err)
	}
}
