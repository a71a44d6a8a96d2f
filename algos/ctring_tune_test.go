package algos

import (
	"math"
	"math/bits"
	"testing"
)

// The tuner's tests are internal: the tier tables are tested row by row,
// on each side of every boundary, before the arithmetic built on them.

const (
	ctKiB = int64(1) << 10
	ctMiB = int64(1) << 20
	ctGiB = int64(1) << 30
)

// occupancy of CTRAN's auto-tune tests: 64 blocks of 512 threads.
const ctOccBlocks, ctOccBlockSize = 64, 512

func TestCTRingPow2(t *testing.T) {
	tests := []struct{ n, want uint64 }{
		{0, 1}, {1, 1}, {2, 2}, {3, 4}, {4, 4}, {5, 4}, {6, 8}, {7, 8},
		{11, 8}, {12, 16}, {13, 16}, {96, 128}, {95, 64}, {100, 128},
		{1<<40 + 1, 1 << 40}, {3 << 40, 4 << 40}, {3<<40 - 1, 2 << 40},
		{math.MaxInt64, 1 << 63}, {1 << 63, 1 << 63}, {math.MaxUint64, 1 << 63},
	}
	for _, tt := range tests {
		if got := ctringPow2(tt.n); got != tt.want {
			t.Errorf("ctringPow2(%d): got %d, want %d", tt.n, got, tt.want)
		}
	}
}

// TestCTRingDepthTiers pins seed 002's pipeline-depth tables on each side
// of every boundary.
func TestCTRingDepthTiers(t *testing.T) {
	tests := []struct {
		arch    CTRingArch
		perRank int64
		want    int
	}{
		{CTRingHopper, 0, 1},
		{CTRingHopper, 32*ctKiB - 1, 1},
		{CTRingHopper, 32 * ctKiB, 2},
		{CTRingHopper, ctMiB - 1, 2},
		{CTRingHopper, ctMiB, 4},
		{CTRingHopper, 4*ctMiB - 1, 4},
		{CTRingHopper, 4 * ctMiB, 2},
		{CTRingHopper, 8*ctMiB - 1, 2},
		{CTRingHopper, 8 * ctMiB, 1},
		{CTRingHopper, math.MaxInt64, 1},
		{CTRingDefault, 0, 1},
		{CTRingDefault, 32*ctKiB - 1, 1},
		{CTRingDefault, 32 * ctKiB, 2},
		{CTRingDefault, ctMiB - 1, 2},
		{CTRingDefault, ctMiB, 4}, // CTRAN today: 2 (see the Default table)
		{CTRingDefault, 16*ctMiB - 1, 4},
		{CTRingDefault, 16 * ctMiB, 2},
		{CTRingDefault, 32*ctMiB - 1, 2},
		{CTRingDefault, 32 * ctMiB, 1},
		{CTRingDefault, math.MaxInt64, 1},
	}
	for _, tt := range tests {
		if got := ctringArchs[tt.arch].depthFor(uint64(tt.perRank)); got != tt.want {
			t.Errorf("%s depth for %d bytes per rank: got %d, want %d", tt.arch, tt.perRank, got, tt.want)
		}
		// The same through CTRingTune. perRank = pow2(msg)/nranks, and
		// pow2(msg) is a power of two, so a boundary B = 2^m is reached
		// with msg = B on 1 rank and B-1 with msg = B² on B+1 ranks
		// (B² = (B+1)(B-1) + 1).
		var msg int64
		var nranks int
		switch b := tt.perRank + 1; {
		case tt.perRank == math.MaxInt64 || tt.perRank == 0:
			continue
		case bits.OnesCount64(uint64(tt.perRank)) == 1:
			msg, nranks = tt.perRank, 1
		case bits.OnesCount64(uint64(b)) == 1:
			msg, nranks = b*b, int(b+1)
		default:
			t.Fatalf("perRank %d is neither a power of two nor one below", tt.perRank)
		}
		k := DefaultCTRingKnobs()
		k.Arch = tt.arch
		if got := CTRingTune(k, msg, nranks, 1, ctOccBlocks, ctOccBlockSize).Depth; got != tt.want {
			t.Errorf("%s CTRingTune(msg %d, %d ranks).Depth: got %d, want %d", tt.arch, msg, nranks, got, tt.want)
		}
	}
}

// TestCTRingBlockTiers pins the block tables on each side of every
// boundary, through TMPBUF_CHUNK_SIZE, which sets the chunk exactly.
func TestCTRingBlockTiers(t *testing.T) {
	tests := []struct {
		arch            CTRingArch
		chunk           int64
		blocks, threads int
	}{
		{CTRingDefault, 1, 1, 512},
		{CTRingDefault, 8*ctKiB - 1, 1, 512},
		{CTRingDefault, 8 * ctKiB, 2, 512},
		{CTRingDefault, 32*ctKiB - 1, 2, 512},
		{CTRingDefault, 32 * ctKiB, 4, 512},
		{CTRingDefault, 64*ctKiB - 1, 4, 512},
		{CTRingDefault, 64 * ctKiB, 8, 512},
		{CTRingDefault, ctGiB, 8, 512},
		{CTRingHopper, 1, 1, 384},
		{CTRingHopper, 16*ctKiB - 1, 1, 384},
		{CTRingHopper, 16 * ctKiB, 1, 512},
		{CTRingHopper, 128*ctKiB - 1, 1, 512},
		{CTRingHopper, 128 * ctKiB, 2, 512},
		{CTRingHopper, 512*ctKiB - 1, 2, 512},
		{CTRingHopper, 512 * ctKiB, 4, 512},
		{CTRingHopper, ctGiB, 4, 512},
	}
	for _, tt := range tests {
		k := DefaultCTRingKnobs()
		k.Arch, k.TmpbufChunkSize = tt.arch, tt.chunk
		got := CTRingTune(k, 64*ctMiB, 8, 1, ctOccBlocks, ctOccBlockSize)
		if got.ChunkBytes != tt.chunk || got.NumBlocks != tt.blocks || got.BlockSize != tt.threads {
			t.Errorf("%s chunk %d: got chunk %d, %d x %d blocks; want chunk %d, %d x %d",
				tt.arch, tt.chunk, got.ChunkBytes, got.NumBlocks, got.BlockSize, tt.chunk, tt.blocks, tt.threads)
		}
	}
}

// tuned is the part of a decision the golden vectors pin.
type tuned struct {
	blocks, threads int
	chunk, chunks   int64
}

func tunedOf(t CTRingTuning) tuned { return tuned{t.NumBlocks, t.BlockSize, t.ChunkBytes, t.NumChunks} }

// TestCTRingTuneGolden: CTRAN's golden vectors (AllReduceRingAutoTuneTest.cc,
// wave2-algorithms-design.md §2.5), 8 ranks, occupancy 64 x 512, with the
// one deviation the seed's Default table makes.
func TestCTRingTuneGolden(t *testing.T) {
	tests := []struct {
		arch  CTRingArch
		msg   int64
		want  tuned
		ctran *tuned // CTRAN's vector, when the seed's table differs
	}{
		{CTRingDefault, ctKiB, tuned{1, 512, 128, 8}, nil},
		{CTRingDefault, 64 * ctKiB, tuned{2, 512, 8 * ctKiB, 8}, nil},
		{CTRingDefault, 256 * ctKiB, tuned{2, 512, 16 * ctKiB, 16}, nil},
		{CTRingDefault, ctMiB, tuned{8, 512, 64 * ctKiB, 16}, nil},
		// 8 MiB per rank: depth 4 in seed 002's table (1 MiB..16 MiB),
		// 2 in CTRAN's current one (32 KiB..32 MiB). Depth 4 makes 32
		// slots of 2 MiB, halved to 16 by the 32 MiB staging buffer;
		// CTRAN's depth 2 makes 16 slots of 4 MiB, halved to 8.
		{CTRingDefault, 64 * ctMiB, tuned{8, 512, 2 * ctMiB, 16}, &tuned{8, 512, 4 * ctMiB, 8}},
		{CTRingDefault, 128 * ctMiB, tuned{8, 512, 8 * ctMiB, 4}, nil},
		{CTRingDefault, 256 * ctMiB, tuned{8, 512, 16 * ctMiB, 2}, nil},
		{CTRingDefault, 512 * ctMiB, tuned{8, 512, 16 * ctMiB, 2}, nil},
		{CTRingDefault, 4 * ctGiB, tuned{8, 512, 16 * ctMiB, 2}, nil},
		{CTRingHopper, ctKiB, tuned{1, 384, 128, 8}, nil},
		{CTRingHopper, 128 * ctKiB, tuned{1, 512, 16 * ctKiB, 8}, nil},
		{CTRingHopper, 8 * ctMiB, tuned{2, 512, 256 * ctKiB, 32}, nil},
		{CTRingHopper, 16 * ctMiB, tuned{4, 512, 512 * ctKiB, 32}, nil},
		{CTRingHopper, 32 * ctMiB, tuned{4, 512, 2 * ctMiB, 16}, nil},
		{CTRingHopper, 64 * ctMiB, tuned{4, 512, 4 * ctMiB, 8}, nil},
		{CTRingHopper, 128 * ctMiB, tuned{4, 512, 4 * ctMiB, 8}, nil},
		{CTRingHopper, 4 * ctGiB, tuned{4, 512, 4 * ctMiB, 8}, nil},
	}
	for _, tt := range tests {
		k := DefaultCTRingKnobs()
		k.Arch = tt.arch
		got := tunedOf(CTRingTune(k, tt.msg, 8, 4, ctOccBlocks, ctOccBlockSize))
		if got != tt.want {
			t.Errorf("%s %d bytes, 8 ranks: got %+v, want %+v", tt.arch, tt.msg, got, tt.want)
		}
		if tt.ctran != nil && *tt.ctran == tt.want {
			t.Errorf("%s %d bytes: the seed's vector equals CTRAN's %+v; drop the deviation note", tt.arch, tt.msg, *tt.ctran)
		}
	}
}

// TestCTRingTuneRanks pins decisions on 8..128 ranks, powers of two or
// not, worked by hand from the arithmetic.
func TestCTRingTuneRanks(t *testing.T) {
	tests := []struct {
		arch   CTRingArch
		msg    int64
		nranks int
		depth  int
		want   tuned
	}{
		// The share is of the rounded message: pow2(6 MiB) = 8 MiB (tie
		// up), 1 MiB per rank -> depth 4, though 6 MiB / 8 is 768 KiB.
		{CTRingHopper, 6 * ctMiB, 8, 4, tuned{2, 512, 256 * ctKiB, 32}},
		// And down: pow2(23 MiB) = 16 MiB, 16 MiB / 20 < 1 MiB -> depth 2,
		// though 23 MiB / 20 > 1 MiB. pow2(20) = 16: 32 slots of 512 KiB.
		{CTRingHopper, 23 * ctMiB, 20, 2, tuned{4, 512, 512 * ctKiB, 32}},
		// pow2(12) = 16 (tie up): 4 x 16 slots of 16 MiB / 64 = 256 KiB.
		{CTRingHopper, 12 * ctMiB, 12, 4, tuned{2, 512, 256 * ctKiB, 64}},
		// pow2(100) = 128: 128 slots of 8 KiB.
		{CTRingHopper, ctMiB, 100, 1, tuned{1, 384, 8 * ctKiB, 128}},
		{CTRingHopper, ctGiB, 64, 1, tuned{4, 512, 512 * ctKiB, 64}},
		{CTRingHopper, ctGiB, 128, 1, tuned{2, 512, 256 * ctKiB, 128}},
		{CTRingDefault, 64 * ctMiB, 16, 4, tuned{8, 512, ctMiB, 32}},
		// pow2(48 MiB) = 64 MiB and pow2(96) = 128, both ties: 64 MiB / 96
		// = 699050 per rank -> depth 2; 256 slots of 256 KiB, halved by
		// staging. 96 > 32 ranks, but growth 64 MiB / 64 MiB = 1.
		{CTRingDefault, 48 * ctMiB, 96, 2, tuned{8, 512, 256 * ctKiB, 128}},
		// Large chunks, growth 2 <= depth 4: unchanged.
		{CTRingDefault, 256 * ctMiB, 64, 4, tuned{8, 512, 512 * ctKiB, 64}},
		// Growth 8 > depth 2: 1 MiB x 8/2 capped at 2 MiB, 32 slots -> 16.
		{CTRingDefault, ctGiB, 64, 2, tuned{8, 512, 2 * ctMiB, 16}},
		// Growth 8 > depth 4: 256 KiB x 8/4 = 512 KiB, 128 slots -> 64.
		{CTRingDefault, ctGiB, 128, 4, tuned{8, 512, 512 * ctKiB, 64}},
		// Growth 16 > depth 2: 512 KiB x 16/2 capped at 2 MiB, 64 -> 16.
		{CTRingDefault, 2 * ctGiB, 128, 2, tuned{8, 512, 2 * ctMiB, 16}},
		// Depth 1, 2 MiB chunks already: nothing to grow.
		{CTRingDefault, 2 * ctGiB, 64, 1, tuned{8, 512, 2 * ctMiB, 16}},
	}
	for _, tt := range tests {
		k := DefaultCTRingKnobs()
		k.Arch = tt.arch
		res := CTRingTune(k, tt.msg, tt.nranks, 4, ctOccBlocks, ctOccBlockSize)
		if got := tunedOf(res); got != tt.want || res.Depth != tt.depth {
			t.Errorf("%s %d bytes, %d ranks: got depth %d %+v, want depth %d %+v",
				tt.arch, tt.msg, tt.nranks, res.Depth, got, tt.depth, tt.want)
		}
	}
}

// TestCTRingTuneSweep checks invariants on every rank count 8..128 and
// every power-of-two message and midpoint from 1 byte to 16 GiB: the auto
// chunk is a power of two in [1, 16 MiB], and chunk x chunks fits both the
// max BDP and the staging buffer.
func TestCTRingTuneSweep(t *testing.T) {
	for _, arch := range []CTRingArch{CTRingHopper, CTRingDefault} {
		k := DefaultCTRingKnobs()
		k.Arch = arch
		for n := 8; n <= 128; n++ {
			for e := 0; e <= 34; e++ {
				for _, msg := range []int64{1 << e, 3 << e >> 1} {
					res := CTRingTune(k, msg, n, 1, ctOccBlocks, ctOccBlockSize)
					c, nc := res.ChunkBytes, res.NumChunks
					limit := min(res.MaxBDP, ctringStaging)
					if bits.OnesCount64(uint64(c)) != 1 || c > ctringMaxChunk || nc < 1 || c*nc > limit {
						t.Fatalf("%s %d bytes, %d ranks: got %d chunks x %d bytes, want a power-of-two chunk <= %d, >= 1 chunk, product <= %d",
							arch, msg, n, nc, c, ctringMaxChunk, limit)
					}
				}
			}
		}
	}
}

// TestCTRingTuneOverrides covers every CVAR the tuner reads, and the
// occupancy caps.
func TestCTRingTuneOverrides(t *testing.T) {
	tests := []struct {
		name   string
		set    func(k *CTRingKnobs)
		arch   CTRingArch
		msg    int64
		nranks int
		esize  int
		occ    [2]int
		want   tuned
		maxBDP int64
	}{
		{"auto", nil, CTRingHopper, 8 * ctMiB, 8, 4, [2]int{64, 512}, tuned{2, 512, 256 * ctKiB, 32}, 32 * ctMiB},
		{"TMPBUF_CHUNK_SIZE alone keeps the auto count", func(k *CTRingKnobs) { k.TmpbufChunkSize = ctMiB },
			CTRingHopper, 8 * ctMiB, 8, 4, [2]int{64, 512}, tuned{4, 512, ctMiB, 32}, 32 * ctMiB},
		{"TMPBUF_NUM_CHUNKS alone keeps the auto chunk", func(k *CTRingKnobs) { k.TmpbufNumChunks = 4 },
			CTRingHopper, 8 * ctMiB, 8, 4, [2]int{64, 512}, tuned{2, 512, 256 * ctKiB, 4}, 32 * ctMiB},
		{"both TMPBUF", func(k *CTRingKnobs) { k.TmpbufChunkSize, k.TmpbufNumChunks = 64*ctKiB, 8 },
			CTRingHopper, 8 * ctMiB, 8, 4, [2]int{64, 512}, tuned{1, 512, 64 * ctKiB, 8}, 32 * ctMiB},
		// 1001 bytes is aligned down to 1000, and the count re-derived
		// from the message: ceil(8 MiB / 1000) = 8389.
		{"TMPBUF_CHUNK_SIZE aligned down to the type", func(k *CTRingKnobs) { k.TmpbufChunkSize, k.TmpbufNumChunks = 1001, 3 },
			CTRingHopper, 8 * ctMiB, 8, 4, [2]int{64, 512}, tuned{1, 384, 1000, 8389}, 32 * ctMiB},
		{"TMPBUF_CHUNK_SIZE below the type is one element", func(k *CTRingKnobs) { k.TmpbufChunkSize = 3 },
			CTRingHopper, 8 * ctMiB, 8, 8, [2]int{64, 512}, tuned{1, 384, 8, ctMiB}, 32 * ctMiB},
		// 16 bytes on 8 ranks: 2-byte auto chunks become one 8-byte
		// element each, 2 of them.
		{"auto chunk below the type", nil, CTRingHopper, 16, 8, 8, [2]int{64, 512}, tuned{1, 384, 8, 2}, 32 * ctMiB},
		{"empty message", nil, CTRingHopper, 0, 8, 4, [2]int{64, 512}, tuned{1, 384, 4, 1}, 32 * ctMiB},
		{"one rank", nil, CTRingHopper, ctMiB, 1, 4, [2]int{64, 512}, tuned{2, 512, 256 * ctKiB, 4}, 32 * ctMiB},
		// 64 MiB, 8 MiB per rank -> depth 1; partition 8 MiB in 8 slots.
		{"AUTO_TUNE_MAX_BDP smaller", func(k *CTRingKnobs) { k.AutoTuneMaxBDP = 8 * ctMiB },
			CTRingHopper, 64 * ctMiB, 8, 4, [2]int{64, 512}, tuned{4, 512, ctMiB, 8}, 8 * ctMiB},
		// Not a power of two: 64 MiB halves to 32 MiB, the first <= 48 MiB.
		{"AUTO_TUNE_MAX_BDP not a power of two", func(k *CTRingKnobs) { k.AutoTuneMaxBDP = 48 * ctMiB },
			CTRingHopper, 64 * ctMiB, 8, 4, [2]int{64, 512}, tuned{4, 512, 4 * ctMiB, 8}, 48 * ctMiB},
		// 256 MiB partition: 32 MiB chunks clamped to 16 MiB, 16 slots,
		// divided by 256/32 = 8 for staging.
		{"AUTO_TUNE_MAX_BDP larger", func(k *CTRingKnobs) { k.AutoTuneMaxBDP = 256 * ctMiB },
			CTRingDefault, ctGiB, 8, 4, [2]int{64, 512}, tuned{8, 512, 16 * ctMiB, 2}, 256 * ctMiB},
		// 32 MiB on 8 ranks: 16 slots of 2 MiB; 32 MiB / 8 MiB staging = 4.
		{"STAGING_BUF_SIZE", func(k *CTRingKnobs) { k.StagingBufSize = 8 * ctMiB },
			CTRingHopper, 32 * ctMiB, 8, 4, [2]int{64, 512}, tuned{4, 512, 2 * ctMiB, 4}, 32 * ctMiB},
		{"STAGING_BUF_SIZE above the partition", func(k *CTRingKnobs) { k.StagingBufSize = ctGiB },
			CTRingDefault, 128 * ctMiB, 8, 4, [2]int{64, 512}, tuned{8, 512, 8 * ctMiB, 16}, 128 * ctMiB},
		{"MIN_SHARD_SIZE is the generator's, not the tuner's", func(k *CTRingKnobs) { k.MinShardSize = ctMiB },
			CTRingHopper, 8 * ctMiB, 8, 4, [2]int{64, 512}, tuned{2, 512, 256 * ctKiB, 32}, 32 * ctMiB},
		{"LARGE_CHUNK_RANK_THRESHOLD default 32", nil, CTRingDefault, ctGiB, 64, 4, [2]int{64, 512}, tuned{8, 512, 2 * ctMiB, 16}, 128 * ctMiB},
		{"LARGE_CHUNK_RANK_THRESHOLD 0 disables", func(k *CTRingKnobs) { k.LargeChunkRankThreshold = 0 },
			CTRingDefault, ctGiB, 64, 4, [2]int{64, 512}, tuned{8, 512, ctMiB, 32}, 128 * ctMiB},
		{"LARGE_CHUNK_RANK_THRESHOLD -1 disables", func(k *CTRingKnobs) { k.LargeChunkRankThreshold = -1 },
			CTRingDefault, ctGiB, 64, 4, [2]int{64, 512}, tuned{8, 512, ctMiB, 32}, 128 * ctMiB},
		{"LARGE_CHUNK_RANK_THRESHOLD = nranks", func(k *CTRingKnobs) { k.LargeChunkRankThreshold = 64 },
			CTRingDefault, ctGiB, 64, 4, [2]int{64, 512}, tuned{8, 512, ctMiB, 32}, 128 * ctMiB},
		{"LARGE_CHUNK_RANK_THRESHOLD = nranks-1", func(k *CTRingKnobs) { k.LargeChunkRankThreshold = 63 },
			CTRingDefault, ctGiB, 64, 4, [2]int{64, 512}, tuned{8, 512, 2 * ctMiB, 16}, 128 * ctMiB},
		{"LARGE_CHUNK_RANK_THRESHOLD: Default tables only", nil, CTRingHopper, ctGiB, 64, 4, [2]int{64, 512}, tuned{4, 512, 512 * ctKiB, 64}, 32 * ctMiB},
		// Growth only exists when the partition was halved, so with the
		// max BDP at 32 MiB the staging test (part > 32 MiB) never passes.
		{"LARGE_CHUNK_RANK_THRESHOLD under the staging size", func(k *CTRingKnobs) { k.AutoTuneMaxBDP = 32 * ctMiB },
			CTRingDefault, ctGiB, 64, 4, [2]int{64, 512}, tuned{8, 512, 256 * ctKiB, 128}, 32 * ctMiB},
		{"MAX_NUM_THREAD_BLOCKS caps", func(k *CTRingKnobs) { k.MaxNumThreadBlocks = 2 },
			CTRingDefault, ctMiB, 8, 4, [2]int{64, 512}, tuned{2, 512, 64 * ctKiB, 16}, 128 * ctMiB},
		{"MAX_NUM_THREAD_BLOCKS above the tier", func(k *CTRingKnobs) { k.MaxNumThreadBlocks = 16 },
			CTRingDefault, ctMiB, 8, 4, [2]int{64, 512}, tuned{8, 512, 64 * ctKiB, 16}, 128 * ctMiB},
		{"NUM_THREAD_BLOCKS forces", func(k *CTRingKnobs) { k.NumThreadBlocks = 3 },
			CTRingDefault, ctMiB, 8, 4, [2]int{64, 512}, tuned{3, 512, 64 * ctKiB, 16}, 128 * ctMiB},
		{"NUM_THREAD_BLOCKS forces past occupancy", func(k *CTRingKnobs) { k.NumThreadBlocks = 16 },
			CTRingDefault, ctMiB, 8, 4, [2]int{4, 512}, tuned{16, 512, 64 * ctKiB, 16}, 128 * ctMiB},
		{"NUM_THREAD_BLOCKS under MAX", func(k *CTRingKnobs) { k.NumThreadBlocks, k.MaxNumThreadBlocks = 2, 4 },
			CTRingDefault, ctMiB, 8, 4, [2]int{64, 512}, tuned{2, 512, 64 * ctKiB, 16}, 128 * ctMiB},
		{"NUM_THREAD_BLOCKS over MAX is capped (Check refuses it)", func(k *CTRingKnobs) { k.NumThreadBlocks, k.MaxNumThreadBlocks = 6, 4 },
			CTRingDefault, ctMiB, 8, 4, [2]int{64, 512}, tuned{4, 512, 64 * ctKiB, 16}, 128 * ctMiB},
		{"THREAD_BLOCK_SIZE", func(k *CTRingKnobs) { k.ThreadBlockSize = 128 },
			CTRingHopper, ctKiB, 8, 4, [2]int{64, 512}, tuned{1, 128, 128, 8}, 32 * ctMiB},
		{"THREAD_BLOCK_SIZE over occupancy is capped (Check refuses it)", func(k *CTRingKnobs) { k.ThreadBlockSize = 1024 },
			CTRingHopper, ctKiB, 8, 4, [2]int{64, 512}, tuned{1, 512, 128, 8}, 32 * ctMiB},
		{"occupancy caps blocks", nil, CTRingDefault, ctMiB, 8, 4, [2]int{2, 512}, tuned{2, 512, 64 * ctKiB, 16}, 128 * ctMiB},
		{"occupancy caps the Default block size", nil, CTRingDefault, ctMiB, 8, 4, [2]int{64, 256}, tuned{8, 256, 64 * ctKiB, 16}, 128 * ctMiB},
		{"occupancy caps the Hopper block size", nil, CTRingHopper, ctKiB, 8, 4, [2]int{64, 256}, tuned{1, 256, 128, 8}, 32 * ctMiB},
		{"QP_SCALING_TH has no effect", func(k *CTRingKnobs) { k.QPScalingThMin, k.QPScalingThMax = -1, 0 },
			CTRingHopper, 8 * ctMiB, 8, 4, [2]int{64, 512}, tuned{2, 512, 256 * ctKiB, 32}, 32 * ctMiB},
	}
	for _, tt := range tests {
		k := DefaultCTRingKnobs()
		k.Arch = tt.arch
		if tt.set != nil {
			tt.set(&k)
		}
		res := CTRingTune(k, tt.msg, tt.nranks, tt.esize, tt.occ[0], tt.occ[1])
		if got := tunedOf(res); got != tt.want || res.MaxBDP != tt.maxBDP {
			t.Errorf("%s: got %+v max BDP %d, want %+v max BDP %d", tt.name, got, res.MaxBDP, tt.want, tt.maxBDP)
		}
	}
}

func TestCTRingTuneBidir(t *testing.T) {
	tests := []struct {
		arch  CTRingArch
		limit int64
		msg   int64
		want  bool
	}{
		{CTRingHopper, -2, 4 * ctMiB, true}, // auto: Hopper up to 4 MiB
		{CTRingHopper, -2, 4*ctMiB + 1, false},
		{CTRingDefault, -2, 128 * ctMiB, true}, // auto: Default up to 128 MiB
		{CTRingDefault, -2, 128*ctMiB + 1, false},
		{CTRingHopper, 0, 0, false}, // off
		{CTRingHopper, 0, 1, false},
		{CTRingDefault, 0, 1, false},
		{CTRingHopper, -1, 64 * ctGiB, true}, // on for every size
		{CTRingHopper, -3, 64 * ctGiB, true}, // any other negative: on
		{CTRingDefault, math.MinInt64, 1, true},
		{CTRingHopper, 1000, 1000, true}, // a cap
		{CTRingHopper, 1000, 1001, false},
		{CTRingDefault, 1, 0, true},
	}
	for _, tt := range tests {
		k := DefaultCTRingKnobs()
		k.Arch, k.BidirAGMaxSize = tt.arch, tt.limit
		if got := CTRingTune(k, tt.msg, 8, 1, ctOccBlocks, ctOccBlockSize).Bidir; got != tt.want {
			t.Errorf("%s BIDIR_AG_MAX_SIZE=%d, %d bytes: got bidir %v, want %v", tt.arch, tt.limit, tt.msg, got, tt.want)
		}
	}
}

func TestCTRingStrings(t *testing.T) {
	tests := []struct{ got, want string }{
		{CTRingHopper.String(), "hopper"},
		{CTRingDefault.String(), "default"},
		{CTRingArch(7).String(), "CTRingArch(7)"},
		{CTRingTune(DefaultCTRingKnobs(), 8*ctMiB, 8, 4, ctOccBlocks, ctOccBlockSize).String(),
			"depth 4, chunks 32 x 262144B, blocks 2 x 512, bidir false, max BDP 33554432B"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestCTRingTunePanics(t *testing.T) {
	bad := []struct {
		name                                      string
		msg                                       int64
		nranks, typeSize, occBlocks, occBlockSize int
	}{
		{"negative message", -1, 8, 4, 64, 512},
		{"no ranks", 1, 0, 4, 64, 512},
		{"no type size", 1, 8, 0, 64, 512},
		{"no occupancy blocks", 1, 8, 4, 0, 512},
		{"no occupancy threads", 1, 8, 4, 64, 0},
	}
	for _, tt := range bad {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: CTRingTune did not panic", tt.name)
				}
			}()
			CTRingTune(DefaultCTRingKnobs(), tt.msg, tt.nranks, tt.typeSize, tt.occBlocks, tt.occBlockSize)
		}()
	}
}
