package comm

import (
	"errors"
	"fmt"
	"testing"

	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// TestHierRecDblStaged runs HierRecDbl's two forms over real connections:
// staged (the one-shot area inside hosts of several ranks, in one piece
// with the default slot and in many with 128-byte slots) and the FIFO
// form (CC_ONESHOT_BYTES=0), on hosts of two ranks, hosts of unequal
// sizes and ranks of a host that are not neighbours; every element of
// every rank is checked, in and out of place, and each rank's plan says
// which form it ran: staged exactly where its host has several ranks and
// the area is on.
func TestHierRecDblStaged(t *testing.T) {
	layouts := map[string][]string{
		"pairs4":      {"a", "a", "b", "b"},
		"pairs5":      {"a", "a", "b", "b", "c"},
		"3+1":         {"a", "a", "a", "b"},
		"interleaved": {"a", "b", "a", "b", "b"},
		"onehost":     {"a", "a", "a"},
	}
	for name, hosts := range layouts {
		for _, slot := range []string{"0", "128", "262144"} {
			t.Run(fmt.Sprintf("%s/oneshot%s", name, slot), func(t *testing.T) {
				p := testParams(t, map[string]string{"NCCL_ALGO": "hierrecdbl", "CC_ONESHOT_BYTES": slot, "NCCL_BUFFSIZE": "4096"})
				cs := withHosts(t, hosts, p)
				cc := collCases()[0]
				for _, count := range []int{0, 1, 31, 33, 1009} {
					runCase(t, cs, cc, count, false)
					runCase(t, cs, cc, count, true)
				}
				for r, c := range cs {
					pl := c.last.plan
					if pl == nil {
						t.Fatalf("rank %d has no last plan", r)
					}
					local := 0
					for _, h := range hosts {
						if h == hosts[r] {
							local++
						}
					}
					if want := slot != "0" && local > 1; (pl.hier != nil) != want {
						t.Errorf("rank %d (%d ranks on its host, CC_ONESHOT_BYTES=%s): staged %v, want %v", r, local, slot, pl.hier != nil, want)
					}
				}
			})
		}
	}
}

// TestHierRecDblStagedAllocatesNothing: a repeated staged HierRecDbl
// all-reduce (2 hosts of 2 ranks: the one-shot phases on every rank, the
// leaders' exchange over TCP) allocates nothing on any rank, with each
// protocol. Ranks 1-3 run in goroutines started beforehand and driven
// through channels, as in TestRepeatedCollectiveAllocatesNothing.
func TestHierRecDblStagedAllocatesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts skipped in -short mode")
	}
	const n, count = 4, 1024
	for _, proto := range []string{"LL", "LL128", "Simple"} {
		t.Run(proto, func(t *testing.T) {
			cs := withHosts(t, []string{"a", "a", "b", "b"}, testParams(t, map[string]string{"NCCL_ALGO": "hierrecdbl", "NCCL_PROTO": proto}))
			bufs := make([][2][]byte, n)
			for r := range bufs {
				bufs[r] = [2][]byte{make([]byte, 4*count), make([]byte, 4*count)}
			}
			call := func(r int) error { return cs[r].AllReduce(bufs[r][0], bufs[r][1], count, reduce.Float32, reduce.Sum) }
			start, done := make([]chan struct{}, n), make(chan error, n)
			for r := 1; r < n; r++ {
				start[r] = make(chan struct{})
				go func() {
					for range start[r] {
						done <- call(r)
					}
				}()
				defer close(start[r])
			}
			run := func() {
				for r := 1; r < n; r++ {
					start[r] <- struct{}{}
				}
				err := call(0)
				for r := 1; r < n; r++ {
					err = errors.Join(err, <-done)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			run() // the first call builds the plan and compiles the programs
			for r, c := range cs {
				if c.last.plan == nil || c.last.plan.hier == nil {
					t.Fatalf("rank %d did not run HierRecDbl staged", r)
				}
			}
			if allocs := testing.AllocsPerRun(50, run); allocs != 0 {
				t.Errorf("%v allocations per call, want 0", allocs)
			}
		})
	}
}
