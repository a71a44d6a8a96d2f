package comm

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// cmaAlgo forces the CMA row for all-gather and the one-shot rows for
// the other collectives (slots of 4 KiB, as in oneShotEnv).
const cmaAlgo = "oneshot;allgather:cma"

// cmaEnv is oneShotEnv with all-gather by CMA.
func cmaEnv(extra ...string) map[string]string {
	return oneShotEnv(append([]string{"NCCL_ALGO", cmaAlgo}, extra...)...)
}

// TestCMAAllGather runs all-gather by the CMA row on one host of 2, 3, 4,
// 5 and 8 ranks (goroutines of one process: process_vm_readv of its own
// pid), in and out of place, at counts below, at and above a one-shot
// slot, checking every element, that the row ran, and that the other
// collectives between them still run through the slots.
func TestCMAAllGather(t *testing.T) {
	for _, n := range []int{2, 3, 4, 5, 8} {
		t.Run(fmt.Sprintf("n%d", n), func(t *testing.T) {
			cs := withHosts(t, hostLayouts(n)["onehost"], testParams(t, cmaEnv()))
			for _, c := range cs {
				if !c.cma.ok {
					t.Fatalf("rank %d: the probe of process_vm_readv failed", c.Rank())
				}
			}
			ag, ar := collCases()[2], collCases()[0]
			for _, count := range oneShotCounts {
				for _, inPlace := range []bool{false, true} {
					before := cs[0].cma.calls
					runCase(t, cs, ag, count, inPlace)
					want := before
					if count > 0 {
						want++
					}
					for _, c := range cs {
						if c.cma.calls != want {
							t.Fatalf("count %d in place %v: rank %d ran %d single-copy calls, want %d", count, inPlace, c.Rank(), c.cma.calls, want)
						}
						if algo, _, _, _ := c.Ran(); count > 0 && algo != algos.CMA {
							t.Fatalf("count %d: rank %d ran %s, want CMA", count, c.Rank(), algo)
						}
					}
					runCase(t, cs, ar, count, inPlace)
				}
			}
		})
	}
}

// TestCMAAllGatherEveryDataType gathers an odd count of every data type
// by the single-copy path (5 ranks), comparing bytes.
func TestCMAAllGatherEveryDataType(t *testing.T) {
	const n, count = 5, 1001
	cs := withHosts(t, hostLayouts(n)["onehost"], testParams(t, cmaEnv()))
	for _, dt := range reduce.DataTypes() {
		es := dt.Size()
		want := make([]byte, n*count*es)
		for i := range want {
			want[i] = byte(i*7 + i/(count*es))
		}
		recvs := make([][]byte, n)
		mustEach(t, cs, dt.String(), func(c *Comm) error {
			r := c.Rank()
			recvs[r] = make([]byte, len(want))
			send := bytes.Clone(want[r*count*es : (r+1)*count*es])
			return c.AllGather(send, recvs[r], count, dt)
		})
		for r, got := range recvs {
			if !bytes.Equal(got, want) {
				t.Fatalf("%s: rank %d gathered other bytes", dt, r)
			}
		}
	}
	if cs[0].cma.calls != uint64(len(reduce.DataTypes())) {
		t.Errorf("%d single-copy calls, want %d", cs[0].cma.calls, len(reduce.DataTypes()))
	}
}

// TestCMAProbeFails: when one rank's probe cannot read a peer (here a
// process_vm_readv that fails once with EPERM, as under Yama's
// ptrace_scope 1), every rank turns the CMA row off alike: the default
// all-gathers run without it, correct, and one that NCCL_ALGO forces to
// CMA fails on every rank with the usual message, naming why.
func TestCMAProbeFails(t *testing.T) {
	var failed atomic.Bool
	real := readPeer
	readPeer = func(pid int, dst []byte, addr uint64) error {
		if failed.CompareAndSwap(false, true) {
			return fmt.Errorf("process_vm_readv: %w", syscall.EPERM)
		}
		return real(pid, dst, addr)
	}
	defer func() { readPeer = real }()
	for _, forced := range []bool{false, true} {
		failed.Store(false)
		env := oneShotEnv("NCCL_ALGO", "")
		if forced {
			env = cmaEnv()
		}
		cs := withHosts(t, hostLayouts(3)["onehost"], testParams(t, env))
		if !failed.Load() {
			t.Fatal("no rank probed process_vm_readv")
		}
		for _, c := range cs {
			if c.cma.ok {
				t.Errorf("rank %d uses CMA after another rank's probe failed", c.Rank())
			}
		}
		if forced {
			wantNoAllGather(t, cs, "process_vm_readv failed")
			continue
		}
		for _, inPlace := range []bool{false, true} {
			runCase(t, cs, collCases()[2], 1025, inPlace)
		}
		if cs[0].cma.calls != 0 {
			t.Errorf("%d CMA calls, want 0", cs[0].cma.calls)
		}
	}
}

// TestCMAOff: with NCCL_ALGO excluding CMA for all-gather, Init does not
// probe and no call reads across processes.
func TestCMAOff(t *testing.T) {
	for _, algo := range []string{"allgather:^cma", "ring,oneshot"} {
		cs := withHosts(t, hostLayouts(2)["onehost"], testParams(t, oneShotEnv("NCCL_ALGO", algo)))
		runCase(t, cs, collCases()[2], 1<<12, false)
		for _, c := range cs {
			if c.cma.ok || c.cma.calls != 0 || c.cma.word != nil {
				t.Errorf("NCCL_ALGO=%s rank %d: probed %v, on %v, %d CMA calls", algo, c.Rank(), c.cma.word != nil, c.cma.ok, c.cma.calls)
			}
		}
	}
}

// TestCMARepeatedCallAllocatesNothing: a single-copy all-gather, repeated,
// allocates nothing on either rank.
func TestCMARepeatedCallAllocatesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts skipped in -short mode")
	}
	cs := withHosts(t, hostLayouts(2)["onehost"], testParams(t, cmaEnv("CC_SHM_SPIN_US", "100000")))
	if allocs := allocsPerCall(t, cs, collCases()[2], 3000, 50); allocs != 0 {
		t.Errorf("%v allocations per call, want 0", allocs)
	}
	if cs[0].cma.calls == 0 {
		t.Error("no single-copy call ran")
	}
}

// TestCMAAsProcesses runs the single-copy all-gather with every rank its
// own OS process (process_vm_readv between processes), n = 2, 3, 4, 5 and 8.
func TestCMAAsProcesses(t *testing.T) {
	for _, n := range []int{2, 3, 4, 5, 8} {
		if n == 8 && testing.Short() {
			continue
		}
		t.Run(fmt.Sprintf("n%d", n), func(t *testing.T) {
			procs := startRanks(t, n, "cma", func(int) []string {
				return []string{"NCCL_SHM_DISABLE=0", "NCCL_ALGO=" + cmaAlgo, "CC_ONESHOT_BYTES=4096"}
			})
			waitOK(t, procs)
		})
	}
}

// childCMA is TestCMAAsProcesses' rank.
func childCMA(c *Comm) error {
	if !c.cma.ok {
		return errors.New("the probe of process_vm_readv failed")
	}
	ag := collCases()[2]
	for _, count := range oneShotCounts {
		for _, inPlace := range []bool{false, true} {
			before := c.cma.calls
			if err := rankCase(c, ag, count, inPlace); err != nil {
				return err
			}
			if count > 0 && c.cma.calls != before+1 {
				return fmt.Errorf("count %d: the single-copy path did not run", count)
			}
		}
	}
	return nil
}

// TestCMAKilledPeer: a rank killed while the others run single-copy
// all-gathers of 256 KiB blocks is named in every other rank's error
// (whether they wait for it or read its memory), and no rank hangs.
func TestCMAKilledPeer(t *testing.T) {
	killPeer(t, "forever-allgather", func(int) []string {
		return []string{"NCCL_SHM_DISABLE=0", "NCCL_ALGO=" + cmaAlgo}
	})
}

// TestCMASendBufferReusedAtReturn: a rank that overwrites its send buffer
// as soon as its all-gather returns does not change what the others
// gather, although they read that buffer late (here every read of rank 0's
// buffer waits 2 ms first): no rank leaves a single-copy call before every
// other has read its buffer.
func TestCMASendBufferReusedAtReturn(t *testing.T) {
	const n, count = 3, 1000
	cs := withHosts(t, hostLayouts(n)["onehost"], testParams(t, cmaEnv()))
	sends := make([][]byte, n)
	for r := range n {
		sends[r], _ = caseBuffers(collCases()[2], r, n, count, false)
	}
	slow := addr(sends[0])
	real := readPeer
	readPeer = func(pid int, dst []byte, at uint64) error {
		if uintptr(at) == slow {
			time.Sleep(2 * time.Millisecond)
		}
		return real(pid, dst, at)
	}
	defer func() { readPeer = real }()
	recvs := make([][]byte, n)
	mustEach(t, cs, "AllGather", func(c *Comm) error {
		r := c.Rank()
		_, recvs[r] = caseBuffers(collCases()[2], r, n, count, false)
		err := c.AllGather(sends[r], recvs[r], count, reduce.Int32)
		clear(sends[r])
		return err
	})
	for r := range n {
		if err := checkCase(collCases()[2], r, n, count, false, recvs[r]); err != nil {
			t.Error(err)
		}
	}
	if cs[0].cma.calls != 1 {
		t.Errorf("%d single-copy calls, want 1", cs[0].cma.calls)
	}
}

// TestCMAChosen: with the built-in constants, 2 ranks of one host gather
// 128 KiB by CMA and 8 MiB (beyond its 6 MiB bound) by another row; CMA
// forced across hosts fails the call on every rank naming why.
func TestCMAChosen(t *testing.T) {
	cs := withHosts(t, hostLayouts(2)["onehost"], testParams(t, nil))
	for _, tc := range []struct {
		count int
		cma   bool
	}{{1 << 14, true}, {1 << 20, false}} {
		runCase(t, cs, collCases()[2], tc.count, false)
		for _, c := range cs {
			if algo, _, _, _ := c.Ran(); (algo == algos.CMA) != tc.cma {
				t.Errorf("all-gather of %d B: rank %d ran %s (CMA wanted: %v)", 2*4*tc.count, c.Rank(), algo, tc.cma)
			}
		}
	}
	cs = withHosts(t, hostLayouts(2)["alone"], testParams(t, map[string]string{"NCCL_ALGO": "allgather:cma"}))
	wantNoAllGather(t, cs, "CMA runs only when every rank is on one host")
}

// wantNoAllGather: an all-gather of 1025 elements fails on every rank of
// cs with the usual "no algorithm/protocol available", naming why.
func wantNoAllGather(t *testing.T, cs []*Comm, why string) {
	t.Helper()
	const count = 1025
	errs := each(cs, func(c *Comm) error {
		send, recv := caseBuffers(collCases()[2], c.Rank(), len(cs), count, false)
		return c.AllGather(send, recv, count, reduce.Int32)
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "no algorithm/protocol available") || !strings.Contains(err.Error(), why) {
			t.Errorf("rank %d: %v, want no algorithm/protocol available naming %q", r, err, why)
		}
	}
}
