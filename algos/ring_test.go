package algos_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/seed-760dd1f1/cc/algos"
)

func TestRingTopology(t *testing.T) {
	for n := 1; n <= 64; n++ {
		seen := make([]bool, n)
		r := 0
		for range n {
			if seen[r] {
				t.Fatalf("n=%d: walking RingNext from 0 visits rank %d twice", n, r)
			}
			seen[r] = true
			next := algos.RingNext(r, n)
			if want := (r + 1) % n; next != want {
				t.Errorf("RingNext(%d, %d) = %d, want %d", r, n, next, want)
			}
			if got := algos.RingPrev(next, n); got != r {
				t.Errorf("RingPrev(RingNext(%d, %d)) = %d, want %d", r, n, got, r)
			}
			r = next
		}
		if r != 0 {
			t.Errorf("n=%d: %d steps of RingNext from 0 end at %d, want 0", n, n, r)
		}
	}
}

// TestRingSchedules pins small schedules op by op: the textbook stages with
// their offsets, in NCCL's order.
func TestRingSchedules(t *testing.T) {
	p := func(off, count, chunk int64) algos.Part { return algos.Part{Offset: off, Count: count, Chunk: chunk} }
	tests := []struct {
		name string
		ops  []algos.Op
		want []string
	}{
		{"allreduce n=3 rank 0", algos.RingAllReduce(0, 3, p(10, 3, 1)), []string{
			"send to=1 src=in[12] n=1",
			"recvReduceSend from=2 to=1 src=in[11] n=1",
			"recvReduceCopySend from=2 to=1 src=in[10] dst=out[10] n=1 post",
			"recvCopySend from=2 to=1 dst=out[12] n=1",
			"recv from=2 dst=out[11] n=1",
		}},
		// Two loops of 4 ranks x chunk 2, the second short: 5 elements left,
		// chunkCount = alignUp(divUp(5, 4), 4) = 4, so chunks 0 and 1 hold
		// 4 and 1 elements and chunks 2 and 3 are empty and left out.
		{"allreduce n=4 rank 1 short last loop", algos.RingAllReduce(1, 4, algos.Part{Count: 13, Chunk: 2, Align: 4}), []string{
			"send to=2 src=in[0] n=2",
			"recvReduceSend from=0 to=2 src=in[6] n=2",
			"recvReduceSend from=0 to=2 src=in[4] n=2",
			"recvReduceCopySend from=0 to=2 src=in[2] dst=out[2] n=2 post",
			"recvCopySend from=0 to=2 dst=out[0] n=2",
			"recvCopySend from=0 to=2 dst=out[6] n=2",
			"recv from=0 dst=out[4] n=2",
			"send to=2 src=in[8] n=4",
			"recvReduceCopySend from=0 to=2 src=in[12] dst=out[12] n=1 post",
			"recvCopySend from=0 to=2 dst=out[8] n=4",
		}},
		{"reducescatter n=3 rank 0", algos.RingReduceScatter(0, 3, 5, p(1, 2, 2)), []string{
			"send to=1 src=in[11] n=2",
			"recvReduceSend from=2 to=1 src=in[6] n=2",
			"recvReduceCopy from=2 src=in[1] dst=out[1] n=2 post",
		}},
		{"allgather n=3 rank 0", algos.RingAllGather(0, 3, 5, p(1, 2, 2)), []string{
			"copySend to=1 src=in[1] dst=out[1] n=2",
			"recvCopySend from=2 to=1 dst=out[11] n=2",
			"recv from=2 dst=out[6] n=2",
		}},
		{"broadcast n=3 root 1 rank 1", algos.RingBroadcast(1, 3, 1, p(0, 3, 2)), []string{
			"copySend to=2 src=in[0] dst=out[0] n=2",
			"copySend to=2 src=in[2] dst=out[2] n=1",
		}},
		{"broadcast n=3 root 1 rank 2", algos.RingBroadcast(2, 3, 1, p(0, 2, 2)), []string{"recvCopySend from=1 to=0 dst=out[0] n=2"}},
		{"broadcast n=3 root 1 rank 0", algos.RingBroadcast(0, 3, 1, p(0, 2, 2)), []string{"recv from=2 dst=out[0] n=2"}},
		{"reduce n=3 root 1 rank 2", algos.RingReduce(2, 3, 1, p(0, 2, 2)), []string{"send to=0 src=in[0] n=2"}},
		{"reduce n=3 root 1 rank 0", algos.RingReduce(0, 3, 1, p(0, 2, 2)), []string{"recvReduceSend from=2 to=1 src=in[0] n=2"}},
		{"reduce n=3 root 1 rank 1", algos.RingReduce(1, 3, 1, p(0, 2, 2)), []string{"recvReduceCopy from=0 src=in[0] dst=out[0] n=2 post"}},
		{"allreduce n=1", algos.RingAllReduce(0, 1, p(3, 40, 4)), []string{"copy src=in[3] dst=out[3] n=40 post"}},
		{"reducescatter n=1", algos.RingReduceScatter(0, 1, 50, p(3, 40, 4)), []string{"copy src=in[3] dst=out[3] n=40 post"}},
		{"allgather n=1", algos.RingAllGather(0, 1, 50, p(3, 40, 4)), []string{"copy src=in[3] dst=out[3] n=40"}},
		{"broadcast n=1", algos.RingBroadcast(0, 1, 0, p(3, 40, 4)), []string{"copy src=in[3] dst=out[3] n=40"}},
		{"reduce n=1", algos.RingReduce(0, 1, 0, p(3, 40, 4)), []string{"copy src=in[3] dst=out[3] n=40 post"}},
		{"allreduce empty", algos.RingAllReduce(0, 4, p(0, 0, 4)), nil},
	}
	for _, tt := range tests {
		var got []string
		for _, op := range tt.ops {
			got = append(got, op.String())
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestRingAllReduceStages checks the stage sequence of seed 004 for every
// ring size: send; (n-2) x recvReduceSend; recvReduceCopySend; (n-2) x
// recvCopySend; recv.
func TestRingAllReduceStages(t *testing.T) {
	for n := 2; n <= 16; n++ {
		var want []string
		want = append(want, "send")
		for range n - 2 {
			want = append(want, "recvReduceSend")
		}
		want = append(want, "recvReduceCopySend")
		for range n - 2 {
			want = append(want, "recvCopySend")
		}
		want = append(want, "recv")
		for r := range n {
			var got []string
			for _, op := range algos.RingAllReduce(r, n, algos.Part{Count: int64(n), Chunk: 1}) {
				got = append(got, op.Name())
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("RingAllReduce(%d, %d) stages (-want +got):\n%s", r, n, diff)
			}
		}
	}
}

func TestRingPanicsOnBadArguments(t *testing.T) {
	good := algos.Part{Count: 4, Chunk: 2}
	tests := []panicCase{
		{"nranks", func() { algos.RingAllReduce(0, 0, good) }, "ring all-reduce: nranks 0: must be at least 1"},
		{"rank", func() { algos.RingAllReduce(4, 4, good) }, "rank 4: must be in [0, 4)"},
		{"root", func() { algos.RingBroadcast(0, 4, -1, good) }, "ring broadcast: root -1: must be in [0, 4)"},
		{"chunk", func() { algos.RingReduce(0, 4, 0, algos.Part{Count: 4}) }, "part chunk 0: must be at least 1"},
		{"count", func() { algos.RingAllGather(0, 4, 8, algos.Part{Count: -1, Chunk: 1}) }, "part count -1: must be at least 0"},
		{"offset", func() { algos.RingAllReduceSteps(0, 4, algos.Part{Offset: -1, Chunk: 1}) }, "part offset -1: must be at least 0"},
		{"align", func() { algos.RingAllReduce(0, 4, algos.Part{Chunk: 1, Align: -4}) }, "part align -4: must be at least 0"},
		{"overflow", func() { algos.RingAllReduce(0, 4, algos.Part{Chunk: 1 << 62}) }, "part chunk 4611686018427387904 + align 0: 4 ranks of it overflow int64"},
		{"block", func() { algos.RingReduceScatter(0, 4, 5, algos.Part{Offset: 2, Count: 4, Chunk: 1}) },
			"ring reduce-scatter: part [2, 6) with 4 ranks: must fit in a block of 5 elements"},
	}
	checkPanics(t, tests)
}

// panicCase is a call that must panic with a message containing want.
type panicCase struct {
	name string
	call func()
	want string
}

// checkPanics runs every case and checks its panic message.
func checkPanics(t *testing.T, cases []panicCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				got := fmt.Sprint(recover())
				if !strings.Contains(got, tt.want) {
					t.Errorf("panic = %q, want it to contain %q", got, tt.want)
				}
			}()
			tt.call()
		})
	}
}
