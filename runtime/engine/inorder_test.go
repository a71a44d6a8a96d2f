package engine

import (
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// TestInOrder: lanes run one after the other only when the schedule says
// they may, every Wait names a lower lane, and no lane posts more than a
// FIFO's worth of slices (16 int32 per slice here).
func TestInOrder(t *testing.T) {
	send := func(count int64) algos.Op { return algos.Op{RecvFrom: algos.NoPeer, SendTo: 1, Count: count} }
	recv := algos.Op{RecvFrom: 1, SendTo: algos.NoPeer, Count: 16}
	two := func(sendCount int64, waits []algos.Wait, ordered bool) algos.Schedule {
		return algos.Schedule{Lanes: []algos.Lane{{Ops: []algos.Op{send(sendCount)}}, {Ops: []algos.Op{recv}, Waits: waits}}, InOrder: ordered}
	}
	for _, c := range []struct {
		name string
		s    algos.Schedule
		want bool
	}{
		{"not marked", two(16, nil, false), false},
		{"one slice", two(16, nil, true), true},
		{"a FIFO's worth", two(8*16, nil, true), true},
		{"more than a FIFO", two(8*16+1, nil, true), false},
		{"wait on a lower lane", two(16, []algos.Wait{{At: 0, Lane: 0, Done: 1}}, true), true},
		{"wait on a higher lane", algos.Schedule{Lanes: []algos.Lane{{Ops: []algos.Op{send(16)}, Waits: []algos.Wait{{At: 0, Lane: 1, Done: 1}}}, {Ops: []algos.Op{recv}}}, InOrder: true}, false},
	} {
		task := &Task{Sched: c.s, Type: reduce.Int32, StepPayload: 64, ChunkSteps: 1, SliceSteps: 1}
		if got := inOrder(task); got != c.want {
			t.Errorf("%s: in order %v, want %v", c.name, got, c.want)
		}
	}
}
