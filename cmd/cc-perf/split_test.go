package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestSplitRule reads the split variables as nccl-tests does (common.cu,
// run()): the colors of ranks 0..7, or the one-line error of a value
// nccl-tests would misread.
func TestSplitRule(t *testing.T) {
	for _, tt := range []struct {
		env    []string
		colors []int  // nil: one group (no split)
		err    string // part of the error, "" for none
	}{
		{nil, nil, ""},
		{[]string{"NCCL_TESTS_SPLIT=AND 1"}, []int{0, 1, 0, 1, 0, 1, 0, 1}, ""},
		{[]string{"NCCL_TESTS_SPLIT=and 0x6"}, []int{0, 0, 2, 2, 4, 4, 6, 6}, ""},
		{[]string{"NCCL_TESTS_SPLIT=&3"}, []int{0, 1, 2, 3, 0, 1, 2, 3}, ""},
		{[]string{"NCCL_TESTS_SPLIT=OR 0b100"}, []int{4, 5, 6, 7, 4, 5, 6, 7}, ""},
		{[]string{"NCCL_TESTS_SPLIT=| 1"}, []int{1, 1, 3, 3, 5, 5, 7, 7}, ""},
		{[]string{"NCCL_TESTS_SPLIT=MOD 3"}, []int{0, 1, 2, 0, 1, 2, 0, 1}, ""},
		{[]string{"NCCL_TESTS_SPLIT=%010"}, []int{0, 1, 2, 3, 4, 5, 6, 7}, ""}, // 010 is octal 8
		{[]string{"NCCL_TESTS_SPLIT= Div 4 "}, []int{0, 0, 0, 0, 1, 1, 1, 1}, ""},
		{[]string{"NCCL_TESTS_SPLIT=/2"}, []int{0, 0, 1, 1, 2, 2, 3, 3}, ""},
		{[]string{"NCCL_TESTS_SPLIT_MASK=0x3"}, []int{0, 1, 2, 3, 0, 1, 2, 3}, ""},
		{[]string{"NCCL_TESTS_SPLIT_MASK=6"}, []int{0, 0, 2, 2, 4, 4, 6, 6}, ""},
		{[]string{"NCCL_TESTS_SPLIT_MASK=0x1", "NCCL_TESTS_SPLIT=DIV 4"}, []int{0, 1, 0, 1, 0, 1, 0, 1}, ""}, // the mask wins
		{[]string{"NCCL_TESTS_SPLIT="}, nil, ""},
		{[]string{"NCCL_TESTS_SPLIT_MASK="}, nil, ""},
		{[]string{"NCCL_TESTS_SPLIT=XOR 1"}, nil, `NCCL_TESTS_SPLIT="XOR 1": want "<op> <value>" with op AND, OR, MOD or DIV`},
		{[]string{"NCCL_TESTS_SPLIT=AND"}, nil, `NCCL_TESTS_SPLIT="AND": "" is not a number`},
		{[]string{"NCCL_TESTS_SPLIT=AND 1x"}, nil, `"1x" is not a number: want a value >= 0`},
		{[]string{"NCCL_TESTS_SPLIT=AND -1"}, nil, `"-1" is not a number`},
		{[]string{"NCCL_TESTS_SPLIT=OR 0x80000000"}, nil, `"0x80000000" is not a number`},
		{[]string{"NCCL_TESTS_SPLIT=OR 09"}, nil, `"09" is not a number`},
		{[]string{"NCCL_TESTS_SPLIT=MOD 0"}, nil, `NCCL_TESTS_SPLIT="MOD 0": MOD by 0: want a value >= 1`},
		{[]string{"NCCL_TESTS_SPLIT=/0x0"}, nil, "DIV by 0"},
		{[]string{"NCCL_TESTS_SPLIT_MASK=0xZZ"}, nil, `NCCL_TESTS_SPLIT_MASK="0xZZ": want a hexadecimal mask such as 0x3`},
		{[]string{"NCCL_TESTS_SPLIT_MASK=-1"}, nil, `NCCL_TESTS_SPLIT_MASK="-1"`},
	} {
		env := map[string]string{}
		for _, kv := range tt.env {
			k, v, _ := strings.Cut(kv, "=")
			env[k] = v
		}
		rule, err := parseSplit(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
		switch {
		case tt.err != "":
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%q: error %v, want one containing %q", tt.env, err, tt.err)
			}
		case err != nil:
			t.Errorf("%q: %v", tt.env, err)
		case (rule == nil) != (tt.colors == nil):
			t.Errorf("%q: rule %+v, want colors %v", tt.env, rule, tt.colors)
		case rule != nil:
			var got []int
			for r := range 8 {
				got = append(got, rule.color(r))
			}
			if !slices.Equal(got, tt.colors) {
				t.Errorf("%q: colors %v, want %v", tt.env, got, tt.colors)
			}
		}
	}
}

// TestSplitBadInput: values nccl-tests would misread and groups that
// cannot run the asked collective are one-line errors, exit 6.
func TestSplitBadInput(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"unknown op", []string{"NCCL_TESTS_SPLIT=XOR 1"}, []string{"all_reduce"}, []string{"NCCL_TESTS_SPLIT", `"XOR 1"`, "AND, OR, MOD or DIV"}},
		{"modulo 0", []string{"NCCL_TESTS_SPLIT=MOD 0"}, []string{"all_reduce"}, []string{`"MOD 0"`, "want a value >= 1"}},
		{"not a number", []string{"NCCL_TESTS_SPLIT=DIV two"}, []string{"all_reduce"}, []string{`"DIV two"`, `"two" is not a number`}},
		{"bad mask", []string{"NCCL_TESTS_SPLIT_MASK=0xG"}, []string{"all_reduce"}, []string{"NCCL_TESTS_SPLIT_MASK", `"0xG"`, "hexadecimal"}},
		{"hypercube group", []string{"NCCL_TESTS_SPLIT=DIV 3"}, []string{"hypercube", "-t", "4", "-b", "8", "-e", "8"}, []string{`NCCL_TESTS_SPLIT="DIV 3": group 0`, "power-of-two", "3"}},
		{"root beyond a group", []string{"NCCL_TESTS_SPLIT=AND 1"}, []string{"broadcast", "-t", "4", "-r", "2", "-b", "8", "-e", "8"}, []string{"-r/--root 2", "smallest group has 2 ranks", "0..1"}},
		{"every root, unequal groups", []string{"NCCL_TESTS_SPLIT=MOD 2"}, []string{"reduce", "-t", "3", "-r", "all", "-b", "8", "-e", "8"}, []string{"-r/--root all", "1 to 2 ranks", "below 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkOneLineError(t, runCmd(t, tt.env, append([]string{"cc-perf"}, tt.args...)...), 6, tt.want)
		})
	}
}

// splitArgs is the run the split tests check: all_reduce over 4 ranks in
// groups of 2, three sizes (the largest one long enough for a non-zero
// algbw under any load).
var splitArgs = []string{"all_reduce", "-b", "8", "-e", "1M", "-f", "128", "-n", "3", "-w", "1"}

// TestSplitTable runs 4 in-process ranks (-t 4) split in groups of 2 and
// checks the whole table against the lines nccl-tests' printf formats make
// of the run's values (checkSplitTable).
func TestSplitTable(t *testing.T) {
	for _, tt := range []struct {
		env    string
		colors []int
	}{
		{"NCCL_TESTS_SPLIT=AND 1", []int{0, 1, 0, 1}},
		{"NCCL_TESTS_SPLIT_MASK=0x2", []int{0, 0, 2, 2}},
	} {
		t.Run(tt.env, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "r.json")
			args := append(append([]string{"cc-perf"}, splitArgs...), "-t", "4", "-J", path)
			r := runCmd(t, []string{tt.env}, args...)
			if r.code != 0 {
				t.Fatalf("exit %d, stderr %q\n%s", r.code, r.stderr, r.stdout)
			}
			checkSplitTable(t, r.stdout, path, 4, tt.colors)
		})
	}
}

// TestSplitProcesses runs the split as 4 processes of one rank each (the
// usual mpirun -np 4 all_reduce_perf): process 0 prints the table, the
// others nothing.
func TestSplitProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	outs := runProcs(t, 4, func(_ int, env []string) result {
		args := append(append([]string{"cc-perf"}, splitArgs...), "-J", path)
		return runCmd(t, append(env, "NCCL_TESTS_SPLIT=AND 1"), args...)
	})
	for i, o := range outs[1:] {
		if o.stdout != "" {
			t.Errorf("process %d printed %q, want nothing", i+1, o.stdout)
		}
	}
	checkSplitTable(t, outs[0].stdout, path, 1, []int{0, 1, 0, 1})
}

// splitDoc is what checkSplitTable reads of the -J file: the values a
// printed line holds, before the table rounds them.
type splitDoc struct {
	Config struct {
		Devices []struct {
			Pid        int    `json:"pid"`
			Hostname   string `json:"hostname"`
			Device     int    `json:"device"`
			DeviceHex  string `json:"device_hex"`
			DeviceInfo string `json:"device_info"`
		} `json:"devices"`
	} `json:"config"`
	Results []struct {
		Size       int64     `json:"size"`
		OutOfPlace splitHalf `json:"out_of_place"`
		InPlace    splitHalf `json:"in_place"`
	} `json:"results"`
	AvgBusBW struct {
		Bandwidth float64 `json:"bandwidth"`
	} `json:"average_bus_bandwidth"`
}

// splitHalf is one half of a -J row, its numbers as written.
type splitHalf struct {
	AlgBW json.Number `json:"alg_bw"`
	BusBW json.Number `json:"bus_bw"`
}

// checkSplitTable compares stdout, line by line, with the table nccl-tests
// v2.19.6 prints for splitArgs over 4 ranks in groups of 2 of the given
// colors, rebuilt here with its printf formats (util.cu): rank 0's group
// of 2 sets each row's count and bus factor, 2(n-1)/n = 1, so busbw must
// print exactly as algbw (with the job's 4 ranks it would be 1.5 x algbw);
// #wrong is 0, summed over the job; the Group column is each rank's color.
// The measured time and algbw are taken from the printed row (the -J file
// shows they are the run's), the device facts from the -J file with
// cc-perf's documented CPU fields in place of the PCI id and GPU name.
func checkSplitTable(t *testing.T, stdout, path string, nthreads int, colors []int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc splitDoc
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v\n%s", path, err, b)
	}
	if len(doc.Config.Devices) != 4 || len(doc.Results) != 3 {
		t.Fatalf("%s: %d devices and %d rows, want 4 and 3:\n%s", path, len(doc.Config.Devices), len(doc.Results), stdout)
	}
	got := strings.Split(stdout, "\n")
	printed := func(i int) []string { // the fields of data row i
		for _, l := range got {
			if f := strings.Fields(l); len(f) == 13 && !strings.HasPrefix(l, "#") && f[0] == strconv.FormatInt(doc.Results[i].Size, 10) {
				return f
			}
		}
		t.Fatalf("no row of %d bytes in\n%s", doc.Results[i].Size, stdout)
		return nil
	}

	want := []string{
		"# Writing JSON output to " + path,
		fmt.Sprintf("# nccl-tests version %s nccl-headers=%d nccl-library=%d", "2.19.6+cc", 23007, 23007),
		fmt.Sprintf("# Collective test starting: %s", "all_reduce_perf"),
		fmt.Sprintf("# nThread %d nGpus %d minBytes %d maxBytes %d step: %d(%s) warmup iters: %d iters: %d agg iters: %d validation: %d graph: %d unalign: %d",
			nthreads, 1, 8, 1<<20, 128, "factor", 1, 3, 1, 1, 0, 0),
		"#",
		"# Using devices",
	}
	for r, d := range doc.Config.Devices {
		want = append(want, fmt.Sprintf("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s",
			r, colors[r], d.Pid, d.Hostname, d.Device, d.DeviceHex, d.DeviceInfo))
	}
	want = append(want, "#",
		fmt.Sprintf("# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          ", "", "", "", "", ""),
		fmt.Sprintf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s",
			"size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong", 0, ""),
		fmt.Sprintf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s",
			"(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", 0, ""))
	var busSum float64
	for i, size := range []int64{8, 1024, 131072} {
		res, f := doc.Results[i], printed(i)
		// writeBenchmarkLinePreamble: "%12li  %12li  %8s  %6s  %6s", the
		// root as "%6i"; all_reduce's count is size / sizeof(float).
		line := fmt.Sprintf("%12d  %12d  %8s  %6s  %6s", size, size/4, "float", "sum", fmt.Sprintf("%6d", -1))
		for h, half := range []splitHalf{res.OutOfPlace, res.InPlace} {
			if half.BusBW != half.AlgBW {
				t.Errorf("%d bytes, half %d: busbw %s, algbw %s: want the same (bus factor 1, groups of 2)", size, h, half.BusBW, half.AlgBW)
			}
			alg, _ := half.AlgBW.Float64()
			if p, err := strconv.ParseFloat(f[6+4*h], 64); err != nil || math.Abs(p-alg) > 0.0051+1e-3*alg {
				t.Errorf("%d bytes, half %d: table algbw %s, file %s", size, h, f[6+4*h], half.AlgBW)
			}
			busSum += alg
			// writeBenchmarkLineBody: "  %7s  %6s  %6s  %6g" (#wrong 0 prints as "%6d" would).
			line += fmt.Sprintf("  %7s  %6s  %6s  %6d", f[5+4*h], f[6+4*h], f[6+4*h], 0)
		}
		want = append(want, line)
	}
	if a, _ := doc.Results[2].OutOfPlace.AlgBW.Float64(); a <= 0 {
		t.Errorf("the 128 KiB row's algbw is %v: want > 0 for the busbw check to mean something", a)
	}
	avg := ""
	for _, l := range got {
		if rest, ok := strings.CutPrefix(l, "# Avg bus bandwidth    : "); ok {
			avg = strings.TrimSpace(rest)
		}
	}
	if p, err := strconv.ParseFloat(avg, 64); err != nil || math.Abs(p-busSum/6) > 1e-5+1e-3*p || math.Abs(p-doc.AvgBusBW.Bandwidth) > 1e-5+1e-3*p {
		t.Errorf("average bus bandwidth %q, want the rows' mean %v (file %v)", avg, busSum/6, doc.AvgBusBW.Bandwidth)
	}
	want = append(want,
		fmt.Sprintf("# %-20s : %d %s", "Out of bounds values", 0, "OK"),
		fmt.Sprintf("# %-20s : %s %s", "Avg bus bandwidth", avg, ""),
		"#",
		fmt.Sprintf("# Collective test concluded: %s", "all_reduce_perf"),
		"#", "", "")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("table differs from nccl-tests' (- got, + want):\n%s", lineDiff(got, want))
	}
}

// lineDiff lists the lines that differ, by position.
func lineDiff(got, want []string) string {
	var b strings.Builder
	for i := range max(len(got), len(want)) {
		g, w := "<none>", "<none>"
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			fmt.Fprintf(&b, "line %d:\n- %q\n+ %q\n", i+1, g, w)
		}
	}
	return b.String()
}
