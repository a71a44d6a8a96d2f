package reduce

import (
	"math"
	"unsafe"
)

// The portable kernels: one per (data type, kind), plain Go over typed views of the byte
// slices. They are the oracle the assembly is tested against, the fallback on other
// architectures and under the purego build tag, and the tail handler of the AVX2 kernels.
// Typed views of unaligned bytes are fine on amd64 (and arm64); the types hold no pointers,
// so checkptr accepts them.

// kernelFn computes n elements: dst[i] = a[i] ⊕ b[i] (or a unary/scalar variant, see kind).
// s is the kind's scalar: for kPreSum and kPre the multiplier (float32 bits for float32,
// half, bfloat16 and fp8, float64 bits for double, the integer for integer types), for
// kPostDiv the divisor.
type kernelFn func(dst, a, b unsafe.Pointer, n int, s uint64)

// kind is what a kernel computes.
type kind uint8

const (
	kSum     kind = iota // dst = a + b
	kProd                // dst = a * b
	kMax                 // dst = max(a, b)
	kMin                 // dst = min(a, b)
	kPreSum              // dst = a + pre(b), pre(x) = round(x * s)
	kPre                 // dst = pre(a)
	kPostDiv             // dst = a / s (integers only; truncating, signed for signed types)

	numKinds = iota
)

var kindNames = [numKinds]string{"sum", "prod", "max", "min", "presum", "pre", "postdiv"}

func (k kind) String() string { return kindNames[k] }

func view[T any](p unsafe.Pointer, n int) []T { return unsafe.Slice((*T)(p), n) }

type integer interface {
	~int8 | ~uint8 | ~int32 | ~uint32 | ~int64 | ~uint64
}

// intKernels are the kernels of one integer type: two's complement, wrapping.
func intKernels[T integer]() [numKinds]kernelFn {
	return [numKinds]kernelFn{
		kSum: func(dst, a, b unsafe.Pointer, n int, _ uint64) {
			d, x, y := view[T](dst, n), view[T](a, n), view[T](b, n)
			for i := range d {
				d[i] = x[i] + y[i]
			}
		},
		kProd: func(dst, a, b unsafe.Pointer, n int, _ uint64) {
			d, x, y := view[T](dst, n), view[T](a, n), view[T](b, n)
			for i := range d {
				d[i] = x[i] * y[i]
			}
		},
		kMax: func(dst, a, b unsafe.Pointer, n int, _ uint64) {
			d, x, y := view[T](dst, n), view[T](a, n), view[T](b, n)
			for i := range d {
				d[i] = max(x[i], y[i])
			}
		},
		kMin: func(dst, a, b unsafe.Pointer, n int, _ uint64) {
			d, x, y := view[T](dst, n), view[T](a, n), view[T](b, n)
			for i := range d {
				d[i] = min(x[i], y[i])
			}
		},
		kPreSum: func(dst, a, b unsafe.Pointer, n int, s uint64) {
			d, x, y, m := view[T](dst, n), view[T](a, n), view[T](b, n), T(s)
			for i := range d {
				d[i] = x[i] + y[i]*m
			}
		},
		kPre: func(dst, a, _ unsafe.Pointer, n int, s uint64) {
			d, x, m := view[T](dst, n), view[T](a, n), T(s)
			for i := range d {
				d[i] = x[i] * m
			}
		},
		kPostDiv: func(dst, a, _ unsafe.Pointer, n int, s uint64) {
			d, x := view[T](dst, n), view[T](a, n)
			if ^T(0) < 0 { // signed: divide in int64 so that nranks > max(T) works
				for i := range d {
					d[i] = T(int64(x[i]) / int64(s))
				}
				return
			}
			for i := range d {
				d[i] = T(uint64(x[i]) / s)
			}
		},
	}
}

func f32Kernels() [numKinds]kernelFn {
	return [numKinds]kernelFn{
		kSum: func(dst, a, b unsafe.Pointer, n int, _ uint64) {
			d, x, y := view[float32](dst, n), view[float32](a, n), view[float32](b, n)
			for i := range d {
				d[i] = add32(x[i], y[i])
			}
		},
		kProd: func(dst, a, b unsafe.Pointer, n int, _ uint64) {
			d, x, y := view[float32](dst, n), view[float32](a, n), view[float32](b, n)
			for i := range d {
				d[i] = mul32(x[i], y[i])
			}
		},
		kMax: func(dst, a, b unsafe.Pointer, n int, _ uint64) {
			d, x, y := view[uint32](dst, n), view[uint32](a, n), view[uint32](b, n)
			for i := range d { // move bits, so that a signalling NaN stays one
				if math.Float32frombits(x[i]) > math.Float32frombits(y[i]) {
					d[i] = x[i]
				} else {
					d[i] = y[i]
				}
			}
		},
		kMin: func(dst, a, b unsafe.Pointer, n int, _ uint64) {
			d, x, y := view[uint32](dst, n), view[uint32](a, n), view[uint32](b, n)
			for i := range d {
				if math.Float32frombits(x[i]) < math.Float32frombits(y[i]) {
					d[i] = x[i]
				} else {
					d[i] = y[i]
				}
			}
		},
		kPreSum: func(dst, a, b unsafe.Pointer, n int, s uint64) {
			d, x, y, m := view[float32](dst, n), view[float32](a, n), view[float32](b, n), math.Float32frombits(uint32(s))
			for i := range d {
				d[i] = add32(x[i], mul32(y[i], m))
			}
		},
		kPre: func(dst, a, _ unsafe.Pointer, n int, s uint64) {
			d, x, m := view[float32](dst, n), view[float32](a, n), math.Float32frombits(uint32(s))
			for i := range d {
				d[i] = mul32(x[i], m)
			}
		},
	}
}

func f64Kernels() [numKinds]kernelFn {
	return [numKinds]kernelFn{
		kSum: func(dst, a, b unsafe.Pointer, n int, _ uint64) {
			d, x, y := view[float64](dst, n), view[float64](a, n), view[float64](b, n)
			for i := range d {
				d[i] = add64(x[i], y[i])
			}
		},
		kProd: func(dst, a, b unsafe.Pointer, n int, _ uint64) {
			d, x, y := view[float64](dst, n), view[float64](a, n), view[float64](b, n)
			for i := range d {
				d[i] = mul64(x[i], y[i])
			}
		},
		kMax: func(dst, a, b unsafe.Pointer, n int, _ uint64) {
			d, x, y := view[uint64](dst, n), view[uint64](a, n), view[uint64](b, n)
			for i := range d {
				if math.Float64frombits(x[i]) > math.Float64frombits(y[i]) {
					d[i] = x[i]
				} else {
					d[i] = y[i]
				}
			}
		},
		kMin: func(dst, a, b unsafe.Pointer, n int, _ uint64) {
			d, x, y := view[uint64](dst, n), view[uint64](a, n), view[uint64](b, n)
			for i := range d {
				if math.Float64frombits(x[i]) < math.Float64frombits(y[i]) {
					d[i] = x[i]
				} else {
					d[i] = y[i]
				}
			}
		},
		kPreSum: func(dst, a, b unsafe.Pointer, n int, s uint64) {
			d, x, y, m := view[float64](dst, n), view[float64](a, n), view[float64](b, n), math.Float64frombits(s)
			for i := range d {
				d[i] = add64(x[i], mul64(y[i], m))
			}
		},
		kPre: func(dst, a, _ unsafe.Pointer, n int, s uint64) {
			d, x, m := view[float64](dst, n), view[float64](a, n), math.Float64frombits(s)
			for i := range d {
				d[i] = mul64(x[i], m)
			}
		},
	}
}

// narrowKernels are the kernels of a floating type narrower than float32 (half, bfloat16,
// fp8), stored as T bits: widen to float32 exactly, one float32 operation, round back with
// round-to-nearest-even. The pre-op result is rounded to the type before it is added, as
// NCCL applies the pre-op to the element and then reduces.
func narrowKernels[T uint8 | uint16](widen func(T) float32, narrow func(float32) T) [numKinds]kernelFn {
	return [numKinds]kernelFn{
		kSum: func(dst, a, b unsafe.Pointer, n int, _ uint64) {
			d, x, y := view[T](dst, n), view[T](a, n), view[T](b, n)
			for i := range d {
				d[i] = narrow(add32(widen(x[i]), widen(y[i])))
			}
		},
		kProd: func(dst, a, b unsafe.Pointer, n int, _ uint64) {
			d, x, y := view[T](dst, n), view[T](a, n), view[T](b, n)
			for i := range d {
				d[i] = narrow(mul32(widen(x[i]), widen(y[i])))
			}
		},
		kMax: func(dst, a, b unsafe.Pointer, n int, _ uint64) {
			d, x, y := view[T](dst, n), view[T](a, n), view[T](b, n)
			for i := range d {
				d[i] = narrow(max32(widen(x[i]), widen(y[i])))
			}
		},
		kMin: func(dst, a, b unsafe.Pointer, n int, _ uint64) {
			d, x, y := view[T](dst, n), view[T](a, n), view[T](b, n)
			for i := range d {
				d[i] = narrow(min32(widen(x[i]), widen(y[i])))
			}
		},
		kPreSum: func(dst, a, b unsafe.Pointer, n int, s uint64) {
			d, x, y, m := view[T](dst, n), view[T](a, n), view[T](b, n), math.Float32frombits(uint32(s))
			for i := range d {
				p := widen(narrow(mul32(widen(y[i]), m)))
				d[i] = narrow(add32(widen(x[i]), p))
			}
		},
		kPre: func(dst, a, _ unsafe.Pointer, n int, s uint64) {
			d, x, m := view[T](dst, n), view[T](a, n), math.Float32frombits(uint32(s))
			for i := range d {
				d[i] = narrow(mul32(widen(x[i]), m))
			}
		},
	}
}

// portable holds every portable kernel; kPostDiv is nil for floating types.
var portable = [numDataTypes][numKinds]kernelFn{
	Int8:       intKernels[int8](),
	Uint8:      intKernels[uint8](),
	Int32:      intKernels[int32](),
	Uint32:     intKernels[uint32](),
	Int64:      intKernels[int64](),
	Uint64:     intKernels[uint64](),
	Float16:    narrowKernels(f16to32, f32to16),
	Float32:    f32Kernels(),
	Float64:    f64Kernels(),
	Bfloat16:   narrowKernels(bf16to32, f32tobf16),
	Float8e4m3: narrowKernels(e4m3to32, f32toE4M3),
	Float8e5m2: narrowKernels(e5m2to32, f32toE5M2),
}
