package reduce

import "math"

// Scalar arithmetic with x86 SSE/AVX semantics, spelled out so that the portable kernels give
// the same bits as the vector instructions (VADDPS, VMULPS, VMAXPS, VMINPS, VCVTPH2PS,
// VCVTPS2PH) on every architecture and whatever operand order the Go compiler picks:
//
//   - a NaN result of add/mul is the first operand if it is a NaN, else the second, with the
//     quiet bit set; an invalid operation on non-NaN operands (inf-inf, 0*inf) gives the x86
//     "default NaN" 0xFFC00000 (0xFFF8000000000000 for float64).
//   - max(a, b) = a > b ? a : b and min(a, b) = a < b ? a : b, comparing as floats: if either
//     is a NaN, or both are zeros of any sign, the result is b, bit for bit.
//
// Multiplications that feed an addition are wrapped in an explicit conversion so that the
// compiler may not fuse them into an FMA (the Go spec allows fusion otherwise, and amd64 v3
// and arm64 do it).

const (
	defaultNaN32 = 0xffc00000
	defaultNaN64 = 0xfff8000000000000
	quiet32      = 0x00400000
	quiet64      = 0x0008000000000000
)

func nan32(a, b float32) float32 {
	switch {
	case a != a:
		return math.Float32frombits(math.Float32bits(a) | quiet32)
	case b != b:
		return math.Float32frombits(math.Float32bits(b) | quiet32)
	}
	return math.Float32frombits(defaultNaN32)
}

func nan64(a, b float64) float64 {
	switch {
	case a != a:
		return math.Float64frombits(math.Float64bits(a) | quiet64)
	case b != b:
		return math.Float64frombits(math.Float64bits(b) | quiet64)
	}
	return math.Float64frombits(defaultNaN64)
}

func add32(a, b float32) float32 {
	if r := a + b; r == r {
		return r
	}
	return nan32(a, b)
}

func mul32(a, b float32) float32 {
	if r := float32(a * b); r == r {
		return r
	}
	return nan32(a, b)
}

func max32(a, b float32) float32 {
	if a > b {
		return a
	}
	return b
}

func min32(a, b float32) float32 {
	if a < b {
		return a
	}
	return b
}

func add64(a, b float64) float64 {
	if r := a + b; r == r {
		return r
	}
	return nan64(a, b)
}

func mul64(a, b float64) float64 {
	if r := float64(a * b); r == r {
		return r
	}
	return nan64(a, b)
}

// f16to32 widens IEEE binary16 bits to float32 exactly, as VCVTPH2PS does: a NaN keeps its
// sign and payload (shifted into the top of the float32 mantissa) and gets the quiet bit.
func f16to32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	u := uint32(h&0x7fff) << 13 // exponent and mantissa, aligned with float32's
	switch exp := u & 0x0f800000; exp {
	case 0x0f800000: // inf or NaN
		u |= 0x7f800000
		if u&0x007fffff != 0 {
			u |= quiet32
		}
	case 0: // zero or subnormal: let the FPU normalise (exact: 2^-24 is a normal float32)
		f := math.Float32frombits(u+0x38800000) - 6.103515625e-05 // 2^-14
		u = math.Float32bits(f)
	default:
		u += (127 - 15) << 23
	}
	return math.Float32frombits(sign | u)
}

// f32to16 rounds a float32 to binary16 bits, to nearest with ties to even, as
// VCVTPS2PH $0 does: overflow gives inf; a NaN keeps its sign and the top 10 payload bits and
// gets the quiet bit. (The classic bit-trick conversion by F. Giesen, "float_to_half_fast3_rtne".)
func f32to16(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	u &= 0x7fffffff
	switch {
	case u >= 0x47800000: // >= 65536, inf or NaN
		if u > 0x7f800000 {
			return sign | 0x7e00 | uint16(u>>13)&0x3ff
		}
		return sign | 0x7c00
	case u < 0x38800000: // < 2^-14: the result is subnormal or zero
		// Adding 0.5 aligns the value so that the FPU's own rounding (RNE) drops exactly
		// the bits binary16 cannot hold; the low mantissa bits are then the result.
		r := math.Float32frombits(u) + 0.5
		return sign | uint16(math.Float32bits(r)-0x3f000000)
	default:
		odd := (u >> 13) & 1
		u += 0xc8000fff // rebias the exponent (15-127)<<23, plus the rounding bias 0xfff
		u += odd        // ties to even
		return sign | uint16(u>>13)
	}
}

// bf16to32 widens bfloat16 bits to float32 exactly (a NaN is passed through unchanged).
func bf16to32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// f32tobf16 rounds a float32 to bfloat16 bits, to nearest with ties to even, keeping
// denormals (unlike VCVTNEPS2BF16, which flushes them). A NaN keeps its sign and top payload
// bits and gets the quiet bit, so a NaN whose payload sat only in the low half stays a NaN.
func f32tobf16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16) | 0x40
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// FP8. e4m3 ("fn"): bias 7, 3 mantissa bits, no inf, S.1111.111 is NaN, max ±448; overflow
// saturates to ±448 like NCCL's __NV_SATFINITE conversion (an inf input too); a NaN stays NaN
// (S.1111.111). e5m2: bias 15, 2 mantissa bits, IEEE-like: it is the top byte of a binary16,
// overflow rounds to inf, a NaN keeps its sign and top payload bit and gets the quiet bit.

var e4m3to32Table, e5m2to32Table = func() (e4, e5 [256]float32) {
	for i := range 256 {
		x := uint8(i)
		e5[i] = f16to32(uint16(x) << 8)
		exp, mant := int(x>>3)&0xf, float64(x&7)
		var v float64
		switch {
		case x&0x7f == 0x7f:
			e4[i] = math.Float32frombits(uint32(x&0x80)<<24 | 0x7fc00000)
			continue
		case exp == 0:
			v = mant * 0x1p-9
		default:
			v = (1 + mant/8) * math.Ldexp(1, exp-7)
		}
		if x&0x80 != 0 {
			v = -v
		}
		e4[i] = float32(v)
	}
	return e4, e5
}()

func e4m3to32(x uint8) float32 { return e4m3to32Table[x] }
func e5m2to32(x uint8) float32 { return e5m2to32Table[x] }

// f32toE4M3 rounds a float32 to e4m3 bits, to nearest with ties to even, saturating.
func f32toE4M3(f float32) uint8 {
	u := math.Float32bits(f)
	sign := uint8(u>>24) & 0x80
	u &= 0x7fffffff
	if u > 0x7f800000 {
		return sign | 0x7f
	}
	r := roundSmall(u, 3, 7)
	if r > 0x7e {
		r = 0x7e // saturate to 448
	}
	return sign | uint8(r)
}

// f32toE5M2 rounds a float32 to e5m2 bits, to nearest with ties to even; overflow gives inf.
func f32toE5M2(f float32) uint8 {
	u := math.Float32bits(f)
	sign := uint8(u>>24) & 0x80
	u &= 0x7fffffff
	if u > 0x7f800000 {
		return sign | 0x7e | uint8(u>>21)&1
	}
	r := roundSmall(u, 2, 15)
	if r > 0x7c {
		r = 0x7c // inf
	}
	return sign | uint8(r)
}

// roundSmall rounds the non-negative, non-NaN float32 bits u to a format with mbits mantissa
// bits and exponent bias `bias`, to nearest with ties to even, with an unbounded top
// exponent: the caller clamps results above its largest encoding. Returns the bits
// exponent<<mbits | mantissa.
func roundSmall(u uint32, mbits, bias uint32) uint32 {
	minNormal := (127 + 1 - bias) << 23 // float32 bits of the format's smallest normal
	if u < minNormal {
		// Subnormal range: count quanta of 2^(1-bias-mbits), rounding to an even count.
		// The scaling by a power of two is exact and the count is small, so float64
		// RoundToEven is exact. A count of 1<<mbits is the smallest normal, encoded alike.
		q := math.Ldexp(1, int(1-int(bias)-int(mbits)))
		return uint32(math.RoundToEven(float64(math.Float32frombits(u)) / q))
	}
	if u >= 0x7f800000 {
		return math.MaxUint32 // inf: above every encoding
	}
	shift := 23 - mbits
	u += (1<<(shift-1) - 1) + (u>>shift)&1
	return (u >> shift) - (127-bias)<<mbits
}

// roundToOdd32 rounds a float64 to float32 with "round to odd" (truncate, then set the last
// bit if anything was lost). A later round-to-nearest-even to a format with at most 22
// mantissa bits then gives the correctly rounded result of the float64 (no double-rounding
// error), which is how NewFunc converts scalars to half, bfloat16 and fp8.
func roundToOdd32(x float64) float32 {
	r := float32(x)
	if float64(r) == x || x != x {
		return r
	}
	if math.Abs(float64(r)) > math.Abs(x) { // rounded away from zero: step back towards zero
		b := math.Float32bits(r)
		r = math.Float32frombits(b - 1) // for an inf r this gives MaxFloat32
	}
	return math.Float32frombits(math.Float32bits(r) | 1)
}
