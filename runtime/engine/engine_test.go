package engine

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

func TestSliceElems(t *testing.T) {
	// stepBytes 512 KiB of float32: stepElems 131072; ring: 4 chunk steps,
	// 2 slice steps (NCCL prims_simple.h arithmetic).
	ring := &Task{StepPayload: 512 << 10, ChunkSteps: 4, SliceSteps: 2}
	pipe := &Task{StepPayload: 512 << 10, ChunkSteps: 1, SliceSteps: 1}
	for _, tc := range []struct {
		t     *Task
		nelem int64
		want  int64
	}{
		{ring, 524288, 262144}, // a full chunk: two full slices
		{ring, 1000, 8192},     // small: at least 1/32 of a full slice
		{ring, 300000, 150000}, // divUp(300000, 32)*16
		{ring, 1 << 30, 262144},
		{pipe, 131072, 131072},
		{pipe, 100, 4096},
	} {
		if got := sliceElems(tc.t, tc.nelem, 4); got != tc.want {
			t.Errorf("sliceElems(chunk %d, slice %d steps, nelem %d) = %d, want %d", tc.t.ChunkSteps, tc.t.SliceSteps, tc.nelem, got, tc.want)
		}
	}
}

// memConn is an in-memory FIFO pair with NSteps slots, checking that the
// engine never holds more than NSteps steps and that nsteps agree.
type memConn struct {
	stepBytes int
	slices    chan memSlice
	cur       int
	buf       []byte
	refs      int
	last      memSlice
}

type memSlice struct {
	data   []byte
	nsteps int
}

func newMemConn(stepBytes int) *memConn {
	return &memConn{stepBytes: stepBytes, slices: make(chan memSlice, NSteps)}
}

func (c *memConn) Acquire(nsteps int) ([]byte, error) {
	c.cur = nsteps
	c.buf = make([]byte, nsteps*c.stepBytes)
	return c.buf, nil
}

func (c *memConn) Post(n int) error {
	c.slices <- memSlice{data: c.buf[:n], nsteps: c.cur}
	return nil
}

func (c *memConn) PostRef(b []byte) error {
	c.refs++
	c.slices <- memSlice{data: append([]byte(nil), b...), nsteps: c.cur}
	return nil
}

func (c *memConn) Flush() error { return nil }

func (c *memConn) Wait(nsteps, nbytes int) ([]byte, error) {
	c.last = <-c.slices
	if c.last.nsteps != nsteps || len(c.last.data) != nbytes {
		return nil, fmt.Errorf("slice of %d steps %d bytes, want %d and %d", c.last.nsteps, len(c.last.data), nsteps, nbytes)
	}
	return c.last.data, nil
}

func (c *memConn) Release() error { return nil }

type memConns struct {
	send map[int]*memConn
	recv map[int]*memConn
}

func (m memConns) SendTo(p, _ int) (SendConn, error)   { return m.send[p], nil }
func (m memConns) RecvFrom(p, _ int) (RecvConn, error) { return m.recv[p], nil }

func i32(v ...int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

// TestRunAllReducePrePost runs a 2-rank ring all-reduce on int32 avg (sum
// then divide) and premulsum through in-memory connections: the pre-op must
// apply once to every input element, the post-op once to every output.
func TestRunAllReducePrePost(t *testing.T) {
	const n, count = 2, 37
	for _, tc := range []struct {
		op     reduce.Op
		scalar float64
		want   func(i int) int32
	}{
		{reduce.Avg, 0, func(i int) int32 { return (int32(i) + int32(100+i)) / 2 }},
		{reduce.PreMulSum, 3, func(i int) int32 { return 3 * (int32(i) + int32(100+i)) }},
	} {
		for _, stable := range []bool{false, true} {
			a, b := newMemConn(64), newMemConn(64) // 0->1, 1->0
			conns := []memConns{
				{send: map[int]*memConn{1: a}, recv: map[int]*memConn{1: b}},
				{send: map[int]*memConn{0: b}, recv: map[int]*memConn{0: a}},
			}
			outs := [][]byte{make([]byte, 4*count), make([]byte, 4*count)}
			var wg sync.WaitGroup
			errs := make([]error, n)
			for r := 0; r < n; r++ {
				in := make([]int32, count)
				for i := range in {
					in[i] = int32(100*r + i)
				}
				fn, err := reduce.NewFunc(reduce.Int32, tc.op, n, tc.scalar)
				if err != nil {
					t.Fatal(err)
				}
				task := &Task{Sched: algos.Single(algos.RingAllReduce(r, n, algos.Part{Count: count, Chunk: 8, Align: 4})),
					In: i32(in...), Out: outs[r], Type: reduce.Int32, Fn: fn,
					StepPayload: 64, ChunkSteps: 4, SliceSteps: 2, Stable: stable}
				wg.Add(1)
				go func(r int) { defer wg.Done(); errs[r] = Run(task, conns[r]) }(r)
			}
			wg.Wait()
			for r := 0; r < n; r++ {
				if errs[r] != nil {
					t.Fatalf("%s rank %d: %v", tc.op, r, errs[r])
				}
				for i := 0; i < count; i++ {
					if got := int32(binary.LittleEndian.Uint32(outs[r][4*i:])); got != tc.want(i) {
						t.Fatalf("%s stable=%v rank %d elem %d = %d, want %d", tc.op, stable, r, i, got, tc.want(i))
					}
				}
			}
			if refs := a.refs + b.refs; stable == (refs == 0) {
				t.Errorf("%s stable=%v: %d slices sent by reference", tc.op, stable, refs)
			}
		}
	}
}
