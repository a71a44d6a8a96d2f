package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
)

// TuneHeader is what the lines above the cc-perf tune table say.
type TuneHeader struct {
	Coll           string // e.g. "all_reduce"
	NRanks, NHosts int
	Type           string // data type name
	Op             string // "" for collectives that do not reduce
	Root           int    // -1 for collectives without one
	Reps, Iters    int
	Warmup         int
	// Detail adds a table of every configuration at every size (--all).
	Detail bool
}

// TuneSummary is what the lines below the tune table say: how often the
// automatic pick was within GoodRegret of the best, its worst regret, and
// the wrong data found.
type TuneSummary struct {
	Sizes      int     // rows
	Good       int     // rows with regret <= GoodRegret
	Worst      float64 // the largest regret, 0 without rows
	WorstBytes int64   // its row's size
	Wrong      int64   // wrong elements over every row
	FirstWrong string  // "Tree/LL/auto at 1024 B": the first measurement with wrong data
}

// GoodRegret is the regret (auto time / best time) below which the
// automatic pick counts as good.
const GoodRegret = 1.25

// SummarizeTune summarises rows.
func SummarizeTune(rows []bench.TuneRow) TuneSummary {
	s := TuneSummary{Sizes: len(rows)}
	for _, r := range rows {
		g := r.Regret()
		if g <= GoodRegret {
			s.Good++
		}
		if g > s.Worst {
			s.Worst, s.WorstBytes = g, r.Bytes
		}
		for _, m := range r.Configs {
			if m.Wrong > 0 && s.FirstWrong == "" {
				s.FirstWrong = fmt.Sprintf("%s at %d B", m.Config, r.Bytes)
			}
			s.Wrong += m.Wrong
		}
	}
	return s
}

// GoodFraction is Good / Sizes, 1 without rows.
func (s TuneSummary) GoodFraction() float64 {
	if s.Sizes == 0 {
		return 1
	}
	return float64(s.Good) / float64(s.Sizes)
}

// WriteTune writes the tune report: header lines, one table row per size
// (tablewriter), and the summary lines. Lines other than the table's start
// with '#'.
func WriteTune(w io.Writer, h TuneHeader, configs []bench.Config, rows []bench.TuneRow) error {
	var b strings.Builder
	what := h.Type
	if h.Op != "" {
		what += " " + h.Op
	}
	if h.Root >= 0 {
		what += fmt.Sprintf(" root %d", h.Root)
	}
	fmt.Fprintf(&b, "# cc-perf tune %s: %d ranks on %s, %s\n", h.Coll, h.NRanks, plural(h.NHosts, "host"), what)
	names := make([]string, len(configs))
	for i, c := range configs {
		names[i] = c.String()
	}
	fmt.Fprintf(&b, "# %s: %s\n", plural(len(configs), "configuration"), strings.Join(names, " "))
	fmt.Fprintf(&b, "# each: %s, then %s of %s, interleaved; time: median per-iteration time (slowest rank), out of place,\n",
		plural(h.Warmup, "warmup call"), plural(h.Reps, "repetition"), plural(h.Iters, "iteration"))
	b.WriteString("# over every configuration that ran the same algo/proto/channels; regret = auto time / best time, where the fastest\n")
	b.WriteString("# ran something else than auto: from a confirmation round of the two alone (best: the winner of that round)\n")
	b.WriteString("#\n")
	if h.Detail {
		err := writeTable(&b, []string{"size (B)", "configuration", "ran", "time (us)", "same ran (us)", "vs best"}, "RLLRRR",
			func(add func(...string)) {
				for _, r := range rows {
					for _, m := range r.Configs {
						add(strconv.FormatInt(r.Bytes, 10), m.Config.String(), m.Ran.String(), usStr(m.TimeUS), usStr(m.RanUS),
							strconv.FormatFloat(m.RanUS/r.Fastest().RanUS, 'f', 2, 64))
					}
				}
			})
		if err != nil {
			return err
		}
		b.WriteString("#\n")
	}

	err := writeTable(&b, []string{"size (B)", "count", "best", "time (us)", "busbw (GB/s)", "auto", "auto (us)", "regret", "#wrong"}, "RRLRRLRRR",
		func(add func(...string)) {
			for _, r := range rows {
				best, auto := r.Winner(), r.Auto()
				add(strconv.FormatInt(r.Bytes, 10), strconv.FormatInt(r.Count, 10),
					best.Ran.String(), usStr(r.BestUS), strconv.FormatFloat(r.BusBW, 'f', 2, 64),
					auto.Ran.String(), usStr(r.AutoUS), strconv.FormatFloat(r.Regret(), 'f', 2, 64),
					strconv.FormatInt(r.Wrong(), 10))
			}
		})
	if err != nil {
		return err
	}

	s := SummarizeTune(rows)
	b.WriteString("#\n")
	if s.Sizes > 0 {
		fmt.Fprintf(&b, "# regret <= %.2f at %d of %d sizes (%.0f%%); worst %.2f at %d B\n",
			GoodRegret, s.Good, s.Sizes, 100*s.GoodFraction(), s.Worst, s.WorstBytes)
	}
	if s.Wrong > 0 {
		fmt.Fprintf(&b, "# wrong data: %d elements; first %s\n", s.Wrong, s.FirstWrong)
	} else {
		b.WriteString("# wrong data: none\n")
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// writeTable renders a borderless table with tablewriter into b, each
// column aligned as align says ('L' left, 'R' right), no trailing blanks.
func writeTable(b *strings.Builder, header []string, align string, rows func(add func(...string))) error {
	cols := make([]tw.Align, len(align))
	for i, a := range align {
		cols[i] = tw.AlignRight
		if a == 'L' {
			cols[i] = tw.AlignLeft
		}
	}
	al := tw.CellAlignment{Global: tw.AlignRight, PerColumn: cols}
	var tb strings.Builder
	t := tablewriter.NewTable(&tb,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{
			Borders:  tw.BorderNone,
			Symbols:  tw.NewSymbols(tw.StyleNone),
			Settings: tw.Settings{Lines: tw.LinesNone, Separators: tw.SeparatorsNone},
		})),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignmentConfig(al),
		tablewriter.WithRowAlignmentConfig(al))
	t.Header(header)
	var err error
	rows(func(cells ...string) {
		if e := t.Append(cells); err == nil {
			err = e
		}
	})
	if err != nil {
		return err
	}
	if err := t.Render(); err != nil {
		return err
	}
	for _, l := range strings.SplitAfter(tb.String(), "\n") {
		if l != "" {
			b.WriteString(strings.TrimRight(l, " \n") + "\n")
		}
	}
	return nil
}

// usStr prints a time in µs with 2 decimals below 100, 1 below 10000, else
// none: 8.37, 412.6, 23457.
func usStr(us float64) string {
	prec := 0
	switch {
	case us < 100:
		prec = 2
	case us < 10000:
		prec = 1
	}
	return strconv.FormatFloat(us, 'f', prec, 64)
}

// plural is "1 host", "2 hosts".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
