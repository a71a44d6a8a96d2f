package reduce

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// vectorLevels are the supported levels other than portable.
func vectorLevels() []level {
	var ls []level
	for l := levelPortable + 1; l < numLevels; l++ {
		if supported[l] {
			ls = append(ls, l)
		}
	}
	return ls
}

// newFuncAt creates a Func bound to level l.
func newFuncAt(tb testing.TB, l level, t DataType, op Op, nranks int, scalar float64) *Func {
	tb.Helper()
	old := activeLevel.Load()
	activeLevel.Store(uint32(l))
	defer activeLevel.Store(old)
	f, err := NewFunc(t, op, nranks, scalar)
	if err != nil {
		tb.Fatalf("NewFunc(%v, %v, %d, %v): %v", t, op, nranks, scalar, err)
	}
	return f
}

// specials are bit patterns worth hitting for each type: signed zeros, infinities, quiet
// and signalling NaNs with payloads, denormals, extreme finite values, rounding ties.
var specials = map[DataType][]uint64{
	Float32: {
		0, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001,
		0x7fa12345, 0x7fffffff, 0x00000001, 0x80000001, 0x007fffff, 0x807fffff, 0x00800000,
		0x7f7fffff, 0xff7fffff, 0x3f800000, 0xbf800000, 0x33800000, 0x3f800001, 0x4b800000,
		0x00400000, 0x3f808000, 0x3f818000, 0x477fe000, 0x477ff000, 0x38800000, 0x387fe000,
	},
	Float64: {
		0, 1 << 63, 0x7ff0000000000000, 0xfff0000000000000, 0x7ff8000000000000, 0xfff8000000000000,
		0x7ff0000000000001, 0xfff0000000000001, 0x7ff4000000abcdef, 0x7fffffffffffffff, 1,
		1<<63 | 1, 0x000fffffffffffff, 0x0010000000000000, 0x7fefffffffffffff, 0xffefffffffffffff,
		0x3ff0000000000000, 0xbff0000000000000, 0x3ff0000000000001, 0x3ca0000000000000,
	},
	Float16: {
		0, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0xfe00, 0x7c01, 0xfc01, 0x7d55, 0x7fff, 0x0001, 0x8001,
		0x03ff, 0x83ff, 0x0400, 0x7bff, 0xfbff, 0x3c00, 0xbc00, 0x3c01, 0x1000, 0x1400, 0x3800,
		0x4c00, 0x4800,
	},
	Bfloat16: {
		0, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffc0, 0x7f81, 0xff81, 0x7fa5, 0x7fff, 0x0001, 0x8001,
		0x007f, 0x807f, 0x0080, 0x7f7f, 0xff7f, 0x3f80, 0xbf80, 0x3f81, 0x3b80, 0x3c00,
	},
	Float8e4m3: {0, 0x80, 0x7f, 0xff, 0x7e, 0xfe, 0x01, 0x81, 0x07, 0x08, 0x38, 0x39, 0x18, 0x77},
	Float8e5m2: {0, 0x80, 0x7c, 0xfc, 0x7d, 0x7e, 0xff, 0x7b, 0xfb, 0x01, 0x81, 0x03, 0x04, 0x3c, 0x3d},
	Int8:       {0, 0x7f, 0x80, 0xff, 1},
	Uint8:      {0, 0x7f, 0x80, 0xff, 1},
	Int32:      {0, 0x7fffffff, 0x80000000, 0xffffffff, 1},
	Uint32:     {0, 0x7fffffff, 0x80000000, 0xffffffff, 1},
	Int64:      {0, 1<<63 - 1, 1 << 63, math.MaxUint64, 1},
	Uint64:     {0, 1<<63 - 1, 1 << 63, math.MaxUint64, 1},
}

// putElem stores the low t.Size() bytes of v at element i of b.
func putElem(t DataType, b []byte, i int, v uint64) {
	switch s := t.Size(); s {
	case 1:
		b[i] = uint8(v)
	case 2:
		binary.LittleEndian.PutUint16(b[2*i:], uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	case 8:
		binary.LittleEndian.PutUint64(b[8*i:], v)
	}
}

// getElem reads element i of b.
func getElem(t DataType, b []byte, i int) uint64 {
	switch t.Size() {
	case 1:
		return uint64(b[i])
	case 2:
		return uint64(binary.LittleEndian.Uint16(b[2*i:]))
	case 4:
		return uint64(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return binary.LittleEndian.Uint64(b[8*i:])
}

// fill writes n elements of test data: a mix of random bits, ordinary values of a few
// magnitudes and specials, so that every lane of a vector sees every kind.
func fill(r *rand.Rand, t DataType, b []byte, n int) {
	sp := specials[t]
	for i := range n {
		var v uint64
		switch r.IntN(4) {
		case 0:
			v = r.Uint64()
		case 1:
			v = sp[r.IntN(len(sp))]
		default:
			x := (r.Float64()*2 - 1) * math.Ldexp(1, r.IntN(20)-10)
			switch t {
			case Float32:
				v = uint64(math.Float32bits(float32(x)))
			case Float64:
				v = math.Float64bits(x)
			case Float16:
				v = uint64(f32to16(float32(x)))
			case Bfloat16:
				v = uint64(f32tobf16(float32(x)))
			case Float8e4m3:
				v = uint64(f32toE4M3(float32(x)))
			case Float8e5m2:
				v = uint64(f32toE5M2(float32(x)))
			default:
				v = uint64(int64(x * 100))
			}
		}
		putElem(t, b, i, v)
	}
}

// at returns a slice of n bytes starting off bytes into a fresh buffer, so the data has a
// chosen misalignment, and a function reporting whether the guard bytes around it are
// unchanged. Each operand of a call gets a different guard byte, so that a kernel writing
// past dst cannot put back the same pattern by combining the sources' guards.
func at(off, n int, guard byte) (s []byte, intact func() bool) {
	buf := make([]byte, off+n+64)
	fillGuard(buf, guard)
	return buf[off : off+n : off+n], func() bool {
		g := make([]byte, len(buf))
		fillGuard(g, guard)
		return bytes.Equal(buf[:off], g[:off]) && bytes.Equal(buf[off+n:], g[off+n:])
	}
}

// fillGuard fills b with the guard byte c (bulk copies: cheap under -race).
func fillGuard(b []byte, c byte) {
	if len(b) == 0 {
		return
	}
	b[0] = c
	for i := 1; i < len(b); i *= 2 {
		copy(b[i:], b[:i])
	}
}
