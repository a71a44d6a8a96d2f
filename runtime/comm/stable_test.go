package comm

import "testing"

// TestInPlaceSendsByReference: an in-place all-gather or broadcast over
// TCP sends its slices straight from user memory, Input and Output
// (engine.Task.Stable), as the out-of-place call does; an in-place
// all-reduce or reduce-scatter, whose Output overwrites Input with other
// values, sends from Output only (engine.Task.OutOnce). Every call stays
// right with a protocol whose sends leave asynchronously (Simple's writer
// goroutines) and with one that writes at once (LL128).
func TestInPlaceSendsByReference(t *testing.T) {
	stableInPlace := map[string]bool{"AllGather": true, "Broadcast": true, "AllReduce": false, "ReduceScatter": false}
	for _, proto := range []string{"Simple", "LL128"} {
		t.Run(proto, func(t *testing.T) {
			p := testParams(t, map[string]string{"NCCL_PROTO": proto, "NCCL_ALGO": "ring", "NCCL_SHM_DISABLE": "1",
				"NCCL_BUFFSIZE": "8192", "NCCL_LL128_BUFFSIZE": "8192"})
			cs := withComms(t, 3, p)
			seen := 0
			for _, cc := range collCases() {
				want, ok := stableInPlace[cc.name]
				if !ok {
					continue
				}
				seen++
				for _, inPlace := range []bool{false, true} {
					runCase(t, cs, cc, 5000, inPlace) // several slices per rank's block
					for r, c := range cs {
						if got := c.tasks[0].Stable; got != (want || !inPlace) {
							t.Errorf("%s in place %v: rank %d's task sends from Input: %v, want %v", cc.name, inPlace, r, got, want || !inPlace)
						}
						if !c.tasks[0].OutOnce {
							t.Errorf("%s in place %v: rank %d's task does not send from Output", cc.name, inPlace, r)
						}
					}
				}
			}
			if seen != len(stableInPlace) {
				t.Fatalf("collCases has %d of the %d collectives checked", seen, len(stableInPlace))
			}
		})
	}
}
