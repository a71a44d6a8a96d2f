package param

// The ctring algorithm's knobs (seed 002; wave2-algorithms-design.md §2.5):
// CTRAN's twelve NCCL_CTRAN_ALLREDUCE_RING_* CVARs, with CTRAN's names,
// defaults and meanings, plus CC_CTRING_ARCH, which picks the tier tables
// that CTRAN takes from the GPU. They are parsed into Params.CTRing and
// checked together by algos.CTRingKnobs.Check.
//
// CTRAN's CVARs are unbounded integers where any value parses; ours have
// the bounds below, and a negative size or count is an error, except where
// CTRAN gives negatives a meaning (BIDIR_AG_MAX_SIZE -2 and -1, the
// QP_SCALING_TH pair).

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/seed-760dd1f1/cc/algos"
)

const (
	ctringPrefix = "NCCL_CTRAN_ALLREDUCE_RING_"
	// maxCTRingBytes caps every byte count at 1 GiB, as NCCL_BUFFSIZE: the
	// staging buffers are allocated per connection and direction, and
	// CTRAN's largest default (the GB200 max BDP) is 128 MiB.
	maxCTRingBytes = 1 << 30
	// maxCTRingChunks is depth 4 x 65536 ranks: the most chunk slots the
	// auto-tuner ever chooses (depth x pow2(nranks)) at bootstrap's rank
	// limit (bootstrap.MaxRanks).
	maxCTRingChunks = 4 << 16
	// maxCTRingRanks is bootstrap.MaxRanks: a rank threshold at or above it
	// can never be passed.
	maxCTRingRanks = 1 << 16
	// maxCTRingBlocks caps block counts. CTRAN's tables choose at most 8;
	// cc splits a round among blocks, so more than 1024 only multiplies
	// bookkeeping on any machine we run on.
	maxCTRingBlocks = 1024
)

// ctringKnobs are the table's rows for ctring, appended to knobs.
var ctringKnobs = []knob{
	ctringInt("TMPBUF_CHUNK_SIZE", "0", 0, maxCTRingBytes, "",
		"bytes of one CTRING chunk (the unit a shard moves in), overriding the auto-tuner; 0 = auto",
		func(k *algos.CTRingKnobs, n int64) { k.TmpbufChunkSize = n }),
	ctringInt("TMPBUF_NUM_CHUNKS", "0", 0, maxCTRingChunks, "",
		"CTRING chunk slots, overriding the auto-tuner; 0 = auto. Set with TMPBUF_CHUNK_SIZE, chunk size x chunks must not exceed the max BDP",
		func(k *algos.CTRingKnobs, n int64) { k.TmpbufNumChunks = n }),
	ctringInt("MIN_SHARD_SIZE", "16", 0, maxCTRingBytes, "",
		"bytes: the last-but-one CTRING partition is shortened so that the last one's shards hold at least this many",
		func(k *algos.CTRingKnobs, n int64) { k.MinShardSize = n }),
	ctringInt("MAX_NUM_THREAD_BLOCKS", "0", 0, maxCTRingBlocks, "",
		"caps the CTRING auto-tuner's block count; 0 = no cap. Blocks are reported in NCCL_DEBUG output",
		func(k *algos.CTRingKnobs, n int64) { k.MaxNumThreadBlocks = int(n) }),
	ctringInt("NUM_THREAD_BLOCKS", "0", 0, maxCTRingBlocks, "",
		"forces CTRING's block count, at most MAX_NUM_THREAD_BLOCKS when that is set; 0 = auto. Blocks are reported in NCCL_DEBUG output",
		func(k *algos.CTRingKnobs, n int64) { k.NumThreadBlocks = int(n) }),
	ctringInt("THREAD_BLOCK_SIZE", "0", 0, algos.CTRingBlockSize, "",
		"forces CTRING's block size, at most the occupancy block size 512; 0 = auto. Validated, no effect on CPUs",
		func(k *algos.CTRingKnobs, n int64) { k.ThreadBlockSize = int(n) }),
	ctringInt("AUTO_TUNE_MAX_BDP", "0", 0, maxCTRingBytes, "",
		"largest CTRING partition in bytes; 0 = the arch's (hopper 32 MiB, default 128 MiB)",
		func(k *algos.CTRingKnobs, n int64) { k.AutoTuneMaxBDP = n }),
	ctringInt("LARGE_CHUNK_RANK_THRESHOLD", "32", 0, maxCTRingRanks, "",
		"with CC_CTRING_ARCH=default and more ranks than this, CTRING grows chunks towards 2 MiB for messages above the max BDP; 0 disables",
		func(k *algos.CTRingKnobs, n int64) { k.LargeChunkRankThreshold = int(n) }),
	ctringInt("QP_SCALING_TH_MIN", "262144", math.MinInt64, maxCTRingBytes, "an integer <= 1073741824 (negative disables)",
		"CTRAN's InfiniBand queue-pair scaling threshold, lower clamp. Validated, no effect (cc has no queue pairs)",
		func(k *algos.CTRingKnobs, n int64) { k.QPScalingThMin = n }),
	ctringInt("QP_SCALING_TH_MAX", "524288", math.MinInt64, maxCTRingBytes, "an integer <= 1073741824 (<= 0 or below QP_SCALING_TH_MIN disables)",
		"CTRAN's InfiniBand queue-pair scaling threshold, upper clamp. Validated, no effect (cc has no queue pairs)",
		func(k *algos.CTRingKnobs, n int64) { k.QPScalingThMax = n }),
	ctringInt("STAGING_BUF_SIZE", "0", 0, maxCTRingBytes, "",
		"CTRING staging bytes per direction; 0 = 32 MiB. A larger partition gets proportionally fewer chunk slots",
		func(k *algos.CTRingKnobs, n int64) { k.StagingBufSize = n }),
	ctringInt("BIDIR_AG_MAX_SIZE", "-2", -2, math.MaxInt64,
		"-2 (by arch: hopper 4 MiB, default 128 MiB), -1 (every size), 0 (never) or a positive number of bytes",
		"largest all-reduce in bytes whose CTRING all-gather runs both ways round the ring",
		func(k *algos.CTRingKnobs, n int64) { k.BidirAGMaxSize = n }),
	{
		name: "CC_CTRING_ARCH", kind: KindEnum, def: "hopper", allowed: "hopper, default (any case)",
		doc: "which of CTRAN's tables CTRING's auto-tuner uses: hopper (H100: 32 MiB max BDP, both-ways all-gather up to 4 MiB) or default (GB200: 128 MiB, 128 MiB, large chunks)",
		parse: func(p *Params, v string) error {
			switch {
			case strings.EqualFold(v, "hopper"):
				p.CTRing.Arch = algos.CTRingHopper
			case strings.EqualFold(v, "default"):
				p.CTRing.Arch = algos.CTRingDefault
			default:
				return errors.New("unknown arch (allowed: hopper, default; any case)")
			}
			return nil
		},
	},
}

// ctringInt is a row for NCCL_CTRAN_ALLREDUCE_RING_<suffix>: a decimal
// integer in lo..hi, stored by set. allowed describes the values when the
// range alone does not ("" for "lo..hi").
func ctringInt(suffix, def string, lo, hi int64, allowed, doc string, set func(*algos.CTRingKnobs, int64)) knob {
	want := allowed
	if allowed == "" {
		allowed = fmt.Sprintf("%d..%d", lo, hi)
		want = "an integer in " + allowed
	}
	return knob{
		name: ctringPrefix + suffix, kind: KindInt, def: def, allowed: allowed, doc: doc,
		parse: func(p *Params, v string) error {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < lo || n > hi {
				return errors.New("want " + want)
			}
			set(&p.CTRing, n)
			return nil
		},
	}
}

// checkCTRing runs algos.CTRingKnobs.Check: each inconsistency becomes an
// *Error on the variable at fault, quoting its value as the environment
// gave it.
func checkCTRing(p *Params) error {
	err := p.CTRing.Check()
	if err == nil {
		return nil
	}
	all := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		all = j.Unwrap()
	}
	for i, e := range all {
		if ke, ok := errors.AsType[*algos.CTRingKnobError](e); ok {
			all[i] = &Error{Name: ke.Name, Value: p.raw(ke.Name), Err: errors.New(ke.Reason)}
		}
	}
	return errors.Join(all...)
}
