package reduce

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/x448/float16"
)

// TestF16WidenMatchesX448 checks the binary16 -> float32 conversion on all 65536 patterns.
func TestF16WidenMatchesX448(t *testing.T) {
	for h := range 1 << 16 {
		got := math.Float32bits(f16to32(uint16(h)))
		want := math.Float32bits(float16.Frombits(uint16(h)).Float32())
		if got != want {
			t.Fatalf("f16to32(%#04x) = %#08x, want %#08x (x448/float16)", h, got, want)
		}
	}
}

// sampleFloat32s returns float32 bit patterns covering every sign and exponent with the
// mantissas that decide rounding (ties, just below/above, all ones) plus random ones.
func sampleFloat32s() []uint32 {
	r := rand.New(rand.NewPCG(9, 10))
	mants := []uint32{0, 1, 2, 0x7fffff, 0x7ffffe, 0x400000, 0x3fffff, 0x400001}
	for k := range 23 {
		mants = append(mants, 1<<k, 1<<k-1, 1<<k+1, 3<<k&0x7fffff)
	}
	var out []uint32
	for sign := range uint32(2) {
		for exp := range uint32(256) {
			for _, m := range mants {
				out = append(out, sign<<31|exp<<23|m)
			}
			for range 48 {
				out = append(out, sign<<31|exp<<23|r.Uint32()&0x7fffff)
			}
		}
	}
	return out
}

// TestF16NarrowMatchesX448 checks float32 -> binary16 (RNE) against x448/float16 on a
// sample covering every exponent and the rounding-relevant mantissa bits.
func TestF16NarrowMatchesX448(t *testing.T) {
	for _, u := range sampleFloat32s() {
		f := math.Float32frombits(u)
		got, want := f32to16(f), float16.Fromfloat32(f).Bits()
		if got != want {
			t.Fatalf("f32to16(%#08x) = %#04x, want %#04x (x448/float16)", u, got, want)
		}
	}
}

// format describes a small floating-point format for the test oracle: every finite
// non-negative value with its bits, sorted, and what overflow does.
type format struct {
	name     string
	vals     []float64 // non-negative finite values, ascending
	bits     []uint64  // their encodings
	signBit  uint64
	inf      uint64 // bits of +inf; 0 if the format saturates instead
	overflow float64
}

// newFormat enumerates a format of nbits bits through its decoder.
func newFormat(name string, nbits int, decode func(uint64) float64, inf uint64) *format {
	f := &format{name: name, signBit: 1 << (nbits - 1), inf: inf}
	type vb struct {
		v float64
		b uint64
	}
	var all []vb
	for b := range uint64(1) << (nbits - 1) {
		if v := decode(b); !math.IsNaN(v) && !math.IsInf(v, 0) {
			all = append(all, vb{v, b})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].v < all[j].v })
	for _, x := range all {
		f.vals = append(f.vals, x.v)
		f.bits = append(f.bits, x.b)
	}
	n := len(f.vals)
	f.overflow = f.vals[n-1] + (f.vals[n-1]-f.vals[n-2])/2 // max + half an ulp
	return f
}

// round is the oracle: x rounded to the format, to nearest, ties to the even encoding;
// beyond max + ulp/2 it gives inf, or saturates to max for a format without inf.
func (f *format) round(x float64) uint64 {
	sign := uint64(0)
	if math.Signbit(x) {
		sign = f.signBit
	}
	ax := math.Abs(x)
	n := len(f.vals)
	if ax >= f.overflow || ax > f.vals[n-1] && f.inf == 0 {
		if f.inf == 0 {
			return sign | f.bits[n-1]
		}
		return sign | f.inf
	}
	i := sort.SearchFloat64s(f.vals, ax) // first value >= ax
	if i == n {
		// between max and the overflow threshold
		return sign | f.bits[n-1]
	}
	if f.vals[i] == ax {
		return sign | f.bits[i]
	}
	lo, hi := i-1, i
	dlo, dhi := ax-f.vals[lo], f.vals[hi]-ax
	switch {
	case dlo < dhi:
		return sign | f.bits[lo]
	case dhi < dlo:
		return sign | f.bits[hi]
	case f.bits[lo]&1 == 0:
		return sign | f.bits[lo]
	}
	return sign | f.bits[hi]
}

var (
	fmtF16 = newFormat("half", 16, func(b uint64) float64 { return float64(f16to32(uint16(b))) }, 0x7c00)
	fmtBF  = newFormat("bfloat16", 16, func(b uint64) float64 { return float64(bf16to32(uint16(b))) }, 0x7f80)
	fmtE4  = newFormat("f8e4m3", 8, decodeE4M3, 0)
	fmtE5  = newFormat("f8e5m2", 8, func(b uint64) float64 { return float64(f16to32(uint16(b) << 8)) }, 0x7c)
)

// decodeE4M3 is the OCP definition, written independently of the kernel's table.
func decodeE4M3(b uint64) float64 {
	s, e, m := b>>7&1, int(b>>3&0xf), float64(b&7)
	if e == 15 && m == 7 {
		return math.NaN()
	}
	v := math.Ldexp(m/8, -6) // subnormal: 0.m * 2^(1-7)
	if e > 0 {
		v = math.Ldexp(1+m/8, e-7)
	}
	if s == 1 {
		return -v
	}
	return v
}

func TestFormatOracleSanity(t *testing.T) {
	tests := []struct {
		f    *format
		max  float64
		minS float64
		n    int
	}{
		{fmtF16, 65504, 0x1p-24, 31744},
		{fmtBF, float64(math.Float32frombits(0x7f7f0000)), 0x1p-133, 32640},
		{fmtE4, 448, 0x1p-9, 127},
		{fmtE5, 57344, 0x1p-16, 124},
	}
	for _, tc := range tests {
		n := len(tc.f.vals)
		if n != tc.n || tc.f.vals[n-1] != tc.max || tc.f.vals[1] != tc.minS {
			t.Errorf("%s: %d values, max %g, min subnormal %g; want %d, %g, %g",
				tc.f.name, n, tc.f.vals[n-1], tc.f.vals[1], tc.n, tc.max, tc.minS)
		}
	}
}

// narrowCase is a narrowing function under test and its oracle.
var narrowCases = []struct {
	f      *format
	narrow func(float32) uint64
	quiet  uint64 // quiet bit a NaN result must carry
}{
	{fmtF16, func(x float32) uint64 { return uint64(f32to16(x)) }, 0x0200},
	{fmtBF, func(x float32) uint64 { return uint64(f32tobf16(x)) }, 0x0040},
	{fmtE4, func(x float32) uint64 { return uint64(f32toE4M3(x)) }, 0x07},
	{fmtE5, func(x float32) uint64 { return uint64(f32toE5M2(x)) }, 0x02},
}

// TestNarrowMatchesOracle checks every float32 -> small-format rounding against the
// nearest-value oracle (finite and infinite inputs) and the NaN rule (sign kept, quiet).
func TestNarrowMatchesOracle(t *testing.T) {
	for _, nc := range narrowCases {
		for _, u := range sampleFloat32s() {
			x := math.Float32frombits(u)
			got := nc.narrow(x)
			if x != x {
				sign := uint64(u>>31) * nc.f.signBit
				if got&nc.f.signBit != sign || got&nc.quiet != nc.quiet || !math.IsNaN(decodeAny(nc.f, got)) {
					t.Fatalf("%s: narrow(NaN %#08x) = %#x: want a quiet NaN of the same sign", nc.f.name, u, got)
				}
				continue
			}
			if want := nc.f.round(float64(x)); got != want {
				t.Fatalf("%s: narrow(%#08x = %g) = %#x, want %#x", nc.f.name, u, x, got, want)
			}
		}
	}
}

func decodeAny(f *format, b uint64) float64 {
	switch f {
	case fmtF16:
		return float64(f16to32(uint16(b)))
	case fmtBF:
		return float64(bf16to32(uint16(b)))
	case fmtE4:
		return float64(e4m3to32(uint8(b)))
	}
	return float64(e5m2to32(uint8(b)))
}

// TestRoundTrips: widening then narrowing gives back every non-NaN pattern; a NaN comes back
// quiet with its payload.
func TestRoundTrips(t *testing.T) {
	for h := range 1 << 16 {
		x := uint16(h)
		want16, wantBF := x, x
		if x&0x7c00 == 0x7c00 && x&0x3ff != 0 {
			want16 = x | 0x200
		}
		if x&0x7f80 == 0x7f80 && x&0x7f != 0 {
			wantBF = x | 0x40
		}
		if got := f32to16(f16to32(x)); got != want16 {
			t.Fatalf("half %#04x -> %#04x, want %#04x", x, got, want16)
		}
		if got := f32tobf16(bf16to32(x)); got != wantBF {
			t.Fatalf("bfloat16 %#04x -> %#04x, want %#04x", x, got, wantBF)
		}
	}
	for b := range 256 {
		x := uint8(b)
		if v := e4m3to32(x); float64(v) != decodeE4M3(uint64(x)) && !(v != v && math.IsNaN(decodeE4M3(uint64(x)))) {
			t.Fatalf("e4m3 table %#02x = %g, want %g", x, v, decodeE4M3(uint64(x)))
		}
		if got := f32toE4M3(e4m3to32(x)); got != x {
			t.Fatalf("e4m3 %#02x -> %#02x", x, got)
		}
		want := x
		if x&0x7c == 0x7c && x&3 != 0 {
			want = x | 2
		}
		if got := f32toE5M2(e5m2to32(x)); got != want {
			t.Fatalf("e5m2 %#02x -> %#02x, want %#02x", x, got, want)
		}
	}
}

// TestArithmeticCorrectlyRounded checks that "widen to float32, one float32 op, round back"
// equals the correctly rounded op of the format: exhaustively over all pairs for fp8, on
// random pairs of finite values for half and bfloat16. The oracle computes in float64,
// which is exact for these products and for half/fp8 sums; for bfloat16 sums it may round
// once at 53 bits first, which cannot change an 8-bit result (53 >= 2*8+2).
func TestArithmeticCorrectlyRounded(t *testing.T) {
	type opDef struct {
		name   string
		kernel kind
		exact  func(x, y float64) float64
	}
	ops := []opDef{
		{"sum", kSum, func(x, y float64) float64 { return x + y }},
		{"prod", kProd, func(x, y float64) float64 { return x * y }},
	}
	check := func(dt DataType, f *format, a, b []uint64) {
		n := len(a)
		ab, bb, d := make([]byte, n*dt.Size()), make([]byte, n*dt.Size()), make([]byte, n*dt.Size())
		for i := range a {
			putElem(dt, ab, i, a[i])
			putElem(dt, bb, i, b[i])
		}
		for _, op := range ops {
			k := portable[dt][op.kernel]
			k(ptrAt(d, 0), ptrAt(ab, 0), ptrAt(bb, 0), n, 0)
			for i := range a {
				x, y := decodeAny(f, a[i]), decodeAny(f, b[i])
				if math.IsNaN(x) || math.IsNaN(y) || math.IsInf(x, 0) || math.IsInf(y, 0) {
					continue
				}
				if got, want := getElem(dt, d, i), f.round(op.exact(x, y)); got != want {
					t.Fatalf("%v %s(%#x=%g, %#x=%g) = %#x, want %#x", dt, op.name, a[i], x, b[i], y, got, want)
				}
			}
		}
	}
	for _, c := range []struct {
		dt DataType
		f  *format
	}{{Float8e4m3, fmtE4}, {Float8e5m2, fmtE5}} {
		var a, b []uint64
		for x := range uint64(256) {
			for y := range uint64(256) {
				a, b = append(a, x), append(b, y)
			}
		}
		check(c.dt, c.f, a, b)
	}
	r := rand.New(rand.NewPCG(11, 12))
	for _, c := range []struct {
		dt DataType
		f  *format
	}{{Float16, fmtF16}, {Bfloat16, fmtBF}} {
		var a, b []uint64
		for range 200000 {
			x := uint64(r.Uint32() & 0xffff)
			y := uint64(r.Uint32() & 0xffff)
			if r.IntN(2) == 0 { // nearby exponents, where the rounding is interesting
				y = x&0xff00 ^ uint64(r.Uint32()&0x83ff)
			}
			a, b = append(a, x), append(b, y)
		}
		check(c.dt, c.f, a, b)
	}
}

// TestRoundToOdd32 checks the scalar conversion path float64 -> half/bfloat16/fp8 against the
// oracle applied to the float64 directly (no double rounding through float32).
func TestRoundToOdd32(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	xs := []float64{1 + 0x1p-11 + 0x1p-40, 1 + 0x1p-8 + 0x1p-40, 1 + 0x1p-11, 65519.999, 65520, 1e300, 1e-300, 0x1p-25 + 0x1p-60}
	for range 100000 {
		xs = append(xs, math.Ldexp(r.Float64()+0.5, r.IntN(300)-150))
	}
	for _, x := range xs {
		for _, nc := range narrowCases {
			for _, v := range []float64{x, -x} {
				if got, want := nc.narrow(roundToOdd32(v)), nc.f.round(v); got != want {
					t.Fatalf("%s: %g -> %#x, want %#x", nc.f.name, v, got, want)
				}
			}
		}
	}
}
