package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

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

// runTuneFake runs Tune on n fake ranks whose calls sleep as delay says
// (see tunedFake; autoFastest when nil).
func runTuneFake(t *testing.T, n int, o TuneOptions, setup func(*fakeJob), delay func(Ran, int) time.Duration) (*tuneRecorder, []*tunedFake, error) {
	t.Helper()
	j, comms := newFakeJob(n)
	if setup != nil {
		setup(j)
	}
	if delay == nil {
		delay = autoFastest
	}
	fakes := make([]*tunedFake, n)
	for i, c := range comms {
		fakes[i] = &tunedFake{fakeComm: c.(*fakeComm), delay: delay}
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
	rec, _, err := runTuneFake(t, 2, o, nil, nil)
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
		// Every other configuration sleeps (autoFastest): auto is the
		// fastest and no confirmation round runs.
		if row.Fastest().Ran != row.Auto().Ran || row.Confirmed() || row.AutoWon || row.Winner().Ran != row.Auto().Ran ||
			row.AutoUS != row.Auto().RanUS || row.BestUS != row.AutoUS || row.Regret() != 1 {
			t.Errorf("row %d: best %s, confirmed %v, auto won %v, winner %s, auto %v us, best %v us, regret %v",
				row.Bytes, row.Fastest().Config, row.Confirmed(), row.AutoWon, row.Winner().Config, row.AutoUS, row.BestUS, row.Regret())
		}
		if row.Regret() < 1 || row.BusBW <= 0 || row.Wrong() != 0 {
			t.Errorf("row %d: regret %v, busbw %v, wrong %d", row.Bytes, row.Regret(), row.BusBW, row.Wrong())
		}
	}
	// Progress: a warmup report, one per measurement and one for the
	// confirmation round that did not run (auto was fastest), every size.
	if want := 4 * (1 + o.Reps*len(wantConfigs) + 1); len(rec.progress) != want {
		t.Errorf("%d progress reports, want %d", len(rec.progress), want)
	}
	last := rec.progress[len(rec.progress)-1]
	if last != (TuneProgress{Bytes: 4096, Size: 4, Sizes: 4, Step: 18, Steps: 18}) {
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
	rec, fakes, err := runTuneFake(t, 3, o, nil, nil)
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

// TestTuneConfirms: when the first round's fastest ran something other
// than the automatic pick, a confirmation round measures the two again,
// alternating (A B, B A, ...), and the regret comes from that round alone.
// Tree/LL is the fastest while the first round lasts; afterwards it is
// slower than the automatic pick (a lucky first round: auto wins the row,
// regret 1) or still faster (it wins, and the regret is auto's time over
// its own in the confirmation round).
func TestTuneConfirms(t *testing.T) {
	o := tuneOptions("all_reduce")
	o.MinBytes, o.MaxBytes, o.Reps = 1024, 1024, 3
	tree := Ran{Algo: algos.Tree, Proto: protocols.LL, Channels: 1}
	auto := Ran{Algo: algos.Ring, Proto: protocols.Simple, Channels: 1}
	// Tree/LL's calls in the first round: warmup, then reps x (iters + the check).
	first := o.Warmup + o.Reps*(o.Iters+1)
	for _, tt := range []struct {
		name    string
		later   time.Duration // Tree/LL's sleep after the first round
		autoWon bool
	}{
		{"lucky", 12 * time.Millisecond, true},
		{"faster", 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec, fakes, err := runTuneFake(t, 2, o, nil, func(r Ran, call int) time.Duration {
				switch {
				case r == tree && call < first:
					return 0
				case r == tree:
					return tt.later
				}
				return 6 * time.Millisecond
			})
			if err != nil {
				t.Fatal(err)
			}
			row := rec.rows[0]
			if row.Fastest().Ran != tree || !row.Confirmed() || row.AutoWon != tt.autoWon {
				t.Fatalf("first round's fastest %s, confirmed %v, auto won %v; want Tree/LL/1, true, %v",
					row.Fastest().Ran, row.Confirmed(), row.AutoWon, tt.autoWon)
			}
			// The confirmation round after the first: auto first, then
			// alternating pairs, then the choice given back.
			configs := []string{"auto", "Tree/LL/auto", "Ring/LL128/auto", "Ring/Simple/auto"}
			var want []string
			for rep := 0; rep < o.Reps; rep++ {
				if rep%2 == 0 {
					want = append(want, "auto", "Tree/LL/auto")
				} else {
					want = append(want, "Tree/LL/auto", "auto")
				}
			}
			want = append(want, "auto")
			log := fakes[1].log
			skip := len(configs) * (1 + o.Reps)
			if len(log) < skip || !cmp.Equal(log[skip:], want) {
				t.Fatalf("forces %v, want the first round's %d then %v", log, skip, want)
			}
			// Tree/LL ran 0 ms a call in the first round; in the
			// confirmation auto's calls take >= 6 ms, Tree/LL's >= 12 ms
			// or 0.
			winner, regret := tree, row.AutoUS/row.BestUS
			if tt.autoWon {
				winner, regret = auto, 1
			}
			if row.Winner().Ran != winner || row.Regret() != regret || row.AutoUS < 6000 {
				t.Errorf("winner %s, regret %v (auto %v us, best %v us); want %s, %v, auto >= 6000 us",
					row.Winner().Ran, row.Regret(), row.AutoUS, row.BestUS, winner, regret)
			}
			if tt.autoWon && row.BestUS != row.AutoUS || !tt.autoWon && (row.BestUS >= 6000 || row.Regret() < 2) {
				t.Errorf("auto %v us, best %v us, regret %v", row.AutoUS, row.BestUS, row.Regret())
			}
			if p := rec.progress[len(rec.progress)-1]; p.Step != p.Steps || p.Steps != o.Reps*(len(configs)+2) {
				t.Errorf("last progress %+v, want step %d of %d", p, o.Reps*(len(configs)+2), o.Reps*(len(configs)+2))
			}
		})
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
	}, nil)
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
	rec, _, err := runTuneFake(t, 2, o, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := rec.sizes(), []int64{0, 32}; !cmp.Equal(got, want) {
		t.Errorf("row sizes %v, want %v", got, want)
	}
}

func TestTuneRefuses(t *testing.T) {
	o := tuneOptions("alltoall")
	if _, _, err := runTuneFake(t, 2, o, nil, nil); err == nil || !strings.Contains(err.Error(), "point-to-point") {
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
