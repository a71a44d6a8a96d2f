package algos

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCTRingPartitions pins CTRAN's partition arithmetic: partitions of
// ChunkElems*NumChunks*nranks elements (total), the last what is left,
// except that a remainder in (total, total+minPart), minPart =
// MinShardElems*nranks, is cut to leave exactly minPart for the last one.
func TestCTRingPartitions(t *testing.T) {
	cfg := func(chunk, numChunks, minShard int64) CTRingConfig {
		return CTRingConfig{ChunkElems: chunk, NumChunks: numChunks, MinShardElems: minShard}
	}
	tests := []struct {
		name   string
		nranks int
		count  int64
		cfg    CTRingConfig
		want   []int64
	}{
		{"empty", 4, 0, cfg(2, 2, 1), nil},
		{"one element", 4, 1, cfg(2, 2, 1), []int64{1}},
		{"less than a partition", 4, 15, cfg(2, 2, 1), []int64{15}},
		{"one partition", 4, 16, cfg(2, 2, 1), []int64{16}},
		// total 16, minPart 4: 17..19 are cut, 20 is not.
		{"total+1", 4, 17, cfg(2, 2, 1), []int64{13, 4}},
		{"total+minPart-1", 4, 19, cfg(2, 2, 1), []int64{15, 4}},
		{"total+minPart", 4, 20, cfg(2, 2, 1), []int64{16, 4}},
		{"total+minPart+1", 4, 21, cfg(2, 2, 1), []int64{16, 5}},
		{"several, then cut", 4, 2*16 + 3, cfg(2, 2, 1), []int64{16, 15, 4}},
		{"several, exact", 4, 3 * 16, cfg(2, 2, 1), []int64{16, 16, 16}},
		{"several, odd tail", 4, 3*16 + 7, cfg(2, 2, 1), []int64{16, 16, 16, 7}},
		// The design study's example: 2 ranks, total 16, minPart 8.
		{"study example", 2, 20, cfg(2, 4, 4), []int64{12, 8}},
		// minPart = total: every remainder in (total, 2 total) is halved
		// unevenly, the last one a full partition.
		{"minPart = total", 3, 10, cfg(1, 2, 2), []int64{4, 6}},
		{"no tail rule", 4, 17, cfg(2, 2, 0), []int64{16, 1}},
		{"one rank", 1, 9, cfg(2, 2, 1), []int64{4, 4, 1}},
		{"one rank cut", 1, 5, cfg(2, 2, 2), []int64{3, 2}},
	}
	for _, tt := range tests {
		var got []int64
		var next int64
		for off, numel := range tt.cfg.partitions(tt.nranks, tt.count) {
			if off != next {
				t.Errorf("%s: partition at %d, want %d", tt.name, off, next)
			}
			got = append(got, numel)
			next = off + numel
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: n=%d count=%d %+v partitions (-want +got):\n%s", tt.name, tt.nranks, tt.count, tt.cfg, diff)
		}
	}
}

// TestCTRingShards pins the shards and rounds of a partition: shardNumel
// = numel/n, the last shard the remainder (CTRAN's 33 elements on 4 ranks:
// 8, 8, 8, 9), rounds of chunk elements and a short last one.
func TestCTRingShards(t *testing.T) {
	pt := ctringPart{base: 100, numel: 33, shardNumel: 33 / 4, chunk: 3, n: 4}
	want := map[int][][2]int64{
		0: {{100, 3}, {103, 3}, {106, 2}},
		1: {{108, 3}, {111, 3}, {114, 2}},
		2: {{116, 3}, {119, 3}, {122, 2}},
		3: {{124, 3}, {127, 3}, {130, 3}},
	}
	for s, w := range want {
		var got [][2]int64
		for j := int64(0); ; j++ {
			off, c, ok := pt.round(s, j)
			if !ok {
				break
			}
			got = append(got, [2]int64{off, c})
		}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("shard %d rounds (-want +got):\n%s", s, diff)
		}
	}
	// 3 elements on 4 ranks: only the last shard has any.
	pt = ctringPart{numel: 3, chunk: 2, n: 4}
	for s := range 3 {
		if off, c, ok := pt.round(s, 0); ok {
			t.Errorf("shard %d of 3 elements on 4 ranks: round (%d, %d), want none", s, off, c)
		}
	}
	if got := pt.maxRounds(); got != 2 {
		t.Errorf("maxRounds = %d, want 2 (the last shard's 3 elements in rounds of 2)", got)
	}
}
