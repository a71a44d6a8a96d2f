package reduce

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Encode writes v as one element of type t at the start of dst. Floating
// types round to nearest even (narrow types through round-to-odd float32,
// so the result is correctly rounded; e4m3 saturates at ±448); integer types
// truncate toward zero and wrap like a Go conversion. It panics if dst is
// shorter than t.Size().
func Encode(t DataType, dst []byte, v float64) {
	checkLen(t, dst)
	switch t {
	case Int8:
		dst[0] = byte(int8(int64(v)))
	case Uint8:
		dst[0] = byte(uint64(int64(v)))
	case Int32:
		binary.LittleEndian.PutUint32(dst, uint32(int32(int64(v))))
	case Uint32:
		binary.LittleEndian.PutUint32(dst, uint32(uint64(int64(v))))
	case Int64:
		binary.LittleEndian.PutUint64(dst, uint64(int64(v)))
	case Uint64:
		binary.LittleEndian.PutUint64(dst, uint64(int64(v)))
	case Float16:
		binary.LittleEndian.PutUint16(dst, f32to16(roundToOdd32(v)))
	case Float32:
		binary.LittleEndian.PutUint32(dst, math.Float32bits(float32(v)))
	case Float64:
		binary.LittleEndian.PutUint64(dst, math.Float64bits(v))
	case Bfloat16:
		binary.LittleEndian.PutUint16(dst, f32tobf16(roundToOdd32(v)))
	case Float8e4m3:
		dst[0] = f32toE4M3(roundToOdd32(v))
	case Float8e5m2:
		dst[0] = f32toE5M2(roundToOdd32(v))
	}
}

// Decode reads the element of type t at the start of src as a float64
// (exact for every type but 64-bit integers beyond 2^53).
func Decode(t DataType, src []byte) float64 {
	checkLen(t, src)
	switch t {
	case Int8:
		return float64(int8(src[0]))
	case Uint8:
		return float64(src[0])
	case Int32:
		return float64(int32(binary.LittleEndian.Uint32(src)))
	case Uint32:
		return float64(binary.LittleEndian.Uint32(src))
	case Int64:
		return float64(int64(binary.LittleEndian.Uint64(src)))
	case Uint64:
		return float64(binary.LittleEndian.Uint64(src))
	case Float16:
		return float64(f16to32(binary.LittleEndian.Uint16(src)))
	case Float32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(src)))
	case Float64:
		return math.Float64frombits(binary.LittleEndian.Uint64(src))
	case Bfloat16:
		return float64(bf16to32(binary.LittleEndian.Uint16(src)))
	case Float8e4m3:
		return float64(e4m3to32(src[0]))
	case Float8e5m2:
		return float64(e5m2to32(src[0]))
	}
	return 0
}

func checkLen(t DataType, b []byte) {
	if !t.Valid() {
		panic(fmt.Sprintf("reduce: invalid data type %d", t))
	}
	if len(b) < t.Size() {
		panic(fmt.Sprintf("reduce: %d bytes cannot hold one %s", len(b), t))
	}
}
