package bench

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// The data check follows nccl-tests' verifiable.cu in spirit: every rank
// fills its input with values derived from (seed, rank, element index), each
// rank computes the expected result of its own output region from every
// rank's input with the runtime's own element kernels (reduce.Func), and the
// result must match bit for bit (2 units in the last place for floating-point
// avg, as in nccl-tests).
//
// A floating-point reduction is only bit-exact whatever the order the
// algorithm combines ranks in if every partial result is exactly
// representable. The inputs are built so that it is:
//
//   - sum: each rank contributes ±m x 2^e with one exponent e per element and
//     integer m such that the positive contributions add up to at most
//     2^p - 1 and so do the negative ones (p = mantissa bits + 1). Any partial
//     sum is then an integer multiple of 2^e below 2^p x 2^e: exact.
//   - premulsum (mulsum): the same, with odd ranks' m halved because their
//     scalar is 2 (even ranks use 1), as nccl-tests does.
//   - prod: one rank contributes a random mantissa, the others ±1 or ±2 with at
//     most three 2s per element: every partial product is exact.
//   - min, max: random finite values; the order cannot matter.
//   - avg: two ranks contribute 1+m (m random mantissa bits), the others 0, so
//     the sum of the pre-multiplied values has one rounding whatever the order.
//
// Integers wrap, which is order-independent for sum, prod and premulsum; avg
// on integers is a wrapped sum then a truncating division.
//
// Collectives that only move data (all_gather, broadcast, alltoall, gather,
// scatter, sendrecv, hypercube) carry random bits tagged by source rank and
// index, so a block landing in the wrong place is caught.

// floatLayout is an IEEE-style binary format.
type floatLayout struct {
	expBits, mantBits uint
	bias              int
}

var layouts = map[reduce.DataType]floatLayout{
	reduce.Float64:    {11, 52, 1023},
	reduce.Float32:    {8, 23, 127},
	reduce.Float16:    {5, 10, 15},
	reduce.Bfloat16:   {8, 7, 127},
	reduce.Float8e4m3: {4, 3, 7},
	reduce.Float8e5m2: {5, 2, 15},
}

// encode returns the bits of ±m x 2^e for 0 < m < 2^(mantBits+1). Callers keep
// the result a normal number (the generator's exponent ranges guarantee it).
func (l floatLayout) encode(neg bool, m uint64, e int) uint64 {
	if m == 0 {
		return 0
	}
	b := bits.Len64(m) - 1 // m = 1.f x 2^b
	exp := b + e + l.bias
	if exp < 1 || exp >= 1<<l.expBits-1 || b > int(l.mantBits) {
		panic(fmt.Sprintf("bench: %d x 2^%d is not a normal number with %d exponent bits", m, e, l.expBits))
	}
	v := uint64(exp)<<l.mantBits | (m<<(l.mantBits-uint(b)))&(1<<l.mantBits-1)
	if neg {
		v |= 1 << (l.expBits + l.mantBits)
	}
	return v
}

// mix is the splitmix64 finalizer: a bijection that scrambles every bit.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// hash mixes a seed, a rank (or another tag) and an element index.
func hash(seed uint64, tag int, idx int64) uint64 {
	return mix(mix(seed*0x9e3779b97f4a7c15+uint64(tag)+1) ^ uint64(idx)*0xc2b2ae3d27d4eb4f)
}

// elementTag tags hashes shared by every rank of one element.
const elementTag = -1

// Gen generates the inputs of one data check: which values every rank sends
// for a given data type, op (nil for collectives that only move data), rank
// count and seed.
type Gen struct {
	dt     reduce.DataType
	elt    int
	reduce bool
	op     reduce.Op
	n      int
	seed   uint64
	lay    floatLayout
	float  bool
	max    uint64 // 2^p - 1: the largest exact integer mantissa
	budget uint64 // max / n: what one rank may add to a sum
}

// NewGen returns the generator for data type dt over n ranks with seed; op is
// the reduction, or nil for data movement.
func NewGen(dt reduce.DataType, op *reduce.Op, n int, seed uint64) *Gen {
	g := &Gen{dt: dt, elt: dt.Size(), n: n, seed: seed}
	if op != nil {
		g.reduce, g.op = true, *op
	}
	if l, ok := layouts[dt]; ok {
		g.lay, g.float = l, true
		g.max = 1<<(l.mantBits+1) - 1
		g.budget = g.max / uint64(n)
	}
	return g
}

// Value returns the raw bits of rank's input element idx.
func (g *Gen) Value(rank int, idx int64) uint64 {
	h := hash(g.seed, rank, idx)
	if !g.reduce || !g.float {
		v := h
		if g.elt < 8 {
			v &= 1<<(8*g.elt) - 1
		}
		if g.reduce && g.op == reduce.Prod && v == 0 {
			v = 1 // a zero factor would hide every other rank
		}
		return v
	}
	he := hash(g.seed, elementTag, idx)
	neg := h>>63 == 1
	l := g.lay
	switch g.op {
	case reduce.Sum, reduce.PreMulSum:
		e := int(he%7) - 3 - int(l.mantBits) // values below 16
		var m uint64
		if g.budget > 0 {
			m = h % (g.budget + 1)
		} else if uint64((int64(rank)+int64(he>>8%uint64(g.n)))%int64(g.n)) < g.max {
			m = 1 // more ranks than mantissa values: at most max of them add 1
		}
		if g.op == reduce.PreMulSum && rank%2 == 1 {
			m /= 2 // this rank's scalar doubles it
		}
		if m == 0 {
			return 0
		}
		return l.encode(neg, m, e)
	case reduce.Prod:
		special := int(he % uint64(g.n))
		if rank == special {
			v := uint64(l.bias)<<l.mantBits | (h>>8)&(1<<l.mantBits-1)
			if neg {
				v |= 1 << (l.expBits + l.mantBits)
			}
			return v
		}
		e := 0
		if (rank-special+g.n)%g.n <= 3 && h>>9&1 == 1 {
			e = 1 // at most three ranks double the product
		}
		return l.encode(neg, 1, e)
	case reduce.Min, reduce.Max:
		exp := uint64(l.bias - 3 + int(h%7))
		v := exp<<l.mantBits | (h>>8)&(1<<l.mantBits-1)
		if neg {
			v |= 1 << (l.expBits + l.mantBits)
		}
		return v
	case reduce.Avg:
		a := int(he % uint64(g.n))
		b := a
		if g.n > 1 {
			b = (a + 1 + int((he>>20)%uint64(g.n-1))) % g.n
		}
		if rank != a && rank != b {
			return 0
		}
		return l.encode(false, 1+(h>>8)&(1<<l.mantBits-1), 0)
	}
	panic(fmt.Sprintf("bench: no generator for %s %s", g.dt, g.op))
}

// Fill writes rank's input elements off .. off+len(buf)/elt-1 into buf.
func (g *Gen) Fill(buf []byte, rank int, off int64) {
	n := int64(len(buf) / g.elt)
	switch g.elt {
	case 1:
		for i := int64(0); i < n; i++ {
			buf[i] = byte(g.Value(rank, off+i))
		}
	case 2:
		for i := int64(0); i < n; i++ {
			binary.LittleEndian.PutUint16(buf[2*i:], uint16(g.Value(rank, off+i)))
		}
	case 4:
		for i := int64(0); i < n; i++ {
			binary.LittleEndian.PutUint32(buf[4*i:], uint32(g.Value(rank, off+i)))
		}
	default:
		for i := int64(0); i < n; i++ {
			binary.LittleEndian.PutUint64(buf[8*i:], g.Value(rank, off+i))
		}
	}
}

// Reducer computes expected reduction results with the runtime's kernels.
type Reducer struct {
	gen  *Gen
	sum  *reduce.Func    // combines two ranks' (pre-multiplied) values
	pre  []*reduce.Func  // per rank parity: the pre-op (premulsum, float avg)
	tmp  []byte          // one chunk of another rank's input
	fns  [2]*reduce.Func // premulsum funcs for scalars 1 and 2
	post bool
}

// expectChunk bounds the scratch buffer of Expect: inputs are generated and
// reduced this many bytes at a time.
const expectChunk = 1 << 16

// PreMulScalar is the premulsum (-o mulsum) scalar of rank, as in nccl-tests:
// 1 on even ranks, 2 on odd ones.
func PreMulScalar(rank int) float64 { return float64(1 + rank%2) }

// NewReducer returns a Reducer for the generator's data type and op.
func NewReducer(g *Gen) (*Reducer, error) {
	r := &Reducer{gen: g, tmp: make([]byte, expectChunk)}
	switch g.op {
	case reduce.PreMulSum:
		for i := range r.fns {
			f, err := reduce.NewFunc(g.dt, reduce.PreMulSum, g.n, PreMulScalar(i))
			if err != nil {
				return nil, err
			}
			r.fns[i] = f
		}
		r.sum, r.pre = r.fns[0], r.fns[:]
	default:
		f, err := reduce.NewFunc(g.dt, g.op, g.n, 0)
		if err != nil {
			return nil, err
		}
		r.sum = f
		if f.HasPre() {
			r.pre = []*reduce.Func{f}
		}
		r.post = f.HasPost()
	}
	return r, nil
}

// Expect writes into dst the reduction over every rank of the input elements
// off .. off+len(dst)/elt-1.
func (r *Reducer) Expect(dst []byte, off int64) {
	elt := int64(r.gen.elt)
	for start := 0; start < len(dst); start += expectChunk {
		acc := dst[start:min(len(dst), start+expectChunk)]
		o := off + int64(start)/elt
		r.gen.Fill(acc, 0, o)
		r.applyPre(acc, 0)
		tmp := r.tmp[:len(acc)]
		for rank := 1; rank < r.gen.n; rank++ {
			r.gen.Fill(tmp, rank, o)
			r.applyPre(tmp, rank)
			r.sum.Reduce(acc, acc, tmp)
		}
		if r.post {
			r.sum.Post(acc, acc)
		}
	}
}

func (r *Reducer) applyPre(b []byte, rank int) {
	if len(r.pre) > 0 {
		r.pre[rank%len(r.pre)].Pre(b, b)
	}
}

// Tolerance is the largest accepted difference between the bits of a result
// and its expected value: 2 for floating-point avg, 0 otherwise.
func Tolerance(dt reduce.DataType, op *reduce.Op) uint64 {
	if op != nil && *op == reduce.Avg && dt.IsFloat() {
		return 2
	}
	return 0
}

// CountWrong compares got with want element by element as unsigned integers
// of elt bytes and counts the elements that differ by more than tol.
func CountWrong(got, want []byte, elt int, tol uint64) int64 {
	var wrong int64
	n := min(len(got), len(want)) / elt
	for i := 0; i < n; i++ {
		var a, b uint64
		switch elt {
		case 1:
			a, b = uint64(got[i]), uint64(want[i])
		case 2:
			a, b = uint64(binary.LittleEndian.Uint16(got[2*i:])), uint64(binary.LittleEndian.Uint16(want[2*i:]))
		case 4:
			a, b = uint64(binary.LittleEndian.Uint32(got[4*i:])), uint64(binary.LittleEndian.Uint32(want[4*i:]))
		default:
			a, b = binary.LittleEndian.Uint64(got[8*i:]), binary.LittleEndian.Uint64(want[8*i:])
		}
		d := a - b
		if b > a {
			d = b - a
		}
		if d > tol {
			wrong++
		}
	}
	return wrong
}
