package reduce

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// Bytes per operation, as each side actually touches memory: Reduce(dst, a, b) reads a and
// b and writes dst, so 3 x size; copy(dst, a) reads a and writes dst, so 2 x size. The
// MB/s columns are therefore comparable memory bandwidths.

var benchSizes = []struct {
	name  string
	bytes int
}{{"4KiB", 4 << 10}, {"256KiB", 256 << 10}, {"4MiB", 4 << 20}, {"64MiB", 64 << 20}}

// benchBuffers returns dst, a, b of n bytes with ordinary values of type t.
func benchBuffers(t DataType, n int) (dst, a, b []byte) {
	r := rand.New(rand.NewPCG(7, 8))
	dst, a, b = make([]byte, n), make([]byte, n), make([]byte, n)
	for i := range n / t.Size() {
		x, y := r.Float32()+0.5, r.Float32()+0.5
		switch t {
		case Float32:
			putElem(t, a, i, uint64(math.Float32bits(x)))
			putElem(t, b, i, uint64(math.Float32bits(y)))
		case Float64:
			putElem(t, a, i, math.Float64bits(float64(x)))
			putElem(t, b, i, math.Float64bits(float64(y)))
		case Float16:
			putElem(t, a, i, uint64(f32to16(x)))
			putElem(t, b, i, uint64(f32to16(y)))
		case Bfloat16:
			putElem(t, a, i, uint64(f32tobf16(x)))
			putElem(t, b, i, uint64(f32tobf16(y)))
		}
	}
	return dst, a, b
}

// BenchmarkReduce measures Func.Reduce (dst distinct from a and b) for the types and ops
// that have assembly, at every implementation this machine supports.
func BenchmarkReduce(b *testing.B) {
	levels := append([]level{levelPortable}, vectorLevels()...)
	for _, size := range benchSizes {
		for _, dt := range []DataType{Float32, Float64, Float16, Bfloat16} {
			dst, x, y := benchBuffers(dt, size.bytes)
			for _, op := range []Op{Sum, Max, Min} {
				for _, l := range levels {
					f := newFuncAt(b, l, dt, op, 2, 0)
					b.Run(fmt.Sprintf("%v-%v/%s/%s", dt, op, size.name, l), func(b *testing.B) {
						b.SetBytes(int64(3 * size.bytes))
						for b.Loop() {
							f.Reduce(dst, x, y)
						}
					})
				}
			}
		}
	}
}

// BenchmarkReducePre measures the float Avg path (recv + local*(1/n)) at 256 KiB.
func BenchmarkReducePre(b *testing.B) {
	levels := append([]level{levelPortable}, vectorLevels()...)
	for _, dt := range []DataType{Float32, Float64, Float16, Bfloat16} {
		dst, x, y := benchBuffers(dt, 256<<10)
		for _, l := range levels {
			f := newFuncAt(b, l, dt, Avg, 4, 0)
			b.Run(fmt.Sprintf("%v-avg/256KiB/%s", dt, l), func(b *testing.B) {
				b.SetBytes(int64(3 * len(dst)))
				for b.Loop() {
					f.ReducePre(dst, x, y)
				}
			})
		}
	}
}

// BenchmarkCopy is the yardstick: the runtime's memmove on the same buffer sizes.
func BenchmarkCopy(b *testing.B) {
	for _, size := range benchSizes {
		dst, x, _ := benchBuffers(Float32, size.bytes)
		b.Run(size.name, func(b *testing.B) {
			b.SetBytes(int64(2 * size.bytes))
			for b.Loop() {
				copy(dst, x)
			}
		})
	}
}
