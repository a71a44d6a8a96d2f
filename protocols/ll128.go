package protocols

import (
	"sync/atomic"
	"unsafe"
)

// LL128 line geometry (NVIDIA/nccl src/device/prims_ll128.h): 16 uint64
// words, 15 of data (120 bytes) and the flag in the last one.
const (
	LL128LineBytes   = 128
	LL128LineWords   = 16
	LL128LinePayload = 120
	LL128FlagWord    = LL128LineWords - 1
)

// LL128Flag is the flag of the lines of step: step+1, 64 bits wide, so it
// never wraps and zeroed memory (flag 0) is never ready.
func LL128Flag(step uint64) uint64 { return step + 1 }

// LL128Lines is the number of lines that carry n payload bytes.
func LL128Lines(n int) int { return LL128.Lines(n) }

// LL128Encode writes src into the lines of dst: for each line in turn, the
// data words (plain stores; the last line's tail bytes are left as they
// were), then the flag word with an atomic store, which publishes them. dst
// must hold LL128Lines(len(src)) lines.
func LL128Encode(dst []uint64, src []byte, flag uint64) {
	lines := LL128Lines(len(src))
	dst = dst[:lines*LL128LineWords]
	for l := 0; l < lines; l++ {
		line := dst[l*LL128LineWords : (l+1)*LL128LineWords]
		copy(wordBytes(line[:LL128FlagWord]), src[l*LL128LinePayload:])
		atomic.StoreUint64(&line[LL128FlagWord], flag)
	}
}

// LL128Ready reports whether the line carries flag: an atomic load of the
// flag word, after which the line's data may be read.
func LL128Ready(line []uint64, flag uint64) bool {
	return atomic.LoadUint64(&line[LL128FlagWord]) == flag
}

// LL128Decode copies the payload of the leading ready lines of src into
// dst, which asks for len(dst) bytes, and returns how many bytes it copied:
// a multiple of LL128LinePayload, or len(dst) once every line it needs is
// ready. Each line's flag is loaded atomically before its data is read.
// Call it again with the remainders to continue.
func LL128Decode(dst []byte, src []uint64, flag uint64) int {
	n := len(dst)
	lines := LL128Lines(n)
	for l := 0; l < lines; l++ {
		line := src[l*LL128LineWords : (l+1)*LL128LineWords]
		if atomic.LoadUint64(&line[LL128FlagWord]) != flag {
			return l * LL128LinePayload
		}
		copy(dst[l*LL128LinePayload:], wordBytes(line[:LL128FlagWord]))
	}
	return n
}

// wordBytes views words as bytes (in memory order).
func wordBytes(w []uint64) []byte {
	if len(w) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&w[0])), len(w)*8)
}
