package engine

import (
	"encoding/binary"
	"sync"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// anyConns are in-memory connections keyed by (peer, connection index).
type anyConns struct {
	send map[[2]int]SendConn
	recv map[[2]int]RecvConn
}

func (m anyConns) SendTo(p, c int) (SendConn, error)   { return m.send[[2]int{p, c}], nil }
func (m anyConns) RecvFrom(p, c int) (RecvConn, error) { return m.recv[[2]int{p, c}], nil }

// teeConn is a multicast store in memory: one Acquire and Post, copied
// into a FIFO to every reader.
type teeConn struct {
	readers []*memConn
	buf     []byte
	nsteps  int
}

func (c *teeConn) Acquire(nsteps int) ([]byte, error) {
	c.nsteps, c.buf = nsteps, make([]byte, nsteps*c.readers[0].stepBytes)
	return c.buf, nil
}

func (c *teeConn) Post(n int) error {
	for _, r := range c.readers {
		b, _ := r.Acquire(c.nsteps)
		copy(b, c.buf[:n])
		r.Post(n)
	}
	return nil
}

// TestWideOps runs NVLS's schedules from algos on 10 ranks (load-reduces
// of 9 peers, beyond algos.MaxFan; scatters and gathers) over in-memory
// connections and multicast tees, and checks every output element.
func TestWideOps(t *testing.T) {
	const n, chunk, step = 10, 24, 64
	topo := algos.BlockTopo(1, n)
	for _, coll := range []algos.Coll{algos.ReduceScatter, algos.AllGather, algos.AllReduce} {
		cs := make([]anyConns, n)
		for r := range cs {
			cs[r] = anyConns{send: map[[2]int]SendConn{}, recv: map[[2]int]RecvConn{}}
		}
		for h := range n {
			tee := &teeConn{}
			for r := range n {
				if r == h {
					continue
				}
				pair, mc := newMemConn(step), newMemConn(step)
				cs[h].send[[2]int{r, 1}], cs[r].recv[[2]int{h, 1}] = pair, pair
				tee.readers = append(tee.readers, mc)
				cs[r].recv[[2]int{algos.McastPeer(n, h), 1}] = mc
			}
			cs[h].send[[2]int{algos.McastPeer(n, h), 1}] = tee
		}
		count := int64(3*n*chunk + 5) // all-reduce: 3 full loops and a short one
		if coll != algos.AllReduce {
			count = 2*chunk + 7
		}
		inLen, outLen := count, count
		if coll == algos.ReduceScatter {
			inLen = n * count
		}
		if coll == algos.AllGather {
			outLen = n * count
		}
		in := func(r int, i int64) int32 { return int32(1000*r) + int32(i%997) }
		outs := make([][]byte, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for r := range n {
			ib := make([]byte, 4*inLen)
			for i := range inLen {
				binary.LittleEndian.PutUint32(ib[4*i:], uint32(in(r, i)))
			}
			outs[r] = make([]byte, 4*outLen)
			part := algos.Part{Offset: 0, Count: count, Chunk: chunk, Align: 4}
			a := &algos.Args{Rank: r, Topo: topo, Count: count, Part: part, ElemSize: 1 << 14}
			fn, err := reduce.NewFunc(reduce.Int32, reduce.Sum, n, 0)
			if err != nil {
				t.Fatal(err)
			}
			task := &Task{Sched: algos.Lookup(algos.NVLS, coll).Gen(a), In: ib, Out: outs[r], Type: reduce.Int32, Fn: fn,
				StepPayload: step, ChunkSteps: 1, SliceSteps: 1}
			wg.Add(1)
			go func() { defer wg.Done(); errs[r] = Run(task, cs[r]) }()
		}
		wg.Wait()
		for r := range n {
			if errs[r] != nil {
				t.Fatalf("%s rank %d: %v", coll, r, errs[r])
			}
			for e := range outLen {
				var want int32
				switch coll {
				case algos.AllGather:
					want = in(int(e/count), e%count)
				case algos.ReduceScatter:
					for s := range n {
						want += in(s, int64(r)*count+e)
					}
				default:
					for s := range n {
						want += in(s, e)
					}
				}
				if got := int32(binary.LittleEndian.Uint32(outs[r][4*e:])); got != want {
					t.Fatalf("%s rank %d elem %d = %d, want %d", coll, r, e, got, want)
				}
			}
		}
	}
}
