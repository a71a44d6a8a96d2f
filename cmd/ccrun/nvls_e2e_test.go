package main

import (
	"testing"
	"time"
)

// TestE2ENVLSTree: NVLS_TREE all-reduce through ccrun on the testbed, two
// ranks on each of tb1..tb4 (NVLS over each host's shared memory, a tree
// of heads over TCP between the hosts), and single-host NVLS's three
// collectives with both ranks on tb1: every row #wrong 0.
func TestE2ENVLSTree(t *testing.T) {
	tb := needTestbed(t)
	_, perf := binaries(t)
	hosts := tb.addr(1) + ":2," + tb.addr(2) + ":2," + tb.addr(3) + ":2," + tb.addr(4) + ":2"
	j := startCCRun(t, "--ssh-config", tb.sshConfig, "-H", hosts, "-np", "8", "-x", "NCCL_ALGO=allreduce:nvlstree",
		perf, "all_reduce", "-b", "8", "-e", "1M", "-f", "8", "-c", "1")
	if code := j.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("nvlstree all_reduce: exit %d; stderr:\n%s", code, j.err)
	}
	checkCollRows(t, "all_reduce", j.out.String())
	for _, coll := range []string{"all_reduce", "reduce_scatter", "all_gather"} {
		j := startCCRun(t, "--ssh-config", tb.sshConfig, "-H", tb.addr(1)+":2", "-np", "2", "-x", "NCCL_ALGO=nvls",
			perf, coll, "-b", "8", "-e", "1M", "-f", "8", "-c", "1")
		if code := j.wait(t, 5*time.Minute); code != 0 {
			t.Fatalf("nvls %s on one host: exit %d; stderr:\n%s", coll, code, j.err)
		}
		checkCollRows(t, coll, j.out.String())
	}
}
