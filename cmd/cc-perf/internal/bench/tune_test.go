package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// tuneRecorder collects what Tune reports.
type tuneRecorder struct {
	configs  []Config
	progress []TuneProgress
	rows     []TuneRow
}

func (r *tuneRecorder) Begin(c []Config)        { r.configs = c }
func (r *tuneRecorder) Progress(p TuneProgress) { r.progress = append(r.progress, p) }
func (r *tuneRecorder) Row(row TuneRow)         { r.rows = append(r.rows, row) }
func (r *tuneRecorder) sizes() []int64 {
	return collect(r.rows, func(x TuneRow) int64 { return x.Bytes })
}

func collect[T, U any](xs []T, f func(T) U) []U {
	out := make([]U, len(xs))
	for i, x := range xs {
		out[i] = f(x)
	}
	return out
}

func runTuneFake(t *testing.T, n int, o TuneOptions, setup func(*fakeJob)) (*tuneRecorder, []*tunedFake, error) {
	t.Helper()
	j, comms := newFakeJob(n)
	if setup != nil {
		setup(j)
	}
	fakes := make([]*tunedFake, n)
	for i, c := range comms {
		fakes[i] = &tunedFake{fakeComm: c.(*fakeComm)}
		comms[i] = fakes[i]
	}
	rec := &tuneRecorder{}
	err := Tune(context.Background(), comms, o, rec)
	return rec, fakes, err
}

func tuneOptions(name string) TuneOptions {
	c, _ := Lookup(name)
	return TuneOptions{Coll: c, Type: reduce.Float32, Op: reduce.Sum, Root: 0,
		MinBytes: 64, MaxBytes: 4096, StepFactor: 4, Iters: 3, Warmup: 1, Reps: 2}
}

// TestTuneRows: one row per size, every configuration measured reps x
// iters times with correct data, the automatic pick first, the best the
// fastest, so that the regret is at least 1.
func TestTuneRows(t *testing.T) {
	o := tuneOptions("all_reduce")
	o.Channels = []int{0, 2}
	rec, _, err := runTuneFake(t, 2, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantConfigs := []string{"auto", "Tree/LL/auto", "Tree/LL/2", "Ring/LL128/auto", "Ring/LL128/2", "Ring/Simple/auto", "Ring/Simple/2"}
	if got := collect(rec.configs, Config.String); !cmp.Equal(got, wantConfigs) {
		t.Errorf("configurations %v, want %v", got, wantConfigs)
	}
	if got, want := rec.sizes(), []int64{64, 256, 1024, 4096}; !cmp.Equal(got, want) {
		t.Fatalf("row sizes %v, want %v", got, want)
	}
	for _, row := range rec.rows {
		if len(row.Configs) != len(wantConfigs) || row.Count != row.Bytes/4 {
			t.Fatalf("row %d: %d configurations, count %d", row.Bytes, len(row.Configs), row.Count)
		}
		for i, m := range row.Configs {
			if m.Config.String() != wantConfigs[i] || m.Iters != o.Reps*o.Iters || m.Wrong != 0 || m.TimeUS <= 0 || m.RanUS <= 0 {
				t.Errorf("row %d config %d: %+v", row.Bytes, i, m)
			}
			if m.RanUS < row.Fastest().RanUS {
				t.Errorf("row %d: %s (%v us) beats the best %s (%v us)", row.Bytes, m.Config, m.RanUS, row.Fastest().Config, row.Fastest().RanUS)
			}
			want := Ran{Algo: algos.Ring, Proto: protocols.Simple, Channels: 1}
			if !m.Config.Auto {
				want = Ran{Algo: m.Config.Algo, Proto: m.Config.Proto, Channels: max(m.Config.Channels, 1)}
			}
			if m.Ran != want {
				t.Errorf("row %d %s: ran %v, want %v", row.Bytes, m.Config, m.Ran, want)
			}
		}
		// auto and Ring/Simple/auto ran Ring/Simple/1: one pooled time.
		if a, f := row.Configs[0], row.Configs[5]; a.Ran != f.Ran || a.RanUS != f.RanUS {
			t.Errorf("row %d: auto %+v and %s %+v ran the same but were not pooled", row.Bytes, a, f.Config, f)
		}
		if row.Regret() < 1 || row.BusBW <= 0 || row.Wrong() != 0 {
			t.Errorf("row %d: regret %v, busbw %v, wrong %d", row.Bytes, row.Regret(), row.BusBW, row.Wrong())
		}
	}
	// Progress: a warmup report and one per measurement, for every size.
	if want := 4 * (1 + o.Reps*len(wantConfigs)); len(rec.progress) != want {
		t.Errorf("%d progress reports, want %d", len(rec.progress), want)
	}
	last := rec.progress[len(rec.progress)-1]
	if last != (TuneProgress{Bytes: 4096, Size: 4, Sizes: 4, Step: 14, Steps: 14}) {
		t.Errorf("last progress %+v", last)
	}
}

// TestTuneOrder: every rank forces the same configurations in the same
// order, each repetition a permutation of them that depends only on the size
// and the repetition, and the sweep ends with the choice given back to the
// tuner.
func TestTuneOrder(t *testing.T) {
	o := tuneOptions("reduce_scatter")
	o.MinBytes, o.MaxBytes, o.Reps = 1024, 1024, 5
	rec, fakes, err := runTuneFake(t, 3, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	nbytes := rec.rows[0].Bytes // 1008: each rank's block rounds down to 84 floats
	for r, f := range fakes[1:] {
		if diff := cmp.Diff(fakes[0].log, f.log); diff != "" {
			t.Fatalf("rank %d forced differently from rank 0 (-0 +%d):\n%s", r+1, r+1, diff)
		}
	}
	configs := []string{"auto", "Tree/LL/auto", "Ring/LL128/auto", "Ring/Simple/auto"}
	want := append([]string(nil), configs...) // warmup
	for rep := 0; rep < o.Reps; rep++ {
		for _, i := range order(len(configs), nbytes, rep) {
			want = append(want, configs[i])
		}
	}
	want = append(want, "auto") // ForceNone at the end
	if diff := cmp.Diff(want, fakes[0].log); diff != "" {
		t.Errorf("force order (-want +got):\n%s", diff)
	}
}

// TestOrder: every order is a permutation, the same for the same size and
// repetition, and repetitions differ (no configuration always follows the
// same one).
func TestOrder(t *testing.T) {
	for n := 1; n <= 40; n++ {
		seen := map[string]bool{}
		for rep := 0; rep < 8; rep++ {
			p := order(n, 4096, rep)
			if !cmp.Equal(p, order(n, 4096, rep)) {
				t.Fatalf("order(%d, 4096, %d) is not deterministic", n, rep)
			}
			hit := make([]bool, n)
			for _, i := range p {
				if i < 0 || i >= n || hit[i] {
					t.Fatalf("order(%d, 4096, %d) = %v is not a permutation", n, rep, p)
				}
				hit[i] = true
			}
			seen[fmt.Sprint(p)] = true
		}
		if n >= 4 && len(seen) < 6 {
			t.Errorf("n=%d: only %d distinct orders in 8 repetitions", n, len(seen))
		}
	}
	if cmp.Equal(order(10, 8, 0), order(10, 16, 0)) {
		t.Error("two sizes share their first order")
	}
}

// TestTuneWrongData: corrupted results are counted for the configuration
// that produced them, and the sweep goes on.
func TestTuneWrongData(t *testing.T) {
	o := tuneOptions("all_gather")
	rec, _, err := runTuneFake(t, 2, o, func(j *fakeJob) {
		j.corrupt = func(rank, call int, out []byte) {
			if rank == 1 && len(out) >= 64 && len(out) != 2*deviceRecord {
				out[0] ^= 1
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.rows) != 4 {
		t.Fatalf("%d rows, want 4", len(rec.rows))
	}
	for _, row := range rec.rows {
		for _, m := range row.Configs {
			if m.Wrong == 0 {
				t.Errorf("row %d %s: corruption not counted", row.Bytes, m.Config)
			}
		}
	}
}

// TestTuneSkipsRepeatedSizes: sizes whose blocks round down to the same
// bytes are measured once (reduce_scatter, 2 ranks, float: 8 and 16 B are
// both 0 B, 32 B is 32 B).
func TestTuneSkipsRepeatedSizes(t *testing.T) {
	o := tuneOptions("reduce_scatter")
	o.MinBytes, o.MaxBytes, o.StepFactor = 8, 32, 2
	rec, _, err := runTuneFake(t, 2, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rec.sizes(), []int64{0, 32}; !cmp.Equal(got, want) {
		t.Errorf("row sizes %v, want %v", got, want)
	}
}

func TestTuneRefuses(t *testing.T) {
	o := tuneOptions("alltoall")
	if _, _, err := runTuneFake(t, 2, o, nil); err == nil || !strings.Contains(err.Error(), "point-to-point") {
		t.Errorf("alltoall: %v, want an error saying it is point-to-point", err)
	}
	_, comms := newFakeJob(2) // no Tuned
	err := Tune(context.Background(), comms, tuneOptions("all_reduce"), nil)
	if err == nil || !strings.Contains(err.Error(), "Tuned") {
		t.Errorf("plain communicators: %v, want an error", err)
	}
	for _, c := range comms {
		c.Abort(fmt.Errorf("done"))
	}
}

func TestMedian(t *testing.T) {
	for _, tt := range []struct {
		xs   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tt.xs); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.xs, got, tt.want)
		}
	}
}
