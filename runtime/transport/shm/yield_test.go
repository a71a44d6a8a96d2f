//go:build linux

package shm

import "testing"

// TestSetYield: waits spin long only while neither the local ranks
// outnumber the cores nor SetYield is on.
func TestSetYield(t *testing.T) {
	cases := []struct {
		ranks, cores int
		yield, long  bool
	}{
		{2, 2, false, true},
		{2, 2, true, false},
		{3, 2, false, false}, // the ranks alone outnumber the cores
	}
	for _, c := range cases {
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
