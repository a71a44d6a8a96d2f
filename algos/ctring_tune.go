package algos

// CTRING's auto-tuner (seed 002, "Chunking Strategy" and "Resource Tuning"):
// for one all-reduce it decides the chunk size, the number of chunk slots,
// the blocks that reduce and copy a chunk, and whether the all-gather runs
// both ways round the ring. The arithmetic is CTRAN's auto-tuner as
// wave2-algorithms-design.md §2.5 transcribes it; the pipeline-depth tiers
// are the seed's.
//
// The idea: size the pipeline by the bytes each rank owns. A small share
// gets one chunk slot per rank, a middling one a deeper pipeline so that
// sends overlap reductions, and a large one is cut into partitions no larger
// than the bandwidth-delay product (max BDP) and moved in a few big chunks.
// 64 MiB on 8 ranks with the Hopper tables:
//
//	pow2(64 MiB) = 64 MiB, 8 MiB per rank  -> depth 1 (the >= 8 MiB tier)
//	partition: 64 MiB halved to the 32 MiB max BDP
//	chunk slots: depth 1 x 8 ranks = 8, of 32 MiB / 8 = 4 MiB each
//	blocks: a 4 MiB chunk is in the >= 512 KiB tier -> 4 x 512
//	bidirectional all-gather: 64 MiB > 4 MiB, Hopper's cap -> off

import (
	"fmt"
	"math"
	"math/bits"
)

// CTRingTuning is what the tuner decided for one all-reduce.
type CTRingTuning struct {
	// Depth is the pipeline depth the tier table gave: chunk slots per rank
	// before clamps, scale-downs and overrides.
	Depth int
	// ChunkBytes is the bytes one round moves, a multiple of the type size.
	ChunkBytes int64
	// NumChunks is the number of chunk slots in the staging buffers.
	NumChunks int64
	// NumBlocks and BlockSize are CTRAN's kernel launch shape. cc reports
	// them; BlockSize has no effect on a CPU.
	NumBlocks, BlockSize int
	// Bidir says the all-gather runs both ways round the ring.
	Bidir bool
	// MaxBDP is the largest partition in bytes that was in force.
	MaxBDP int64
}

// String renders the decision like CTRAN's auto-tune log line.
func (t CTRingTuning) String() string {
	return fmt.Sprintf("depth %d, chunks %d x %dB, blocks %d x %d, bidir %v, max BDP %dB",
		t.Depth, t.NumChunks, t.ChunkBytes, t.NumBlocks, t.BlockSize, t.Bidir, t.MaxBDP)
}

const (
	ctringMaxChunk   = 16 << 20 // the auto chunk is clamped to [1, 16 MiB]
	ctringLargeChunk = 2 << 20  // the Default tables' large-chunk target
	ctringStaging    = 32 << 20 // staging bytes per direction when unset
	ctringBidirAuto  = -2       // BIDIR_AG_MAX_SIZE: decide by arch
	ctringTierEnd    = math.MaxUint64
)

// ctringDepthTier: per-rank bytes below upTo get depth chunk slots per rank.
type ctringDepthTier struct {
	upTo  uint64
	depth int
}

// ctringBlockTier: chunks below upTo get blocks blocks of blockSize threads
// (0: the occupancy block size), each capped by occupancy.
type ctringBlockTier struct {
	upTo              uint64
	blocks, blockSize int
}

// ctringArchTables is one arch's column of CTRAN's constants and tables.
type ctringArchTables struct {
	maxBDP, bidirMax int64
	depth            []ctringDepthTier
	blocks           []ctringBlockTier
}

var ctringArchs = [...]ctringArchTables{
	CTRingHopper: {
		maxBDP: 32 << 20, bidirMax: 4 << 20,
		depth: []ctringDepthTier{
			{32 << 10, 1},      // < 32 KiB per rank: latency-bound, one slot each
			{1 << 20, 2},       // < 1 MiB: double-buffered
			{4 << 20, 4},       // < 4 MiB: deepest pipeline
			{8 << 20, 2},       // < 8 MiB: partitions near the 32 MiB max BDP
			{ctringTierEnd, 1}, // larger: max-BDP partitions, big chunks
		},
		blocks: []ctringBlockTier{
			{16 << 10, 1, 384},
			{128 << 10, 1, 512},
			{512 << 10, 2, 512},
			{ctringTierEnd, 4, 512},
		},
	},
	CTRingDefault: {
		maxBDP: 128 << 20, bidirMax: 128 << 20,
		// Seed 002's table, which our issue's acceptance names. CTRAN's
		// current AllReduceRingAutoTune.cc has no depth-4 row (<32K:1,
		// <1M:2, <32M:2, else 1; wave2-algorithms-design.md §2.5); an
		// earlier revision (torchcomms c4f0d05) had exactly this one. Per-rank
		// shares of 1 MiB up to 16 MiB therefore get depth 4 here and 2 in
		// CTRAN. Of CTRAN's golden vectors only 64 MiB on 8 ranks changes:
		// CTRAN expects 8 chunks of 4 MiB, this table gives 16 of 2 MiB
		// (TestCTRingTuneGolden).
		depth: []ctringDepthTier{
			{32 << 10, 1},      // < 32 KiB per rank: latency-bound, one slot each
			{1 << 20, 2},       // < 1 MiB: double-buffered
			{16 << 20, 4},      // < 16 MiB: deepest pipeline
			{32 << 20, 2},      // < 32 MiB: partitions near the staging size
			{ctringTierEnd, 1}, // larger: max-BDP partitions, big chunks
		},
		blocks: []ctringBlockTier{
			{8 << 10, 1, 0},
			{32 << 10, 2, 0},
			{64 << 10, 4, 0},
			{ctringTierEnd, 8, 0},
		},
	},
}

// depthFor returns the depth of the first tier with perRank below its end.
func (a *ctringArchTables) depthFor(perRank uint64) int {
	for _, t := range a.depth {
		if perRank < t.upTo {
			return t.depth
		}
	}
	panic("unreachable: the last depth tier ends at MaxUint64")
}

// blocksFor returns the block count and size of the first tier with chunk
// below its end, each capped by occupancy.
func (a *ctringArchTables) blocksFor(chunk uint64, occBlocks, occBlockSize int) (n, size int) {
	for _, t := range a.blocks {
		if chunk < t.upTo {
			size = t.blockSize
			if size == 0 {
				size = occBlockSize
			}
			return min(t.blocks, occBlocks), min(size, occBlockSize)
		}
	}
	panic("unreachable: the last block tier ends at MaxUint64")
}

// ctringPow2 rounds n to the nearest power of two, ties up (3 -> 4, 6 -> 8,
// 5 -> 4); 1 for n <= 1.
func ctringPow2(n uint64) uint64 {
	if n <= 1 {
		return 1
	}
	lo := uint64(1) << (63 - bits.LeadingZeros64(n))
	if lo == n || lo == 1<<63 { // a power of two, or no larger one fits
		return lo
	}
	if hi := lo << 1; n-lo >= hi-n {
		return hi
	}
	return lo
}

func ceilDivU(x, y uint64) uint64 { return x/y + min(x%y, 1) }

// CTRingTune decides the chunking, blocks and all-gather direction of one
// all-reduce of msgBytes on nranks ranks, elements of typeSize bytes, with
// occupancy occBlocks x occBlockSize (CTRAN: what the GPU can hold; cc
// reports the blocks uncapped, with CTRingBlockSize, and its schedules do
// not use them: a lane runs on one goroutine).
// It is pure and never fails: run k.Check first. Where Check would refuse,
// the tuner caps (NUM_THREAD_BLOCKS to MAX_NUM_THREAD_BLOCKS,
// THREAD_BLOCK_SIZE to occBlockSize). It panics if msgBytes is negative,
// another count is below 1, or k.Arch is neither arch.
func CTRingTune(k CTRingKnobs, msgBytes int64, nranks, typeSize, occBlocks, occBlockSize int) CTRingTuning {
	if msgBytes < 0 || nranks < 1 || typeSize < 1 || occBlocks < 1 || occBlockSize < 1 {
		panic(fmt.Sprintf("ctring tune: msgBytes %d, nranks %d, typeSize %d, occupancy %d x %d: want msgBytes >= 0, the others >= 1",
			msgBytes, nranks, typeSize, occBlocks, occBlockSize))
	}
	arch := &ctringArchs[k.Arch]
	msg := uint64(msgBytes)
	t := CTRingTuning{MaxBDP: k.maxBDP()}
	depth, chunk, numChunks := k.pipeline(arch, msg, uint64(nranks), uint64(t.MaxBDP))
	t.Depth = depth

	// The CVARs override the tuner, then the chunk is aligned down to whole
	// elements; an aligned chunk re-derives the slot count from the message.
	if k.TmpbufNumChunks > 0 {
		numChunks = uint64(k.TmpbufNumChunks)
	}
	if k.TmpbufChunkSize > 0 {
		chunk = uint64(k.TmpbufChunkSize)
	}
	ts := uint64(typeSize)
	if aligned := max(chunk/ts, 1) * ts; aligned != chunk {
		chunk = aligned
		numChunks = max(ceilDivU(msg, chunk), 1)
	}
	t.ChunkBytes, t.NumChunks = int64(chunk), int64(numChunks)

	t.NumBlocks, t.BlockSize = arch.blocksFor(chunk, occBlocks, occBlockSize)
	switch {
	case k.NumThreadBlocks > 0:
		t.NumBlocks = k.NumThreadBlocks
		if k.MaxNumThreadBlocks > 0 { // Check refuses NUM above MAX
			t.NumBlocks = min(t.NumBlocks, k.MaxNumThreadBlocks)
		}
	case k.MaxNumThreadBlocks > 0:
		t.NumBlocks = min(t.NumBlocks, k.MaxNumThreadBlocks)
	}
	if k.ThreadBlockSize > 0 {
		t.BlockSize = min(k.ThreadBlockSize, occBlockSize)
	}

	t.Bidir = k.bidir(arch, msgBytes)
	return t
}

// pipeline is the auto-tuned chunking, before the CVARs: the depth from
// the per-rank share, the partition (the message rounded to a power of two
// and halved down to maxBDP), depth x pow2(nranks) slots of a clamped
// chunk, then the staging scale-down.
func (k CTRingKnobs) pipeline(arch *ctringArchTables, msg, nranks, maxBDP uint64) (depth int, chunk, numChunks uint64) {
	whole := ctringPow2(msg)
	depth = arch.depthFor(whole / nranks)
	part := whole
	for part > maxBDP {
		part /= 2
	}
	// part / (depth x pow2(nranks)), as two divisions that cannot overflow.
	chunk = min(max(part/uint64(depth)/ctringPow2(nranks), 1), ctringMaxChunk)
	numChunks = max(ceilDivU(part, chunk), 1)

	staging := uint64(k.stagingBytes())
	if part <= staging {
		return depth, chunk, numChunks
	}
	numChunks = max(numChunks/ceilDivU(part, staging), 1)
	if k.Arch == CTRingDefault && k.LargeChunkRankThreshold > 0 && nranks > uint64(k.LargeChunkRankThreshold) {
		chunk, numChunks = largeChunks(chunk, numChunks, whole/part, uint64(depth))
	}
	return depth, chunk, numChunks
}

// largeChunks is the Default tables' rule for many ranks: when the message
// is growth times the partition and growth exceeds the depth, chunks below
// 2 MiB grow by growth/depth, up to 2 MiB, keeping chunk x numChunks.
// 1 GiB on 128 ranks: depth 4, 256 KiB x 128 slots, growth 8 -> 512 KiB x 64.
func largeChunks(chunk, numChunks, growth, depth uint64) (uint64, uint64) {
	if growth <= depth || chunk >= ctringLargeChunk {
		return chunk, numChunks
	}
	grown := uint64(ctringLargeChunk)
	// chunk x growth / depth < 2 MiB exactly when growth is below
	// ceil(2 MiB x depth / chunk); then the product cannot overflow.
	if growth < ceilDivU(ctringLargeChunk*depth, chunk) {
		grown = chunk * growth / depth
	}
	return grown, max(chunk*numChunks/grown, 1)
}

// maxBDP is AUTO_TUNE_MAX_BDP, or the arch's.
func (k CTRingKnobs) maxBDP() int64 {
	if k.AutoTuneMaxBDP > 0 {
		return k.AutoTuneMaxBDP
	}
	return ctringArchs[k.Arch].maxBDP
}

// stagingBytes is the staging buffer per direction: the two TMPBUF CVARs'
// product when both are set, else STAGING_BUF_SIZE, else 32 MiB.
func (k CTRingKnobs) stagingBytes() int64 {
	switch {
	case k.TmpbufChunkSize > 0 && k.TmpbufNumChunks > 0:
		if k.TmpbufChunkSize > math.MaxInt64/k.TmpbufNumChunks {
			return math.MaxInt64
		}
		return k.TmpbufChunkSize * k.TmpbufNumChunks
	case k.StagingBufSize > 0:
		return k.StagingBufSize
	}
	return ctringStaging
}

// bidir applies BIDIR_AG_MAX_SIZE: 0 off, -2 the arch's cap, any other
// negative on, positive a cap.
func (k CTRingKnobs) bidir(arch *ctringArchTables, msgBytes int64) bool {
	switch lim := k.BidirAGMaxSize; {
	case lim == 0:
		return false
	case lim == ctringBidirAuto:
		return msgBytes <= arch.bidirMax
	case lim < 0:
		return true
	default:
		return msgBytes <= lim
	}
}
