package algos

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestCTRingKnobsCheck(t *testing.T) {
	const p = "NCCL_CTRAN_ALLREDUCE_RING_"
	tests := []struct {
		name string
		set  func(k *CTRingKnobs)
		want []string // the errors, in order; none for a consistent set
	}{
		{"defaults", func(k *CTRingKnobs) {}, nil},
		{"the zero value", func(k *CTRingKnobs) { *k = CTRingKnobs{} }, nil},
		{"NUM_THREAD_BLOCKS above MAX", func(k *CTRingKnobs) { k.NumThreadBlocks, k.MaxNumThreadBlocks = 8, 4 },
			[]string{p + "NUM_THREAD_BLOCKS=8: above " + p + "MAX_NUM_THREAD_BLOCKS=4 (want NUM_THREAD_BLOCKS <= MAX_NUM_THREAD_BLOCKS, or either 0)"}},
		{"NUM_THREAD_BLOCKS = MAX", func(k *CTRingKnobs) { k.NumThreadBlocks, k.MaxNumThreadBlocks = 4, 4 }, nil},
		{"NUM_THREAD_BLOCKS without MAX", func(k *CTRingKnobs) { k.NumThreadBlocks = 64 }, nil},
		{"MAX without NUM_THREAD_BLOCKS", func(k *CTRingKnobs) { k.MaxNumThreadBlocks = 1 }, nil},
		{"THREAD_BLOCK_SIZE 512", func(k *CTRingKnobs) { k.ThreadBlockSize = 512 }, nil},
		{"THREAD_BLOCK_SIZE 513", func(k *CTRingKnobs) { k.ThreadBlockSize = 513 },
			[]string{p + "THREAD_BLOCK_SIZE=513: above the occupancy block size 512 (want 0..512)"}},
		{"chunks fill the Hopper max BDP", func(k *CTRingKnobs) { k.TmpbufChunkSize, k.TmpbufNumChunks = 4*ctMiB, 8 }, nil},
		{"chunks above the Hopper max BDP", func(k *CTRingKnobs) { k.TmpbufChunkSize, k.TmpbufNumChunks = 4*ctMiB, 9 },
			[]string{p + "TMPBUF_CHUNK_SIZE=4194304: times " + p + "TMPBUF_NUM_CHUNKS=9 is 37748736 bytes, above the max BDP of 33554432 bytes " +
				"(the hopper arch's, CC_CTRING_ARCH=hopper); want chunk size x chunks <= max BDP"}},
		{"the same under the Default max BDP", func(k *CTRingKnobs) { k.Arch, k.TmpbufChunkSize, k.TmpbufNumChunks = CTRingDefault, 4*ctMiB, 9 }, nil},
		{"chunks above the Default max BDP", func(k *CTRingKnobs) { k.Arch, k.TmpbufChunkSize, k.TmpbufNumChunks = CTRingDefault, 16*ctMiB+1, 8 },
			[]string{p + "TMPBUF_CHUNK_SIZE=16777217: times " + p + "TMPBUF_NUM_CHUNKS=8 is 134217736 bytes, above the max BDP of 134217728 bytes " +
				"(the default arch's, CC_CTRING_ARCH=default); want chunk size x chunks <= max BDP"}},
		{"chunks above AUTO_TUNE_MAX_BDP", func(k *CTRingKnobs) { k.TmpbufChunkSize, k.TmpbufNumChunks, k.AutoTuneMaxBDP = ctMiB, 2, ctMiB },
			[]string{p + "TMPBUF_CHUNK_SIZE=1048576: times " + p + "TMPBUF_NUM_CHUNKS=2 is 2097152 bytes, above the max BDP of 1048576 bytes " +
				"(" + p + "AUTO_TUNE_MAX_BDP=1048576); want chunk size x chunks <= max BDP"}},
		{"AUTO_TUNE_MAX_BDP raises the limit", func(k *CTRingKnobs) { k.TmpbufChunkSize, k.TmpbufNumChunks, k.AutoTuneMaxBDP = ctGiB, 4, 4*ctGiB }, nil},
		{"overflowing product", func(k *CTRingKnobs) { k.TmpbufChunkSize, k.TmpbufNumChunks = math.MaxInt64, 4 },
			[]string{p + "TMPBUF_CHUNK_SIZE=9223372036854775807: times " + p + "TMPBUF_NUM_CHUNKS=4 is 9223372036854775807 x 4 bytes, above the max BDP of 33554432 bytes " +
				"(the hopper arch's, CC_CTRING_ARCH=hopper); want chunk size x chunks <= max BDP"}},
		{"TMPBUF_CHUNK_SIZE alone", func(k *CTRingKnobs) { k.TmpbufChunkSize = ctGiB }, nil},
		{"TMPBUF_NUM_CHUNKS alone", func(k *CTRingKnobs) { k.TmpbufNumChunks = 1 << 18 }, nil},
		{"QP scaling disabled by MIN < 0", func(k *CTRingKnobs) { k.QPScalingThMin = -1 }, nil},
		{"QP scaling disabled by MAX <= 0", func(k *CTRingKnobs) { k.QPScalingThMax = 0 }, nil},
		{"QP scaling disabled by MAX < MIN", func(k *CTRingKnobs) { k.QPScalingThMin, k.QPScalingThMax = 2*ctMiB, ctMiB }, nil},
		{"unknown arch", func(k *CTRingKnobs) { k.Arch = 2 }, []string{"CC_CTRING_ARCH=2: want 0 (hopper) or 1 (default)"}},
		{"several at once", func(k *CTRingKnobs) {
			k.NumThreadBlocks, k.MaxNumThreadBlocks, k.ThreadBlockSize = 2, 1, 1024
		}, []string{
			p + "NUM_THREAD_BLOCKS=2: above " + p + "MAX_NUM_THREAD_BLOCKS=1 (want NUM_THREAD_BLOCKS <= MAX_NUM_THREAD_BLOCKS, or either 0)",
			p + "THREAD_BLOCK_SIZE=1024: above the occupancy block size 512 (want 0..512)",
		}},
	}
	for _, tt := range tests {
		k := DefaultCTRingKnobs()
		tt.set(&k)
		err := k.Check()
		var got []string
		if err != nil {
			got = strings.Split(err.Error(), "\n")
			var ke *CTRingKnobError
			if !errors.As(err, &ke) {
				t.Errorf("%s: Check() = %v, not a *CTRingKnobError", tt.name, err)
			}
		}
		if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
			t.Errorf("%s: Check():\n got  %q\n want %q", tt.name, got, tt.want)
		}
	}
}

func TestDefaultCTRingKnobs(t *testing.T) {
	got := DefaultCTRingKnobs()
	want := CTRingKnobs{Arch: CTRingHopper, MinShardSize: 16, BidirAGMaxSize: -2,
		QPScalingThMin: 262144, QPScalingThMax: 524288, LargeChunkRankThreshold: 32}
	if got != want {
		t.Errorf("DefaultCTRingKnobs(): got %+v, want %+v", got, want)
	}
	if CTRingHopper != (CTRingKnobs{}).Arch {
		t.Errorf("the zero CTRingKnobs has arch %v, want cc's default hopper", (CTRingKnobs{}).Arch)
	}
}
