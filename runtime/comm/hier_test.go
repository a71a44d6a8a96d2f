package comm

import (
	"fmt"
	"testing"
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
