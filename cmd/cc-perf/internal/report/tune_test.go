package report

import (
	"bytes"
	"math"
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
	"github.com/seed-760dd1f1/cc/protocols"
)

// tuneRows makes rows as bench.Tune would: the automatic pick first, made-up
// times; at 1 KiB a forced entry wins by 1.5x, at 1 MiB by 2.5x, and one
// measurement saw wrong data; at 64 MiB Tree/LL is fastest in the first
// round by a hair, and the confirmation round gives the row to the
// automatic pick. Configurations that ran the same share their time
// (RanUS), here the mean of theirs. The confirmation rounds' times are the
// first round's, except at 64 MiB.
func tuneRows() ([]bench.Config, []bench.TuneRow) {
	configs := []bench.Config{{Auto: true},
		{Algo: algos.Tree, Proto: protocols.LL}, {Algo: algos.Ring, Proto: protocols.LL128}, {Algo: algos.Ring, Proto: protocols.Simple}}
	ar, _ := bench.Lookup("all_reduce")
	var rows []bench.TuneRow
	for i, size := range []int64{8, 1024, 1 << 20, 64 << 20} {
		r := bench.TuneRow{Bytes: size, Count: size / 4}
		auto := bench.Ran{Algo: algos.Ring, Proto: protocols.LL128, Channels: 1}
		if size > 1<<20 {
			auto.Proto = protocols.Simple
		}
		for j, c := range configs {
			m := bench.Measured{Config: c, Iters: 60, TimeUS: 4 + float64(size)/2000 + float64(j)}
			if c.Auto {
				m.Ran = auto
			} else {
				m.Ran = bench.Ran{Algo: c.Algo, Proto: c.Proto, Channels: 1}
			}
			r.Configs = append(r.Configs, m)
		}
		switch i {
		case 1:
			r.Configs[1].TimeUS = r.Configs[0].TimeUS / 1.5
		case 2:
			r.Configs[3].TimeUS = (r.Configs[0].TimeUS + r.Configs[2].TimeUS) / 2 / 2.5
			r.Configs[2].Wrong = 7
		}
		for j := range r.Configs {
			var sum float64
			var n int
			for _, o := range r.Configs {
				if o.Ran == r.Configs[j].Ran {
					sum += o.TimeUS
					n++
				}
			}
			r.Configs[j].RanUS = sum / float64(n)
			if r.Configs[j].RanUS < r.Configs[r.Best].RanUS {
				r.Best = j
			}
		}
		r.AutoUS, r.BestUS = r.Auto().RanUS, r.Fastest().RanUS
		if i == 3 {
			r.AutoUS, r.BestUS, r.AutoWon = 33000, 33000, true
		}
		r.AlgBW, r.BusBW = ar.Bandwidth(bench.Counts{Param: r.Count}, 4, 2, r.BestUS/1e6)
		rows = append(rows, r)
	}
	return configs, rows
}

func TestTuneGolden(t *testing.T) {
	configs, rows := tuneRows()
	var b bytes.Buffer
	h := TuneHeader{Coll: "all_reduce", NRanks: 2, NHosts: 1, Type: "float", Op: "sum", Root: -1, Reps: 3, Iters: 20, Warmup: 1}
	if err := WriteTune(&b, h, configs, rows); err != nil {
		t.Fatal(err)
	}
	golden(t, "tune.txt", b.Bytes())
	out := b.String()

	h.Detail = true
	b.Reset()
	if err := WriteTune(&b, h, configs, rows); err != nil {
		t.Fatal(err)
	}
	golden(t, "tune_all.txt", b.Bytes())
	b.Reset()
	b.WriteString(out)

	// One table line per row, between the header's '#' lines and the summary's.
	var data int
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if !strings.HasPrefix(l, "#") {
			data++
		}
	}
	if data != 1+len(rows) {
		t.Errorf("%d table lines, want a header and %d rows", data, len(rows))
	}
}

func TestSummarizeTune(t *testing.T) {
	_, rows := tuneRows()
	s := SummarizeTune(rows)
	if s.Sizes != 4 || s.Good != 2 || math.Abs(s.Worst-2.5) > 1e-9 || s.WorstBytes != 1<<20 || s.Wrong != 7 || s.FirstWrong != "Ring/LL128/auto at 1048576 B" {
		t.Errorf("SummarizeTune = %+v", s)
	}
	if f := s.GoodFraction(); f != 0.5 {
		t.Errorf("GoodFraction = %v, want 0.5", f)
	}
	if f := SummarizeTune(nil).GoodFraction(); f != 1 {
		t.Errorf("GoodFraction of nothing = %v, want 1", f)
	}
}
