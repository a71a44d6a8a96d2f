package protocols

import (
	"encoding/binary"
	"sync/atomic"
)

// LL line geometry: a 16-byte line {data1, flag1, data2, flag2} of uint32s,
// stored as two uint64 words data|flag<<32, carries 8 payload bytes.
const (
	LLLineBytes   = 16
	LLLineWords   = 2
	LLLinePayload = 8
)

// llFlagBits is the width of an LL flag. Tests run the same arithmetic with
// narrower flags to reach the wraparound in a few hundred steps.
const llFlagBits = 32

// LLFlag is the flag of the lines of step: uint32(step+1), as NCCL's
// NCCL_LL_FLAG(step+1). Zeroed memory carries flag 0, which is the flag of
// step 2^32-1; by then every line has been rewritten (see LLClean).
func LLFlag(step uint64) uint32 { return uint32(llFlag(step, llFlagBits)) }

func llFlag(step uint64, bits uint) uint64 { return (step + 1) & (1<<bits - 1) }

// LLClean reports whether the sender must rewrite every line of step's slot
// after writing its data (NCCL's NCCL_LL_CLEAN_MASK, 0x7ffffff8): true for
// the eight steps ending each multiple of 2^31, so each slot is rewritten
// once every 2^31 steps and no line's flag is older than 2^31+8 steps, half
// the flag period.
func LLClean(step uint64) bool { return llClean(step, llFlagBits) }

func llClean(step uint64, bits uint) bool {
	m := uint64(1)<<(bits-1) - NSteps
	return step&m == m
}

// LLWord is one 8-byte store unit of an LL line: data in the low half, flag
// in the high half (little-endian {data, flag}).
func LLWord(data, flag uint32) uint64 { return uint64(flag)<<32 | uint64(data) }

// LLSplit is the inverse of LLWord.
func LLSplit(w uint64) (data, flag uint32) { return uint32(w), uint32(w >> 32) }

// LLLines is the number of lines that carry n payload bytes.
func LLLines(n int) int { return LL.Lines(n) }

// LLEncode writes src into the lines of dst (LLLineWords words per line),
// every word with one atomic store of data|flag, in ascending order. The
// last line is padded with zero bytes. dst must hold LLLines(len(src)) lines.
func LLEncode(dst []uint64, src []byte, flag uint32) {
	n := len(src)
	full := n / LLLinePayload
	dst = dst[:LLLineWords*LLLines(n)]
	f := uint64(flag) << 32
	for i := 0; i < full; i++ {
		v := binary.LittleEndian.Uint64(src[LLLinePayload*i:])
		atomic.StoreUint64(&dst[2*i], v&0xffffffff|f)
		atomic.StoreUint64(&dst[2*i+1], v>>32|f)
	}
	if r := n - full*LLLinePayload; r > 0 {
		var b [LLLinePayload]byte
		copy(b[:], src[full*LLLinePayload:])
		v := binary.LittleEndian.Uint64(b[:])
		atomic.StoreUint64(&dst[2*full], v&0xffffffff|f)
		atomic.StoreUint64(&dst[2*full+1], v>>32|f)
	}
}

// LLFill writes every word of dst as zero data with flag: the cleanup of
// the lines a step did not use.
func LLFill(dst []uint64, flag uint32) {
	w := LLWord(0, flag)
	for i := range dst {
		atomic.StoreUint64(&dst[i], w)
	}
}

// LLReady reports whether the line (its first LLLineWords words) carries
// flag in both halves: only then are both data words the sender's.
func LLReady(line []uint64, flag uint32) bool {
	_, f1 := LLSplit(atomic.LoadUint64(&line[0]))
	_, f2 := LLSplit(atomic.LoadUint64(&line[1]))
	return f1 == flag && f2 == flag
}

// LLDecode copies the payload of the leading ready lines of src into dst,
// which asks for len(dst) bytes, and returns how many bytes it copied: a
// multiple of LLLinePayload, or len(dst) once every line it needs is ready.
// Each word is read with one atomic load and its own flag checked, so a
// word's data is never taken without its flag. Call it again with the
// remainders (dst[n:], src[n/LLLinePayload*LLLineWords:]) to continue.
func LLDecode(dst []byte, src []uint64, flag uint32) int {
	n := len(dst)
	full := n / LLLinePayload
	for i := 0; i < full; i++ {
		w0 := atomic.LoadUint64(&src[2*i])
		w1 := atomic.LoadUint64(&src[2*i+1])
		if uint32(w0>>32) != flag || uint32(w1>>32) != flag {
			return i * LLLinePayload
		}
		binary.LittleEndian.PutUint64(dst[LLLinePayload*i:], w0&0xffffffff|w1<<32)
	}
	if r := n - full*LLLinePayload; r > 0 {
		w0 := atomic.LoadUint64(&src[2*full])
		w1 := atomic.LoadUint64(&src[2*full+1])
		if uint32(w0>>32) != flag || uint32(w1>>32) != flag {
			return full * LLLinePayload
		}
		var b [LLLinePayload]byte
		binary.LittleEndian.PutUint64(b[:], w0&0xffffffff|w1<<32)
		copy(dst[full*LLLinePayload:], b[:r])
	}
	return n
}
