package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/runtime/tune"
)

// TestCalibrate is cc-perf calibrate end to end on 2 ranks of one host:
// the file it writes loads as constants whose shm class is new (its source
// names the run) and whose other classes are the base's; the report names
// the class and every constant; and the runtime takes the file as
// CC_TUNE_FILE (cc-perf tune runs with it and says so at NCCL_DEBUG=INFO).
func TestCalibrate(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "cc-tune.json")
	r := runCmd(t, nil, "cc-perf", "calibrate", "-t", "2", "-o", out, "-b", "32", "-e", "1M", "-f", "32", "-n", "2", "--reps", "2", "-w", "1", "--all")
	if r.code != 0 {
		t.Fatalf("calibrate: exit %d, stderr %q\n%s", r.code, r.stderr, r.stdout)
	}
	for _, w := range []string{"# cc-perf calibrate: 2 ranks on 1 host: link class shm\n",
		"# measured: all_reduce, reduce_scatter, all_gather; every entry on 1 channel(s); 32..1048576 B (x32)",
		" gamma Simple ", " alpha LL ", " beta LL128 ", " beta_max Simple ", " efficiency Tree ", " algo_lat CTRing ",
		"kept: no PAT call", // one host: PAT is off
		" AllGather      Ring/Simple/1 ", "# model error, median |predicted / measured - 1| over ",
		"# constants: " + out + " (class shm fitted, the others from the base); use: CC_TUNE_FILE=" + out + "\n"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("report lacks %q:\n%s", w, r.stdout)
		}
	}
	got, err := tune.LoadConsts(out)
	if err != nil {
		t.Fatal(err)
	}
	base := tune.Default()
	if s := got.Class[tune.SHM].Source; !strings.HasPrefix(s, "cc-perf calibrate on ") || !strings.Contains(s, "2 ranks on 1 host") {
		t.Errorf("shm source %q: want the calibration run", s)
	}
	if got.Class[tune.SHM].Beta == base.Class[tune.SHM].Beta {
		t.Errorf("shm beta %v: the built-in constants, not fitted", got.Class[tune.SHM].Beta)
	}
	for _, cl := range []tune.Class{tune.Net, tune.SHMBusy} {
		if got.Class[cl] != base.Class[cl] {
			t.Errorf("class %s changed: %+v, want the base's", cl, got.Class[cl])
		}
	}

	// A second calibration on top of the first keeps its other classes
	// from --base, and the runtime reads the result.
	next := filepath.Join(dir, "next.json")
	edited := *got
	edited.Class[tune.Net].Alpha[0] = 123
	b, err := edited.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
	r = runCmd(t, nil, "cc-perf", "calibrate", "-t", "2", "--base", out, "-o", next, "-b", "32", "-e", "1M", "-f", "32", "-n", "1", "--reps", "1", "-w", "0")
	if r.code != 0 {
		t.Fatalf("calibrate --base: exit %d, stderr %q", r.code, r.stderr)
	}
	if n, err := tune.LoadConsts(next); err != nil || n.Class[tune.Net].Alpha[0] != 123 {
		t.Fatalf("--base %s: net alpha LL not kept (%v)", out, err)
	}
	logFile := filepath.Join(dir, "debug.log")
	r = runCmd(t, []string{"CC_TUNE_FILE=" + next, "NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=TUNING", "NCCL_DEBUG_FILE=" + logFile},
		"cc-perf", "all_reduce", "-t", "2", "-b", "8", "-e", "8", "-n", "1")
	log, _ := os.ReadFile(logFile)
	if r.code != 0 || !strings.Contains(string(log), "tuner constants: cc-perf calibrate") {
		t.Errorf("all_reduce with CC_TUNE_FILE=%s: exit %d, want the file's constants in the TUNING log; stderr %q, log:\n%s", next, r.code, r.stderr, log)
	}
}

func TestCalibrateBadInput(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte(`{"source": "x"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.json")
	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"no output", []string{"-t", "2"}, []string{"missing -o/--output FILE"}},
		{"output dir", []string{"-o", "/nonexistent/dir/x.json"}, []string{`-o/--output "/nonexistent/dir/x.json"`}},
		{"too small", []string{"-o", out, "-e", "1M", "-f", "8"}, []string{"-b 8 -e 1048576 -f 8", ">= 1048576 B (bandwidths)", "the largest is 262144 B"}},
		{"too large -b", []string{"-o", out, "-b", "8K", "-e", "4M"}, []string{"<= 4096 B (latencies)"}},
		{"auto channels", []string{"-o", out, "--channels", "auto"}, []string{"--channels auto", "want numbers"}},
		{"bad base", []string{"-o", out, "--base", bad}, []string{"--base: " + bad + `: classes: no "shm"`}},
		{"argument", []string{"-o", out, "all_reduce"}, []string{`unexpected argument "all_reduce"`}},
		{"shared cores, large -b", []string{"-o", out, "--shared-cores", "2", "-b", "8K", "-e", "16K"}, []string{"-b 8192: --shared-cores fits latencies", "<= 4096 B"}},
		{"shared cores, one host", []string{"-o", out, "--shared-cores", "1", "-t", "2", "-b", "8", "-e", "64"},
			[]string{"--shared-cores 1: 2 ranks on 1 host", "a job of one rank per host with more ranks than the 1 cores"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			checkOneLineError(t, runCmd(t, nil, append([]string{"cc-perf", "calibrate"}, tt.args...)...), exitUsage, tt.want)
			if _, err := os.Stat(out); err == nil {
				t.Errorf("%s was written", out)
			}
		})
	}
}
