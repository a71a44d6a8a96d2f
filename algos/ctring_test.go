package algos_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
)

// laneStrings renders a schedule lane by lane: its Waits, then its Ops.
func laneStrings(s algos.Schedule) []string {
	var out []string
	for l, lane := range s.Lanes {
		out = append(out, fmt.Sprintf("lane %d waits %v", l, lane.Waits))
		for _, op := range lane.Ops {
			out = append(out, op.String())
		}
	}
	return out
}

// TestCTRingSchedules pins the worked example of ctring.go (n = 4,
// bidirectional, 8 elements, rounds of 2) and the degenerate shapes.
func TestCTRingSchedules(t *testing.T) {
	example := algos.CTRingConfig{ChunkElems: 2, NumChunks: 1, MinShardElems: 1, Bidir: true}
	tests := []struct {
		name string
		s    algos.Schedule
		want []string
	}{
		{"n=4 rank 0", algos.CTRingAllReduce(0, 4, algos.Part{Count: 8}, example), []string{
			"lane 0 waits []",
			"send to=1 src=in[0] n=2",
			"recvReduceSend from=3 to=1 src=in[6] n=2",
			"recvReduceSend from=3 to=1 src=in[4] n=2",
			"recvReduceCopySend from=3 to=1 src=in[2] dst=out[2] n=2 post",
			"recvCopySend from=3 to=1 dst=out[0] n=2",
			"recv from=3 dst=out[6] n=2",
			"lane 1 waits [{0 0 4}]",
			"send to=3 src=out[2] n=2",
			"recv from=1 dst=out[4] n=2",
		}},
		{"n=4 rank 3", algos.CTRingAllReduce(3, 4, algos.Part{Count: 8}, example), []string{
			"lane 0 waits []",
			"send to=0 src=in[6] n=2",
			"recvReduceSend from=2 to=0 src=in[4] n=2",
			"recvReduceSend from=2 to=0 src=in[2] n=2",
			"recvReduceCopySend from=2 to=0 src=in[0] dst=out[0] n=2 post",
			"recvCopySend from=2 to=0 dst=out[6] n=2",
			"recv from=2 dst=out[4] n=2",
			"lane 1 waits [{0 0 4}]",
			"send to=2 src=out[0] n=2",
			"recv from=0 dst=out[2] n=2",
		}},
		// Forward only: the ring's 2(n-1) steps, one lane.
		{"n=4 rank 0 forward only", algos.CTRingAllReduce(0, 4, algos.Part{Offset: 10, Count: 8}, algos.CTRingConfig{ChunkElems: 2, NumChunks: 1}), []string{
			"lane 0 waits []",
			"send to=1 src=in[10] n=2",
			"recvReduceSend from=3 to=1 src=in[16] n=2",
			"recvReduceSend from=3 to=1 src=in[14] n=2",
			"recvReduceCopySend from=3 to=1 src=in[12] dst=out[12] n=2 post",
			"recvCopySend from=3 to=1 dst=out[10] n=2",
			"recvCopySend from=3 to=1 dst=out[16] n=2",
			"recv from=3 dst=out[14] n=2",
		}},
		// Round-major: round 0 of every step, then round 1. 5 elements on
		// 2 ranks are shards of 2 and 3 (rounds of 2 and 1).
		{"n=2 rank 1 rounds", algos.CTRingAllReduce(1, 2, algos.Part{Count: 5}, algos.CTRingConfig{ChunkElems: 2, NumChunks: 2, Bidir: true}), []string{
			"lane 0 waits []",
			"send to=0 src=in[2] n=2",
			"recvReduceCopySend from=0 to=0 src=in[0] dst=out[0] n=2 post",
			"recv from=0 dst=out[2] n=2",
			"send to=0 src=in[4] n=1",
			"recv from=0 dst=out[4] n=1",
		}},
		{"n=1", algos.CTRingAllReduce(0, 1, algos.Part{Offset: 3, Count: 40}, example), []string{
			"lane 0 waits []",
			"copy src=in[3] dst=out[3] n=40 post",
		}},
		{"empty", algos.CTRingAllReduce(2, 4, algos.Part{}, example), []string{"lane 0 waits []", "lane 1 waits []"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, laneStrings(tt.s)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestCTRingWaits pins the Waits of two multi-partition shapes. Lane 1
// waits for its partition's reduce-scatter (lane 0's Ops through the
// recvReduceCopySend step), lane 0 for lane 1's previous partitions; a lane
// with no Op in a partition gets no Wait for it.
func TestCTRingWaits(t *testing.T) {
	type waits struct{ fwd, rev []algos.Wait }
	tests := []struct {
		name string
		n    int
		p    algos.Part
		cfg  algos.CTRingConfig
		want map[int]waits // by rank
	}{
		// 3 ranks, 20 elements, partitions of 6, 6, 5 (cut by the tail
		// rule) and 3, rounds of one element. Rank 0's lane 0 has 8 Ops
		// in each of the first two partitions (4 steps x 2 rounds, round
		// by round), 6 and 4 in the others; its reduce-scatter ends with
		// its last Op that reads Input: after 7, 15, 22 and 25 (in the
		// third partition the last shard has 3 rounds and rank 0's own 1,
		// so the last round's recvReduceSend comes after the
		// recvReduceCopySend; the reverse lane writes that shard).
		{"tail", 3, algos.Part{Offset: 1, Count: 20}, algos.CTRingConfig{ChunkElems: 1, NumChunks: 2, MinShardElems: 1, Bidir: true}, map[int]waits{
			0: {[]algos.Wait{{At: 8, Lane: 1, Done: 4}, {At: 16, Lane: 1, Done: 8}, {At: 22, Lane: 1, Done: 12}},
				[]algos.Wait{{At: 0, Lane: 0, Done: 7}, {At: 4, Lane: 0, Done: 15}, {At: 8, Lane: 0, Done: 22}, {At: 12, Lane: 0, Done: 25}}},
		}},
		// 4 ranks, 7 elements, partitions of 3 (all in shard 3, 3 rounds)
		// and 4. Lane 1 moves shard rank+1 and receives rank+2: in the
		// first partition only ranks 2 (sends shard 3) and 1 (receives it)
		// have lane 1 Ops.
		{"empty shards", 4, algos.Part{Count: 7}, algos.CTRingConfig{ChunkElems: 1, NumChunks: 1, MinShardElems: 1, Bidir: true}, map[int]waits{
			0: {nil, []algos.Wait{{At: 0, Lane: 0, Done: 10}}},
			2: {[]algos.Wait{{At: 3, Lane: 1, Done: 3}}, []algos.Wait{{At: 0, Lane: 0, Done: 3}, {At: 3, Lane: 0, Done: 7}}},
		}},
	}
	for _, tt := range tests {
		for rank, w := range tt.want {
			s := algos.CTRingAllReduce(rank, tt.n, tt.p, tt.cfg)
			if diff := cmp.Diff(w.fwd, s.Lanes[0].Waits); diff != "" {
				t.Errorf("%s rank %d lane 0 waits (-want +got):\n%s", tt.name, rank, diff)
			}
			if diff := cmp.Diff(w.rev, s.Lanes[1].Waits); diff != "" {
				t.Errorf("%s rank %d lane 1 waits (-want +got):\n%s", tt.name, rank, diff)
			}
		}
	}
}

// TestCTRingStages checks the stage sequence for every ring size with one
// round per shard: lane 0 is send; (n-2) x recvReduceSend;
// recvReduceCopySend; (f-1) x recvCopySend; recv, with f forward all-gather
// steps, and lane 1 is send; (b-1) x recvCopySend; recv. Every Op uses
// connection index 0, and CheckLanes accepts the lanes.
func TestCTRingStages(t *testing.T) {
	repeat := func(s string, k int) []string { return strings.Fields(strings.Repeat(s+" ", k)) }
	for n := 2; n <= 64; n++ {
		for _, bidir := range []bool{false, true} {
			f, b := n-1, 0
			if bidir {
				f, b = n/2, (n-1)/2
			}
			want := [][]string{append(append(append([]string{"send"}, repeat("recvReduceSend", n-2)...), "recvReduceCopySend"),
				append(repeat("recvCopySend", f-1), "recv")...)}
			if b > 0 {
				want = append(want, append(append([]string{"send"}, repeat("recvCopySend", b-1)...), "recv"))
			}
			for r := range n {
				s := algos.CTRingAllReduce(r, n, algos.Part{Count: int64(n)}, algos.CTRingConfig{ChunkElems: 1, NumChunks: 1, Bidir: bidir})
				var got [][]string
				for _, lane := range s.Lanes {
					var names []string
					for _, op := range lane.Ops {
						names = append(names, op.Name())
						if op.Conn != 0 {
							t.Errorf("n=%d rank %d: %v: connection index %d, want 0", n, r, op, op.Conn)
						}
					}
					got = append(got, names)
				}
				if !slices.EqualFunc(want, got, slices.Equal) {
					t.Errorf("n=%d bidir=%t rank %d stages (-want +got):\n%s", n, bidir, r, cmp.Diff(want, got))
				}
				if err := s.CheckLanes(); err != nil {
					t.Errorf("n=%d bidir=%t rank %d: CheckLanes: %v", n, bidir, r, err)
				}
			}
		}
	}
}

// TestCTRingRow checks the table's row: all-reduce only, Simple only with
// the ring's geometry, the peers of both rings. TestCTRingRowInSim runs it.
func TestCTRingRow(t *testing.T) {
	row := algos.Lookup(algos.CTRing, algos.AllReduce)
	if row == nil {
		t.Fatal("no CTRing AllReduce row")
	}
	if !row.WritesOutputOnce {
		t.Error("WritesOutputOnce = false, want true")
	}
	for p := range protocols.NumProtos {
		want := algos.Geometry{}
		if protocols.Proto(p) == protocols.Simple {
			want = algos.Geometry{ChunkSteps: 4, SliceSteps: 2}
		}
		if got := row.Geometry[p]; got != want {
			t.Errorf("Geometry[%v] = %+v, want %+v", protocols.Proto(p), got, want)
		}
	}
	for _, c := range []algos.Coll{algos.Broadcast, algos.Reduce, algos.AllGather, algos.ReduceScatter} {
		if r := algos.Lookup(algos.CTRing, c); r != nil {
			t.Errorf("Lookup(CTRing, %v) = a row, want nil: CTRING is an all-reduce", c)
		}
	}
	peers := map[int][]string{
		1: nil,
		2: {"->1/conn0", "<-1/conn0"},
		3: {"->1/conn0", "<-2/conn0", "->2/conn0", "<-1/conn0"},
		5: {"->1/conn0", "<-4/conn0", "->4/conn0", "<-1/conn0"},
	}
	for n, want := range peers {
		var got []string
		for _, l := range row.Peers(&algos.Args{Rank: 0, Topo: algos.FlatTopo(n)}) {
			got = append(got, l.String())
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("n=%d rank 0 Peers (-want +got):\n%s", n, diff)
		}
	}
}

func TestCTRingPanicsOnBadArguments(t *testing.T) {
	good := algos.CTRingConfig{ChunkElems: 2, NumChunks: 2, MinShardElems: 1}
	bigShard := algos.CTRingConfig{ChunkElems: 2, NumChunks: 2, MinShardElems: 5}
	p := algos.Part{Count: 4}
	tests := []panicCase{
		{"nranks", func() { algos.CTRingAllReduce(0, 0, p, good) }, "ctring all-reduce: nranks 0: must be at least 1"},
		{"rank", func() { algos.CTRingAllReduce(4, 4, p, good) }, "rank 4: must be in [0, 4)"},
		{"offset", func() { algos.CTRingAllReduce(0, 4, algos.Part{Offset: -1}, good) }, "part offset -1: must be at least 0"},
		{"chunk", func() { algos.CTRingAllReduce(0, 4, p, algos.CTRingConfig{NumChunks: 1}) }, "chunk 0 elements: must be at least 1"},
		{"chunks", func() { algos.CTRingAllReduce(0, 4, p, algos.CTRingConfig{ChunkElems: 1}) }, "0 chunks: must be at least 1"},
		{"overflow", func() { algos.CTRingAllReduce(0, 4, p, algos.CTRingConfig{ChunkElems: 1 << 41, NumChunks: 1 << 20}) },
			"partition of 1048576 chunks of 2199023255552 elements on 4 ranks: overflows int64"},
		{"min shard", func() { algos.CTRingAllReduce(0, 4, p, bigShard) },
			"minimum shard 5 elements: must be in [0, 4], the shard of a full partition"},
	}
	checkPanics(t, tests)
}
