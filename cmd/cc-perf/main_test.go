package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/report"
	"github.com/seed-760dd1f1/cc/cmd/internal/cli"
	"github.com/seed-760dd1f1/cc/hw"
	"github.com/seed-760dd1f1/cc/runtime/bootstrap"
	"go.uber.org/goleak"
)

// TestMain runs the tests, or, in a process startProc started, cc-perf.
func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(cli.Main(run))
	}
	goleak.VerifyTestMain(m)
}

// baseEnv is a clean environment: no launcher, no knobs.
var baseEnv = []string{"PATH=/usr/bin:/bin", "HOME=/tmp"}

type result struct {
	code           int
	stdout, stderr string
}

func runCmd(t *testing.T, env []string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, append(append([]string(nil), baseEnv...), env...), &out, &errb)
	return result{code, out.String(), errb.String()}
}

// TestBadInput runs each bad input of the issue (and a few more): a one-line
// error naming the flag, its value and what is allowed, a non-zero exit,
// nothing on stdout and no output file.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		env  []string
		args []string
		code int
		want []string // substrings of the one-line error
	}{
		{"bad size", nil, []string{"all_reduce", "-b", "1X"}, 6, []string{"-b, --minbytes", `"1X"`, "K, M or G"}},
		{"min above max", nil, []string{"all_reduce", "-b", "2G", "-e", "1G"}, 6, []string{"-b/--minbytes 2147483648", "-e/--maxbytes 1073741824"}},
		{"bad type", nil, []string{"all_reduce", "-d", "float7"}, 6, []string{"-d, --datatype", `"float7"`, "bfloat16", "or all"}},
		{"bad op", nil, []string{"all_reduce", "-o", "avgg"}, 6, []string{"-o, --op", `"avgg"`, "premulsum", "or all"}},
		{"root out of range", nil, []string{"broadcast", "-t", "4", "-r", "9", "-b", "8", "-e", "8"}, 6, []string{"-r/--root 9 with 4 ranks", "0..3"}},
		{"zero iters", nil, []string{"all_reduce", "-n", "0"}, 6, []string{"-n, --iters", `"0"`, "1 or more"}},
		{"endless sweep", nil, []string{"all_reduce", "-b", "8", "-e", "64", "-f", "0", "-i", "0"}, 6, []string{"-i/--stepbytes 0", "-f/--stepfactor 0"}},
		{"unwritable -J", nil, []string{"all_reduce", "-b", "8", "-e", "8", "-J", filepath.Join(dir, "no", "such", "dir", "r.json")}, 6, []string{"-J/--output_file", "r.json"}},
		{"not a number", nil, []string{"all_reduce", "-t", "two"}, 6, []string{"-t, --nthreads", `"two"`}},
		{"unknown flag", nil, []string{"all_reduce", "--bogus"}, 6, []string{"bogus"}},
		{"unknown collective", nil, []string{"allreduce"}, 6, []string{`"allreduce"`, "all_reduce"}},
		{"no collective", nil, []string{}, 6, []string{"missing collective"}},
		{"stray argument", nil, []string{"all_reduce", "extra"}, 6, []string{`"extra"`}},
		{"cudagraph", nil, []string{"all_reduce", "-G", "4"}, 6, []string{"-G/--cudagraph 4", "use 0"}},
		{"stream null", nil, []string{"all_reduce", "-y", "1"}, 6, []string{"-y/--stream_null 1"}},
		{"register", nil, []string{"all_reduce", "-R", "2"}, 6, []string{"-R/--local_register 2"}},
		{"device impl", nil, []string{"all_reduce", "-D", "1"}, 6, []string{"-D/--device_implementation 1"}},
		{"device ctas", nil, []string{"all_reduce", "-V", "8"}, 6, []string{"-V/--device_cta_count 8", "use 16"}},
		{"cta policy", nil, []string{"all_reduce", "-x", "1"}, 6, []string{"-x/--cta_policy 1", "use 0", "-Z"}},
		{"cta policy 2", nil, []string{"all_reduce", "-x", "2"}, 6, []string{"-x/--cta_policy 2"}},
		{"hypercube ranks", nil, []string{"hypercube", "-t", "3", "-b", "8", "-e", "8"}, 6, []string{"power-of-two", "3"}},
		{"legacy with -I", nil, []string{"all_reduce", "--legacy-format", "-I", "1"}, 6, []string{"--legacy-format", "-I"}},
		{"skip everything", nil, []string{"all_reduce", "-I", "1", "-K", "20"}, 6, []string{"-K/--per_iter_skip 20", "-n"}},
		{"output format", nil, []string{"all_reduce", "-Z", "xml", "-J", "r.xml"}, 6, []string{`"xml"`, "json, csv"}},
		{"output extension", nil, []string{"all_reduce", "-J", "r.txt"}, 6, []string{`"r.txt"`, ".json or .csv"}},
		{"env flag", []string{"CC_PERF_ITERS=abc"}, []string{"all_reduce"}, 6, []string{"CC_PERF_ITERS", `"abc"`}},
		{"min bw", []string{"NCCL_TESTS_MIN_BW=fast"}, []string{"all_reduce"}, 6, []string{"NCCL_TESTS_MIN_BW", `"fast"`}},
		{"negative min bw", []string{"NCCL_TESTS_MIN_BW=-2"}, []string{"all_reduce"}, 6, []string{"NCCL_TESTS_MIN_BW", `"-2"`, "-1 for no check"}},
		{"split", []string{"NCCL_TESTS_SPLIT=MOD -2"}, []string{"all_reduce"}, 6, []string{"NCCL_TESTS_SPLIT", `"MOD -2"`, "want a value >= 0"}},
		{"bad knob", []string{"NCCL_PROTO=bogus"}, []string{"all_reduce", "-b", "8", "-e", "8"}, 6, []string{"NCCL_PROTO"}},
		{"mpirun without a root", []string{"OMPI_COMM_WORLD_RANK=0", "OMPI_COMM_WORLD_SIZE=2"}, []string{"all_reduce", "-b", "8", "-e", "8"}, 6, []string{"NCCL_COMM_ID"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkOneLineError(t, runCmd(t, tt.env, append([]string{"cc-perf"}, tt.args...)...), tt.code, tt.want)
		})
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files left behind: %v", entries)
	}
}

// checkOneLineError checks a run that must fail with exit code: one line
// on stderr starting with "cc-perf: " and containing every want, nothing
// on stdout.
func checkOneLineError(t *testing.T, r result, code int, want []string) {
	t.Helper()
	if r.code != code {
		t.Errorf("exit %d, want %d; stderr %q", r.code, code, r.stderr)
	}
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "cc-perf: ") {
		t.Errorf("stderr %q, want one line starting with cc-perf:", r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr %q does not contain %q", r.stderr, w)
		}
	}
	if r.stdout != "" {
		t.Errorf("stdout %q, want nothing", r.stdout)
	}
}

func TestHelp(t *testing.T) {
	r := runCmd(t, nil, "cc-perf", "all_reduce", "-h")
	if r.code != 0 {
		t.Fatalf("-h exit %d, stderr %q", r.code, r.stderr)
	}
	for _, flag := range []string{"-t, --nthreads", "-g, --ngpus", "-b, --minbytes", "-e, --maxbytes", "-i, --stepbytes", "-f, --stepfactor",
		"-n, --iters", "-m, --agg_iters", "-w, --warmup_iters", "-N, --run_cycles", "-p, --parallel_init", "-c, --check", "-o, --op",
		"-d, --datatype", "-r, --root", "-z, --blocking", "-y, --stream_null", "-T, --timeout", "-G, --cudagraph", "-C, --report_cputime",
		"-S, --report_timestamps", "-J, --output_file", "-a, --average", "-R, --local_register", "-x, --cta_policy",
		"-D, --device_implementation", "-V, --device_cta_count", "-M, --memory", "-u, --unalign", "-I, --per_iter_timing",
		"-K, --per_iter_skip", "-Z, --rccl_output_format", "-X, --rccl_output_file", "--legacy-format", "Exit status"} {
		if !strings.Contains(r.stdout, flag) {
			t.Errorf("help does not list %q", flag)
		}
	}
}

// table is a parsed nccl-tests table.
type table struct {
	comments []string
	rows     [][]string
}

func parseTable(t *testing.T, out string) table {
	t.Helper()
	var tb table
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		switch {
		case strings.HasPrefix(l, "#"):
			tb.comments = append(tb.comments, l)
		case strings.TrimSpace(l) == "":
		default:
			tb.rows = append(tb.rows, strings.Fields(l))
		}
	}
	return tb
}

// TestEveryCollective runs every collective on 2 ranks of the real runtime
// and checks each data row: column count, #wrong 0 (N/A where nccl-tests
// prints it) and busbw = algbw x the collective's factor.
func TestEveryCollective(t *testing.T) {
	for _, c := range bench.Collectives {
		args := []string{"cc-perf", c.Name, "-t", "2", "-b", "8", "-e", "64K", "-f", "16", "-n", "2", "-w", "1"}
		r := runCmd(t, nil, args...)
		if r.code != 0 {
			t.Fatalf("%s: exit %d, stderr %q\n%s", c.Name, r.code, r.stderr, r.stdout)
		}
		tb := parseTable(t, r.stdout)
		if len(tb.rows) != 4 { // 8, 128, 2K, 32K
			t.Fatalf("%s: %d rows, want 4:\n%s", c.Name, len(tb.rows), r.stdout)
		}
		cols := 13
		if c.OpColumn("sum") == "" {
			cols = 12
		}
		factor := c.BusFactor(2)
		for _, f := range tb.rows {
			if len(f) != cols {
				t.Fatalf("%s: %d columns in %q, want %d", c.Name, len(f), f, cols)
			}
			oopWrong, ipWrong := f[cols-5], f[cols-1]
			wantIP := "0"
			if !c.InPlaceChecked {
				wantIP = "N/A"
			}
			if oopWrong != "0" || ipWrong != wantIP {
				t.Errorf("%s: #wrong %s / %s in %q, want 0 / %s", c.Name, oopWrong, ipWrong, f, wantIP)
			}
			for _, i := range []int{cols - 7, cols - 3} {
				alg, _ := strconv.ParseFloat(f[i], 64)
				bus, _ := strconv.ParseFloat(f[i+1], 64)
				if math.Abs(bus-alg*factor) > 0.0051*(1+factor)+1e-3*bus {
					t.Errorf("%s: busbw %v != algbw %v x %v", c.Name, bus, alg, factor)
				}
			}
		}
		want := []string{
			"# Collective test starting: " + c.Name + "_perf",
			"# Out of bounds values : 0 OK",
			"# Collective test concluded: " + c.Name + "_perf",
		}
		for _, w := range want {
			if !strings.Contains(r.stdout, w+"\n") {
				t.Errorf("%s: output lacks %q", c.Name, w)
			}
		}
		if n := strings.Count(r.stdout, "#  Rank "); n != 2 {
			t.Errorf("%s: %d device lines, want 2", c.Name, n)
		}
	}
}

// TestAllTypesAndOps covers -d all -o all on 3 ranks (not a power of two).
func TestAllTypesAndOps(t *testing.T) {
	for _, name := range []string{"all_reduce", "reduce_scatter", "reduce"} {
		r := runCmd(t, nil, "cc-perf", name, "-t", "3", "-b", "4K", "-e", "4K", "-n", "1", "-w", "0", "-d", "all", "-o", "all", "-r", "2")
		if r.code != 0 {
			t.Fatalf("%s: exit %d, stderr %q\n%s", name, r.code, r.stderr, r.stdout)
		}
		tb := parseTable(t, r.stdout)
		if len(tb.rows) != 12*6 {
			t.Fatalf("%s: %d rows, want 72", name, len(tb.rows))
		}
		seen := map[string]bool{}
		for _, f := range tb.rows {
			seen[f[2]+"/"+f[3]] = true
			if f[8] != "0" || f[12] != "0" {
				t.Errorf("%s: wrong data in %q", name, f)
			}
		}
		if len(seen) != 72 || !seen["f8e5m2/mulsum"] || !seen["int8/avg"] {
			t.Errorf("%s: %d type/op combinations: %v", name, len(seen), seen)
		}
	}
}

// TestJSONMatchesTable checks that -J writes a parsable nccl-tests JSON
// document carrying the table's numbers.
func TestJSONMatchesTable(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.json")
	args := []string{"cc-perf", "reduce_scatter", "-t", "2", "-b", "1K", "-e", "64K", "-f", "4", "-n", "3", "-J", path}
	r := runCmd(t, nil, args...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.HasPrefix(r.stdout, "# Writing JSON output to "+path+"\n") {
		t.Errorf("stdout starts %q", r.stdout[:min(80, len(r.stdout))])
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Version int      `json:"version"`
		Args    []string `json:"args"`
		Config  struct {
			NThreads int              `json:"nthreads"`
			Devices  []map[string]any `json:"devices"`
		} `json:"config"`
		Results []struct {
			Size       int64              `json:"size"`
			Count      int64              `json:"count"`
			Type       string             `json:"type"`
			RedOp      string             `json:"redop"`
			OutOfPlace map[string]float64 `json:"out_of_place"`
			InPlace    map[string]float64 `json:"in_place"`
		} `json:"results"`
		AvgBusBW struct {
			Bandwidth float64 `json:"bandwidth"`
		} `json:"average_bus_bandwidth"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("-J file does not parse: %v\n%s", err, b)
	}
	tb := parseTable(t, r.stdout)
	if doc.Version != 3 || doc.Config.NThreads != 2 || len(doc.Config.Devices) != 2 || len(doc.Results) != len(tb.rows) || len(doc.Args) != len(args) {
		t.Fatalf("document %+v for %d rows", doc, len(tb.rows))
	}
	near := func(printed string, v float64) bool {
		p, err := strconv.ParseFloat(printed, 64)
		return err == nil && math.Abs(p-v) <= 0.0051+1e-3*math.Abs(v)
	}
	for i, f := range tb.rows {
		res := doc.Results[i]
		if strconv.FormatInt(res.Size, 10) != f[0] || strconv.FormatInt(res.Count, 10) != f[1] || res.Type != f[2] || res.RedOp != f[3] {
			t.Errorf("row %d: JSON %+v, table %q", i, res, f)
		}
		for h, half := range []map[string]float64{res.OutOfPlace, res.InPlace} {
			for k, key := range []string{"time", "alg_bw", "bus_bw", "nwrong"} {
				if !near(f[5+4*h+k], half[key]) {
					t.Errorf("row %d %s: JSON %v, table %s", i, key, half[key], f[5+4*h+k])
				}
			}
		}
	}
	var avg string
	for _, c := range tb.comments {
		if strings.HasPrefix(c, "# Avg bus bandwidth") {
			avg = strings.Fields(c)[5]
		}
	}
	if !near(avg, doc.AvgBusBW.Bandwidth) {
		t.Errorf("average bus bandwidth: JSON %v, table %s", doc.AvgBusBW.Bandwidth, avg)
	}

	// A second run never overwrites: it writes r.json.0.
	if r := runCmd(t, nil, "cc-perf", "all_gather", "-b", "8", "-e", "8", "-J", path); r.code != 0 || !strings.Contains(r.stdout, path+".0") {
		t.Errorf("second run: exit %d, stdout %q", r.code, r.stdout)
	}
	if b2, _ := os.ReadFile(path); !bytes.Equal(b, b2) {
		t.Error("the first JSON file changed")
	}
}

func TestCSVOutput(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.csv")
	r := runCmd(t, nil, "cc-perf", "alltoall", "-t", "2", "-b", "1K", "-e", "1K", "-Z", "csv", "-x", path)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3 || lines[0]+"\n" != report.CSVHeader {
		t.Fatalf("CSV:\n%s", b)
	}
	for _, l := range lines[1:] {
		f := strings.Split(l, ", ")
		if len(f) != 13 || f[0] != "alltoall" || f[1] != "1" || f[2] != "2" || f[3] != "2" {
			t.Errorf("CSV row %q", l)
		}
	}
	if !strings.HasSuffix(lines[2], "N/A") {
		t.Errorf("in-place alltoall row %q, want #wrong N/A", lines[2])
	}
}

// TestSymlinkName runs the binary as nccl-tests' all_gather_perf (under
// the names a symlink may have), and the alias subcommand: the header and
// footer print the invoked name, as nccl-tests prints basename(argv[0]).
func TestSymlinkName(t *testing.T) {
	for _, tt := range []struct {
		args []string
		name string
	}{
		{[]string{"/opt/nccl-tests/build/all_gather_perf_mpi", "-b", "8", "-e", "8"}, "all_gather_perf_mpi"},
		{[]string{"bin/all_gather_perf", "-b", "8", "-e", "8"}, "all_gather_perf"},
		{[]string{"cc-perf", "all_gather_perf", "-b", "8", "-e", "8"}, "all_gather_perf"},
	} {
		r := runCmd(t, nil, tt.args...)
		if r.code != 0 || !strings.Contains(r.stdout, "# Collective test starting: "+tt.name+"\n") ||
			!strings.Contains(r.stdout, "# Collective test concluded: "+tt.name+"\n") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", tt.args, r.code, r.stdout, r.stderr)
		}
	}
}

// runWith runs args like runCmd, after hook has adjusted the process's env
// (hostname, readFile).
func runWith(t *testing.T, hook func(*env), environ []string, args ...string) result {
	t.Helper()
	var out, errb bytes.Buffer
	e := newEnv(args, append(append([]string(nil), baseEnv...), environ...), &out, &errb)
	hook(e)
	code := execute(context.Background(), e)
	return result{code, out.String(), errb.String()}
}

// TestHostnameCut: a host named node01.example.com is node01 in the device
// lines and in the -J file's hostname, as nccl-tests prints and records it.
func TestHostnameCut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	r := runWith(t, func(e *env) { e.hostname = func() (string, error) { return "node01.example.com", nil } },
		nil, "cc-perf", "all_gather", "-t", "2", "-b", "1K", "-e", "1K", "-n", "1", "-J", path)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if n := strings.Count(r.stdout, " on     node01 device "); n != 2 {
		t.Errorf("%d device lines on node01, want 2:\n%s", n, r.stdout)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Config struct {
			Devices []struct {
				Hostname string `json:"hostname"`
			} `json:"devices"`
		} `json:"config"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Config.Devices) != 2 {
		t.Fatalf("%d devices in %s", len(doc.Config.Devices), b)
	}
	for _, d := range doc.Config.Devices {
		if d.Hostname != "node01" {
			t.Errorf("JSON hostname %q, want node01", d.Hostname)
		}
	}
}

// TestGPUOnlyDefaults: command lines copied from GPU runs that spell out
// nccl-tests' defaults of the GPU-only flags run; -x with a file name is
// still rccl-tests' output file.
func TestGPUOnlyDefaults(t *testing.T) {
	base := []string{"cc-perf", "all_reduce", "-t", "2", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0"}
	for _, extra := range [][]string{
		{"-y", "0", "-G", "0", "-R", "0", "-D", "0", "-V", "16", "-x", "0"},
		{"--device_cta_count", "16", "--cta_policy", "-1"},
	} {
		if r := runCmd(t, nil, append(base, extra...)...); r.code != 0 {
			t.Errorf("%v: exit %d, stderr %q", extra, r.code, r.stderr)
		}
	}
	path := filepath.Join(t.TempDir(), "r.json")
	r := runCmd(t, nil, append(base, "-V", "16", "-x", path)...)
	if r.code != 0 || !strings.HasPrefix(r.stdout, "# Writing JSON output to "+path+"\n") {
		t.Errorf("-x %s: exit %d, stdout %q, stderr %q", path, r.code, r.stdout, r.stderr)
	}
	if _, err := os.Stat(path); err != nil {
		t.Error(err)
	}
}

// withMemory makes a process see avail bytes of available memory and no
// cgroup limit.
func withMemory(avail int64) func(*env) {
	return func(e *env) {
		e.readFile = func(path string) ([]byte, error) {
			if path == "/proc/meminfo" {
				return fmt.Appendf(nil, "MemTotal: 99999999 kB\nMemAvailable: %d kB\n", avail>>10), nil
			}
			if strings.HasPrefix(path, "/sys/fs/cgroup/") {
				return nil, os.ErrNotExist
			}
			return os.ReadFile(path)
		}
	}
}

// TestMaxBytesReduced: a -e the memory cannot hold is lowered as nccl-tests
// does, with its line between the device list and the column header, and
// the rest of the sweep runs. 2 MiB available, less a 16th, for 2 ranks of
// all_reduce -c 1 (3 bytes per byte of -e, plus 64 KiB): -e 305834.
func TestMaxBytesReduced(t *testing.T) {
	for _, tt := range []struct {
		min   string
		sizes []string
	}{
		{"128K", []string{"131072", "262144"}},
		{"512K", []string{"305832"}}, // -b is lowered too; the count rounds down to whole floats
	} {
		r := runWith(t, withMemory(2<<20), nil, "cc-perf", "all_reduce", "-t", "2", "-b", tt.min, "-e", "1G", "-f", "2", "-n", "1", "-w", "0")
		if r.code != 0 {
			t.Fatalf("-b %s: exit %d, stderr %q", tt.min, r.code, r.stderr)
		}
		want := fmt.Sprintf("#  Rank  1 Group  0 Pid %6d on", os.Getpid())
		i := strings.Index(r.stdout, want)
		reducing := "\n#\n# Reducing maxBytes to 305834 due to memory limitation\n#\n#    "
		if i < 0 || !strings.HasPrefix(r.stdout[i+strings.Index(r.stdout[i:], "\n"):], reducing) {
			t.Errorf("-b %s: no %q after the device lines:\n%s", tt.min, reducing, r.stdout)
		}
		if !strings.Contains(r.stdout, " maxBytes 1073741824 ") {
			t.Errorf("-b %s: the header does not show -e as given:\n%s", tt.min, r.stdout)
		}
		var sizes []string
		for _, f := range parseTable(t, r.stdout).rows {
			sizes = append(sizes, f[0])
		}
		if fmt.Sprint(sizes) != fmt.Sprint(tt.sizes) {
			t.Errorf("-b %s: sizes %v, want %v", tt.min, sizes, tt.sizes)
		}
	}
}

// TestMaxBytesAgreed: the processes of a job lower -e to what the one with
// the least memory holds, so that they sweep the same sizes.
func TestMaxBytesAgreed(t *testing.T) {
	avail := []int64{64 << 30, 2 << 20} // process 1 has less
	outs := runProcs(t, 2, func(rank int, env []string) result {
		return runWith(t, withMemory(avail[rank]), env, "cc-perf", "all_reduce", "-t", "2", "-b", "128K", "-e", "1G", "-f", "2", "-n", "1", "-w", "0")
	})
	if !strings.Contains(outs[0].stdout, "# Reducing maxBytes to 305834 due to memory limitation\n") ||
		len(parseTable(t, outs[0].stdout).rows) != 2 {
		t.Errorf("process 0 did not lower -e to process 1's 305834:\n%s", outs[0].stdout)
	}
}

// TestRootIgnoredWithoutRoot: collectives without a root accept any -r,
// as nccl-tests does; the rooted ones still check it.
func TestRootIgnoredWithoutRoot(t *testing.T) {
	for _, tt := range []struct {
		coll, root string
		code       int
	}{
		{"all_reduce", "5", 0},
		{"alltoall", "-7", 0},
		{"sendrecv", "bogus", 0},
		{"hypercube", "99", 0},
		{"broadcast", "5", 6},
		{"gather", "bogus", 6},
		{"reduce", "1", 0},
	} {
		r := runCmd(t, nil, "cc-perf", tt.coll, "-t", "2", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0", "-r", tt.root)
		if r.code != tt.code {
			t.Errorf("%s -r %s: exit %d, want %d; stderr %q", tt.coll, tt.root, r.code, tt.code, r.stderr)
		}
		if tt.code != 0 && !strings.Contains(r.stderr, "root") {
			t.Errorf("%s -r %s: stderr %q does not name -r", tt.coll, tt.root, r.stderr)
		}
	}
}

func TestMinBandwidthGate(t *testing.T) {
	r := runCmd(t, []string{"NCCL_TESTS_MIN_BW=1e6"}, "cc-perf", "all_reduce", "-t", "2", "-b", "8", "-e", "8")
	if r.code != 7 || !strings.Contains(r.stdout, "# Avg bus bandwidth    : ") || !strings.Contains(r.stdout, " FAILED\n") {
		t.Errorf("exit %d, stdout %q", r.code, r.stdout)
	}
	// As nccl-tests' atof: empty is 0, a gate every run passes; -1 is no
	// gate (the line ends with a space after the number).
	for _, tt := range []struct{ env, gate string }{
		{"NCCL_TESTS_MIN_BW=0", "OK"},
		{"NCCL_TESTS_MIN_BW=", "OK"},
		{"NCCL_TESTS_MIN_BW= ", "OK"},
		{"NCCL_TESTS_MIN_BW=-1", ""},
	} {
		r = runCmd(t, []string{tt.env}, "cc-perf", "all_reduce", "-t", "2", "-b", "8", "-e", "8")
		_, line, _ := strings.Cut(r.stdout, "# Avg bus bandwidth    : ")
		line, _, _ = strings.Cut(line, "\n")
		if r.code != 0 || !strings.HasSuffix(line, " "+tt.gate) {
			t.Errorf("%s: exit %d, average line %q, want it to end in %q; stderr %q", tt.env, r.code, line, " "+tt.gate, r.stderr)
		}
	}
}

func TestEnvFillsFlags(t *testing.T) {
	r := runCmd(t, []string{"CC_PERF_LEGACY_FORMAT=1", "CC_PERF_ITERS=3", "CC_PERF_MINBYTES=1K"}, "cc-perf", "all_reduce", "-e", "1K")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.Contains(r.stdout, " iters: 3 ") || !strings.Contains(r.stdout, "minBytes 1024 ") {
		t.Errorf("environment not applied:\n%s", r.stdout)
	}
	if !strings.Contains(r.stdout, "  busbw #wrong     time") { // the legacy header
		t.Errorf("CC_PERF_LEGACY_FORMAT=1 did not select the legacy format:\n%s", r.stdout)
	}
}

// TestOptionalLines exercises -z, -p, -I, -K, -S, -C, -M, -N, -m, -a and -u
// together on 2 ranks.
func TestOptionalLines(t *testing.T) {
	r := runCmd(t, nil, "cc-perf", "all_reduce", "-t", "2", "-b", "64", "-e", "256", "-f", "4", "-n", "4",
		"-z", "3", "-p", "1", "-I", "1", "-K", "1", "-S", "1", "-C", "1", "-M", "1", "-N", "2", "-m", "2", "-a", "3", "-u", "1")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, w := range []string{
		"# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes barrier \n",
		"# Per-Iteration Report: wall-clock timing; i_* uses max over ranks; summary skips first 1 iterations \n",
		"# Parallel Init Enabled: ranks create their communicators concurrently \n",
		"cputime", "i_cv%", "timestamp", "# Host memory usage    : Initialization ", "agg iters: 2", "unalign: 1",
	} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("output lacks %q:\n%s", w, r.stdout)
		}
	}
	tb := parseTable(t, r.stdout)
	if len(tb.rows) != 4 { // 2 sizes x 2 cycles
		t.Fatalf("%d rows, want 4", len(tb.rows))
	}
	for _, f := range tb.rows {
		if len(f) != 13+8+2 { // + i_* columns + date and time
			t.Errorf("%d columns in %q", len(f), f)
		}
	}
}

// TestLauncherJoins runs two "processes" (as two concurrent runs with
// torchrun's variables) of two ranks each: they join one 4-rank job, and
// only the process of rank 0 prints.
func TestLauncherJoins(t *testing.T) {
	outs := runProcs(t, 2, func(_ int, env []string) result {
		return runCmd(t, env, "cc-perf", "all_reduce", "-t", "2", "-b", "8", "-e", "4K", "-f", "8", "-n", "2")
	})
	if outs[1].stdout != "" {
		t.Errorf("process 1 printed %q, want nothing", outs[1].stdout)
	}
	tb := parseTable(t, outs[0].stdout)
	if n := strings.Count(outs[0].stdout, "#  Rank "); n != 4 || len(tb.rows) != 4 {
		t.Fatalf("%d device lines and %d rows, want 4 and 4:\n%s", n, len(tb.rows), outs[0].stdout)
	}
	for i := 0; i < 4; i++ {
		if !strings.Contains(outs[0].stdout, fmt.Sprintf("#  Rank %2d Group  0 Pid", i)) {
			t.Errorf("no device line for rank %d", i)
		}
	}
	for _, f := range tb.rows {
		if f[8] != "0" || f[12] != "0" {
			t.Errorf("wrong data: %q", f)
		}
	}
}

// runProcs runs n "processes" of one job at once, each started by run with
// the environment torchrun gives it on this host, and returns their results
// in rank order once every one has exited 0.
func runProcs(t *testing.T, n int, run func(rank int, env []string) result) []result {
	t.Helper()
	root := "MASTER_PORT=" + strconv.Itoa(freePort(t)-1)
	outs := make([]result, n)
	var wg sync.WaitGroup
	for rank := range n {
		wg.Go(func() { outs[rank] = run(rank, torchrunEnv(rank, n, root)) })
	}
	wg.Wait()
	for rank, r := range outs {
		if r.code != 0 {
			t.Fatalf("process %d: exit %d, stderr %q", rank, r.code, r.stderr)
		}
	}
	return outs
}

// torchrunEnv is the environment torchrun gives process rank of n on
// this host, root its MASTER_PORT entry.
func torchrunEnv(rank, n int, root string) []string {
	return []string{"RANK=" + strconv.Itoa(rank), "WORLD_SIZE=" + strconv.Itoa(n),
		"LOCAL_RANK=" + strconv.Itoa(rank), "LOCAL_WORLD_SIZE=" + strconv.Itoa(n), "MASTER_ADDR=127.0.0.1", root}
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestFailedExitCodes(t *testing.T) {
	var out bytes.Buffer
	text := &report.Text{W: &out}
	text.RowStart(bench.Result{Bytes: 8, Count: 2, Type: "float", RedOp: "sum", Root: -1})
	err := failed(&bench.TimeoutError{Rank: 1, Timeout: 5e9, Phase: "all_reduce float sum, 8 bytes, in-place"}, &recorder{text: text})
	if got := cli.Code(err); got != 4 {
		t.Errorf("timeout exit %d, want 4", got)
	}
	if !strings.Contains(out.String(), "-1\n# ") || !strings.Contains(out.String(), ": Test timeout (5s) all_reduce float sum, 8 bytes, in-place\n") {
		t.Errorf("timeout report %q", out.String())
	}
	err = failed(fmt.Errorf("rank 3 aborted: test timeout (5s) on rank 3 during x"), nil)
	if got := cli.Code(err); got != 4 {
		t.Errorf("remote timeout exit %d, want 4", got)
	}
	if got := cli.Code(failed(fmt.Errorf("connection reset"), nil)); got != 3 {
		t.Errorf("runtime failure exit %d, want 3", got)
	}
	if got := cli.Code(failed(&cli.SignalError{Signal: os.Interrupt}, nil)); got != 130 {
		t.Errorf("interrupted exit %d, want 130", got)
	}
}

// TestFailedJoinTimeout: a timeout while joining names, on the table and
// in one line on stderr, the ranks that never joined when the runtime knows
// them (here or in another process), and the runtime's error otherwise.
func TestFailedJoinTimeout(t *testing.T) {
	te := &bench.TimeoutError{Rank: 0, Timeout: 2e9, Phase: joinPhase}
	missing := func(cause error) error {
		me := &bootstrap.MissingError{Addr: "10.0.0.1:29500", NRanks: 4, Err: cause,
			Joined: []bootstrap.RankInfo{{Rank: 0, Host: "a"}, {Rank: 2, Host: "b"}}}
		return errors.Join(fmt.Errorf("rank 0: init: rank 0: %w", me), fmt.Errorf("rank 1: init: rank 1: %w", me))
	}
	const who = "ranks 1,3 of 4 never joined the bootstrap root at 10.0.0.1:29500; joined: 0 (a), 2 (b)"
	for _, tt := range []struct {
		name        string
		err         error
		table, line string
	}{
		{"here", missing(te), "Test timeout (2s) joining the job: " + who, "test timeout (2s) joining the job: " + who},
		{"elsewhere", missing(errors.New("job aborted while joining: rank 2 (host b, pid 7) failed: gave up waiting for every rank to join: test timeout (2s) on rank 2 during joining the job")),
			"Test timeout in another process: " + who, "test timeout in another process: " + who},
		{"no root", fmt.Errorf("rank 1: init: rank 1: could not reach the bootstrap root at 10.0.0.1:29500: dial 10.0.0.1:29500: gave up after 9 attempts: %w (last error: refused)", te),
			"Test timeout (2s) joining the job: rank 1: init: rank 1: could not reach the bootstrap root at 10.0.0.1:29500",
			"rank 1: init: rank 1: could not reach the bootstrap root at 10.0.0.1:29500"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			err := failed(tt.err, &recorder{text: &report.Text{W: &out}})
			if got := cli.Code(err); got != 4 {
				t.Errorf("exit %d, want 4", got)
			}
			if want := "# " + readHostFacts().host + ": " + tt.table; !strings.Contains(out.String(), want) || strings.Count(out.String(), "\n") != 1 {
				t.Errorf("table %q, want one line starting %q", out.String(), want)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, tt.line) || strings.Contains(msg, "\n") {
				t.Errorf("stderr %q, want one line starting %q", msg, tt.line)
			}
		})
	}
}

// TestFailureReport makes every rank fail at init with the same error
// (errors.Join puts one per line): stdout stays parseable, with only '#'
// lines after the header and the message said once for the three ranks,
// stderr is one line saying it once, and the -J file ends with it.
func TestFailureReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	r := runCmd(t, []string{"NCCL_SOCKET_IFNAME=nosuchif0"}, "cc-perf", "all_reduce", "-t", "3", "-b", "1K", "-e", "1K", "-n", "2", "-J", path)
	if r.code != 3 {
		t.Fatalf("exit %d, want 3; stderr %q", r.code, r.stderr)
	}
	checkJSONFile(t, path, 0, ": Test failure: ranks 0-2: init: NCCL_SOCKET_IFNAME=")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	header := 0 // the lines of Text.Start, up to its closing "#"
	for header < len(lines) && lines[header] != "#" {
		header++
	}
	seen := map[string]bool{}
	for _, l := range lines[header+1:] {
		if !strings.HasPrefix(l, "#") {
			t.Errorf("stdout line %q is not a '#' line", l)
		}
		if seen[l] && l != "#" {
			t.Errorf("stdout line %q repeated", l)
		}
		seen[l] = true
	}
	if n := strings.Count(r.stdout, "Test failure: ranks 0-2: init: NCCL_SOCKET_IFNAME="); n != 1 {
		t.Errorf("%d failure lines naming ranks 0-2, want 1:\n%s", n, r.stdout)
	}
	if n := strings.Count(r.stdout, "nosuchif0"); n != 1 {
		t.Errorf("the message appears %d times on stdout, want 1:\n%s", n, r.stdout)
	}
	if !strings.HasPrefix(r.stderr, "cc-perf: ranks 0-2: init: ") || strings.Count(r.stderr, "\n") != 1 || strings.Count(r.stderr, "nosuchif0") != 1 {
		t.Errorf("stderr %q, want one line saying the message once", r.stderr)
	}
}

func TestDistinctLines(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want []string
	}{
		{errors.New("connection reset"), []string{"connection reset"}},
		{errors.Join(errors.New("rank 0: init: x"), errors.New("rank 1: init: x"), errors.New("rank 2: init: x")), []string{"ranks 0-2: init: x"}},
		{errors.Join(errors.New("rank 3: x"), errors.New("rank 2: y"), errors.New("rank 0: x"), errors.New("rank 1: x"), errors.New("rank 5: x")),
			[]string{"ranks 0-1,3,5: x", "rank 2: y"}},
		{errors.Join(errors.New("rank 4: send: a\nrank 4: recv: b"), errors.New("rank 4: send: a")), []string{"rank 4: send: a", "rank 4: recv: b"}},
		{errors.Join(errors.New("x"), errors.New("rank 1: x"), errors.New("x")), []string{"x", "rank 1: x"}},
		{errors.New("rank 1 aborted: y\n\nrank 1 aborted: y"), []string{"rank 1 aborted: y"}},
	} {
		if got := distinctLines(tt.err); fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tt.want) {
			t.Errorf("distinctLines(%q) = %q, want %q", tt.err, got, tt.want)
		}
	}
}

func TestHostFacts(t *testing.T) {
	if got := hw.CPUList([]int{0, 1, 2, 3, 8, 10, 11}).String(); got != "0-3,8,10-11" {
		t.Errorf("CPU list = %q", got)
	}
	if got := cpuModel([]byte("processor\t: 0\nmodel name\t: AMD  EPYC 7B13 64-Core\nflags : x\n")); got != "AMD EPYC 7B13 64-Core" {
		t.Errorf("cpuModel = %q", got)
	}
	files := map[string]string{
		"/proc/meminfo":                 "MemTotal: 100 kB\nMemAvailable:    2048 kB\n",
		"/sys/fs/cgroup/memory.max":     "1048576\n",
		"/sys/fs/cgroup/memory.current": "524288\n",
	}
	read := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, os.ErrNotExist
	}
	if got, ok := availableMemory(read); !ok || got != 524288 {
		t.Errorf("availableMemory = %d, %v; want the cgroup's 524288", got, ok)
	}
	files["/sys/fs/cgroup/memory.max"] = "max\n"
	if got, ok := availableMemory(read); !ok || got != 2048<<10 {
		t.Errorf("availableMemory = %d, %v; want MemAvailable", got, ok)
	}
}

// TestMemoryReport: -M's Initialization is what creating the communicators
// kept (live heap, stacks, shared-memory segments), never a meaningless 0,
// even when the heap already has room for them, as it often has in a real
// run (the growth of memory obtained from the OS was 0 then).
func TestMemoryReport(t *testing.T) {
	growHeap(256 << 20)
	r := runCmd(t, nil, "cc-perf", "all_reduce", "-t", "2", "-b", "1K", "-e", "1K", "-n", "1", "-w", "0", "-M", "1")
	_, line, _ := strings.Cut(r.stdout, "# Host memory usage    : Initialization ")
	init, _, _ := strings.Cut(line, " |")
	if r.code != 0 || init == "" || init == "0.00 B" {
		t.Errorf("exit %d, Initialization %q, want a size > 0:\n%s", r.code, init, r.stdout)
	}
}

// growHeap makes the heap n bytes larger, then leaves that room free.
func growHeap(n int) {
	b := make([]byte, n)
	b[n-1] = 1
	runtime.KeepAlive(b)
	runtime.GC()
}

func TestSharedMapped(t *testing.T) {
	maps := `55d0c0a00000-55d0c0a21000 rw-p 00000000 00:00 0                          [heap]
7f0000000000-7f0000100000 rw-s 00000000 00:1a 4242                       /dev/shm/cc-job (deleted)
7f0000200000-7f0000300000 rw-s 00000000 00:1a 4242                       /dev/shm/cc-job (deleted)
7f0000400000-7f0000401000 rw-s 00000000 00:01 0                          /dev/zero (deleted)
7f0000500000-7f0000507000 r--s 00000000 fe:00 325737                     /usr/lib/gconv/gconv-modules.cache
`
	// The segment once (1 MiB, mapped by two ranks) + 4 KiB anonymous; not
	// the heap, not the read-only file.
	if got, want := sharedMapped([]byte(maps)), int64(1<<20+4096); got != want {
		t.Errorf("sharedMapped = %d, want %d", got, want)
	}
}

func TestRedact(t *testing.T) {
	got := redact([]string{"HOME=/root", "CC_JOB_SECRET=abc", "GITHUB_TOKEN=x", "AWS_SECRET_ACCESS_KEY=y", "SSH_KEY=z", "NCCL_ALGO=ring"})
	want := []string{"HOME=/root", "CC_JOB_SECRET=<redacted>", "GITHUB_TOKEN=<redacted>", "AWS_SECRET_ACCESS_KEY=<redacted>", "SSH_KEY=<redacted>", "NCCL_ALGO=ring"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("redact = %v, want %v", got, want)
	}
}

// TestShowAlgo runs -A on the real runtime: three more columns naming an
// algorithm and protocol the runtime has and a channel count; N/A for a
// collective of point-to-point calls.
func TestShowAlgo(t *testing.T) {
	r := runCmd(t, nil, "cc-perf", "all_reduce", "-t", "2", "-b", "8", "-e", "64K", "-f", "16", "-n", "2", "-A", "1")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	tb := parseTable(t, r.stdout)
	if len(tb.rows) != 4 || !strings.Contains(r.stdout, "#wrong      algo   proto  nchannels \n") {
		t.Fatalf("want 4 rows under an algo proto nchannels header:\n%s", r.stdout)
	}
	for _, f := range tb.rows {
		if len(f) != 16 || !strings.Contains(" Ring Tree CTRing OneShot ", " "+f[13]+" ") || !strings.Contains(" LL LL128 Simple ", " "+f[14]+" ") {
			t.Errorf("row %q: want 16 fields ending in algo, proto, channels", f)
		}
		if ch, err := strconv.Atoi(f[15]); err != nil || ch < 1 {
			t.Errorf("row %q: channels %q", f, f[15])
		}
	}
	r = runCmd(t, nil, "cc-perf", "alltoall", "-t", "2", "-b", "1K", "-e", "1K", "-n", "1", "-A", "1")
	if tb := parseTable(t, r.stdout); r.code != 0 || len(tb.rows) != 1 || strings.Join(tb.rows[0][13:], " ") != "N/A N/A N/A" {
		t.Errorf("alltoall -A 1: exit %d, rows %q", r.code, tb.rows)
	}
}
