package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// checkAllToAllVRows checks alltoallv data rows of n ranks: #wrong 0 out of
// place and N/A in place, redop none, root -1, and busbw = algbw x (n-1)/n
// to the printed precision.
func checkAllToAllVRows(t *testing.T, rows [][]string, n int) {
	t.Helper()
	for _, f := range rows {
		if len(f) != 13 || f[3] != "none" || f[4] != "-1" || f[8] != "0" || f[12] != "N/A" {
			t.Errorf("%d ranks: row %q, want none -1 ... #wrong 0 ... N/A", n, f)
			continue
		}
		for _, i := range []int{6, 10} {
			alg, _ := strconv.ParseFloat(f[i], 64)
			bus, _ := strconv.ParseFloat(f[i+1], 64)
			if d := bus - alg*float64(n-1)/float64(n); d > 0.011 || d < -0.011 {
				t.Errorf("%d ranks: busbw %v != algbw %v x %d/%d", n, bus, alg, n-1, n)
			}
		}
	}
}

// TestAllToAllV runs alltoallv on 2, 3 and 4 ranks of the real runtime with
// nccl-tests' default matrix: every out-of-place half right, and the sizes
// and counts of bench.DefaultTraffic (3 ranks: every data type too).
func TestAllToAllV(t *testing.T) {
	for _, n := range []int{2, 3, 4} {
		args := []string{"cc-perf", "alltoallv", "-t", strconv.Itoa(n), "-b", "8", "-e", "256K", "-f", "8", "-n", "2", "-w", "1"}
		types := 1
		if n == 3 {
			args = append(args, "-d", "all", "-e", "4K")
			types = 12
		}
		r := runCmd(t, nil, args...)
		if r.code != 0 {
			t.Fatalf("%d ranks: exit %d, stderr %q\n%s", n, r.code, r.stderr, r.stdout)
		}
		tb := parseTable(t, r.stdout)
		sizes := 6 // 8 .. 256K by 8
		if n == 3 {
			sizes = 4 // 8 .. 4K
		}
		if len(tb.rows) != sizes*types {
			t.Fatalf("%d ranks: %d rows, want %d:\n%s", n, len(tb.rows), sizes*types, r.stdout)
		}
		checkAllToAllVRows(t, tb.rows, n)
		size := int64(8)
		for i, f := range tb.rows {
			if i%sizes == 0 {
				size = 8
			}
			elt := int64(eltOf(t, f[2]))
			c := bench.DefaultTraffic.Counts(size/elt, elt, n)
			if f[0] != strconv.FormatInt(c.Bytes(elt), 10) || f[1] != strconv.FormatInt(c.Param, 10) {
				t.Errorf("%d ranks, %d bytes of %s: size %s count %s, want %d %d", n, size, f[2], f[0], f[1], c.Bytes(elt), c.Param)
			}
			size *= 8
		}
		if !strings.Contains(r.stdout, "# Out of bounds values : 0 OK\n") {
			t.Errorf("%d ranks: footer:\n%s", n, r.stdout)
		}
	}
}

// eltOf is the size in bytes of a data type column.
func eltOf(t *testing.T, typ string) int {
	t.Helper()
	for _, dt := range reduce.DataTypes() {
		if dt.String() == typ {
			return dt.Size()
		}
	}
	t.Fatalf("unknown type %q", typ)
	return 0
}

// writeMatrix writes a traffic matrix file and returns its path.
func writeMatrix(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "traffic.txt")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// matrixText is 3 ranks' traffic with empty pairs and traffic to self:
// rank 2 receives the most, 160+256+256 = 672 bytes; 4 ranks use the first
// 4 rows and columns of a 5x5 one.
const matrixText = "0 96 160\n320 64 256\n16 0 256\n"

// TestAllToAllVMatrix runs a matrix file on 3 ranks with
// NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY: one row of 672 bytes and count 0, and
// the summary lines after it.
func TestAllToAllVMatrix(t *testing.T) {
	env := []string{envMatrixFile + "=" + writeMatrix(t, matrixText), envPrintSummary + "=1"}
	r := runCmd(t, env, "cc-perf", "alltoallv", "-t", "3", "-b", "1K", "-e", "1K", "-n", "2", "-d", "double")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q\n%s", r.code, r.stderr, r.stdout)
	}
	tb := parseTable(t, r.stdout)
	if len(tb.rows) != 1 || tb.rows[0][0] != "672" || tb.rows[0][1] != "0" || tb.rows[0][2] != "double" {
		t.Fatalf("rows %q, want one of 672 bytes, count 0:\n%s", tb.rows, r.stdout)
	}
	checkAllToAllVRows(t, tb.rows, 3)
	for _, want := range []string{
		"# NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY: mode=matrix nranks=3 matrix_dim=3 scale=1.000 time_usec=",
		"#   rank=0 send_bytes=256 recv_bytes=336 alg_bw=",
		"#   rank=1 send_bytes=640 recv_bytes=160 alg_bw=",
		"#   rank=2 send_bytes=272 recv_bytes=672 alg_bw=",
	} {
		if n := strings.Count(r.stdout, want); n != 2 {
			t.Errorf("%d lines %q, want 2 (one per half):\n%s", n, want, r.stdout)
		}
	}

	// Scaled by 2 (values and the summary), 4 ranks of a 5x5 matrix.
	five := "0 16 32 48 999\n16 0 16 32 999\n32 16 0 16 999\n48 32 16 0 999\n999 999 999 999 999\n"
	env = []string{envMatrixFile + "=" + writeMatrix(t, five), envMatrixScale + "=2", envPrintSummary + "=1"}
	r = runCmd(t, env, "cc-perf", "alltoallv", "-t", "4", "-b", "1K", "-e", "1K", "-n", "1")
	if r.code != 0 {
		t.Fatalf("5x5: exit %d, stderr %q", r.code, r.stderr)
	}
	tb = parseTable(t, r.stdout)
	if len(tb.rows) != 1 || tb.rows[0][0] != "192" { // rank 0 sends (16+32+48) x 2
		t.Errorf("5x5 x 2 on 4 ranks: rows %q, want one of 192 bytes", tb.rows)
	}
	checkAllToAllVRows(t, tb.rows, 4)
	if !strings.Contains(r.stdout, "mode=matrix nranks=4 matrix_dim=5 scale=2.000 ") {
		t.Errorf("5x5: summary:\n%s", r.stdout)
	}
}

// TestAllToAllVProcesses runs alltoallv in 3 processes of one rank each
// (torchrun's variables) and in 2 of 2 ranks, the default matrix and a
// matrix file: #wrong 0, and only rank 0's process prints.
func TestAllToAllVProcesses(t *testing.T) {
	file := writeMatrix(t, matrixText)
	for _, tt := range []struct {
		procs, perProc int
		env            []string
		args           []string
	}{
		{3, 1, nil, []string{"-b", "64", "-e", "64K", "-f", "32"}},
		{2, 2, nil, []string{"-b", "1K", "-e", "1K", "-d", "half"}},
		{3, 1, []string{envMatrixFile + "=" + file}, []string{"-b", "1K", "-e", "1K"}},
	} {
		port := strconv.Itoa(freePort(t) - 1) // the root listens on MASTER_PORT+1
		ps := make([]*proc, tt.procs)
		for r := range ps {
			env := append([]string{"RANK=" + strconv.Itoa(r), "WORLD_SIZE=" + strconv.Itoa(tt.procs), "LOCAL_RANK=" + strconv.Itoa(r),
				"LOCAL_WORLD_SIZE=" + strconv.Itoa(tt.procs), "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port}, tt.env...)
			args := append([]string{"alltoallv", "-t", strconv.Itoa(tt.perProc), "-n", "2"}, tt.args...)
			ps[r] = startProc(t, env, args...)
		}
		n := tt.procs * tt.perProc
		for r, p := range ps {
			code, lines := p.wait(t)
			if code != 0 {
				t.Fatalf("%d x %d ranks, process %d: exit %d:\n%s", tt.procs, tt.perProc, r, code, p.output())
			}
			if r > 0 && len(lines) != 0 {
				t.Errorf("process %d printed %q", r, lines)
			}
		}
		tb := parseTable(t, strings.Join(ps[0].stdout, "\n"))
		if len(tb.rows) == 0 || strings.Count(ps[0].output(), "#  Rank ") != n {
			t.Fatalf("%d x %d ranks: %d rows:\n%s", tt.procs, tt.perProc, len(tb.rows), ps[0].output())
		}
		checkAllToAllVRows(t, tb.rows, n)
	}
}

// TestAllToAllVNames: nccl-tests' binary name, with a suffix, through a
// path, and the subcommand's alias all run alltoallv.
func TestAllToAllVNames(t *testing.T) {
	for _, tt := range []struct {
		args []string
		name string
	}{
		{[]string{"/opt/nccl-tests/build/alltoallv_perf", "-t", "2", "-b", "1K", "-e", "1K", "-n", "1"}, "alltoallv_perf"},
		{[]string{"alltoallv_perf_mpi", "-t", "2", "-b", "1K", "-e", "1K", "-n", "1"}, "alltoallv_perf_mpi"},
		{[]string{"cc-perf", "alltoallv_perf", "-t", "2", "-b", "1K", "-e", "1K", "-n", "1"}, "alltoallv_perf"},
	} {
		r := runCmd(t, nil, tt.args...)
		if r.code != 0 || !strings.Contains(r.stdout, "# Collective test starting: "+tt.name+"\n") {
			t.Errorf("%v: exit %d, stderr %q\n%s", tt.args, r.code, r.stderr, r.stdout)
		}
	}
}

// TestAllToAllVBadEnv: every bad alltoallv knob is a one-line error naming
// it and what is allowed, exit 6, before anything is printed; matrix file
// errors carry file:line.
func TestAllToAllVBadEnv(t *testing.T) {
	good := writeMatrix(t, matrixText)
	ragged := writeMatrix(t, "1 2 3\n4 5 6\n7 8\n")
	word := writeMatrix(t, "1 2\n3 lots\n")
	b1K := []string{"-t", "3", "-b", "1K", "-e", "1K"}
	for _, tt := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"spread above 1", []string{envSpread + "=1.5"}, nil, []string{envSpread, `"1.5"`, "from 0", "to 1"}},
		{"spread text", []string{envSpread + "=wide"}, nil, []string{envSpread, `"wide"`}},
		{"negative scale", []string{envMatrixFile + "=" + good, envMatrixScale + "=-1"}, b1K, []string{envMatrixScale, `"-1"`, ">= 0"}},
		{"scale without file", []string{envMatrixScale + "=2"}, nil, []string{envMatrixScale, "without " + envMatrixFile}},
		{"spread with file", []string{envMatrixFile + "=" + good, envSpread + "=0"}, b1K, []string{envSpread, envMatrixFile, "unset one"}},
		{"summary", []string{envPrintSummary + "=yes"}, nil, []string{envPrintSummary, `"yes"`, "0 (off)"}},
		{"empty file", []string{envMatrixFile + "="}, nil, []string{envMatrixFile, "is empty"}},
		{"missing file", []string{envMatrixFile + "=/no/such/traffic.txt"}, b1K, []string{envMatrixFile, "/no/such/traffic.txt", "no such file"}},
		{"ragged row", []string{envMatrixFile + "=" + ragged}, b1K, []string{envMatrixFile, ragged + ":3:", "a row of 2, want 3 values as on line 1"}},
		{"not a number", []string{envMatrixFile + "=" + word}, b1K, []string{word + ":2:", "column 2", `"lots"`, ">= 0"}},
		{"sweep with file", []string{envMatrixFile + "=" + good}, []string{"-t", "3", "-b", "1K", "-e", "2K"}, []string{"-b/--minbytes 1024", "-e/--maxbytes 2048", "same size"}},
		{"too few ranks in file", []string{envMatrixFile + "=" + good}, []string{"-t", "4", "-b", "1K", "-e", "1K"}, []string{"3x3 matrix for 4 ranks", "at least 4"}},
		{"-e below matrix", []string{envMatrixFile + "=" + good}, []string{"-t", "3", "-b", "512", "-e", "512"}, []string{"-e/--maxbytes 512", "672 bytes", ">= 672"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"cc-perf", "alltoallv"}, tt.args...)
			checkOneLineError(t, runCmd(t, tt.env, args...), 6, tt.want)
		})
	}
	// The knobs are alltoallv's: alltoall ignores them, as nccl-tests' does.
	if r := runCmd(t, []string{envSpread + "=7"}, "cc-perf", "alltoall", "-t", "2", "-b", "1K", "-e", "1K", "-n", "1"); r.code != 0 {
		t.Errorf("alltoall with %s=7: exit %d, %q", envSpread, r.code, r.stderr)
	}
}
