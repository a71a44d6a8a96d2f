package comm

import (
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
)

// TestBusyLanes: the lanes a rank runs at once, as shm.Segment.SetLanes
// weighs them, for the algorithms of issue 13 beside the ring and PAT.
func TestBusyLanes(t *testing.T) {
	one := algos.NewTopo([]string{"a", "a"})
	p := algos.Part{Count: 1 << 12, Chunk: 1 << 10, Align: 4}
	for _, c := range []struct {
		name string
		s    algos.Schedule
		want int
	}{
		{"ring all-reduce", algos.Single(algos.RingAllReduce(0, 2, p)), 1},
		{"pat reduce-scatter", algos.Schedule{Slots: algos.PatReduceScatter(0, 2, p.Count, p)}, 1},
		{"nvls reduce-scatter", algos.NvlsReduceScatter(0, one, p.Count, p), 2},
		{"collnet all-reduce", algos.CollNetAllReduce(0, one, 2, p), 4},
		{"empty", algos.Schedule{}, 0},
	} {
		if got := busyLanes(c.s); got != c.want {
			t.Errorf("%s: %d busy lanes, want %d", c.name, got, c.want)
		}
	}
	k := &coll{plan: &plan{lanes: 4}}
	if got := waitingLanes([]*coll{{plan: &plan{}}, k}); got != 4 {
		t.Errorf("waitingLanes: %d, want 4", got)
	}
}
