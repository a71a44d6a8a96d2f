package algos

// The knobs of CTRING's auto-tuner (ctring_tune.go): CTRAN's
// NCCL_CTRAN_ALLREDUCE_RING_* CVARs and cc's CC_CTRING_ARCH, as
// runtime/param parses them, and the rules that tie several together.

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
)

// CTRingArch selects CTRAN's tier tables. CTRAN takes them from the GPU
// (Hopper below CUDA arch 10.0, Default from Blackwell on); cc has no GPU,
// so CC_CTRING_ARCH chooses.
type CTRingArch int

const (
	// CTRingHopper is CTRAN's H100 tables: 32 MiB max BDP, bidirectional
	// all-gather up to 4 MiB. It is cc's default (and the zero value):
	//   - its 32 MiB max BDP equals the 32 MiB staging default, so by
	//     default a partition always fits the staging buffer and the
	//     tuner never has to scale the slot count down;
	//   - a BDP is bandwidth x delay, and cc's links (memory copies through
	//     shared memory, TCP between hosts) are slower than either GPU's
	//     NVLink, so the smaller of CTRAN's two BDPs is the closer fit;
	//   - its 4 MiB bidirectional cap suits slow links, where the reverse
	//     direction competes with the forward one for the same bandwidth.
	CTRingHopper CTRingArch = iota
	// CTRingDefault is CTRAN's Default (GB200, Blackwell) tables: 128 MiB
	// max BDP, bidirectional all-gather up to 128 MiB, and chunks of up to
	// 2 MiB above LARGE_CHUNK_RANK_THRESHOLD ranks.
	CTRingDefault
)

// String returns the CC_CTRING_ARCH spelling: "hopper" or "default".
func (a CTRingArch) String() string {
	switch a {
	case CTRingHopper:
		return "hopper"
	case CTRingDefault:
		return "default"
	}
	return fmt.Sprintf("CTRingArch(%d)", int(a))
}

// CTRingBlockSize is cc's maximum-occupancy block size: the most "threads"
// a block may claim (CTRAN's maxOccupancyBlockSize on the GPUs it tunes
// for). A CPU has no blocks; the number is kept so that CTRAN's tables and
// THREAD_BLOCK_SIZE checks carry over.
const CTRingBlockSize = 512

// CTRingKnobs are the NCCL_CTRAN_ALLREDUCE_RING_* CVARs and CC_CTRING_ARCH,
// as runtime/param parsed them. A zero size or count means "auto", as in
// CTRAN; DefaultCTRingKnobs holds CTRAN's defaults.
type CTRingKnobs struct {
	// Arch is CC_CTRING_ARCH: which tier tables apply.
	Arch CTRingArch
	// TmpbufChunkSize is TMPBUF_CHUNK_SIZE: bytes per chunk, overriding the
	// tuner; 0 = auto.
	TmpbufChunkSize int64
	// TmpbufNumChunks is TMPBUF_NUM_CHUNKS: chunk slots, overriding the
	// tuner; 0 = auto. With TmpbufChunkSize it also sizes the staging buffer.
	TmpbufNumChunks int64
	// MinShardSize is MIN_SHARD_SIZE: bytes; the last-but-one partition is
	// shortened so that the last one has shards of at least this size.
	MinShardSize int64
	// AutoTuneMaxBDP is AUTO_TUNE_MAX_BDP: the largest partition in bytes;
	// 0 = the arch's (Hopper 32 MiB, Default 128 MiB).
	AutoTuneMaxBDP int64
	// StagingBufSize is STAGING_BUF_SIZE: staging bytes per direction; 0 =
	// 32 MiB. A larger partition has its slot count scaled down.
	StagingBufSize int64
	// BidirAGMaxSize is BIDIR_AG_MAX_SIZE: 0 never runs the all-gather both
	// ways, -2 decides by arch (Hopper up to 4 MiB, Default up to 128 MiB),
	// -1 or any other negative always does, > 0 does up to that many bytes.
	BidirAGMaxSize int64
	// QPScalingThMin and QPScalingThMax are QP_SCALING_TH_MIN and _MAX:
	// CTRAN clamps its InfiniBand queue-pair scaling threshold to them.
	// CTRAN disables the scaling when MIN < 0, MAX <= 0 or MAX < MIN; cc
	// accepts those as "disabled" too. cc has no queue pairs: both are
	// validated and have no effect.
	QPScalingThMin, QPScalingThMax int64
	// MaxNumThreadBlocks is MAX_NUM_THREAD_BLOCKS: caps the tuner's block
	// count; 0 = no cap.
	MaxNumThreadBlocks int
	// NumThreadBlocks is NUM_THREAD_BLOCKS: forces the block count; 0 =
	// auto. It may not exceed a non-zero MaxNumThreadBlocks.
	NumThreadBlocks int
	// ThreadBlockSize is THREAD_BLOCK_SIZE: forces the block size, at most
	// CTRingBlockSize; 0 = auto.
	ThreadBlockSize int
	// LargeChunkRankThreshold is LARGE_CHUNK_RANK_THRESHOLD: with the
	// Default tables and more ranks than this, chunks of partitions much
	// smaller than the message grow towards 2 MiB; <= 0 disables.
	LargeChunkRankThreshold int
}

// DefaultCTRingKnobs returns CTRAN's defaults (nccl_cvars.yaml) with cc's
// default arch, Hopper (see CTRingHopper for why).
func DefaultCTRingKnobs() CTRingKnobs {
	return CTRingKnobs{
		Arch:                    CTRingHopper,
		MinShardSize:            16,
		BidirAGMaxSize:          ctringBidirAuto,
		QPScalingThMin:          256 << 10,
		QPScalingThMax:          512 << 10,
		LargeChunkRankThreshold: 32,
	}
}

// The variables Check names, as the environment spells them.
const (
	ctringVarPrefix       = "NCCL_CTRAN_ALLREDUCE_RING_"
	ctringVarArch         = "CC_CTRING_ARCH"
	ctringVarNumBlocks    = ctringVarPrefix + "NUM_THREAD_BLOCKS"
	ctringVarMaxNumBlocks = ctringVarPrefix + "MAX_NUM_THREAD_BLOCKS"
	ctringVarBlockSize    = ctringVarPrefix + "THREAD_BLOCK_SIZE"
	ctringVarChunkSize    = ctringVarPrefix + "TMPBUF_CHUNK_SIZE"
	ctringVarNumChunks    = ctringVarPrefix + "TMPBUF_NUM_CHUNKS"
	ctringVarMaxBDP       = ctringVarPrefix + "AUTO_TUNE_MAX_BDP"
)

// CTRingKnobError is one inconsistency Check found: the variable at fault,
// its value, and why, naming the other variable involved and what is
// allowed.
type CTRingKnobError struct {
	Name   string
	Value  int64
	Reason string
}

// Error returns "NAME=value: reason".
func (e *CTRingKnobError) Error() string { return fmt.Sprintf("%s=%d: %s", e.Name, e.Value, e.Reason) }

// Check reports the combinations CTRAN refuses, and one it lets through
// that our issue calls an error, each as a *CTRingKnobError (several are
// joined with errors.Join):
//   - an Arch other than hopper or default;
//   - NUM_THREAD_BLOCKS above a non-zero MAX_NUM_THREAD_BLOCKS (CTRAN
//     throws);
//   - THREAD_BLOCK_SIZE above CTRingBlockSize, the occupancy block size
//     (CTRAN throws);
//   - TMPBUF_CHUNK_SIZE x TMPBUF_NUM_CHUNKS, both set, above the max BDP in
//     force (AUTO_TUNE_MAX_BDP, else the arch's).
//
// The QP_SCALING_TH pair has no invalid combination: CTRAN reads MIN < 0,
// MAX <= 0 and MAX < MIN as "scaling disabled", and so does cc, where the
// pair has no effect.
func (k CTRingKnobs) Check() error {
	var errs []error
	bad := func(name string, v int64, format string, args ...any) {
		errs = append(errs, &CTRingKnobError{Name: name, Value: v, Reason: fmt.Sprintf(format, args...)})
	}
	if k.Arch != CTRingHopper && k.Arch != CTRingDefault {
		bad(ctringVarArch, int64(k.Arch), "want %d (hopper) or %d (default)", CTRingHopper, CTRingDefault)
		return errors.Join(errs...) // the BDP check needs the arch's tables
	}
	if k.NumThreadBlocks > 0 && k.MaxNumThreadBlocks > 0 && k.NumThreadBlocks > k.MaxNumThreadBlocks {
		bad(ctringVarNumBlocks, int64(k.NumThreadBlocks), "above %s=%d (want NUM_THREAD_BLOCKS <= MAX_NUM_THREAD_BLOCKS, or either 0)",
			ctringVarMaxNumBlocks, k.MaxNumThreadBlocks)
	}
	if k.ThreadBlockSize > CTRingBlockSize {
		bad(ctringVarBlockSize, int64(k.ThreadBlockSize), "above the occupancy block size %d (want 0..%d)", CTRingBlockSize, CTRingBlockSize)
	}
	if c, n := k.TmpbufChunkSize, k.TmpbufNumChunks; c > 0 && n > 0 && c > k.maxBDP()/n {
		source := fmt.Sprintf("%s=%d", ctringVarMaxBDP, k.AutoTuneMaxBDP)
		if k.AutoTuneMaxBDP <= 0 {
			source = fmt.Sprintf("the %s arch's, %s=%s", k.Arch, ctringVarArch, k.Arch)
		}
		bad(ctringVarChunkSize, c, "times %s=%d is %s bytes, above the max BDP of %d bytes (%s); want chunk size x chunks <= max BDP",
			ctringVarNumChunks, n, mulString(c, n), k.maxBDP(), source)
	}
	return errors.Join(errs...)
}

// mulString is a x b in decimal, for positive a and b that may overflow.
func mulString(a, b int64) string {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi != 0 || lo > math.MaxInt64 {
		return fmt.Sprintf("%d x %d", a, b)
	}
	return fmt.Sprint(lo)
}
