package sim_test

import (
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/algos/sim"
)

// TestFanInFanOut runs a two-level tree by hand: ranks 1 and 2 send their
// Input to rank 0, which reduces both with its own and sends the result back
// to both with one fan-out Op.
func TestFanInFanOut(t *testing.T) {
	ranks := newRanks(3, 2)
	up := &algos.Fan{Recv: []int{2}, Send: []int{2}}
	scheds := []algos.Schedule{
		algos.Single([]algos.Op{{RecvFrom: 1, SendTo: 1, Src: algos.Input, Dst: algos.Output, Count: 2, Reduce: true, Fan: up}}),
		algos.Single([]algos.Op{sendOp(0, 0, 2), recvOp(0, 0, 2)}),
		algos.Single([]algos.Op{sendOp(0, 0, 2), recvOp(0, 0, 2)}),
	}
	red := sim.Reduction{Op: func(a, b int64) int64 { return a*10 + b }} // order shows
	stats, err := sim.RunSchedules(ranks, [][]algos.Schedule{scheds}, red, 1)
	if err != nil {
		t.Fatalf("RunSchedules: %v", err)
	}
	// (recv(1) ⊕ recv(2)) ⊕ local: ((200*10)+300)*10+100 for element 0.
	want := []int64{(200*10+300)*10 + 100, (201*10+301)*10 + 101}
	for r := range 3 {
		if got := ranks[r].Out; !slicesEqual(got, want) {
			t.Errorf("rank %d Out = %v, want %v", r, got, want)
		}
	}
	if got := stats.Between(0, 2).Messages; got != 1 {
		t.Errorf("messages 0 -> 2 = %d, want 1 (the fan-out)", got)
	}
	if stats.Rewrites != 0 {
		t.Errorf("Rewrites = %d, want 0", stats.Rewrites)
	}
}

// TestConnIndexKeepsStreamsApart: two lanes talk between the same pair on
// connections 0 and 1. Their messages must not mix even though lane 1's
// message is sent first.
func TestConnIndexKeepsStreamsApart(t *testing.T) {
	ranks := newRanks(2, 4)
	conn1 := func(o algos.Op) algos.Op { o.Conn = 1; return o }
	scheds := []algos.Schedule{
		{Lanes: []algos.Lane{{Ops: []algos.Op{sendOp(1, 0, 2)}}, {Ops: []algos.Op{conn1(sendOp(1, 2, 2))}}}},
		{Lanes: []algos.Lane{{Ops: []algos.Op{recvOp(0, 0, 2)}}, {Ops: []algos.Op{conn1(recvOp(0, 2, 2))}}}},
	}
	stats, err := sim.RunSchedules(ranks, [][]algos.Schedule{scheds}, sim.Reduction{}, 8)
	if err != nil {
		t.Fatalf("RunSchedules: %v", err)
	}
	if got, want := ranks[1].Out, []int64{100, 101, 102, 103}; !slicesEqual(got, want) {
		t.Errorf("rank 1 Out = %v, want %v", got, want)
	}
	if len(stats.Links) != 2 {
		t.Errorf("links = %v, want two (connections 0 and 1)", stats.Links)
	}
}

// TestWaitOrdersLanes: lane 1 copies Output[0] (which lane 0 receives) to
// rank 1, but only after lane 0 has completed its receive.
func TestWaitOrdersLanes(t *testing.T) {
	ranks := newRanks(3, 1)
	scheds := []algos.Schedule{
		{Lanes: []algos.Lane{
			{Ops: []algos.Op{recvOp(2, 0, 1)}},
			{Ops: []algos.Op{{RecvFrom: algos.NoPeer, SendTo: 1, Src: algos.Output, Count: 1}}, Waits: []algos.Wait{{At: 0, Lane: 0, Done: 1}}},
		}},
		algos.Single([]algos.Op{recvOp(0, 0, 1)}),
		algos.Single([]algos.Op{sendOp(0, 0, 1)}),
	}
	if _, err := sim.RunSchedules(ranks, [][]algos.Schedule{scheds}, sim.Reduction{}, 8); err != nil {
		t.Fatalf("RunSchedules: %v", err)
	}
	if got := ranks[1].Out[0]; got != 300 {
		t.Errorf("rank 1 Out[0] = %d, want 300 (rank 2's input relayed after the wait)", got)
	}
	// Without the wait, lane 1 sends rank 0's Output before it arrives.
	scheds[0].Lanes[1].Waits = nil
	ranks = newRanks(3, 1)
	if _, err := sim.RunSchedules(ranks, [][]algos.Schedule{scheds}, sim.Reduction{}, 8); err != nil {
		t.Fatalf("RunSchedules: %v", err)
	}
	if got := ranks[1].Out[0]; got != -1 {
		t.Errorf("without the wait rank 1 Out[0] = %d, want -1 (the stale output)", got)
	}
}

// TestWaitDeadlockIsReported: two lanes waiting on each other.
func TestWaitDeadlockIsReported(t *testing.T) {
	ranks := newRanks(2, 1)
	scheds := []algos.Schedule{
		{Lanes: []algos.Lane{
			{Ops: []algos.Op{sendOp(1, 0, 1)}, Waits: []algos.Wait{{At: 0, Lane: 1, Done: 1}}},
			{Ops: []algos.Op{recvOp(1, 0, 1)}, Waits: []algos.Wait{{At: 0, Lane: 0, Done: 1}}},
		}},
		algos.Single([]algos.Op{recvOp(0, 0, 1), sendOp(0, 0, 1)}),
	}
	_, err := sim.RunSchedules(ranks, [][]algos.Schedule{scheds}, sim.Reduction{}, 8)
	if err == nil || !strings.Contains(err.Error(), "rank 0 lane 0 op 0/1 (send to=1 src=in[0] n=1): waiting for lane 1 to complete 1 ops (it has completed 0)") {
		t.Fatalf("RunSchedules = %v, want a deadlock naming the wait", err)
	}
}

// TestLanesMayNotShareALink: two lanes sending to the same peer on the same
// connection would make a FIFO with two producers.
func TestLanesMayNotShareALink(t *testing.T) {
	scheds := []algos.Schedule{
		{Lanes: []algos.Lane{{Ops: []algos.Op{sendOp(1, 0, 1)}}, {Ops: []algos.Op{sendOp(1, 1, 1)}}}},
		algos.Single([]algos.Op{recvOp(0, 0, 1), recvOp(0, 1, 1)}),
	}
	_, err := sim.RunSchedules(newRanks(2, 2), [][]algos.Schedule{scheds}, sim.Reduction{}, 8)
	if err == nil || !strings.Contains(err.Error(), "lanes 0 and 1 both use link ->1/conn0") {
		t.Fatalf("RunSchedules = %v, want the shared link refused", err)
	}
}

// TestRewritesCounted: writing an output element twice is counted.
func TestRewritesCounted(t *testing.T) {
	scheds := [][]algos.Op{
		{sendOp(1, 0, 2), sendOp(1, 0, 2)},
		{recvOp(0, 0, 2), recvOp(0, 1, 2)},
	}
	stats, err := sim.Run(newRanks(2, 3), scheds, sim.Reduction{}, 8)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Rewrites != 1 {
		t.Errorf("Rewrites = %d, want 1 (element 1 written twice)", stats.Rewrites)
	}
}

// TestFanRejects: malformed fans.
func TestFanRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   algos.Op
		want string
	}{
		{"fan recv without reduce", algos.Op{RecvFrom: 1, SendTo: none, Dst: algos.Output, Count: 1, Fan: &algos.Fan{Recv: []int{1}}}, "named twice"},
		{"several without reduce", algos.Op{RecvFrom: 1, SendTo: none, Dst: algos.Output, Count: 1, Fan: &algos.Fan{Recv: []int{0}}}, "without reduce"},
		{"fan send without SendTo", algos.Op{RecvFrom: none, SendTo: none, Src: algos.Input, Count: 1, Fan: &algos.Fan{Send: []int{1}}}, "without SendTo"},
		{"bad conn", algos.Op{RecvFrom: none, SendTo: 1, Src: algos.Input, Count: 1, Conn: 2}, "connection index 2"},
	} {
		scheds := [][]algos.Op{{tc.op}, {}}
		_, err := sim.Run(newRanks(2, 2), scheds, sim.Reduction{Op: add}, 8)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Run = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
