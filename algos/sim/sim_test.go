package sim_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/algos/sim"
)

const none = algos.NoPeer

func add(a, b int64) int64 { return a + b }

// sendOp and recvOp are the two plain primitives of point-to-point tests.
func sendOp(to int, off, n int64) algos.Op {
	return algos.Op{RecvFrom: none, SendTo: to, Src: algos.Input, SrcOff: off, Count: n}
}

func recvOp(from int, off, n int64) algos.Op {
	return algos.Op{RecvFrom: from, SendTo: none, Dst: algos.Output, DstOff: off, Count: n}
}

func newRanks(n, size int) []sim.Rank {
	ranks := make([]sim.Rank, n)
	for r := range ranks {
		ranks[r] = sim.Rank{In: make([]int64, size), Out: make([]int64, size)}
		for i := range size {
			ranks[r].In[i] = int64(100*(r+1) + i)
			ranks[r].Out[i] = -1
		}
	}
	return ranks
}

func TestRunExchange(t *testing.T) {
	ranks := newRanks(2, 3)
	scheds := [][]algos.Op{
		{sendOp(1, 0, 2), {Count: 0, RecvFrom: 1, SendTo: none, Dst: algos.Output}, recvOp(1, 1, 2)},
		{sendOp(0, 1, 2), recvOp(0, 0, 2)},
	}
	stats, err := sim.Run(ranks, scheds, sim.Reduction{}, 1)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got, want := ranks[0].Out, []int64{-1, 201, 202}; !slicesEqual(got, want) {
		t.Errorf("rank 0 Out = %v, want %v", got, want)
	}
	if got, want := ranks[1].Out, []int64{100, 101, -1}; !slicesEqual(got, want) {
		t.Errorf("rank 1 Out = %v, want %v", got, want)
	}
	want := sim.Stats{Rounds: 2, Ops: 4, Links: map[sim.Link]sim.Traffic{
		{Channel: 0, Src: 0, Dst: 1}: {Messages: 1, Elements: 2, MaxDepth: 1},
		{Channel: 0, Src: 1, Dst: 0}: {Messages: 1, Elements: 2, MaxDepth: 1},
	}}
	if diff := cmp.Diff(want, stats); diff != "" {
		t.Errorf("Run stats (-want +got):\n%s", diff)
	}
}

// TestRunArithmetic checks the Op shape of the algos package doc: Pre on
// every read of In and only In, received ⊕ local in that order, PostOp once,
// and the value written is the value sent.
func TestRunArithmetic(t *testing.T) {
	ranks := newRanks(2, 2)
	red := sim.Reduction{
		Op:   func(a, b int64) int64 { return a*1000 + b }, // shows the operand order
		Pre:  func(rank int, x int64) int64 { return x + int64(10*(rank+1)) },
		Post: func(x int64) int64 { return -x },
	}
	scheds := [][]algos.Op{
		{
			sendOp(1, 0, 2), // (100+10, 101+10)
			recvOp(1, 0, 2),
		},
		{
			// recvReduceCopySend: received ⊕ Pre(In), post, to Out and back to 0.
			{RecvFrom: 0, SendTo: 0, Src: algos.Input, SrcOff: 0, Dst: algos.Output, DstOff: 0, Count: 2, Reduce: true, PostOp: true},
		},
	}
	if _, err := sim.Run(ranks, scheds, red, 1); err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []int64{-(110*1000 + 220), -(111*1000 + 221)}
	if got := ranks[1].Out; !slicesEqual(got, want) {
		t.Errorf("rank 1 Out = %v, want %v", got, want)
	}
	if got := ranks[0].Out; !slicesEqual(got, want) {
		t.Errorf("rank 0 Out = %v, want %v (the sent value is the post-op'd one)", got, want)
	}
	if got, want := ranks[1].In, []int64{200, 201}; !slicesEqual(got, want) {
		t.Errorf("rank 1 In = %v, want %v (unchanged)", got, want)
	}
}

// TestRunChain checks rounds and FIFO depth on a 3-rank pipeline of k
// messages.
func TestRunChain(t *testing.T) {
	const k = 5
	var scheds [3][]algos.Op
	for i := range int64(k) {
		scheds[0] = append(scheds[0], sendOp(1, i, 1))
		scheds[1] = append(scheds[1], algos.Op{RecvFrom: 0, SendTo: 2, Dst: algos.Output, DstOff: i, Count: 1})
		scheds[2] = append(scheds[2], recvOp(1, i, 1))
	}
	for _, slots := range []int{1, 8} {
		ranks := newRanks(3, k)
		stats, err := sim.Run(ranks, scheds[:], sim.Reduction{}, slots)
		if err != nil {
			t.Fatalf("Run(slots %d): %v", slots, err)
		}
		// Eight slots: one hop per round, so the last message lands in round
		// k+2. One slot: a freed slot is refilled a round later, so a
		// message every other round.
		wantRounds := map[int]int{1: 2*k + 1, 8: k + 2}[slots]
		if stats.Rounds != wantRounds {
			t.Errorf("Run(slots %d).Rounds = %d, want %d", slots, stats.Rounds, wantRounds)
		}
		if got, want := stats.Between(0, 1), (sim.Traffic{Messages: k, Elements: k, MaxDepth: 1}); got != want {
			t.Errorf("Run(slots %d).Between(0, 1) = %+v, want %+v", slots, got, want)
		}
		if got, want := ranks[2].Out, ranks[0].In; !slicesEqual(got, want) {
			t.Errorf("Run(slots %d): rank 2 Out = %v, want %v", slots, got, want)
		}
	}
}

// TestRunChannels runs two channels over disjoint halves and sums Between
// over them.
func TestRunChannels(t *testing.T) {
	ranks := newRanks(2, 4)
	half := func(off int64) [][]algos.Op {
		return [][]algos.Op{{sendOp(1, off, 2)}, {recvOp(0, off, 2)}}
	}
	stats, err := sim.RunChannels(ranks, [][][]algos.Op{half(0), half(2)}, sim.Reduction{}, 1)
	if err != nil {
		t.Fatalf("RunChannels: %v", err)
	}
	if got, want := ranks[1].Out, ranks[0].In; !slicesEqual(got, want) {
		t.Errorf("rank 1 Out = %v, want %v", got, want)
	}
	if got, want := stats.Between(0, 1), (sim.Traffic{Messages: 2, Elements: 4, MaxDepth: 1}); got != want {
		t.Errorf("Between(0, 1) = %+v, want %+v", got, want)
	}
	if got := len(stats.Links); got != 2 {
		t.Errorf("len(Links) = %d, want 2 (one per channel): %v", got, stats.Links)
	}
	if stats.Rounds != 2 {
		t.Errorf("Rounds = %d, want 2: channels progress in the same rounds", stats.Rounds)
	}
}

func TestDeadlockBothReceiveFirst(t *testing.T) {
	scheds := [][]algos.Op{
		{recvOp(1, 0, 1), sendOp(1, 0, 1)},
		{recvOp(0, 0, 1), sendOp(0, 0, 1)},
	}
	_, err := sim.Run(newRanks(2, 1), scheds, sim.Reduction{}, 8)
	de, ok := errors.AsType[*sim.DeadlockError](err)
	if !ok {
		t.Fatalf("Run = %v, want a *DeadlockError", err)
	}
	want := []sim.Blocked{
		{Channel: 0, Rank: 0, Index: 0, Len: 2, Op: scheds[0][0], Waiting: "a message from rank 1 (fifo empty)", Lanes: 1},
		{Channel: 0, Rank: 1, Index: 0, Len: 2, Op: scheds[1][0], Waiting: "a message from rank 0 (fifo empty)", Lanes: 1},
	}
	if diff := cmp.Diff(want, de.Blocked); diff != "" {
		t.Errorf("DeadlockError.Blocked (-want +got):\n%s", diff)
	}
	for _, s := range []string{
		"deadlock in round 1: 2 ops blocked",
		"channel 0 rank 0 op 0/2 (recv from=1 dst=out[0] n=1): waiting for a message from rank 1",
		"channel 0 rank 1 op 0/2 (recv from=0 dst=out[0] n=1): waiting for a message from rank 0",
	} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("Run error = %q, want it to contain %q", err, s)
		}
	}
}

// TestDeadlockFullFifo: both ranks send twice before receiving. One slot per
// FIFO is too few, two are enough.
func TestDeadlockFullFifo(t *testing.T) {
	scheds := [][]algos.Op{
		{sendOp(1, 0, 1), sendOp(1, 1, 1), recvOp(1, 0, 1), recvOp(1, 1, 1)},
		{sendOp(0, 0, 1), sendOp(0, 1, 1), recvOp(0, 0, 1), recvOp(0, 1, 1)},
	}
	_, err := sim.Run(newRanks(2, 2), scheds, sim.Reduction{}, 1)
	if _, ok := errors.AsType[*sim.DeadlockError](err); !ok {
		t.Fatalf("Run(slots 1) = %v, want a *DeadlockError", err)
	}
	for _, s := range []string{
		"deadlock in round 2: 2 ops blocked",
		"rank 0 op 1/4 (send to=1 src=in[1] n=1): waiting for a free slot to rank 1 (1 of 1 full)",
		"rank 1 op 1/4 (send to=0 src=in[1] n=1): waiting for a free slot to rank 0 (1 of 1 full)",
	} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("Run(slots 1) error = %q, want it to contain %q", err, s)
		}
	}
	if _, err := sim.Run(newRanks(2, 2), scheds, sim.Reduction{}, 2); err != nil {
		t.Errorf("Run(slots 2) = %v, want success", err)
	}
}

func TestDeadlockHoldingMessage(t *testing.T) {
	// Rank 1 takes rank 0's message but rank 2 never drains its FIFO.
	fwd := algos.Op{RecvFrom: 0, SendTo: 2, Dst: algos.Output, Count: 1}
	scheds := [][]algos.Op{
		{sendOp(1, 0, 1), sendOp(1, 0, 1)},
		{fwd, fwd},
		{sendOp(1, 0, 1)},
	}
	_, err := sim.Run(newRanks(3, 1), scheds, sim.Reduction{}, 1)
	want := "channel 0 rank 1 op 1/2 (recvCopySend from=0 to=2 dst=out[0] n=1): waiting for a free slot to rank 2 (1 of 1 full), holding the message of rank 0 op 1"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Run = %v, want an error containing %q", err, want)
	}
}

func TestCountMismatchNamesBothOps(t *testing.T) {
	scheds := [][]algos.Op{{sendOp(1, 0, 3)}, {recvOp(0, 0, 4)}}
	_, err := sim.Run(newRanks(2, 4), scheds, sim.Reduction{}, 8)
	want := "channel 0: rank 1 op 0 (recv from=0 dst=out[0] n=4) receives the message of rank 0 op 0 (send to=1 src=in[0] n=3): count 3, want 4"
	if err == nil || err.Error() != want {
		t.Errorf("Run = %v, want %q", err, want)
	}
}

func TestUnreceivedMessages(t *testing.T) {
	scheds := [][]algos.Op{{sendOp(1, 0, 1), sendOp(1, 1, 1)}, {recvOp(0, 0, 1)}}
	_, err := sim.Run(newRanks(2, 2), scheds, sim.Reduction{}, 8)
	want := "channel 0: 1 messages from rank 0 to rank 1 never received, the first from op 1 (send to=1 src=in[1] n=1)"
	if err == nil || err.Error() != want {
		t.Errorf("Run = %v, want %q", err, want)
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	ok := sendOp(1, 0, 1)
	tests := []struct {
		name   string
		ranks  int
		scheds [][]algos.Op
		red    sim.Reduction
		slots  int
		want   string
	}{
		{"no ranks", 0, [][]algos.Op{}, sim.Reduction{}, 1, "no ranks"},
		{"slots", 2, [][]algos.Op{{}, {}}, sim.Reduction{}, 0, "fifo slots 0: must be at least 1"},
		{"schedules", 2, [][]algos.Op{{ok}}, sim.Reduction{}, 1, "channel 0: 1 schedules for 2 ranks"},
		{"send peer", 2, [][]algos.Op{{sendOp(2, 0, 1)}, {}}, sim.Reduction{}, 1,
			"channel 0 rank 0 op 0 (send to=2 src=in[0] n=1): send to rank 2: must be -1 (none) or in [0, 2)"},
		{"recv peer", 2, [][]algos.Op{{}, {recvOp(-2, 0, 1)}}, sim.Reduction{}, 1,
			"channel 0 rank 1 op 0 (recv from=-2 dst=out[0] n=1): recv from rank -2: must be -1 (none) or in [0, 2)"},
		{"count", 2, [][]algos.Op{{sendOp(1, 0, -1)}, {}}, sim.Reduction{}, 1, "count -1: must be at least 0"},
		{"src range", 2, [][]algos.Op{{sendOp(1, 3, 2)}, {}}, sim.Reduction{}, 1, "src in[3, 5): outside rank 0's 4 elements"},
		{"dst range", 2, [][]algos.Op{{}, {recvOp(0, -1, 1)}}, sim.Reduction{}, 1, "dst out[-1, 0): outside rank 0's 4 elements"},
		{"reduce without op", 2, [][]algos.Op{{}, {{RecvFrom: 0, SendTo: none, Src: algos.Input, Dst: algos.Output, Count: 1, Reduce: true}}},
			sim.Reduction{}, 1, "reduce with a reduction that has no Op"},
		{"reduce without recv", 2, [][]algos.Op{{{RecvFrom: none, SendTo: 1, Src: algos.Input, Count: 1, Reduce: true}}, {}},
			sim.Reduction{Op: add}, 1, "reduce without a receive"},
		{"src without reduce", 2, [][]algos.Op{{}, {{RecvFrom: 0, SendTo: none, Src: algos.Input, Dst: algos.Output, Count: 1}}},
			sim.Reduction{}, 1, "receives without reduce but names a local operand"},
		{"no value", 2, [][]algos.Op{{{RecvFrom: none, SendTo: 1, Count: 1}}, {}}, sim.Reduction{}, 1,
			"neither receives nor reads a local operand"},
		{"nothing", 2, [][]algos.Op{{{RecvFrom: none, SendTo: none, Src: algos.Input, Count: 1}}, {}}, sim.Reduction{}, 1,
			"neither receives, sends nor writes"},
		{"buffer", 2, [][]algos.Op{{{RecvFrom: none, SendTo: 1, Src: 7, Count: 1}}, {}}, sim.Reduction{}, 1,
			"buffers Buf(7), -: must be -, in or out"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sim.Run(newRanks(tt.ranks, 4), tt.scheds, tt.red, tt.slots)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Run = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func slicesEqual(a, b []int64) bool { return cmp.Equal(a, b) }
