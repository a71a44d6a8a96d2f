package param

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
)

// cr is the prefix of CTRAN's ring CVARs.
const cr = "NCCL_CTRAN_ALLREDUCE_RING_"

func TestCTRingDefaults(t *testing.T) {
	got, want := Defaults().CTRing, algos.DefaultCTRingKnobs()
	if got != want {
		t.Errorf("Defaults().CTRing: got %+v, want algos.DefaultCTRingKnobs() %+v", got, want)
	}
	defaults := map[string]string{
		cr + "TMPBUF_CHUNK_SIZE": "0", cr + "TMPBUF_NUM_CHUNKS": "0", cr + "MIN_SHARD_SIZE": "16",
		cr + "MAX_NUM_THREAD_BLOCKS": "0", cr + "NUM_THREAD_BLOCKS": "0", cr + "THREAD_BLOCK_SIZE": "0",
		cr + "AUTO_TUNE_MAX_BDP": "0", cr + "LARGE_CHUNK_RANK_THRESHOLD": "32",
		cr + "QP_SCALING_TH_MIN": "262144", cr + "QP_SCALING_TH_MAX": "524288",
		cr + "STAGING_BUF_SIZE": "0", cr + "BIDIR_AG_MAX_SIZE": "-2", "CC_CTRING_ARCH": "hopper",
	}
	for _, k := range Knobs() {
		if want, ok := defaults[k.Name]; ok {
			if k.Default != want {
				t.Errorf("%s default: got %q, want %q (CTRAN's)", k.Name, k.Default, want)
			}
			delete(defaults, k.Name)
		}
	}
	for name := range defaults {
		t.Errorf("knob %s missing from the table", name)
	}
}

func TestCTRingLoadGood(t *testing.T) {
	tests := []struct {
		env  []string
		get  func(k algos.CTRingKnobs) any
		want any
	}{
		{[]string{cr + "TMPBUF_CHUNK_SIZE=1048576"}, func(k algos.CTRingKnobs) any { return k.TmpbufChunkSize }, int64(1 << 20)},
		{[]string{cr + "TMPBUF_CHUNK_SIZE=1073741824"}, func(k algos.CTRingKnobs) any { return k.TmpbufChunkSize }, int64(1 << 30)},
		{[]string{cr + "TMPBUF_CHUNK_SIZE=1001"}, func(k algos.CTRingKnobs) any { return k.TmpbufChunkSize }, int64(1001)},
		{[]string{cr + "TMPBUF_NUM_CHUNKS=262144"}, func(k algos.CTRingKnobs) any { return k.TmpbufNumChunks }, int64(262144)},
		{[]string{cr + "TMPBUF_CHUNK_SIZE=4194304", cr + "TMPBUF_NUM_CHUNKS=8"},
			func(k algos.CTRingKnobs) any { return [2]int64{k.TmpbufChunkSize, k.TmpbufNumChunks} }, [2]int64{4 << 20, 8}},
		{[]string{cr + "MIN_SHARD_SIZE=0"}, func(k algos.CTRingKnobs) any { return k.MinShardSize }, int64(0)},
		{[]string{cr + "MIN_SHARD_SIZE=4096"}, func(k algos.CTRingKnobs) any { return k.MinShardSize }, int64(4096)},
		{[]string{cr + "MAX_NUM_THREAD_BLOCKS=1024"}, func(k algos.CTRingKnobs) any { return k.MaxNumThreadBlocks }, 1024},
		{[]string{cr + "NUM_THREAD_BLOCKS=4", cr + "MAX_NUM_THREAD_BLOCKS=4"},
			func(k algos.CTRingKnobs) any { return [2]int{k.NumThreadBlocks, k.MaxNumThreadBlocks} }, [2]int{4, 4}},
		{[]string{cr + "NUM_THREAD_BLOCKS=16"}, func(k algos.CTRingKnobs) any { return k.NumThreadBlocks }, 16},
		{[]string{cr + "THREAD_BLOCK_SIZE=512"}, func(k algos.CTRingKnobs) any { return k.ThreadBlockSize }, 512},
		{[]string{cr + "AUTO_TUNE_MAX_BDP=50331648"}, func(k algos.CTRingKnobs) any { return k.AutoTuneMaxBDP }, int64(48 << 20)},
		{[]string{cr + "LARGE_CHUNK_RANK_THRESHOLD=0"}, func(k algos.CTRingKnobs) any { return k.LargeChunkRankThreshold }, 0},
		{[]string{cr + "LARGE_CHUNK_RANK_THRESHOLD=65536"}, func(k algos.CTRingKnobs) any { return k.LargeChunkRankThreshold }, 65536},
		{[]string{cr + "QP_SCALING_TH_MIN=-1"}, func(k algos.CTRingKnobs) any { return k.QPScalingThMin }, int64(-1)},
		{[]string{cr + "QP_SCALING_TH_MIN=-9223372036854775808"}, func(k algos.CTRingKnobs) any { return k.QPScalingThMin }, int64(-1 << 63)},
		{[]string{cr + "QP_SCALING_TH_MAX=0"}, func(k algos.CTRingKnobs) any { return k.QPScalingThMax }, int64(0)},
		// MAX below MIN is CTRAN's "disabled", not an error.
		{[]string{cr + "QP_SCALING_TH_MIN=1048576", cr + "QP_SCALING_TH_MAX=65536"},
			func(k algos.CTRingKnobs) any { return [2]int64{k.QPScalingThMin, k.QPScalingThMax} }, [2]int64{1 << 20, 1 << 16}},
		{[]string{cr + "STAGING_BUF_SIZE=8388608"}, func(k algos.CTRingKnobs) any { return k.StagingBufSize }, int64(8 << 20)},
		{[]string{cr + "BIDIR_AG_MAX_SIZE=0"}, func(k algos.CTRingKnobs) any { return k.BidirAGMaxSize }, int64(0)},
		{[]string{cr + "BIDIR_AG_MAX_SIZE=-1"}, func(k algos.CTRingKnobs) any { return k.BidirAGMaxSize }, int64(-1)},
		{[]string{cr + "BIDIR_AG_MAX_SIZE=9223372036854775807"}, func(k algos.CTRingKnobs) any { return k.BidirAGMaxSize }, int64(1<<63 - 1)},
		{[]string{"CC_CTRING_ARCH=default"}, func(k algos.CTRingKnobs) any { return k.Arch }, algos.CTRingDefault},
		{[]string{"CC_CTRING_ARCH=Default"}, func(k algos.CTRingKnobs) any { return k.Arch }, algos.CTRingDefault},
		{[]string{"CC_CTRING_ARCH=HOPPER"}, func(k algos.CTRingKnobs) any { return k.Arch }, algos.CTRingHopper},
		// 16 MiB x 8 fits the default arch's 128 MiB max BDP, not Hopper's.
		{[]string{"CC_CTRING_ARCH=default", cr + "TMPBUF_CHUNK_SIZE=16777216", cr + "TMPBUF_NUM_CHUNKS=8"},
			func(k algos.CTRingKnobs) any { return k.TmpbufChunkSize * k.TmpbufNumChunks }, int64(128 << 20)},
		{[]string{cr + "AUTO_TUNE_MAX_BDP=134217728", cr + "TMPBUF_CHUNK_SIZE=16777216", cr + "TMPBUF_NUM_CHUNKS=8"},
			func(k algos.CTRingKnobs) any { return k.TmpbufChunkSize * k.TmpbufNumChunks }, int64(128 << 20)},
		// The empty string counts as unset.
		{[]string{cr + "MIN_SHARD_SIZE="}, func(k algos.CTRingKnobs) any { return k.MinShardSize }, int64(16)},
	}
	for _, tt := range tests {
		p, err := Load(env(tt.env...))
		if err != nil {
			t.Errorf("Load(%q): %v", tt.env, err)
			continue
		}
		if got := tt.get(p.CTRing); got != tt.want {
			t.Errorf("Load(%q): got %v, want %v", tt.env, got, tt.want)
		}
	}
}

func TestCTRingLoadBad(t *testing.T) {
	tests := []struct {
		env  string // NAME=value, the value is what the error must quote
		want string // also in the message: what is allowed
	}{
		{cr + "TMPBUF_CHUNK_SIZE=-1", "want an integer in 0..1073741824"},
		{cr + "TMPBUF_CHUNK_SIZE=1073741825", "want an integer in 0..1073741824"},
		{cr + "TMPBUF_CHUNK_SIZE=4M", "want an integer in 0..1073741824"},
		{cr + "TMPBUF_CHUNK_SIZE=0x100", "want an integer in 0..1073741824"},
		{cr + "TMPBUF_CHUNK_SIZE=99999999999999999999", "want an integer in 0..1073741824"},
		{cr + "TMPBUF_NUM_CHUNKS=-8", "want an integer in 0..262144"},
		{cr + "TMPBUF_NUM_CHUNKS=262145", "want an integer in 0..262144"},
		{cr + "MIN_SHARD_SIZE=-16", "want an integer in 0..1073741824"},
		{cr + "MAX_NUM_THREAD_BLOCKS=-1", "want an integer in 0..1024"},
		{cr + "MAX_NUM_THREAD_BLOCKS=1025", "want an integer in 0..1024"},
		{cr + "NUM_THREAD_BLOCKS=-2", "want an integer in 0..1024"},
		{cr + "NUM_THREAD_BLOCKS=2.5", "want an integer in 0..1024"},
		{cr + "THREAD_BLOCK_SIZE=513", "want an integer in 0..512"},
		{cr + "THREAD_BLOCK_SIZE=1024", "want an integer in 0..512"},
		{cr + "THREAD_BLOCK_SIZE=-1", "want an integer in 0..512"},
		{cr + "AUTO_TUNE_MAX_BDP=-1", "want an integer in 0..1073741824"},
		{cr + "AUTO_TUNE_MAX_BDP=2147483648", "want an integer in 0..1073741824"},
		{cr + "LARGE_CHUNK_RANK_THRESHOLD=-1", "want an integer in 0..65536"},
		{cr + "LARGE_CHUNK_RANK_THRESHOLD=65537", "want an integer in 0..65536"},
		{cr + "QP_SCALING_TH_MIN=1073741825", "want an integer <= 1073741824 (negative disables)"},
		{cr + "QP_SCALING_TH_MIN=low", "want an integer <= 1073741824 (negative disables)"},
		{cr + "QP_SCALING_TH_MAX=2147483648", "want an integer <= 1073741824 (<= 0 or below QP_SCALING_TH_MIN disables)"},
		{cr + "STAGING_BUF_SIZE=-33554432", "want an integer in 0..1073741824"},
		{cr + "STAGING_BUF_SIZE=1073741825", "want an integer in 0..1073741824"},
		{cr + "BIDIR_AG_MAX_SIZE=-3", "want -2 (by arch: hopper 4 MiB, default 128 MiB), -1 (every size), 0 (never) or a positive number of bytes"},
		{cr + "BIDIR_AG_MAX_SIZE=4MiB", "want -2 (by arch"},
		{"CC_CTRING_ARCH=blackwell", "unknown arch (allowed: hopper, default; any case)"},
		{"CC_CTRING_ARCH=gb200", "allowed: hopper, default"},
	}
	for _, tt := range tests {
		name, value, _ := strings.Cut(tt.env, "=")
		_, err := Load(env(tt.env))
		if err == nil {
			t.Errorf("Load(%s): got no error, want one", tt.env)
			continue
		}
		prefix := fmt.Sprintf("%s=%q: ", name, value)
		if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Load(%s):\n got error %q\n want it to start with %q and contain %q", tt.env, err, prefix, tt.want)
		}
		if pe, ok := errors.AsType[*Error](err); !ok || pe.Name != name || pe.Value != value {
			t.Errorf("Load(%s): error %v is not an *Error for %s=%q", tt.env, err, name, value)
		}
	}
}

// TestCTRingLoadCrossKnobErrors: algos.CTRingKnobs.Check runs from Load,
// and its findings are *Errors on the variable at fault, quoting it as the
// environment gave it.
func TestCTRingLoadCrossKnobErrors(t *testing.T) {
	tests := []struct {
		env  []string
		want string
	}{
		{[]string{cr + "NUM_THREAD_BLOCKS=8", cr + "MAX_NUM_THREAD_BLOCKS=4"},
			cr + `NUM_THREAD_BLOCKS="8": above ` + cr + `MAX_NUM_THREAD_BLOCKS=4 (want NUM_THREAD_BLOCKS <= MAX_NUM_THREAD_BLOCKS, or either 0)`},
		{[]string{cr + "TMPBUF_CHUNK_SIZE=04194304", cr + "TMPBUF_NUM_CHUNKS=9"},
			cr + `TMPBUF_CHUNK_SIZE="04194304": times ` + cr + `TMPBUF_NUM_CHUNKS=9 is 37748736 bytes, above the max BDP of 33554432 bytes ` +
				`(the hopper arch's, CC_CTRING_ARCH=hopper); want chunk size x chunks <= max BDP`},
		{[]string{"CC_CTRING_ARCH=DEFAULT", cr + "TMPBUF_CHUNK_SIZE=1073741824", cr + "TMPBUF_NUM_CHUNKS=2"},
			cr + `TMPBUF_CHUNK_SIZE="1073741824": times ` + cr + `TMPBUF_NUM_CHUNKS=2 is 2147483648 bytes, above the max BDP of 134217728 bytes ` +
				`(the default arch's, CC_CTRING_ARCH=default); want chunk size x chunks <= max BDP`},
		{[]string{cr + "AUTO_TUNE_MAX_BDP=1048576", cr + "TMPBUF_CHUNK_SIZE=65536", cr + "TMPBUF_NUM_CHUNKS=32"},
			cr + `TMPBUF_CHUNK_SIZE="65536": times ` + cr + `TMPBUF_NUM_CHUNKS=32 is 2097152 bytes, above the max BDP of 1048576 bytes ` +
				`(` + cr + `AUTO_TUNE_MAX_BDP=1048576); want chunk size x chunks <= max BDP`},
		// Two at once, both reported.
		{[]string{cr + "NUM_THREAD_BLOCKS=2", cr + "MAX_NUM_THREAD_BLOCKS=1", cr + "TMPBUF_CHUNK_SIZE=33554432", cr + "TMPBUF_NUM_CHUNKS=2"},
			cr + `NUM_THREAD_BLOCKS="2": above ` + cr + `MAX_NUM_THREAD_BLOCKS=1 (want NUM_THREAD_BLOCKS <= MAX_NUM_THREAD_BLOCKS, or either 0)` + "\n" +
				cr + `TMPBUF_CHUNK_SIZE="33554432": times ` + cr + `TMPBUF_NUM_CHUNKS=2 is 67108864 bytes, above the max BDP of 33554432 bytes ` +
				`(the hopper arch's, CC_CTRING_ARCH=hopper); want chunk size x chunks <= max BDP`},
	}
	for _, tt := range tests {
		_, err := Load(env(tt.env...))
		if err == nil || err.Error() != tt.want {
			t.Errorf("Load(%q):\n got  %v\n want %s", tt.env, err, tt.want)
			continue
		}
		if pe, ok := errors.AsType[*Error](err); !ok || !strings.HasPrefix(tt.want, pe.Name+"=") {
			t.Errorf("Load(%q): error %v is not an *Error naming the variable at fault", tt.env, err)
		}
	}
}
