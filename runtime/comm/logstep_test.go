package comm

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
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

// TestLogStepDefault: without NCCL_ALGO the log-step rows may run between
// hosts, where an 8-byte all-reduce of 2 ranks runs recursive doubling
// (one step against the ring's two at the same per-call cost), and on one
// host over TCP (NCCL_SHM_DISABLE=1; which one runs there is the link
// class's business), but not on one host over shared memory, where they
// run only when NCCL_ALGO names them (and OneShot takes small calls).
func TestLogStepDefault(t *testing.T) {
	for _, tc := range []struct {
		name    string
		layout  string
		env     map[string]string
		allowed bool
		want    algos.Algo // -1: any
	}{
		{"two hosts", "alone", nil, true, algos.RecDbl},
		{"one host over tcp", "onehost", map[string]string{"NCCL_SHM_DISABLE": "1"}, true, -1},
		{"one host over shm", "onehost", nil, false, algos.OneShot}, // the one-host row for small calls
		{"one host named", "onehost", map[string]string{"NCCL_ALGO": "ring,recdbl,rabenseifner"}, true, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := withHosts(t, hostLayouts(2)[tc.layout], testParams(t, tc.env))
			got := ranSmall(t, cs, "AllReduce", func(c *Comm, b []byte) error { return c.AllReduce(b, b, 2, reduce.Int32, reduce.Sum) })
			for r, c := range cs {
				for _, a := range []algos.Algo{algos.RecDbl, algos.Rabenseifner} {
					if ok := c.model.Time(algos.AllReduce, a, protocols.LL, 8, 1) >= 0; ok != tc.allowed {
						t.Errorf("rank %d: %s may run: %v, want %v", r, a, ok, tc.allowed)
					}
				}
				if tc.want >= 0 && got[r] != tc.want {
					t.Errorf("rank %d ran %s, want %s", r, got[r], tc.want)
				}
			}
		})
	}
}

// childAllGather is childAllReduce for all-gather.
func childAllGather(c *Comm) error { return childCounts(c, collCases()[2]) }

// TestLogStepAllGatherAsProcesses runs the log-step all-gather with every
// rank its own OS process over TCP (recursive doubling at 2, 4 and 8
// ranks, Bruck at 3 and 5) and over both transports at once (hosts of two
// ranks).
func TestLogStepAllGatherAsProcesses(t *testing.T) {
	for _, tr := range transports {
		if tr.name == "shm" {
			continue // TestLogStepAllGather runs it on one host
		}
		for _, n := range []int{2, 3, 4, 5, 8} {
			if n == 8 && testing.Short() {
				continue
			}
			t.Run(fmt.Sprintf("%s/n%d", tr.name, n), func(t *testing.T) {
				procs := startRanks(t, n, "allgather-matrix", withAlgo("allgather:recdbl", tr.env))
				waitOK(t, procs)
			})
		}
	}
}

// TestHierRecDblDefault: HierRecDbl may run on its own (unnamed) only
// staged, between hosts of which some have several ranks; elsewhere only
// where NCCL_ALGO names it, and named an 8-byte all-reduce runs it. Where
// it may run on its own, what runs is the model's pick (which one that is
// on this machine's class: runtime/tune's TestStagedHierPicked).
func TestHierRecDblDefault(t *testing.T) {
	for _, tc := range []struct {
		name, layout string
		env          map[string]string
		allowed      bool
	}{
		{"default", "pairs", nil, true},
		{"no staging area", "pairs", map[string]string{"CC_ONESHOT_BYTES": "0"}, false},
		{"over tcp", "pairs", map[string]string{"NCCL_SHM_DISABLE": "1"}, false},
		{"one rank per host", "alone", nil, false},
		{"named", "pairs", map[string]string{"NCCL_ALGO": "hierrecdbl"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := withHosts(t, hostLayouts(4)[tc.layout], testParams(t, tc.env))
			got := ranSmall(t, cs, "AllReduce", func(c *Comm, b []byte) error { return c.AllReduce(b, b, 2, reduce.Int32, reduce.Sum) })
			for r, c := range cs {
				if ok := c.model.Time(algos.AllReduce, algos.HierRecDbl, protocols.LL, 8, 1) >= 0; ok != tc.allowed {
					t.Errorf("rank %d: HierRecDbl may run: %v, want %v", r, ok, tc.allowed)
				}
				best, _ := c.model.Decide(algos.AllReduce, 8, 1, -1)
				if got[r] != best.Algo {
					t.Errorf("rank %d ran %s, the model picks %s", r, got[r], best.Algo)
				}
				if tc.name == "named" && got[r] != algos.HierRecDbl {
					t.Errorf("rank %d ran %s with NCCL_ALGO=hierrecdbl", r, got[r])
				}
				if !tc.allowed && got[r] == algos.HierRecDbl {
					t.Errorf("rank %d ran HierRecDbl, which may not run here", r)
				}
			}
		})
	}
}

// ranSmall runs an 8-byte call on every rank of cs and returns the
// algorithm each rank ran it with.
func ranSmall(t *testing.T, cs []*Comm, name string, call func(c *Comm, b []byte) error) []algos.Algo {
	t.Helper()
	got := make([]algos.Algo, len(cs))
	mustEach(t, cs, name, func(c *Comm) error {
		if err := call(c, make([]byte, 8)); err != nil {
			return err
		}
		got[c.Rank()], _, _, _ = c.Ran()
		return nil
	})
	return got
}

// TestLogStepAllGatherKilledPeer kills a rank with SIGKILL in the middle of
// a stream of log-step all-gathers, over TCP only and over both
// transports: every other rank's call fails naming it, and every process
// exits (TestKilledPeerAlgorithms does the same for the all-reduce rows).
func TestLogStepAllGatherKilledPeer(t *testing.T) {
	for _, tr := range transports {
		if tr.name == "shm" {
			continue
		}
		t.Run(tr.name, func(t *testing.T) { killPeer(t, "forever-allgather", withAlgo("allgather:recdbl", tr.env)) })
	}
}
