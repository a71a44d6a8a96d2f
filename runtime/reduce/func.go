package reduce

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
	"unsafe"
)

// Func is a reduction bound to a data type, as NCCL's device code sees it (hostToDevRedOp):
//
//   - Sum, Prod, Max, Min reduce with that operation and have no pre- or post-op.
//   - PreMulSum multiplies this rank's LOCAL input by this rank's scalar (the pre-op), then
//     sums.
//   - Avg on a floating type is PreMulSum with scalar 1/nranks; on an integer type it is Sum
//     followed by a truncating divide by nranks (the post-op).
//
// An algorithm applies Pre (or ReducePre) to every element of local input exactly once
// before it meets another rank's data, reduces with Reduce, and applies Post once to every
// final element. A Func is immutable and safe for concurrent use.
type Func struct {
	t       DataType
	op      Op
	size    int
	red     impl   // Reduce
	preSum  impl   // ReducePre when there is a pre-op
	pre     impl   // Pre when there is a pre-op
	post    impl   // Post when there is a post-op
	scalar  uint64 // kernel scalar of pre (kPreSum, kPre) ...
	divisor uint64 // ... and of post (kPostDiv)
	hasPre  bool
	hasPost bool
}

// impl is one kernel at the level the Func was created with.
type impl struct {
	asm     kernelFn // nil: portable only
	block   int      // asm handles multiples of block elements
	nt      kernelFn // asm with non-temporal stores, or nil
	ntBlock int      // nt handles multiples of ntBlock elements
	port    kernelFn
}

// NewFunc binds op to data type t. scalar is used only for PreMulSum: this rank's
// multiplier, converted to t with round-to-nearest-even (for an integer t it must round to
// a value t can hold). nranks is used only for Avg. It returns an error naming the value and
// the allowed set for an invalid t or op, nranks < 1, or an unrepresentable integer scalar.
func NewFunc(t DataType, op Op, nranks int, scalar float64) (*Func, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("invalid data type %d: allowed 0..%d (%s)", uint8(t), numDataTypes-1,
			strings.Join(dataTypeNames(), " "))
	}
	if !op.Valid() {
		return nil, fmt.Errorf("invalid reduction op %d: allowed 0..%d (sum prod max min avg premulsum)",
			uint8(op), numOps-1)
	}
	if nranks < 1 {
		return nil, fmt.Errorf("invalid nranks %d: must be >= 1", nranks)
	}
	f := &Func{t: t, op: op, size: t.Size()}
	lvl := level(activeLevel.Load())
	bind := func(k kind) impl {
		a := asmKernels[lvl][t][k]
		return impl{asm: a.fn, block: a.block, nt: a.nt, ntBlock: a.ntBlock, port: portable[t][k]}
	}
	red := kSum
	switch op {
	case Prod:
		red = kProd
	case Max:
		red = kMax
	case Min:
		red = kMin
	case PreMulSum:
		s, err := scalarBits(t, scalar)
		if err != nil {
			return nil, err
		}
		f.hasPre, f.scalar = true, s
	case Avg:
		if t.IsFloat() {
			f.hasPre, f.scalar = true, avgScalarBits(t, nranks)
		} else {
			f.hasPost, f.divisor = true, uint64(nranks)
		}
	}
	f.red = bind(red)
	if f.hasPre {
		f.preSum, f.pre = bind(kPreSum), bind(kPre)
	}
	if f.hasPost {
		f.post = bind(kPostDiv)
	}
	return f, nil
}

// scalarBits converts a PreMulSum scalar to the kernel scalar of t: the value rounded to t
// (to nearest, ties to even), then widened to float32 bits for the types computed in float32.
func scalarBits(t DataType, x float64) (uint64, error) {
	switch t {
	case Float64:
		return math.Float64bits(x), nil
	case Float32:
		return uint64(math.Float32bits(float32(x))), nil
	case Float16:
		return uint64(math.Float32bits(f16to32(f32to16(roundToOdd32(x))))), nil
	case Bfloat16:
		return uint64(math.Float32bits(bf16to32(f32tobf16(roundToOdd32(x))))), nil
	case Float8e4m3:
		return uint64(math.Float32bits(e4m3to32(f32toE4M3(roundToOdd32(x))))), nil
	case Float8e5m2:
		return uint64(math.Float32bits(e5m2to32(f32toE5M2(roundToOdd32(x))))), nil
	}
	r := math.RoundToEven(x)
	var lo, hi float64 // the range of t, as float64 (hi exclusive for 64-bit types)
	switch t {
	case Int8:
		lo, hi = math.MinInt8, math.MaxInt8
	case Uint8:
		lo, hi = 0, math.MaxUint8
	case Int32:
		lo, hi = math.MinInt32, math.MaxInt32
	case Uint32:
		lo, hi = 0, math.MaxUint32
	case Int64:
		lo, hi = math.MinInt64, 0x1p63
	case Uint64:
		lo, hi = 0, 0x1p64
	}
	inRange := r >= lo && r <= hi && !(t.Size() == 8 && r == hi)
	if !inRange {
		return 0, fmt.Errorf("premulsum scalar %v out of range for %s: allowed %v..%v", x, t, lo, hi)
	}
	if r < 0 {
		return uint64(int64(r)), nil
	}
	return uint64(r), nil
}

// avgScalarBits is the Avg multiplier exactly as NCCL computes it: float(1.0/nranks)
// rounded to the type (double keeps 1.0/nranks).
func avgScalarBits(t DataType, nranks int) uint64 {
	inv := 1.0 / float64(nranks)
	if t == Float64 {
		return math.Float64bits(inv)
	}
	s := float32(inv)
	switch t {
	case Float16:
		s = f16to32(f32to16(s))
	case Bfloat16:
		s = bf16to32(f32tobf16(s))
	case Float8e4m3:
		s = e4m3to32(f32toE4M3(s))
	case Float8e5m2:
		s = e5m2to32(f32toE5M2(s))
	}
	return uint64(math.Float32bits(s))
}

// Type returns the data type f reduces.
func (f *Func) Type() DataType { return f.t }

// Op returns the op f was created from (Avg stays Avg; see HasPre and HasPost).
func (f *Func) Op() Op { return f.op }

// String describes f, e.g. "float/avg".
func (f *Func) String() string { return f.t.String() + "/" + f.op.String() }

// HasPre reports whether f has a pre-op (PreMulSum, and Avg on floating types).
func (f *Func) HasPre() bool { return f.hasPre }

// HasPost reports whether f has a post-op (Avg on integer types).
func (f *Func) HasPost() bool { return f.hasPost }

// Reduce computes dst[i] = a[i] ⊕ b[i]. dst may be a or b (the same slice), but must not
// overlap them otherwise. Slices are raw little-endian elements of equal length, a multiple
// of the element size; anything else panics.
func (f *Func) Reduce(dst, a, b []byte) {
	if !f.fits(dst, a) || !f.fits(dst, b) { // check, without its call
		f.bad("Reduce", dst, a, b, true)
	}
	if len(dst) <= tinyBytes && f.size >= 4 { // run's first case, without the call
		f.red.port(ptrAt(dst, 0), ptrAt(a, 0), ptrAt(b, 0), len(dst)>>bits.TrailingZeros(uint(f.size)), 0)
		return
	}
	f.red.run(dst, a, b, f.size, 0)
}

// ReducePre computes dst[i] = recv[i] ⊕ pre(local[i]), where pre is the identity unless f
// has a pre-op. Same rules as Reduce.
func (f *Func) ReducePre(dst, recv, local []byte) {
	f.check("ReducePre", dst, recv, local, true)
	if f.hasPre {
		f.preSum.run(dst, recv, local, f.size, f.scalar)
	} else {
		f.red.run(dst, recv, local, f.size, 0)
	}
}

// Pre computes dst = pre(src): a copy when f has no pre-op. dst may be src.
func (f *Func) Pre(dst, src []byte) {
	f.check("Pre", dst, src, nil, false)
	if f.hasPre {
		f.pre.run(dst, src, nil, f.size, f.scalar)
	} else {
		copy(dst, src)
	}
}

// Post computes dst = post(src): the integer Avg divide, a copy otherwise. dst may be src.
func (f *Func) Post(dst, src []byte) {
	f.check("Post", dst, src, nil, false)
	if f.hasPost {
		f.post.run(dst, src, nil, f.size, f.divisor)
	} else {
		copy(dst, src)
	}
}

// check panics on slices a kernel cannot take: a programming error inside the runtime.
// Without a division (element sizes are powers of two), and Reduce does it (and run's
// tiny case) without the calls: an 8 B all-reduce's reduction is a few ns of work, and
// engine's BenchmarkFlat8B took 29-34 ns through check and run against 23-25 ns inline
// (5 interleaved runs each).
func (f *Func) check(method string, dst, a, b []byte, hasB bool) {
	if !f.fits(dst, a) || (hasB && !f.fits(dst, b)) {
		f.bad(method, dst, a, b, hasB)
	}
}

// fits reports whether src may be an operand of a kernel writing dst: the
// same length, a multiple of the element size, and either the same memory
// or apart.
func (f *Func) fits(dst, src []byte) bool {
	n := uintptr(len(dst))
	d, s := uintptr(unsafe.Pointer(unsafe.SliceData(dst))), uintptr(unsafe.Pointer(unsafe.SliceData(src)))
	return len(src) == len(dst) && n&uintptr(f.size-1) == 0 && (d == s || d+n <= s || s+n <= d)
}

// bad panics with what check found wrong.
func (f *Func) bad(method string, dst, a, b []byte, hasB bool) {
	if len(a) != len(dst) || (hasB && len(b) != len(dst)) || len(dst)%f.size != 0 {
		msg := fmt.Sprintf("reduce: %s.%s: lengths must be equal multiples of %d bytes: dst %d, src %d",
			f, method, f.size, len(dst), len(a))
		if hasB {
			msg += fmt.Sprintf(", src2 %d", len(b))
		}
		panic(msg)
	}
	panic(fmt.Sprintf("reduce: %s.%s: dst overlaps a source without being the same slice", f, method))
}

// maxCallBytes bounds one assembly call: the Go scheduler cannot preempt assembly, so a
// 1 GiB reduction is cut into pieces of at most this many bytes per operand (~10-50 us).
// It must be a multiple of 256, the largest ntBlock*size, so that every piece of a
// non-temporal run stays aligned and whole. A variable so that tests can shrink it.
var maxCallBytes = 1 << 20

// ntMinBytes is the dst size from which the kernels write with non-temporal stores, when
// they have them: such a call streams through more than the last-level cache (32 MiB here)
// and skipping the read-for-ownership of dst saves a quarter of the memory traffic. Smaller
// results stay in cache, where the next step (a send, the next reduction) wants them.
var ntMinBytes = 16 << 20

// ntAlign is the dst alignment the non-temporal kernels need.
const ntAlign = 64

// tinyBytes is the dst size up to which a call on elements of 4 or 8
// bytes runs the portable kernel even where assembly exists: for an 8 B
// all-reduce's two floats the plain loop costs less than the assembly's
// setup (masks, the ABI wrapper, vzeroupper): float sum of 8 B 13-20 ns
// against 15-30 ns with AVX2 or AVX-512, double 11-20 ns against 16-41 ns
// (go test -bench Reduce with an 8 B size added, 3 runs, 2026-11-27, a
// loaded 2-core EPYC); at 64 B the two were level. Not for 16-bit floats
// and fp8, whose portable kernels convert each element.
const tinyBytes = 16

func (k *impl) run(dst, a, b []byte, size int, s uint64) {
	n := len(dst) >> bits.TrailingZeros(uint(size)) // sizes are powers of two
	if k.asm == nil || (len(dst) <= tinyBytes && size >= 4) {
		k.port(ptrAt(dst, 0), ptrAt(a, 0), ptrAt(b, 0), n, s)
		return
	}
	if p := uintptr(ptrAt(dst, 0)); k.nt != nil && len(dst) >= ntMinBytes && p%uintptr(size) == 0 {
		head := min(n, int((ntAlign-p%ntAlign)%ntAlign)/size) // elements before dst is aligned
		mid := head + (n-head)/k.ntBlock*k.ntBlock
		k.cached(dst[:head*size], part(a, 0, head, size), part(b, 0, head, size), size, s)
		chunked(k.nt, dst[head*size:mid*size], part(a, head, mid, size), part(b, head, mid, size), size, s)
		k.cached(dst[mid*size:], part(a, mid, n, size), part(b, mid, n, size), size, s)
		return
	}
	k.cached(dst, a, b, size, s)
}

// cached runs the regular assembly kernel on the multiple of its block and the portable
// kernel on the rest.
func (k *impl) cached(dst, a, b []byte, size int, s uint64) {
	n := len(dst) / size
	m := n &^ (k.block - 1)
	chunked(k.asm, dst[:m*size], part(a, 0, m, size), part(b, 0, m, size), size, s)
	if m < n {
		k.port(ptrAt(dst, m*size), ptrAt(a, m*size), ptrAt(b, m*size), n-m, s)
	}
}

// chunked calls an assembly kernel on at most maxCallBytes per operand at a time.
func chunked(fn kernelFn, dst, a, b []byte, size int, s uint64) {
	n := len(dst) / size
	for done := 0; done < n; {
		c := min(n-done, maxCallBytes/size)
		off := done * size
		fn(ptrAt(dst, off), ptrAt(a, off), ptrAt(b, off), c, s)
		done += c
	}
}

// part is elements [from, to) of s; nil (the absent second source of Pre and Post) stays nil.
func part(s []byte, from, to, size int) []byte {
	if s == nil {
		return nil
	}
	return s[from*size : to*size]
}

// ptrAt is the address of s[off], or nil when s is nil.
func ptrAt(s []byte, off int) unsafe.Pointer {
	if s == nil {
		return nil
	}
	return unsafe.Add(unsafe.Pointer(unsafe.SliceData(s)), off)
}
