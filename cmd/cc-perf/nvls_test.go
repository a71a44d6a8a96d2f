package main

import (
	"os"
	"strings"
	"testing"
)

// TestNVLS runs reduce_scatter, all_reduce and all_gather with
// NCCL_ALGO=nvls on 4 ranks of one host (shared memory) and -c 1: every
// row has #wrong 0 both ways and names NVLS/Simple in the -A columns; then
// as 3 ranks that join like separate processes (torchrun's variables).
func TestNVLS(t *testing.T) {
	env := []string{"NCCL_ALGO=nvls", "NCCL_NVLS_CHUNKSIZE=16384"}
	check := func(name, stdout string, rows int) {
		t.Helper()
		tb := parseTable(t, stdout)
		if len(tb.rows) != rows {
			t.Fatalf("%s: %d rows, want %d:\n%s", name, len(tb.rows), rows, stdout)
		}
		for _, f := range tb.rows {
			if len(f) != 16 || f[8] != "0" || f[12] != "0" || f[13] != "NVLS" || f[14] != "Simple" {
				t.Errorf("%s: row %q: want #wrong 0 / 0 and NVLS Simple", name, f)
			}
		}
		if !strings.Contains(stdout, "# Out of bounds values : 0 OK\n") {
			t.Errorf("%s: output lacks the out-of-bounds line", name)
		}
	}
	for _, name := range []string{"reduce_scatter", "all_reduce", "all_gather"} {
		r := runCmd(t, env, "cc-perf", name, "-t", "4", "-b", "8", "-e", "1M", "-f", "32", "-n", "2", "-w", "1", "-c", "1", "-A", "1")
		if r.code != 0 {
			t.Fatalf("%s: exit %d, stderr %q\n%s", name, r.code, r.stderr, r.stdout)
		}
		check(name, r.stdout, 4) // 8, 256, 8K, 256K
	}
	outs := runProcs(t, 3, func(_ int, penv []string) result {
		return runCmd(t, append(penv, env...), "cc-perf", "all_reduce", "-b", "1K", "-e", "64K", "-f", "8", "-n", "2", "-c", "1", "-A", "1")
	})
	check("all_reduce, 3 processes", outs[0].stdout, 3)
}

// TestNVLSUnavailable: NCCL_ALGO=nvls on one rank fails with NCCL's
// no-algorithm message naming why, one line on stderr, exit 3 (a test
// failure), as any algorithm that cannot run.
func TestNVLSUnavailable(t *testing.T) {
	r := runCmd(t, []string{"NCCL_ALGO=nvls"}, "cc-perf", "all_reduce", "-t", "1", "-b", "8", "-e", "8", "-c", "1")
	want := `no algorithm/protocol available for function AllReduce with datatype float: NCCL_ALGO was set to "nvls", NVLS needs at least 2 ranks on a host and every host has 1`
	if r.code != 3 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, want) {
		t.Errorf("exit %d, stderr %q: want 3 and one line containing %q", r.code, r.stderr, want)
	}
}

// TestNVLSRegistered: -R 1 (nccl-tests' --local_register 1) allocates the
// buffers with comm.MemAlloc and registers them: with NCCL_ALGO=nvls every
// row has #wrong 0 and NCCL_DEBUG's COLL lines say that the calls read the
// registered buffers in place; on 4 ranks of one process and on 3
// processes. The table is nccl-tests': -R prints nothing of its own.
func TestNVLSRegistered(t *testing.T) {
	for _, name := range []string{"reduce_scatter", "all_reduce", "all_gather"} {
		logFile := t.TempDir() + "/debug.log"
		env := []string{"NCCL_ALGO=nvls", "NCCL_NVLS_CHUNKSIZE=16384", "NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=COLL", "NCCL_DEBUG_FILE=" + logFile}
		r := runCmd(t, env, "cc-perf", name, "-t", "4", "-b", "8", "-e", "1M", "-f", "32", "-n", "2", "-w", "1", "-c", "1", "-R", "1")
		if r.code != 0 {
			t.Fatalf("%s -R 1: exit %d, stderr %q\n%s", name, r.code, r.stderr, r.stdout)
		}
		tb := parseTable(t, r.stdout)
		if len(tb.rows) != 4 {
			t.Fatalf("%s -R 1: %d rows, want 4:\n%s", name, len(tb.rows), r.stdout)
		}
		for _, f := range tb.rows {
			if f[8] != "0" || f[12] != "0" {
				t.Errorf("%s -R 1: row %q: want #wrong 0 / 0", name, f)
			}
		}
		log, err := os.ReadFile(logFile)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(log), "registered buffers: heads read every local rank's send buffer in place") {
			t.Errorf("%s -R 1: the COLL lines never say the registered path ran:\n%.2000s", name, log)
		}
	}
	outs := runProcs(t, 3, func(_ int, penv []string) result {
		return runCmd(t, append(penv, "NCCL_ALGO=nvls", "NCCL_NVLS_CHUNKSIZE=16384"), "cc-perf", "all_reduce", "-b", "1K", "-e", "64K", "-f", "8", "-n", "2", "-c", "1", "-R", "1")
	})
	if !strings.Contains(outs[0].stdout, "# Out of bounds values : 0 OK\n") {
		t.Errorf("all_reduce -R 1, 3 processes:\n%s", outs[0].stdout)
	}
	// Registration is harmless where nothing reads it: the ring.
	r := runCmd(t, []string{"NCCL_ALGO=ring"}, "cc-perf", "all_reduce", "-t", "3", "-b", "1K", "-e", "4K", "-f", "4", "-n", "1", "-c", "1", "-R", "1")
	if r.code != 0 || !strings.Contains(r.stdout, "# Out of bounds values : 0 OK\n") {
		t.Errorf("ring -R 1: exit %d, stderr %q\n%s", r.code, r.stderr, r.stdout)
	}
}
