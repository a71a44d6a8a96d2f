package bench

import "testing"

// TestRegionIsIterModN: the region counted on from the last iteration is
// nccl-tests' iter % (maxbytes/totalnbytes) for iterations in order,
// repeated, skipped and restarted, as the warm-up, timed and check calls
// ask them.
func TestRegionIsIterModN(t *testing.T) {
	for _, c := range []struct{ total, maxBytes int64 }{{8, 8}, {8, 64}, {24, 100}, {0, 64}, {1 << 20, 1 << 20}} {
		k := &rank{}
		k.regions.reset(c.total, c.maxBytes)
		n := int64(1)
		if c.total > 0 {
			n = c.maxBytes / c.total
		}
		iters := []int{0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0, 1, 2, 7, 8, 8, 3, 100, 101, 102, 0}
		for i, it := range iters {
			if got, want := k.region(it), int64(it)%n; got != want {
				t.Fatalf("total %d, maxbytes %d: call %d (iteration %d): region %d, want %d", c.total, c.maxBytes, i, it, got, want)
			}
		}
	}
}
