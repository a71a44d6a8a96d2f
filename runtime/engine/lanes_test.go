package engine

import (
	"encoding/binary"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// keyConns are in-memory connections keyed by (peer, connection index).
type keyConns struct {
	send map[[2]int]*memConn
	recv map[[2]int]*memConn
}

func (m keyConns) SendTo(p, c int) (SendConn, error)   { return m.send[[2]int{p, c}], nil }
func (m keyConns) RecvFrom(p, c int) (RecvConn, error) { return m.recv[[2]int{p, c}], nil }

// wireUp connects every (from, to, conn) link of links with a memConn.
func wireUp(n int, links [][3]int, stepBytes int) []keyConns {
	cs := make([]keyConns, n)
	for r := range cs {
		cs[r] = keyConns{send: map[[2]int]*memConn{}, recv: map[[2]int]*memConn{}}
	}
	for _, l := range links {
		c := newMemConn(stepBytes)
		cs[l[0]].send[[2]int{l[1], l[2]}] = c
		cs[l[1]].recv[[2]int{l[0], l[2]}] = c
	}
	return cs
}

// TestFanAndLanes runs a three-rank tree all-reduce by hand: rank 0 is the
// root and reduces both children's Input with its own in one Op with a fan,
// then sends the result to both; ranks 1 and 2 run an up lane (send) and a
// down lane (receive) concurrently. Several chunks, so lanes overlap; in
// order, the children's lanes run one after the other (InOrder).
func TestFanAndLanes(t *testing.T) {
	const n, count, chunk = 3, 40, 8
	links := [][3]int{{1, 0, 0}, {2, 0, 0}, {0, 1, 0}, {0, 2, 0}}
	for _, mode := range []string{"copy", "stable", "in place", "in order"} {
		stable, inPlace := mode == "stable", mode == "in place"
		cs := wireUp(n, links, 64)
		fan := &algos.Fan{Recv: []int{2}, Send: []int{2}}
		var root, up, down []algos.Op
		for off := int64(0); off < count; off += chunk {
			root = append(root, algos.Op{RecvFrom: 1, SendTo: 1, Src: algos.Input, SrcOff: off, Dst: algos.Output, DstOff: off, Count: chunk, Reduce: true, PostOp: true, Fan: fan})
			up = append(up, algos.Op{RecvFrom: algos.NoPeer, SendTo: 0, Src: algos.Input, SrcOff: off, Count: chunk})
			down = append(down, algos.Op{RecvFrom: 0, SendTo: algos.NoPeer, Dst: algos.Output, DstOff: off, Count: chunk})
		}
		ordered := mode == "in order"
		scheds := []algos.Schedule{algos.Single(root), {Lanes: []algos.Lane{{Ops: up}, {Ops: down}}, InOrder: ordered},
			{Lanes: []algos.Lane{{Ops: up}, {Ops: down}}, InOrder: ordered}}
		outs := make([][]byte, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for r := range n {
			in := make([]byte, 4*count)
			for i := range count {
				binary.LittleEndian.PutUint32(in[4*i:], uint32(100*(r+1)+i))
			}
			outs[r] = make([]byte, 4*count)
			if inPlace {
				outs[r] = in // the root's fan-in reads and writes one buffer
			}
			fn, err := reduce.NewFunc(reduce.Int32, reduce.Avg, n, 0)
			if err != nil {
				t.Fatal(err)
			}
			task := &Task{Sched: scheds[r], In: in, Out: outs[r], Type: reduce.Int32, Fn: fn,
				StepPayload: 64, ChunkSteps: 1, SliceSteps: 1, Stable: stable}
			wg.Add(1)
			go func() { defer wg.Done(); errs[r] = Run(task, cs[r]) }()
		}
		wg.Wait()
		for r := range n {
			if errs[r] != nil {
				t.Fatalf("%s rank %d: %v", mode, r, errs[r])
			}
			for i := range count {
				want := int32((100 + 200 + 300 + 3*i) / 3)
				if got := int32(binary.LittleEndian.Uint32(outs[r][4*i:])); got != want {
					t.Fatalf("%s rank %d elem %d = %d, want %d", mode, r, i, got, want)
				}
			}
		}
		refs := cs[0].send[[2]int{1, 0}].refs + cs[0].send[[2]int{2, 0}].refs
		if stable != (refs > 0) {
			t.Errorf("%s: the root sent %d slices by reference", mode, refs)
		}
	}
}

// failConn fails every call, after unblocking nothing.
type failConn struct{}

func (failConn) Acquire(int) ([]byte, error)   { return nil, errors.New("link cut") }
func (failConn) Post(int) error                { return nil }
func (failConn) Wait(int, int) ([]byte, error) { return nil, errors.New("link cut") }
func (failConn) Release() error                { return nil }

// blockConn blocks in Wait until released.
type blockConn struct{ release chan struct{} }

func (b blockConn) Acquire(int) ([]byte, error) { <-b.release; return nil, errors.New("failed") }
func (b blockConn) Post(int) error              { return nil }
func (b blockConn) Wait(int, int) ([]byte, error) {
	<-b.release
	return nil, errors.New("failed by the communicator")
}
func (b blockConn) Release() error { return nil }

type fixedConns struct {
	send map[int]SendConn
	recv map[int]RecvConn
}

func (f fixedConns) SendTo(p, _ int) (SendConn, error)   { return f.send[p], nil }
func (f fixedConns) RecvFrom(p, _ int) (RecvConn, error) { return f.recv[p], nil }

// TestLaneFailureReleasesTheOthers: lane 2 fails; lane 1, blocked in a
// connection, returns once onError fails the connections; lane 0, held by
// a Wait on lane 1, is released. Run returns the first error, naming its
// lane, and the Runner is reusable.
func TestLaneFailureReleasesTheOthers(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	r := NewRunner(func(error) {
		if calls.Add(1) == 1 {
			close(release)
		}
	})
	defer r.Close()
	conns := fixedConns{send: map[int]SendConn{}, recv: map[int]RecvConn{1: blockConn{release}, 2: failConn{}}}
	op := func(from int) algos.Op {
		return algos.Op{RecvFrom: from, SendTo: algos.NoPeer, Dst: algos.Output, Count: 1}
	}
	task := &Task{Sched: algos.Schedule{Lanes: []algos.Lane{
		{Ops: []algos.Op{{RecvFrom: algos.NoPeer, SendTo: algos.NoPeer, Src: algos.Input, Dst: algos.Output, Count: 1}}, Waits: []algos.Wait{{At: 0, Lane: 1, Done: 1}}},
		{Ops: []algos.Op{op(1)}},
		{Ops: []algos.Op{op(2)}},
	}}, In: make([]byte, 4), Out: make([]byte, 4), Type: reduce.Int32, StepPayload: 64, ChunkSteps: 1, SliceSteps: 1}
	err := r.Run(task, conns)
	if err == nil || !strings.Contains(err.Error(), "lane 2") || !strings.Contains(err.Error(), "link cut") {
		t.Fatalf("Run = %v, want lane 2's link cut", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("onError called %d times, want 1", n)
	}
	// Reusable: a clean single-lane task after a failed one.
	ok := &Task{Sched: algos.Single([]algos.Op{{RecvFrom: algos.NoPeer, SendTo: algos.NoPeer, Src: algos.Input, Dst: algos.Output, Count: 1}}),
		In: []byte{1, 2, 3, 4}, Out: make([]byte, 4), Type: reduce.Int32, StepPayload: 64, ChunkSteps: 1, SliceSteps: 1}
	if err := r.Run(ok, conns); err != nil || ok.Out[0] != 1 {
		t.Fatalf("Run after a failure = %v, out %v", err, ok.Out)
	}
}
