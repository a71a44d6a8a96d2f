package reduce

import (
	"fmt"
	"math"
	"testing"
)

func f32b(x float32) uint64 { return uint64(math.Float32bits(x)) }
func f64b(x float64) uint64 { return math.Float64bits(x) }
func ints(v ...int64) []uint64 {
	out := make([]uint64, len(v))
	for i, x := range v {
		out[i] = uint64(x)
	}
	return out
}
func u(v ...uint64) []uint64 { return v }

// refCase is one hand-computed expectation: method(a, b) with Func(t, op, nranks, scalar).
type refCase struct {
	name   string
	t      DataType
	op     Op
	nranks int
	scalar float64
	method string // Reduce, ReducePre, Pre or Post
	a, b   []uint64
	want   []uint64
}

var refCases = []refCase{
	// Integers wrap (two's complement).
	{"int8 sum wraps", Int8, Sum, 2, 0, "Reduce", ints(127, -128, 100), ints(1, -1, 100), ints(-128, 127, -56)},
	{"uint8 sum wraps", Uint8, Sum, 2, 0, "Reduce", u(255, 200), u(1, 100), u(0, 44)},
	{"int32 sum wraps", Int32, Sum, 2, 0, "Reduce", ints(math.MaxInt32), ints(1), ints(math.MinInt32)},
	{"uint32 sum wraps", Uint32, Sum, 2, 0, "Reduce", u(math.MaxUint32), u(5), u(4)},
	{"int64 sum wraps", Int64, Sum, 2, 0, "Reduce", ints(math.MinInt64), ints(-1), ints(math.MaxInt64)},
	{"uint64 sum wraps", Uint64, Sum, 2, 0, "Reduce", u(math.MaxUint64), u(2), u(1)},
	{"int8 prod wraps", Int8, Prod, 2, 0, "Reduce", ints(16, -128, -3), ints(16, -1, 5), ints(0, -128, -15)},
	{"uint32 prod wraps", Uint32, Prod, 2, 0, "Reduce", u(0x10000, 3), u(0x10000, 0x55555556), u(0, 2)},
	{"int64 prod wraps", Int64, Prod, 2, 0, "Reduce", ints(1<<62, -7), ints(4, 3), ints(0, -21)},
	{"int8 max signed", Int8, Max, 2, 0, "Reduce", ints(-1, -128, 5), ints(1, 127, 5), ints(1, 127, 5)},
	{"int8 min signed", Int8, Min, 2, 0, "Reduce", ints(-1, -128, 5), ints(1, 127, 5), ints(-1, -128, 5)},
	{"uint8 max unsigned", Uint8, Max, 2, 0, "Reduce", u(0xff, 0x80), u(1, 0x7f), u(0xff, 0x80)},
	{"uint8 min unsigned", Uint8, Min, 2, 0, "Reduce", u(0xff, 0x80), u(1, 0x7f), u(1, 0x7f)},
	{"int32 max", Int32, Max, 2, 0, "Reduce", ints(math.MinInt32, -5), ints(0, -6), ints(0, -5)},
	{"uint32 min", Uint32, Min, 2, 0, "Reduce", u(math.MaxUint32, 7), u(0, 8), u(0, 7)},
	{"int64 max", Int64, Max, 2, 0, "Reduce", ints(-1, math.MinInt64), ints(1, math.MaxInt64), ints(1, math.MaxInt64)},
	{"uint64 max", Uint64, Max, 2, 0, "Reduce", u(math.MaxUint64, 0), u(1, 0), u(math.MaxUint64, 0)},
	// Integer avg: sum (wrapping) then a truncating divide by nranks, signed for signed types.
	{"int8 avg sum", Int8, Avg, 2, 0, "ReducePre", ints(100), ints(100), ints(-56)},
	{"int8 avg pre is copy", Int8, Avg, 2, 0, "Pre", ints(-7), nil, ints(-7)},
	{"int8 avg post truncates", Int8, Avg, 2, 0, "Post", ints(-7, 7, -128, 127, -1), nil, ints(-3, 3, -64, 63, 0)},
	{"int8 avg nranks > 127", Int8, Avg, 200, 0, "Post", ints(-128, 127), nil, ints(0, 0)},
	{"uint8 avg post", Uint8, Avg, 2, 0, "Post", u(255, 1), nil, u(127, 0)},
	{"int32 avg post", Int32, Avg, 3, 0, "Post", ints(-10, 10, math.MinInt32), nil, ints(-3, 3, -715827882)},
	{"uint32 avg post", Uint32, Avg, 3, 0, "Post", u(math.MaxUint32), nil, u(1431655765)},
	{"int64 avg post", Int64, Avg, 3, 0, "Post", ints(math.MinInt64, -2), nil, ints(-3074457345618258602, 0)},
	{"uint64 avg post", Uint64, Avg, 3, 0, "Post", u(math.MaxUint64), nil, u(6148914691236517205)},
	// Integer premulsum: recv + local*scalar, wrapping.
	{"int32 premulsum", Int32, PreMulSum, 2, -2, "ReducePre", ints(10), ints(3), ints(4)},
	{"int32 premulsum pre", Int32, PreMulSum, 2, -2, "Pre", ints(3), nil, ints(-6)},
	{"int8 premulsum pre wraps", Int8, PreMulSum, 2, 2, "Pre", ints(100), nil, ints(-56)},
	{"uint8 premulsum pre wraps", Uint8, PreMulSum, 2, 200, "Pre", u(2), nil, u(144)},
	{"int8 premulsum scalar rounds to even", Int8, PreMulSum, 2, 2.5, "Pre", ints(3), nil, ints(6)},
	{"premulsum reduce is sum", Int32, PreMulSum, 2, 5, "Reduce", ints(1), ints(2), ints(3)},
	{"sum post is copy", Int32, Sum, 2, 0, "Post", ints(9), nil, ints(9)},

	// float: round to nearest even; NaN rules of x86 (first operand's NaN, quieted).
	{"float sum tie to even down", Float32, Sum, 2, 0, "Reduce", u(0x3f800000), u(0x33800000), u(0x3f800000)},
	{"float sum tie to even up", Float32, Sum, 2, 0, "Reduce", u(0x3f800001), u(0x33800000), u(0x3f800002)},
	{"float sum NaN: first wins", Float32, Sum, 2, 0, "Reduce", u(0x7fc00001), u(0xffc00002), u(0x7fc00001)},
	{"float sum sNaN quieted", Float32, Sum, 2, 0, "Reduce", u(0x3f800000), u(0x7f800001), u(0x7fc00001)},
	{"float sum inf-inf", Float32, Sum, 2, 0, "Reduce", u(0x7f800000), u(0xff800000), u(0xffc00000)},
	{"float sum overflow", Float32, Sum, 2, 0, "Reduce", u(0x7f7fffff), u(0x7f7fffff), u(0x7f800000)},
	{"float sum zeros", Float32, Sum, 2, 0, "Reduce", u(0x80000000, 0x80000000), u(0, 0x80000000), u(0, 0x80000000)},
	{"float prod 0*inf", Float32, Prod, 2, 0, "Reduce", u(0), u(0x7f800000), u(0xffc00000)},
	{"float prod denormal kept", Float32, Prod, 2, 0, "Reduce", u(0x00800000), u(f32b(0.5)), u(0x00400000)},
	{"float max NaN and zeros pick b", Float32, Max, 2, 0, "Reduce",
		u(0x7f800001, 0x3f800000, 0, 0x80000000, f32b(2)), u(0x3f800000, 0x7f800001, 0x80000000, 0, f32b(3)),
		u(0x3f800000, 0x7f800001, 0x80000000, 0, f32b(3))},
	{"float min NaN and zeros pick b", Float32, Min, 2, 0, "Reduce",
		u(0x7fc00000, f32b(-1), 0x80000000, 0, f32b(2)), u(f32b(-1), 0x7fc00000, 0, 0x80000000, f32b(3)),
		u(f32b(-1), 0x7fc00000, 0, 0x80000000, f32b(2))},
	{"float avg", Float32, Avg, 4, 0, "ReducePre", u(f32b(1)), u(f32b(2)), u(f32b(1.5))},
	{"float avg pre", Float32, Avg, 4, 0, "Pre", u(f32b(2)), nil, u(f32b(0.5))},
	{"float avg post is copy", Float32, Avg, 4, 0, "Post", u(f32b(2)), nil, u(f32b(2))},
	// The pre-op is rounded before the add (no FMA): fused would give 0x3a000400.
	{"float premulsum not fused", Float32, PreMulSum, 2, 1 + 0x1p-12, "ReducePre", u(f32b(-1)), u(0x3f800800), u(0x3a000000)},
	{"double sum tie", Float64, Sum, 2, 0, "Reduce", u(f64b(1)), u(f64b(0x1p-53)), u(f64b(1))},
	{"double prod 0*inf", Float64, Prod, 2, 0, "Reduce", u(0), u(0x7ff0000000000000), u(0xfff8000000000000)},
	{"double max", Float64, Max, 2, 0, "Reduce", u(0x7ff0000000000001, f64b(1)), u(f64b(1), 0x7ff0000000000001), u(f64b(1), 0x7ff0000000000001)},
	{"double avg pre", Float64, Avg, 3, 0, "Pre", u(f64b(1)), nil, u(0x3fd5555555555555)},

	// half: a float32 op of widened values, rounded to nearest even.
	{"half sum ties", Float16, Sum, 2, 0, "Reduce", u(0x3c00, 0x3c01), u(0x1000, 0x1000), u(0x3c00, 0x3c02)},
	{"half sum overflow", Float16, Sum, 2, 0, "Reduce", u(0x7bff, 0x7bff), u(0x4c00, 0x4800), u(0x7c00, 0x7bff)},
	{"half sum subnormals", Float16, Sum, 2, 0, "Reduce", u(0x0001, 0x03ff), u(0x0001, 0x0001), u(0x0002, 0x0400)},
	{"half sum NaNs", Float16, Sum, 2, 0, "Reduce", u(0x7c01, 0x7c00), u(0x3c00, 0xfc00), u(0x7e01, 0xfe00)},
	{"half prod underflow ties", Float16, Prod, 2, 0, "Reduce", u(0x0001, 0x0003), u(0x3800, 0x3800), u(0x0000, 0x0002)},
	{"half max", Float16, Max, 2, 0, "Reduce", u(0x7c01, 0x3c00, 0x0000), u(0x3c00, 0x7c01, 0x8000), u(0x3c00, 0x7e01, 0x8000)},
	{"half min", Float16, Min, 2, 0, "Reduce", u(0xbc00, 0x3c00), u(0x3c00, 0xfc00), u(0xbc00, 0xfc00)},
	{"half avg pre 1/3", Float16, Avg, 3, 0, "Pre", u(0x3c00), nil, u(0x3555)},
	{"half premulsum 0.1", Float16, PreMulSum, 2, 0.1, "Pre", u(0x3c00), nil, u(0x2e66)},
	{"half premulsum rounds pre-op", Float16, PreMulSum, 2, 0.1, "ReducePre", u(0x3c00), u(0x3c00), u(0x3c66)},
	{"half scalar no double rounding", Float16, PreMulSum, 2, 1 + 0x1p-11 + 0x1p-40, "Pre", u(0x3c00), nil, u(0x3c01)},
	{"half scalar overflow", Float16, PreMulSum, 2, 65520, "Pre", u(0x3c00), nil, u(0x7c00)},

	// bfloat16: the same, with denormals kept (no flush to zero).
	{"bf16 sum ties", Bfloat16, Sum, 2, 0, "Reduce", u(0x3f80, 0x3f81), u(0x3b80, 0x3b80), u(0x3f80, 0x3f82)},
	{"bf16 sum denormals kept", Bfloat16, Sum, 2, 0, "Reduce", u(0x0001, 0x8001), u(0x0001, 0x0000), u(0x0002, 0x8001)},
	{"bf16 sum overflow", Bfloat16, Sum, 2, 0, "Reduce", u(0x7f7f), u(0x7f7f), u(0x7f80)},
	{"bf16 sum NaNs", Bfloat16, Sum, 2, 0, "Reduce", u(0x7f81, 0x7f80), u(0x3f80, 0xff80), u(0x7fc1, 0xffc0)},
	{"bf16 max", Bfloat16, Max, 2, 0, "Reduce", u(0x7f81, 0x3f80), u(0x3f80, 0x7f81), u(0x3f80, 0x7fc1)},
	{"bf16 avg pre 1/3", Bfloat16, Avg, 3, 0, "Pre", u(0x3f80), nil, u(0x3eab)},
	{"bf16 scalar no double rounding", Bfloat16, PreMulSum, 2, 1 + 0x1p-8 + 0x1p-40, "Pre", u(0x3f80), nil, u(0x3f81)},

	// fp8 e4m3: saturates to ±448, NaN stays NaN.
	{"e4m3 sum saturates", Float8e4m3, Sum, 2, 0, "Reduce", u(0x7e, 0xfe), u(0x7e, 0xe8), u(0x7e, 0xfe)},
	{"e4m3 sum ties", Float8e4m3, Sum, 2, 0, "Reduce", u(0x38, 0x39), u(0x18, 0x18), u(0x38, 0x3a)},
	{"e4m3 sum subnormals", Float8e4m3, Sum, 2, 0, "Reduce", u(0x01, 0x07), u(0x01, 0x01), u(0x02, 0x08)},
	{"e4m3 sum NaN", Float8e4m3, Sum, 2, 0, "Reduce", u(0x7f, 0x38), u(0x38, 0xff), u(0x7f, 0xff)},
	{"e4m3 prod", Float8e4m3, Prod, 2, 0, "Reduce", u(0x7e, 0x01, 0x03), u(0x7e, 0x30, 0x30), u(0x7e, 0x00, 0x02)},
	{"e4m3 premulsum saturates", Float8e4m3, PreMulSum, 2, 448, "Pre", u(0x40), nil, u(0x7e)},
	{"e4m3 scalar saturates", Float8e4m3, PreMulSum, 2, math.Inf(-1), "Pre", u(0x38), nil, u(0xfe)},
	{"e4m3 scalar NaN", Float8e4m3, PreMulSum, 2, math.NaN(), "Pre", u(0x38), nil, u(0x7f)},
	{"e4m3 max", Float8e4m3, Max, 2, 0, "Reduce", u(0x7f, 0x38, 0x00), u(0x38, 0x7f, 0x80), u(0x38, 0x7f, 0x80)},

	// fp8 e5m2: IEEE-like, overflow to inf.
	{"e5m2 sum overflow", Float8e5m2, Sum, 2, 0, "Reduce", u(0x7b, 0x7b, 0x7b), u(0x70, 0x6c, 0x68), u(0x7c, 0x7c, 0x7b)},
	{"e5m2 sum subnormals", Float8e5m2, Sum, 2, 0, "Reduce", u(0x01, 0x03), u(0x01, 0x01), u(0x02, 0x04)},
	{"e5m2 sum NaNs", Float8e5m2, Sum, 2, 0, "Reduce", u(0x7c, 0x7d), u(0xfc, 0x3c), u(0xfe, 0x7f)},
	{"e5m2 scalar overflow", Float8e5m2, PreMulSum, 2, 1e6, "Pre", u(0x3c), nil, u(0x7c)},
	{"e5m2 min", Float8e5m2, Min, 2, 0, "Reduce", u(0xbc, 0x3c), u(0x3c, 0xfc), u(0xbc, 0xfc)},
}

// TestReference checks hand-computed results at every implementation level. Each case's
// elements are repeated so that they pass through full vectors and every tail position.
func TestReference(t *testing.T) {
	levels := append([]level{levelPortable}, vectorLevels()...)
	const reps = 37
	for _, tc := range refCases {
		for _, l := range levels {
			t.Run(fmt.Sprintf("%s/%s", tc.name, l), func(t *testing.T) {
				f := newFuncAt(t, l, tc.t, tc.op, tc.nranks, tc.scalar)
				n := len(tc.a) * reps
				sz := tc.t.Size()
				a, b, dst := make([]byte, n*sz), make([]byte, n*sz), make([]byte, n*sz)
				for i := range n {
					putElem(tc.t, a, i, tc.a[i%len(tc.a)])
					if tc.b != nil {
						putElem(tc.t, b, i, tc.b[i%len(tc.b)])
					}
				}
				methods := map[string]func(){
					"Reduce":    func() { f.Reduce(dst, a, b) },
					"ReducePre": func() { f.ReducePre(dst, a, b) },
					"Pre":       func() { f.Pre(dst, a) },
					"Post":      func() { f.Post(dst, a) },
				}
				methods[tc.method]()
				mask := uint64(math.MaxUint64) >> (64 - 8*sz) // the want values are int64 or wider
				for i := range n {
					got, want := getElem(tc.t, dst, i), tc.want[i%len(tc.want)]&mask
					if got != want {
						t.Fatalf("%s element %d: got %#x, want %#x", tc.method, i%len(tc.a), got, want)
					}
				}
			})
		}
	}
}

func TestFuncAccessors(t *testing.T) {
	tests := []struct {
		t               DataType
		op              Op
		hasPre, hasPost bool
	}{
		{Float32, Sum, false, false},
		{Float32, Avg, true, false},
		{Bfloat16, Avg, true, false},
		{Int32, Avg, false, true},
		{Uint8, Avg, false, true},
		{Int8, PreMulSum, true, false},
		{Float8e4m3, PreMulSum, true, false},
		{Float64, Max, false, false},
	}
	for _, tc := range tests {
		f, err := NewFunc(tc.t, tc.op, 4, 2)
		if err != nil {
			t.Fatal(err)
		}
		if f.Type() != tc.t || f.Op() != tc.op || f.HasPre() != tc.hasPre || f.HasPost() != tc.hasPost {
			t.Errorf("%v/%v: got type %v op %v pre %v post %v, want %v %v %v %v", tc.t, tc.op,
				f.Type(), f.Op(), f.HasPre(), f.HasPost(), tc.t, tc.op, tc.hasPre, tc.hasPost)
		}
	}
}
