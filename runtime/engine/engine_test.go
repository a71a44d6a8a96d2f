package engine

import (
	"encoding/binary"
	"fmt"
	"sync"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
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

// memConn is an in-memory FIFO pair with protocols.NSteps slots, checking
// that the engine never holds more than NSteps steps and that nsteps agree.
type memConn struct {
	stepBytes int
	slices    chan memSlice
	cur       int
	buf       []byte
	refs      int // slices sent by PostRef
	posts     int // and by Post
	last      memSlice
}

type memSlice struct {
	data   []byte
	nsteps int
}

func newMemConn(stepBytes int) *memConn {
	return &memConn{stepBytes: stepBytes, slices: make(chan memSlice, protocols.NSteps)}
}

func (c *memConn) Acquire(nsteps int) ([]byte, error) {
	c.cur = nsteps
	c.buf = make([]byte, nsteps*c.stepBytes)
	return c.buf, nil
}

func (c *memConn) Post(n int) error {
	c.posts++
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
	sync bool // send over syncMemConns
}

// syncMemConn is a memConn that says what memConn does: PostRef copies b
// before it returns (engine.SyncRefSender).
type syncMemConn struct{ *memConn }

func (syncMemConn) RefDoneOnReturn() {}

func (m memConns) SendTo(p, _ int) (SendConn, error) {
	if m.sync {
		return syncMemConn{m.send[p]}, nil
	}
	return m.send[p], nil
}

func (m memConns) RecvFrom(p, _ int) (RecvConn, error) { return m.recv[p], nil }

// ringPair runs a 2-rank ring all-reduce of count int32 with op through
// in-memory connections (over syncMemConns when synced): rank r's input is
// 100r+i, in a buffer of its own or, inPlace, in its output. set adjusts
// each rank's task. It returns the outputs and the connections 0->1, 1->0.
func ringPair(t *testing.T, count int, op reduce.Op, scalar float64, synced, inPlace bool, set func(*Task)) (outs [2][]byte, a, b *memConn) {
	t.Helper()
	const n = 2
	a, b = newMemConn(64), newMemConn(64)
	conns := []memConns{
		{send: map[int]*memConn{1: a}, recv: map[int]*memConn{1: b}, sync: synced},
		{send: map[int]*memConn{0: b}, recv: map[int]*memConn{0: a}, sync: synced},
	}
	var wg sync.WaitGroup
	var errs [n]error
	for r := 0; r < n; r++ {
		in := make([]int32, count)
		for i := range in {
			in[i] = int32(100*r + i)
		}
		fn, err := reduce.NewFunc(reduce.Int32, op, n, scalar)
		if err != nil {
			t.Fatal(err)
		}
		task := &Task{Sched: algos.Single(algos.RingAllReduce(r, n, algos.Part{Count: int64(count), Chunk: 8, Align: 4})),
			In: i32(in...), Type: reduce.Int32, Fn: fn, StepPayload: 64, ChunkSteps: 4, SliceSteps: 2}
		task.Out = task.In
		if !inPlace {
			task.Out = make([]byte, 4*count)
		}
		set(task)
		outs[r] = task.Out
		wg.Add(1)
		go func(r int) { defer wg.Done(); errs[r] = Run(task, conns[r]) }(r)
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("%s sync=%v in place %v rank %d: %v", op, synced, inPlace, r, err)
		}
	}
	return outs, a, b
}

// TestSyncSenderInPlace: a connection whose PostRef has sent b when it
// returns (SyncRefSender) takes every slice whose value is in user memory
// by reference, even in an in-place all-reduce, whose Output overwrites
// the Input it sends from (a task neither OutOnce nor Stable); an
// asynchronous one takes none there. The sums are right either way.
func TestSyncSenderInPlace(t *testing.T) {
	const count = 37
	for _, synced := range []bool{false, true} {
		outs, a, b := ringPair(t, count, reduce.Sum, 0, synced, true, func(*Task) {})
		for r, out := range outs {
			for i := 0; i < count; i++ {
				if got, want := int32(binary.LittleEndian.Uint32(out[4*i:])), int32(100+2*i); got != want {
					t.Fatalf("sync=%v rank %d elem %d = %d, want %d", synced, r, i, got, want)
				}
			}
		}
		// Two ranks: every slice's value is in user memory, Input's or
		// Output's, so a sync connection copies none into its FIFO.
		if refs, posts := a.refs+b.refs, a.posts+b.posts; synced && (refs == 0 || posts != 0) || !synced && refs != 0 {
			t.Errorf("sync=%v: %d slices sent by reference, %d through the FIFO", synced, refs, posts)
		}
	}
}

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
	const count = 37
	for _, tc := range []struct {
		op     reduce.Op
		scalar float64
		want   func(i int) int32
	}{
		{reduce.Avg, 0, func(i int) int32 { return (int32(i) + int32(100+i)) / 2 }},
		{reduce.PreMulSum, 3, func(i int) int32 { return 3 * (int32(i) + int32(100+i)) }},
	} {
		for _, mode := range []struct{ outOnce, stable bool }{{false, false}, {true, false}, {false, true}} {
			outs, a, b := ringPair(t, count, tc.op, tc.scalar, false, false, func(task *Task) {
				task.OutOnce, task.Stable = mode.outOnce, mode.stable
			})
			for r, out := range outs {
				for i := 0; i < count; i++ {
					if got := int32(binary.LittleEndian.Uint32(out[4*i:])); got != tc.want(i) {
						t.Fatalf("%s %+v rank %d elem %d = %d, want %d", tc.op, mode, r, i, got, tc.want(i))
					}
				}
			}
			// Either way the all-gather half's slices go from Out.
			if refs, any := a.refs+b.refs, mode.outOnce || mode.stable; any == (refs == 0) {
				t.Errorf("%s %+v: %d slices sent by reference", tc.op, mode, refs)
			}
		}
	}
}
