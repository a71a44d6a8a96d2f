package comm

import (
	"bytes"
	"fmt"
	"math"
	"testing"

	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// exactValue is rank r's element i for op: small integers (or their sums,
// products and quarters) that every data type holds exactly, so that any
// reduction order gives the same bits.
func exactValue(dt reduce.DataType, op reduce.Op, r, i int) float64 {
	signed := dt != reduce.Uint8 && dt != reduce.Uint32 && dt != reduce.Uint64
	if op == reduce.Prod {
		v := float64(1 + (r+i)%2)
		if signed && (r+2*i)%5 == 0 {
			v = -v
		}
		return v
	}
	v := float64((r*7 + i*3) % 3)
	if signed && i%2 == 1 {
		v = -v
	}
	return v
}

// exactResult is the reduction of exactValue over n ranks, computed in
// float64 (exact for these values), as the element the runtime must produce.
func exactResult(dt reduce.DataType, op reduce.Op, n, i int, scalar float64) float64 {
	acc := 0.0
	switch op {
	case reduce.Prod:
		acc = 1
	case reduce.Max:
		acc = math.Inf(-1)
	case reduce.Min:
		acc = math.Inf(1)
	}
	for r := 0; r < n; r++ {
		v := exactValue(dt, op, r, i)
		switch op {
		case reduce.Sum, reduce.Avg:
			acc += v
		case reduce.PreMulSum:
			acc += v * scalar
		case reduce.Prod:
			acc *= v
		case reduce.Max:
			acc = math.Max(acc, v)
		case reduce.Min:
			acc = math.Min(acc, v)
		}
	}
	if op == reduce.Avg {
		if dt.IsFloat() {
			return acc / float64(n)
		}
		return math.Trunc(acc / float64(n))
	}
	return acc
}

// TestEveryDataTypeAndOp runs all-reduce, reduce-scatter and reduce for
// every data type x op over loopback TCP and over shared memory, and
// compares bytes exactly.
func TestEveryDataTypeAndOp(t *testing.T) {
	for _, shmDisable := range []string{"1", "0"} {
		t.Run("NCCL_SHM_DISABLE="+shmDisable, func(t *testing.T) { everyDataTypeAndOp(t, shmDisable) })
	}
}

func everyDataTypeAndOp(t *testing.T, shmDisable string) {
	const n, count, scalar = 4, 301, 2.0
	cs := withComms(t, n, testParams(t, map[string]string{"NCCL_BUFFSIZE": "8192", "NCCL_NCHANNELS": "2", "NCCL_SHM_DISABLE": shmDisable}))
	for _, dt := range reduce.DataTypes() {
		for _, op := range reduce.Ops() {
			t.Run(fmt.Sprintf("%s/%s", dt, op), func(t *testing.T) {
				es := dt.Size()
				want := exactResults(dt, op, n, 0, n*count, scalar)
				sends := make([][]byte, n)
				for r := range sends {
					sends[r] = exactValues(dt, op, r, n*count)
				}
				ars, rss, rds := make([][]byte, n), make([][]byte, n), make([][]byte, n)
				mustEach(t, cs, "collectives", func(c *Comm) error {
					r := c.Rank()
					o, done, err := testOp(c, op, dt, scalar)
					if err != nil {
						return err
					}
					defer done()
					ars[r] = make([]byte, n*count*es)
					rss[r] = make([]byte, count*es)
					rds[r] = make([]byte, n*count*es)
					if err := c.AllReduce(sends[r], ars[r], n*count, dt, o); err != nil {
						return err
					}
					if err := c.ReduceScatter(sends[r], rss[r], count, dt, o); err != nil {
						return err
					}
					return c.Reduce(sends[r], rds[r], n*count, dt, o, n-1)
				})
				for r := 0; r < n; r++ {
					if !bytes.Equal(ars[r], want) {
						t.Errorf("AllReduce rank %d: %s", r, firstDiff(dt, ars[r], want))
					}
					if blk := want[r*count*es : (r+1)*count*es]; !bytes.Equal(rss[r], blk) {
						t.Errorf("ReduceScatter rank %d: %s", r, firstDiff(dt, rss[r], blk))
					}
				}
				if !bytes.Equal(rds[n-1], want) {
					t.Errorf("Reduce root: %s", firstDiff(dt, rds[n-1], want))
				}
			})
		}
	}
}

func firstDiff(dt reduce.DataType, got, want []byte) string {
	es := dt.Size()
	for i := 0; i+es <= len(want); i += es {
		if !bytes.Equal(got[i:i+es], want[i:i+es]) {
			return fmt.Sprintf("element %d = %v, want %v", i/es, reduce.Decode(dt, got[i:]), reduce.Decode(dt, want[i:]))
		}
	}
	return "lengths differ"
}

// testOp returns op for a call of data type dt: a PreMulSum op created
// with scalar (done destroys it), any other op as it is.
func testOp(c *Comm, op reduce.Op, dt reduce.DataType, scalar float64) (o reduce.Op, done func(), err error) {
	if op != reduce.PreMulSum {
		return op, func() {}, nil
	}
	if o, err = c.CreatePreMulSum(scalar, dt); err != nil {
		return 0, nil, err
	}
	return o, func() { c.DestroyOp(o) }, nil
}

// exactValues encodes rank r's first count inputs of type dt for op.
func exactValues(dt reduce.DataType, op reduce.Op, r, count int) []byte {
	es := dt.Size()
	b := make([]byte, count*es)
	for i := range count {
		reduce.Encode(dt, b[i*es:], exactValue(dt, op, r, i))
	}
	return b
}

// exactResults encodes the expected results of op over n ranks for the
// count elements from element from on.
func exactResults(dt reduce.DataType, op reduce.Op, n, from, count int, scalar float64) []byte {
	es := dt.Size()
	b := make([]byte, count*es)
	for i := range count {
		reduce.Encode(dt, b[i*es:], exactResult(dt, op, n, from+i, scalar))
	}
	return b
}
