package reduce

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestDataTypeTable(t *testing.T) {
	tests := []struct {
		t     DataType
		nccl  int
		name  string
		size  int
		float bool
	}{
		{Int8, 0, "int8", 1, false}, {Uint8, 1, "uint8", 1, false},
		{Int32, 2, "int32", 4, false}, {Uint32, 3, "uint32", 4, false},
		{Int64, 4, "int64", 8, false}, {Uint64, 5, "uint64", 8, false},
		{Float16, 6, "half", 2, true}, {Float32, 7, "float", 4, true},
		{Float64, 8, "double", 8, true}, {Bfloat16, 9, "bfloat16", 2, true},
		{Float8e4m3, 10, "f8e4m3", 1, true}, {Float8e5m2, 11, "f8e5m2", 1, true},
	}
	if got := DataTypes(); len(got) != len(tests) {
		t.Fatalf("DataTypes() has %d types, want %d", len(got), len(tests))
	}
	for i, tc := range tests {
		if DataTypes()[i] != tc.t || int(tc.t) != tc.nccl || tc.t.String() != tc.name ||
			tc.t.Size() != tc.size || tc.t.IsFloat() != tc.float || !tc.t.Valid() {
			t.Errorf("%d: got %d %q size %d float %v, want %d %q %d %v", i, tc.t, tc.t.String(),
				tc.t.Size(), tc.t.IsFloat(), tc.nccl, tc.name, tc.size, tc.float)
		}
	}
	bad := DataType(12)
	if bad.Valid() || bad.Size() != 0 || bad.IsFloat() || bad.String() != "DataType(12)" {
		t.Errorf("DataType(12): valid %v size %d float %v %q", bad.Valid(), bad.Size(), bad.IsFloat(), bad.String())
	}
}

func TestParseDataType(t *testing.T) {
	tests := []struct {
		in   string
		want DataType
	}{
		{"int8", Int8}, {"char", Int8}, {"ncclInt8", Int8}, {"ncclChar", Int8},
		{"uint8", Uint8}, {"uchar", Uint8},
		{"int32", Int32}, {"int", Int32}, {"ncclInt", Int32},
		{"uint32", Uint32}, {"uint", Uint32},
		{"int64", Int64}, {"uint64", Uint64},
		{"half", Float16}, {"float16", Float16}, {"fp16", Float16}, {"ncclHalf", Float16},
		{"float", Float32}, {"float32", Float32}, {"fp32", Float32}, {"FLOAT", Float32}, {"ncclFloat", Float32},
		{"double", Float64}, {"float64", Float64}, {"fp64", Float64}, {"ncclDouble", Float64},
		{"bfloat16", Bfloat16}, {"bf16", Bfloat16}, {"BF16", Bfloat16},
		{"f8e4m3", Float8e4m3}, {"fp8_e4m3", Float8e4m3}, {"ncclFloat8e4m3", Float8e4m3},
		{"f8e5m2", Float8e5m2}, {"fp8_e5m2", Float8e5m2}, {"e5m2", Float8e5m2},
	}
	for _, tc := range tests {
		got, err := ParseDataType(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseDataType(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "all", "int16", "float8", " float", "float ", "fp8"} {
		_, err := ParseDataType(in)
		if err == nil {
			t.Errorf("ParseDataType(%q) succeeded, want an error", in)
			continue
		}
		msg := err.Error()
		if !strings.Contains(msg, strconv.Quote(in)) || !strings.Contains(msg, "int8 uint8 int32") || !strings.Contains(msg, "f8e5m2") {
			t.Errorf("ParseDataType(%q) error %q: want the value and the allowed names", in, msg)
		}
	}
}

func TestOpTable(t *testing.T) {
	names := []string{"sum", "prod", "max", "min", "avg", "premulsum"}
	ops := Ops()
	if len(ops) != len(names) {
		t.Fatalf("Ops() = %v", ops)
	}
	for i, o := range ops {
		if int(o) != i || o.String() != names[i] || !o.Valid() {
			t.Errorf("op %d: got %d %q valid %v, want %d %q", i, o, o, o.Valid(), i, names[i])
		}
	}
	if Op(6).Valid() || Op(6).String() != "Op(6)" {
		t.Errorf("Op(6): valid %v %q", Op(6).Valid(), Op(6).String())
	}
}

func TestParseOp(t *testing.T) {
	tests := []struct {
		in   string
		want Op
	}{
		{"sum", Sum}, {"SUM", Sum}, {"ncclSum", Sum}, {"prod", Prod}, {"max", Max}, {"min", Min},
		{"avg", Avg}, {"ncclAvg", Avg}, {"premulsum", PreMulSum}, {"mulsum", PreMulSum}, {"premul_sum", PreMulSum},
	}
	for _, tc := range tests {
		got, err := ParseOp(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseOp(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"", "all", "add", "sum ", "mean"} {
		_, err := ParseOp(in)
		if err == nil {
			t.Errorf("ParseOp(%q) succeeded, want an error", in)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, strconv.Quote(in)) || !strings.Contains(msg, "sum prod max min avg premulsum") {
			t.Errorf("ParseOp(%q) error %q: want the value and the allowed names", in, msg)
		}
	}
}

func FuzzParseDataType(f *testing.F) {
	for _, s := range []string{"float", "bf16", "ncclInt", "x", "", "F8E4M3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		dt, err := ParseDataType(s)
		if err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("error %q does not name the value %q", err, s)
			}
			return
		}
		if !dt.Valid() {
			t.Fatalf("ParseDataType(%q) = invalid %d", s, dt)
		}
		if back, err := ParseDataType(dt.String()); err != nil || back != dt {
			t.Fatalf("%q -> %v -> %q -> %v, %v", s, dt, dt.String(), back, err)
		}
		if up, err := ParseDataType(strings.ToUpper(s)); err != nil || up != dt {
			t.Fatalf("upper case %q -> %v, %v; want %v", strings.ToUpper(s), up, err, dt)
		}
	})
}

func FuzzParseOp(f *testing.F) {
	for _, s := range []string{"sum", "mulsum", "ncclAvg", "x", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		op, err := ParseOp(s)
		if err != nil {
			if !strings.Contains(err.Error(), strconv.Quote(s)) {
				t.Fatalf("error %q does not name the value %q", err, s)
			}
			return
		}
		if !op.Valid() {
			t.Fatalf("ParseOp(%q) = invalid %d", s, op)
		}
		if back, err := ParseOp(op.String()); err != nil || back != op {
			t.Fatalf("%q -> %v -> %q -> %v, %v", s, op, op.String(), back, err)
		}
	})
}

func TestNewFuncErrors(t *testing.T) {
	tests := []struct {
		name   string
		t      DataType
		op     Op
		nranks int
		scalar float64
		want   []string // substrings of the error
	}{
		{"bad type", DataType(12), Sum, 2, 0, []string{"invalid data type 12", "int8", "f8e5m2"}},
		{"bad type 255", DataType(255), Sum, 2, 0, []string{"invalid data type 255"}},
		{"bad op", Float32, Op(6), 2, 0, []string{"invalid reduction op 6", "sum prod max min avg premulsum"}},
		{"nranks 0", Float32, Sum, 0, 0, []string{"invalid nranks 0", ">= 1"}},
		{"nranks negative", Int32, Avg, -3, 0, []string{"invalid nranks -3"}},
		{"int8 scalar too big", Int8, PreMulSum, 2, 127.5, []string{"premulsum scalar 127.5", "int8", "-128..127"}},
		{"uint8 scalar negative", Uint8, PreMulSum, 2, -1, []string{"premulsum scalar -1", "uint8"}},
		{"int32 scalar NaN", Int32, PreMulSum, 2, math.NaN(), []string{"premulsum scalar NaN"}},
		{"int64 scalar 2^63", Int64, PreMulSum, 2, 0x1p63, []string{"out of range for int64"}},
		{"uint64 scalar 2^64", Uint64, PreMulSum, 2, 0x1p64, []string{"out of range for uint64"}},
		{"uint32 scalar inf", Uint32, PreMulSum, 2, math.Inf(1), []string{"out of range for uint32"}},
	}
	for _, tc := range tests {
		f, err := NewFunc(tc.t, tc.op, tc.nranks, tc.scalar)
		if err == nil {
			t.Errorf("%s: NewFunc succeeded (%v), want an error", tc.name, f)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q, want it to contain %q", tc.name, err, w)
			}
		}
	}
	// Edges that are fine.
	for _, c := range []struct {
		t DataType
		s float64
	}{{Int8, 127.4}, {Int8, -128.5}, {Uint64, 0x1p64 - 2048}, {Int64, -0x1p63}, {Float32, math.NaN()}} {
		if _, err := NewFunc(c.t, PreMulSum, 1, c.s); err != nil {
			t.Errorf("NewFunc(%v, premulsum, 1, %v): %v", c.t, c.s, err)
		}
	}
}

// mustPanic runs fn and returns its panic message, failing if it does not panic.
func mustPanic(t *testing.T, what string, fn func()) string {
	t.Helper()
	var msg string
	func() {
		defer func() {
			if r := recover(); r != nil {
				msg, _ = r.(string)
				if msg == "" {
					msg = "non-string panic"
				}
			}
		}()
		fn()
	}()
	if msg == "" {
		t.Errorf("%s: did not panic", what)
	}
	return msg
}

func TestPanics(t *testing.T) {
	f, _ := NewFunc(Float32, Sum, 2, 0)
	buf := make([]byte, 64)
	cases := []struct {
		name string
		fn   func()
		want string
	}{
		{"Reduce length mismatch", func() { f.Reduce(buf[:8], buf[8:16], buf[16:20]) }, "dst 8, src 8, src2 4"},
		{"Reduce not a multiple", func() { f.Reduce(buf[:6], buf[8:14], buf[16:22]) }, "multiples of 4 bytes"},
		{"ReducePre mismatch", func() { f.ReducePre(buf[:8], buf[8:12], buf[16:24]) }, "ReducePre"},
		{"Pre mismatch", func() { f.Pre(buf[:8], buf[8:12]) }, "float/sum.Pre"},
		{"Post mismatch", func() { f.Post(buf[:4], buf[8:16]) }, "Post"},
		{"dst overlaps a", func() { f.Reduce(buf[0:16], buf[4:20], buf[32:48]) }, "overlaps"},
		{"dst overlaps b", func() { f.Reduce(buf[8:24], buf[32:48], buf[4:20]) }, "overlaps"},
		{"Pre overlap", func() { f.Pre(buf[0:16], buf[8:24]) }, "overlaps"},
	}
	for _, c := range cases {
		if msg := mustPanic(t, c.name, c.fn); msg != "" && !strings.Contains(msg, c.want) {
			t.Errorf("%s: panic %q, want it to contain %q", c.name, msg, c.want)
		}
	}
	// Exact aliasing and a source shared by a and b are fine.
	f.Reduce(buf[:16], buf[:16], buf[16:32])
	f.Reduce(buf[16:32], buf[:16], buf[16:32])
	f.Reduce(buf[:16], buf[32:48], buf[32:48])
	f.Reduce(nil, nil, nil)
}

func TestImplementations(t *testing.T) {
	names := Implementations()
	if len(names) == 0 || names[0] != "portable" {
		t.Fatalf("Implementations() = %v: want portable first", names)
	}
	if !slices.Contains(names, Implementation()) || Implementation() != names[len(names)-1] {
		t.Errorf("Implementation() = %q, want the best of %v", Implementation(), names)
	}
	old := activeLevel.Load()
	t.Cleanup(func() { activeLevel.Store(old) })
	for _, n := range names {
		if err := SetImplementation(n); err != nil || Implementation() != n {
			t.Errorf("SetImplementation(%q): %v, now %q", n, err, Implementation())
		}
	}
	if err := SetImplementation("sse9"); err == nil || !strings.Contains(err.Error(), `"sse9"`) || !strings.Contains(err.Error(), "portable") {
		t.Errorf("SetImplementation(sse9) error %v: want the value and the allowed set", err)
	}
	for l := range numLevels {
		if !supported[l] {
			if err := SetImplementation(level(l).String()); err == nil {
				t.Errorf("SetImplementation(%q) succeeded on a CPU without it", level(l))
			}
		}
	}
}

// TestNoAllocs: the hot path allocates nothing (the engine calls it for every step).
func TestNoAllocs(t *testing.T) {
	buf := make([]byte, 3*4096)
	dst, a, b := buf[:4096], buf[4096:8192], buf[8192:]
	for _, c := range []struct {
		t  DataType
		op Op
	}{{Float32, Sum}, {Bfloat16, Avg}, {Int32, Avg}, {Float8e4m3, Max}} {
		f, err := NewFunc(c.t, c.op, 3, 0)
		if err != nil {
			t.Fatal(err)
		}
		allocs := testing.AllocsPerRun(100, func() {
			f.Reduce(dst, a, b)
			f.ReducePre(dst, a, b)
			f.Pre(dst, a)
			f.Post(dst, dst)
		})
		if allocs != 0 {
			t.Errorf("%v: %v allocations per call, want 0", f, allocs)
		}
	}
}
