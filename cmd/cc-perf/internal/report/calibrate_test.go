package report

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/runtime/tune"
)

// TestWriteCalibration: the report has a row per constant of the class
// with both values and the basis, and warns exactly when the fitted model
// misses by more than BadFit.
func TestWriteCalibration(t *testing.T) {
	old := tune.Default().Class[tune.Net]
	old.Alpha[2] = 50
	nw := old
	nw.Alpha[2] = 42
	f := &tune.Fitted{Class: tune.Net, Old: old, New: nw, Basis: map[string]string{"alpha Simple": "3 samples: ring"}, ErrBefore: 0.5, ErrAfter: 0.1}
	h := CalibrationHeader{NRanks: 2, NHosts: 2, Colls: []string{"all_reduce"}, Channels: []int{1, 2}, MinBytes: 8, MaxBytes: 1 << 20, Factor: 8,
		Reps: 5, Iters: 5, Base: "built-in", Samples: []Predicted{{Sample: tune.Sample{Coll: algos.AllReduce, Algo: algos.Ring, Channels: 1, Bytes: 8, TimeUS: 1}}}}
	for _, c := range []struct {
		err  float64
		warn bool
	}{{0.1, false}, {BadFit + 0.01, true}} {
		f.ErrAfter = c.err
		var b strings.Builder
		if err := WriteCalibration(&b, h, f); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		for _, w := range []string{"# cc-perf calibrate: 2 ranks on 2 hosts: link class net\n",
			"every entry on 1 and 2 channel(s); 8..1048576 B (x8); 5 repetitions of 5 iterations each",
			" op_cost ",
			"over 1 measurements: 50% with the base constants"} {
			if !strings.Contains(out, w) {
				t.Errorf("report lacks %q:\n%s", w, out)
			}
		}
		// The name column is as wide as the longest constant's name, whatever algorithms exist.
		if !regexp.MustCompile(`(?m)^ alpha Simple +us +50 +42  3 samples: ring$`).MatchString(out) {
			t.Errorf("report lacks the row of alpha Simple (50 before, 42 after, 3 ring samples):\n%s", out)
		}
		if got := strings.Contains(out, "# warning: the fitted model"); got != c.warn {
			t.Errorf("error %.2f: warning %v, want %v:\n%s", c.err, got, c.warn, out)
		}
		for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
			if strings.HasSuffix(l, " ") {
				t.Errorf("trailing blank in %q", l)
			}
		}
	}
}

// TestWriteCalibrationBound: a refitted bound (CMA's max_bytes) has its
// row, in whole bytes.
func TestWriteCalibrationBound(t *testing.T) {
	old := tune.Default().Class[tune.SHM]
	nw := old
	nw.MaxBytes[algos.CMA] = 1310720
	f := &tune.Fitted{Class: tune.SHM, Old: old, New: nw, Basis: map[string]string{"max_bytes CMA": "CMA beat the ring at 262144 B, not at 2097152 B"}}
	h := CalibrationHeader{NRanks: 2, NHosts: 1, Colls: []string{"all_gather"}, Channels: []int{1}, MinBytes: 8, MaxBytes: 1 << 20, Factor: 8, Reps: 5, Iters: 5, Base: "built-in"}
	var b strings.Builder
	if err := WriteCalibration(&b, h, f); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`(?m)^ max_bytes CMA +B +%d +1310720  CMA beat the ring at 262144 B, not at 2097152 B$`, int64(old.MaxBytes[algos.CMA]))
	if !regexp.MustCompile(want).MatchString(b.String()) {
		t.Errorf("report lacks the row of CMA's bound (%s):\n%s", want, b.String())
	}
}

// TestWriteCalibrationSharedCores: an alpha_cpu fit lists alpha and
// alpha_cpu alone and says what reads it, with no fit warning; a full fit
// shows alpha_cpu only where a value or its reset is there to show.
func TestWriteCalibrationSharedCores(t *testing.T) {
	old := tune.Default().Class[tune.Net]
	nw := old
	nw.AlphaCPU = [3]float64{1, 2, 3}
	f := &tune.Fitted{Class: tune.Net, Old: old, New: nw, Basis: map[string]string{"alpha_cpu LL": "11 samples: ring"}, ErrBefore: 0.6, ErrAfter: 0.6}
	h := CalibrationHeader{NRanks: 4, NHosts: 2, Colls: []string{"all_reduce"}, Channels: []int{1}, MinBytes: 8, MaxBytes: 4096, Factor: 4,
		Reps: 3, Iters: 5, Base: "x", SharedCores: 2}
	var b strings.Builder
	if err := WriteCalibration(&b, h, f); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, w := range []string{" alpha LL ", " alpha_cpu Simple ", "4 ranks on 2 shared cores: the base's model is 60% off", "the tuner does not read it"} {
		if !strings.Contains(out, w) {
			t.Errorf("report lacks %q:\n%s", w, out)
		}
	}
	if !regexp.MustCompile(`(?m)^ alpha_cpu LL +us +0 +1  11 samples: ring$`).MatchString(out) {
		t.Errorf("report lacks the row of alpha_cpu LL (0 before, 1 after):\n%s", out)
	}
	for _, no := range []string{" beta ", " gamma ", " efficiency ", "# warning", "model error"} {
		if strings.Contains(out, no) {
			t.Errorf("report has %q:\n%s", no, out)
		}
	}
	// A full fit of a class without alpha_cpu: no such rows.
	h.SharedCores = 0
	f.New = old
	b.Reset()
	if err := WriteCalibration(&b, h, f); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "alpha_cpu") || !strings.Contains(b.String(), " beta_max Simple ") {
		t.Errorf("a full fit without alpha_cpu:\n%s", b.String())
	}
}
