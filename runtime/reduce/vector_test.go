package reduce

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// funcConfig is one way to build a Func for a type.
type funcConfig struct {
	op     Op
	nranks int
	scalar float64
}

func (c funcConfig) String() string {
	switch c.op {
	case Avg:
		return fmt.Sprintf("avg/n=%d", c.nranks)
	case PreMulSum:
		return fmt.Sprintf("premulsum/s=%v", c.scalar)
	}
	return c.op.String()
}

// funcConfigs lists the ops to test on t, with several scalars for PreMulSum (special ones
// for floating types) and several rank counts for Avg.
func funcConfigs(t DataType) []funcConfig {
	cs := []funcConfig{{Sum, 2, 0}, {Prod, 2, 0}, {Max, 2, 0}, {Min, 2, 0}, {Avg, 3, 0}, {Avg, 1, 0}, {Avg, 7, 0}}
	scalars := []float64{3, -2}
	if !t.isSigned() {
		scalars = []float64{3, 200}
	}
	if t.IsFloat() {
		scalars = []float64{0.3, -2.5, math.NaN(), math.Inf(1), math.Copysign(0, -1), 1e-40, 1e-300, 65520, 1e30}
	}
	for _, s := range scalars {
		cs = append(cs, funcConfig{PreMulSum, 2, s})
	}
	return cs
}

var testLengths = []int{0, 1, 3, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 1000, 4099}

// testOffsets are byte misalignments of (dst, a, b): all equal 0..7, then mixed.
var testOffsets = [][3]int{
	{0, 0, 0}, {1, 1, 1}, {2, 2, 2}, {3, 3, 3}, {4, 4, 4}, {5, 5, 5}, {6, 6, 6}, {7, 7, 7},
	{0, 3, 5}, {5, 0, 3}, {3, 5, 0}, {1, 2, 7},
}

// method applies one of Func's four entry points.
type method struct {
	name string
	run  func(f *Func, dst, a, b []byte)
}

var methods = []method{
	{"Reduce", func(f *Func, dst, a, b []byte) { f.Reduce(dst, a, b) }},
	{"ReducePre", func(f *Func, dst, a, b []byte) { f.ReducePre(dst, a, b) }},
	{"Pre", func(f *Func, dst, a, _ []byte) { f.Pre(dst, a) }},
	{"Post", func(f *Func, dst, a, _ []byte) { f.Post(dst, a) }},
}

// runAt runs m on copies of a and b placed at the offsets off, and returns dst. It fails
// the test if anything outside dst was written.
func runAt(t *testing.T, f *Func, m method, a, b []byte, off [3]int) []byte {
	t.Helper()
	dst, dstOK := at(off[0], len(a), 0xa5)
	x, xOK := at(off[1], len(a), 0x5b)
	y, yOK := at(off[2], len(b), 0x3c)
	copy(x, a)
	copy(y, b)
	m.run(f, dst, x, y)
	if !dstOK() || !xOK() || !yOK() {
		t.Fatalf("%v %s wrote outside its slices (len %d, offsets %v)", f, m.name, len(a), off)
	}
	if !bytes.Equal(x, a) || !bytes.Equal(y, b) {
		t.Fatalf("%v %s modified an input", f, m.name)
	}
	return dst
}

// diff describes the first element where got and want differ, or returns "".
func diff(dt DataType, got, want, a, b []byte) string {
	for i := range len(got) / dt.Size() {
		g, w := getElem(dt, got, i), getElem(dt, want, i)
		if g != w {
			return fmt.Sprintf("element %d of %d: a=%#x b=%#x: got %#x, want %#x",
				i, len(got)/dt.Size(), getElem(dt, a, i), getElem(dt, b, i), g, w)
		}
	}
	return ""
}

// withNT sets the size from which non-temporal kernels are used, until the test ends.
func withNT(t *testing.T, minBytes int) {
	old := ntMinBytes
	ntMinBytes = minBytes
	t.Cleanup(func() { ntMinBytes = old })
}

// withSmallCalls cuts every call into assembly calls of at most 256 bytes per operand, so
// short test buffers cross the boundaries that big buffers cross every 1 MiB.
func withSmallCalls(t *testing.T) {
	old := maxCallBytes
	maxCallBytes = 256
	t.Cleanup(func() { maxCallBytes = old })
}

// TestVectorMatchesPortable checks every kernel of every vector level against the portable
// kernel, bit for bit, on random and special data, for many lengths (every tail path) and
// misalignments; once with the cached kernels and once with the non-temporal ones forced
// on (their aligned middle, and the cached head and tail around it). Calls are cut into
// 256-byte assembly calls in both.
func TestVectorMatchesPortable(t *testing.T) {
	t.Run("cached", func(t *testing.T) {
		withSmallCalls(t)
		testVectorMatchesPortable(t, 0)
	})
	t.Run("nontemporal", func(t *testing.T) {
		withSmallCalls(t)
		withNT(t, 0)
		testVectorMatchesPortable(t, 63) // shorter calls never reach the aligned middle
	})
}

// hasAsm reports whether some level has assembly for dt; the other types dispatch to the
// portable kernels at every level, so one misalignment suffices for them.
func hasAsm(dt DataType) bool {
	for l := range numLevels {
		if asmKernels[l][dt][kSum].fn != nil {
			return true
		}
	}
	return false
}

func testVectorMatchesPortable(t *testing.T, minLen int) {
	levels := vectorLevels()
	if len(levels) == 0 {
		t.Skip("no vector implementation on this machine or build")
	}
	r := rand.New(rand.NewPCG(1, 2))
	for _, dt := range DataTypes() {
		offsets := testOffsets
		if !hasAsm(dt) {
			offsets = testOffsets[len(testOffsets)-1:]
		}
		for _, n := range testLengths {
			if n < minLen {
				continue
			}
			a, b := make([]byte, n*dt.Size()), make([]byte, n*dt.Size())
			fill(r, dt, a, n)
			fill(r, dt, b, n)
			for _, c := range funcConfigs(dt) {
				pf := newFuncAt(t, levelPortable, dt, c.op, c.nranks, c.scalar)
				for _, m := range methods {
					// The portable result at one alignment is the oracle for all; the
					// portable kernel itself is checked at another alignment too.
					want := runAt(t, pf, m, a, b, [3]int{})
					if got := runAt(t, pf, m, a, b, [3]int{1, 2, 7}); !bytes.Equal(got, want) {
						t.Fatalf("portable %v %v %s n=%d: result depends on alignment", dt, c, m.name, n)
					}
					for _, off := range offsets {
						for _, l := range levels {
							vf := newFuncAt(t, l, dt, c.op, c.nranks, c.scalar)
							got := runAt(t, vf, m, a, b, off)
							if d := diff(dt, got, want, a, b); d != "" {
								t.Fatalf("%s %v %v %s n=%d offsets=%v: %s", l, dt, c, m.name, n, off, d)
							}
						}
					}
				}
			}
		}
	}
}

// TestVectorSpecialPairs runs every pair of special values through every op, each pair in
// every lane position of a vector (the operands are rotations of the specials list).
func TestVectorSpecialPairs(t *testing.T) {
	levels := vectorLevels()
	if len(levels) == 0 {
		t.Skip("no vector implementation on this machine or build")
	}
	for _, dt := range []DataType{Float32, Float64, Float16, Bfloat16} {
		sp := specials[dt]
		var av, bv []uint64
		for i := range sp { // every (x, y) pair: x at position p, y at p; repeated with shifts
			for j := range sp {
				av = append(av, sp[i])
				bv = append(bv, sp[j])
			}
		}
		for shift := range 3 { // move pairs across lane positions and vector boundaries
			n := len(av) + shift
			a, b := make([]byte, n*dt.Size()), make([]byte, n*dt.Size())
			for i := range av {
				putElem(dt, a, i+shift, av[i])
				putElem(dt, b, i+shift, bv[i])
			}
			for _, c := range funcConfigs(dt) {
				pf := newFuncAt(t, levelPortable, dt, c.op, c.nranks, c.scalar)
				for _, m := range methods[:2] {
					want := runAt(t, pf, m, a, b, [3]int{})
					for _, l := range levels {
						got := runAt(t, newFuncAt(t, l, dt, c.op, c.nranks, c.scalar), m, a, b, [3]int{})
						if d := diff(dt, got, want, a, b); d != "" {
							t.Fatalf("%s %v %v %s: %s", l, dt, c, m.name, d)
						}
					}
				}
			}
		}
	}
}

// TestAliasing checks dst == a and dst == b against the out-of-place result, at every level.
func TestAliasing(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	levels := append([]level{levelPortable}, vectorLevels()...)
	for _, dt := range DataTypes() {
		for _, n := range []int{1, 17, 129, 4099} {
			a, b := make([]byte, n*dt.Size()), make([]byte, n*dt.Size())
			fill(r, dt, a, n)
			fill(r, dt, b, n)
			for _, c := range funcConfigs(dt)[:6] {
				for _, l := range levels {
					f := newFuncAt(t, l, dt, c.op, c.nranks, 0.5)
					for _, m := range methods {
						want := make([]byte, len(a))
						m.run(f, want, a, b)
						x, y := bytes.Clone(a), bytes.Clone(b)
						m.run(f, x, x, y) // dst == a
						if d := diff(dt, x, want, a, b); d != "" {
							t.Errorf("%s %v %v %s dst==a: %s", l, dt, c, m.name, d)
						}
						if m.name == "Reduce" || m.name == "ReducePre" {
							x, y = bytes.Clone(a), bytes.Clone(b)
							m.run(f, y, x, y) // dst == b
							if d := diff(dt, y, want, a, b); d != "" {
								t.Errorf("%s %v %v %s dst==b: %s", l, dt, c, m.name, d)
							}
						}
					}
				}
			}
		}
	}
}

// TestVectorKernelsPresent guards the dispatch: on a CPU with AVX-512 or AVX2, the hot types
// really get assembly at that level (a table bug would otherwise silently test portable
// against portable).
func TestVectorKernelsPresent(t *testing.T) {
	for _, l := range vectorLevels() {
		for _, dt := range []DataType{Float32, Float64, Float16, Bfloat16} {
			for _, k := range []kind{kSum, kProd, kMax, kMin, kPreSum, kPre} {
				if asmKernels[l][dt][k].fn == nil && !(dt == Float16 && l == levelAVX2) {
					t.Errorf("%s %v %v: no assembly kernel", l, dt, k)
				}
			}
		}
		f := newFuncAt(t, l, Float32, Sum, 2, 0)
		if f.red.asm == nil || f.red.nt == nil {
			t.Errorf("%s: NewFunc(float, sum) did not bind the assembly kernels", l)
		}
	}
}

// FuzzVectorMatchesPortable feeds arbitrary bytes, types, ops and scalars to every vector
// level and the portable kernels, at a fuzzed misalignment.
func FuzzVectorMatchesPortable(f *testing.F) {
	f.Add(uint8(Float32), uint8(Sum), uint8(0), 0.5, []byte("0123456789abcdef0123456789abcdef"))
	f.Add(uint8(Bfloat16), uint8(PreMulSum), uint8(3), -3.25, []byte{0x80, 0x7f, 0x81, 0x7f, 0, 0, 1, 0})
	f.Add(uint8(Float16), uint8(Max), uint8(5), 1.0, []byte{0x01, 0x7c, 0x00, 0x3c, 0, 0x80, 0, 0})
	f.Fuzz(func(t *testing.T, typ, op, off uint8, scalar float64, data []byte) {
		dt, o := DataType(typ%numDataTypes), Op(op%numOps)
		n := len(data) / 2 / dt.Size()
		a, b := data[:n*dt.Size()], data[n*dt.Size():2*n*dt.Size()]
		if _, err := NewFunc(dt, o, 3, scalar); err != nil {
			return // an integer scalar out of range
		}
		pf := newFuncAt(t, levelPortable, dt, o, 3, scalar)
		offs := [3]int{int(off) % 8, int(off/8) % 8, int(off/64) % 4}
		for _, m := range methods {
			want := runAt(t, pf, m, a, b, offs)
			for _, l := range vectorLevels() {
				got := runAt(t, newFuncAt(t, l, dt, o, 3, scalar), m, a, b, offs)
				if d := diff(dt, got, want, a, b); d != "" {
					t.Fatalf("%s %v %v %s offsets %v: %s", l, dt, o, m.name, offs, d)
				}
			}
		}
	})
}
