package comm

import (
	"fmt"
	"strconv"
	"testing"
)

// TestLogStepAllGather runs the log-step all-gather (recursive doubling
// for 2, 4, 8 ranks, Bruck for 3 and 5) over real connections: each rank
// alone on its host (TCP between all) and one host (shared memory), every
// protocol, one and two channels, in and out of place, at counts around
// chunk boundaries; every element is checked. All-reduce's log-step rows
// run in algos_test.go's table-driven tests.
func TestLogStepAllGather(t *testing.T) {
	const buffSize = 8 * 512 // 512-byte slots: chunks of 128 int32
	ag := collCases()[2]
	if ag.name != "AllGather" {
		t.Fatalf("collCases()[2] is %s, want AllGather", ag.name)
	}
	for _, n := range []int{2, 3, 4, 5, 8} {
		for _, layout := range []string{"alone", "onehost"} {
			if n == 8 && layout == "onehost" {
				continue // 8 ranks on 2 cores: the TCP layout covers it
			}
			for _, proto := range []string{"LL", "LL128", "Simple"} {
				t.Run(fmt.Sprintf("n%d/%s/%s", n, layout, proto), func(t *testing.T) {
					p := testParams(t, map[string]string{"NCCL_ALGO": "allgather:recdbl", "NCCL_PROTO": proto,
						"NCCL_BUFFSIZE": strconv.Itoa(buffSize), "NCCL_LL_BUFFSIZE": strconv.Itoa(buffSize),
						"NCCL_LL128_BUFFSIZE": strconv.Itoa(2 * buffSize), "NCCL_NCHANNELS": strconv.Itoa(1 + n%2)})
					cs := withHosts(t, hostLayouts(n)[layout], p)
					for _, count := range []int{0, 1, n - 1, 127, 129, 1009} {
						runCase(t, cs, ag, count, false)
						runCase(t, cs, ag, count, true)
					}
				})
			}
		}
	}
}
