package comm

import (
	"fmt"
	"testing"

	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// TestRepeatedCollectiveAllocatesNothing: once a collective of a shape has
// run, running it again allocates nothing, on either rank, over shared
// memory and over TCP, with each protocol. Rank 1 runs in a goroutine
// started beforehand, driven through channels (which allocate nothing), so
// that testing.AllocsPerRun, which counts every goroutine's allocations,
// sees both ranks' calls and nothing else.
func TestRepeatedCollectiveAllocatesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts skipped in -short mode")
	}
	type call func(c *Comm, send, recv []byte) error
	const count = 1024
	colls := map[string]call{
		"AllReduce": func(c *Comm, s, r []byte) error { return c.AllReduce(s, r, count, reduce.Float32, reduce.Sum) },
		"ReduceScatter": func(c *Comm, s, r []byte) error {
			return c.ReduceScatter(s, r, count/2, reduce.Float32, reduce.Sum)
		},
		"AllGather": func(c *Comm, s, r []byte) error { return c.AllGather(s[:4*count/2], r, count/2, reduce.Float32) },
		"Broadcast": func(c *Comm, s, r []byte) error { return c.Broadcast(s, r, count, reduce.Float32, 0) },
	}
	for _, shmDisable := range []string{"0", "1"} {
		for _, proto := range []string{"LL", "LL128", "Simple"} {
			cs := withComms(t, 2, testParams(t, map[string]string{"NCCL_SHM_DISABLE": shmDisable, "NCCL_PROTO": proto}))
			for name, f := range colls {
				t.Run(fmt.Sprintf("shmdisable=%s/%s/%s", shmDisable, proto, name), func(t *testing.T) {
					bufs := [2][2][]byte{}
					for r := range bufs {
						bufs[r] = [2][]byte{make([]byte, 4*count), make([]byte, 4*count)}
					}
					start, done := make(chan struct{}), make(chan error)
					go func() {
						for range start {
							done <- f(cs[1], bufs[1][0], bufs[1][1])
						}
					}()
					defer close(start)
					run := func() {
						start <- struct{}{}
						if err := f(cs[0], bufs[0][0], bufs[0][1]); err != nil {
							t.Fatal(err)
						}
						if err := <-done; err != nil {
							t.Fatal(err)
						}
					}
					run() // the first call builds the plan and may open connections
					if allocs := testing.AllocsPerRun(50, run); allocs != 0 {
						t.Errorf("%v allocations per call, want 0", allocs)
					}
				})
			}
		}
	}
}
