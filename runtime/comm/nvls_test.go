package comm

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// nvlsEnv forces NVLS for reduce-scatter, all-gather and all-reduce (or
// NVLS_TREE for all-reduce, tree) with small chunks (512 bytes: 128
// int32), so that counts span many loops and every head has work.
func nvlsEnv(tree bool, extra ...string) map[string]string {
	algo := "nvls"
	if tree {
		algo = "allreduce:nvlstree"
	}
	env := map[string]string{"NCCL_ALGO": algo, "NCCL_NVLS_CHUNKSIZE": "512", "NCCL_BUFFSIZE": "8192"}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	return env
}

// algoRuns reports whether NCCL_ALGO token algo can run all-reduce on the
// ranks of hosts: NVLS and NVLS_TREE only where their topology is.
func algoRuns(algo string, hosts []string) bool {
	switch algo {
	case "nvls":
		return algos.NvlsUnavailable(algos.NewTopo(hosts), false) == ""
	case "nvlstree":
		return algos.NvlsUnavailable(algos.NewTopo(hosts), true) == ""
	case "oneshot":
		return algos.OneShotUnavailable(algos.NewTopo(hosts)) == ""
	}
	return true
}

// hostsFor is the "pairs" layout of n ranks, or one host for NVLS, which
// runs only inside one.
func hostsFor(algo string, n int) []string {
	if hosts := hostLayouts(n)["pairs"]; algoRuns(algo, hosts) {
		return hosts
	}
	return hostLayouts(n)["onehost"]
}

// TestNVLS runs NVLS reduce-scatter, all-reduce and all-gather over shared
// memory (multicast regions and connection-1 FIFOs) on one host of 2, 3, 4
// and 8 ranks, one and two channels, in and out of place, at counts below,
// around and far above one loop, checking every element.
func TestNVLS(t *testing.T) {
	for _, n := range []int{2, 3, 4, 8} {
		for _, nc := range []string{"1", "2"} {
			t.Run(fmt.Sprintf("n%d/ch%s", n, nc), func(t *testing.T) {
				cs := withHosts(t, hostLayouts(n)["onehost"], testParams(t, nvlsEnv(false, "NCCL_NCHANNELS", nc)))
				for _, cc := range collCases()[:3] { // AllReduce, ReduceScatter, AllGather
					for _, count := range []int{0, 1, n - 1, 128*n + 3, 5000} {
						runCase(t, cs, cc, count, false)
						runCase(t, cs, cc, count, true)
					}
				}
				if algo, _, _, _ := cs[0].Ran(); algo != algos.NVLS {
					t.Errorf("the last call ran %s, want NVLS", algo)
				}
			})
		}
	}
}

// TestNVLSTree runs NVLS_TREE all-reduce across 2, 3 and 4 fake hosts
// (host identities: TCP between hosts, shared memory inside) of 2 and 3
// ranks, checking every element.
func TestNVLSTree(t *testing.T) {
	for _, shape := range [][2]int{{2, 2}, {3, 2}, {4, 2}, {2, 3}} {
		hosts, ppn := shape[0], shape[1]
		t.Run(fmt.Sprintf("%dx%d", hosts, ppn), func(t *testing.T) {
			ids := make([]string, hosts*ppn)
			for r := range ids {
				ids[r] = fmt.Sprintf("h%d", r/ppn)
			}
			cs := withHosts(t, ids, testParams(t, nvlsEnv(true)))
			for _, count := range []int{0, 1, 7, 128*ppn + 3, 5000} {
				runCase(t, cs, collCases()[0], count, false)
				runCase(t, cs, collCases()[0], count, true)
			}
			if algo, _, _, _ := cs[0].Ran(); algo != algos.NVLSTree {
				t.Errorf("the last call ran %s, want NVLSTree", algo)
			}
		})
	}
}

// TestNVLSEveryDataTypeAndOp runs NVLS reduce-scatter for every data type
// and op (NCCL's hardware allows sum, min and max on some types; the
// emulation reduces anything) on one host of 3 ranks, comparing bytes
// exactly.
func TestNVLSEveryDataTypeAndOp(t *testing.T) {
	const n, count, scalar = 3, 301, 2.0
	cs := withHosts(t, hostLayouts(n)["onehost"], testParams(t, nvlsEnv(false)))
	for _, dt := range reduce.DataTypes() {
		for _, op := range reduce.Ops() {
			reduceScatterExact(t, cs, dt, op, count, scalar)
		}
	}
}

// TestNVLSUnavailable: NVLS forced where it cannot run fails every rank's
// call with NCCL's no-algorithm error and the reason; the ring still runs.
func TestNVLSUnavailable(t *testing.T) {
	for _, c := range []struct {
		name, layout string
		env          []string
		want         string
	}{
		{"one rank per host", "alone", nil, "NVLS runs inside one host and the job spans 3 hosts"},
		{"disabled", "onehost", []string{"NCCL_NVLS_ENABLE", "0"}, "NVLS is disabled (NCCL_NVLS_ENABLE=0)"},
		{"no shared memory", "onehost", []string{"NCCL_SHM_DISABLE", "1"}, "NVLS needs shared memory and NCCL_SHM_DISABLE=1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			const n, count = 3, 8
			env := nvlsEnv(false, c.env...)
			env["NCCL_ALGO"] = "reducescatter:nvls;allgather:nvls"
			cs := withHosts(t, hostLayouts(n)[c.layout], testParams(t, env))
			errs := each(cs, func(cm *Comm) error {
				return cm.ReduceScatter(make([]byte, 4*n*count), make([]byte, 4*count), count, reduce.Int32, reduce.Sum)
			})
			for r, err := range errs {
				if err == nil || !strings.Contains(err.Error(), c.want) ||
					!strings.Contains(err.Error(), "no algorithm/protocol available for function ReduceScatter with datatype int32") {
					t.Errorf("rank %d: %v, want the no-algorithm error naming %q", r, err, c.want)
				}
			}
			runCase(t, cs, collCases()[0], 100, false) // AllReduce runs the ring
		})
	}
}

// TestNVLSAutoOnlyWhenNamed: with NCCL_NVLS_ENABLE=2 (the default) and
// NCCL_ALGO unset, the tuner never picks NVLS; with 1 it may, and
// NCCL_ALGO=nvls runs it under either.
func TestNVLSAutoOnlyWhenNamed(t *testing.T) {
	const n = 3
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, false},
		{map[string]string{"NCCL_NVLS_ENABLE": "1"}, true},
		{map[string]string{"NCCL_ALGO": "nvls"}, true},
	} {
		cs := withHosts(t, hostLayouts(n)["onehost"], testParams(t, c.env))
		got := false
		for _, e := range cs[0].Entries(algos.ReduceScatter) {
			got = got || e.Algo == algos.NVLS
		}
		if got != c.want {
			t.Errorf("%v: NVLS among the entries: %v, want %v", c.env, got, c.want)
		}
	}
}

// nvlsSkips reports whether the process tests skip transport tr (of
// transports) for algorithm token algo: NVLS runs inside one host over
// shared memory, NVLS_TREE across hosts.
func nvlsSkips(algo, tr string) bool {
	return ((algo == "nvls" || algo == "oneshot") && tr != "shm") || (algo == "nvlstree" && tr != "mixed")
}

// childNVLS runs reduce-scatter, all-reduce and all-gather (as NCCL_ALGO
// allows them) in and out of place at counts below, around and far above
// one NVLS loop, checking every element.
func childNVLS(c *Comm) error {
	for _, cc := range collCases()[:3] {
		for _, count := range []int{1, 1000, 20000, 300000} {
			for _, inPlace := range []bool{false, true} {
				if err := rankCase(c, cc, count, inPlace); err != nil {
					return err
				}
				tree := strings.Contains(os.Getenv("NCCL_ALGO"), "nvlstree") // the others on the ring
				if algo, _, _, _ := c.Ran(); algo != algos.NVLS && algo != algos.NVLSTree && (!tree || cc.name == "AllReduce") {
					return fmt.Errorf("%s count %d ran %s, want NVLS", cc.name, count, algo)
				}
			}
		}
	}
	return nil
}

// TestNVLSAsProcesses runs NVLS with every rank its own OS process over
// shared memory, n = 2, 3, 4 and 8, and NVLS_TREE all-reduce over two
// and four fake hosts of two ranks (TCP between hosts).
func TestNVLSAsProcesses(t *testing.T) {
	for _, c := range []struct {
		algo, tr string
		ns       []int
	}{
		{"nvls", "shm", []int{2, 3, 4, 8}},
		{"allreduce:nvlstree;reducescatter:ring;allgather:ring", "mixed", []int{4, 8}},
	} {
		for _, tr := range transports {
			if tr.name != c.tr {
				continue
			}
			for _, n := range c.ns {
				if n == 8 && testing.Short() {
					continue
				}
				t.Run(fmt.Sprintf("%s/n%d", c.algo, n), func(t *testing.T) {
					env := func(r int) []string { return append(tr.env(r), "NCCL_ALGO="+c.algo, "NCCL_NVLS_CHUNKSIZE=16384") }
					procs := startRanks(t, n, "nvls", env)
					waitOK(t, procs)
					if left := shmFiles(t, procs[0].job); left != "" {
						t.Errorf("the job left segments in %s: %s", shmDir, left)
					}
				})
			}
		}
	}
}

// TestNVLSDevShmTooSmall: multicast regions that do not fit in the
// shared-memory directory (a 2 MiB tmpfs, 8 MiB regions) fail Init on
// every rank with an error naming NCCL_NVLS_CHUNKSIZE, not a SIGBUS.
func TestNVLSDevShmTooSmall(t *testing.T) {
	initFailsInSmallShm(t, "2m", map[string]string{"NCCL_ALGO": "nvls", "NCCL_NVLS_CHUNKSIZE": "1048576", "NCCL_BUFFSIZE": "8192"},
		"cannot hold the 8.0 MiB of multicast region", "NCCL_NVLS_CHUNKSIZE")
}

// TestNVLSRepeatedCallAllocatesNothing: once an NVLS collective of a
// shape has run on 3 ranks of one host, running it again allocates
// nothing on any rank (the wide Ops' connection lists are the lanes').
func TestNVLSRepeatedCallAllocatesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts skipped in -short mode")
	}
	const n, count = 3, 3 * 1024
	cs := withHosts(t, hostLayouts(n)["onehost"], testParams(t, nvlsEnv(false)))
	for _, cc := range collCases()[:3] {
		t.Run(cc.name, func(t *testing.T) {
			if allocs := allocsPerCall(t, cs, cc, count, 20); allocs != 0 {
				t.Errorf("%v allocations per call, want 0", allocs)
			}
		})
	}
}
