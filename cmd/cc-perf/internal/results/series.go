package results

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Measure is what a plot's y axis shows.
type Measure string

// The measures a plot can show.
const (
	BusBW Measure = "busbw"
	AlgBW Measure = "algbw"
	Time  Measure = "time"
)

// ParseMeasure checks --y.
func ParseMeasure(s string) (Measure, error) {
	switch m := Measure(s); m {
	case BusBW, AlgBW, Time:
		return m, nil
	}
	return "", fmt.Errorf("--y %q: want busbw, algbw or time", s)
}

// Label is the y axis' title.
func (m Measure) Label() string {
	switch m {
	case Time:
		return "time (us)"
	case AlgBW:
		return "algbw (GB/s)"
	}
	return "busbw (GB/s)"
}

// Point is one measurement of a series.
type Point struct {
	Bytes int64
	Y     float64
}

// Series is one line of a plot.
type Series struct {
	Label  string
	Points []Point // by size
}

// Plot is what a figure shows: series of one measure against size.
type Plot struct {
	Title  string // collectives, ranks and hosts, unless the caller sets its own
	Y      Measure
	Series []Series
}

// PlotOf builds the plot of files: one series per sweep, per algorithm and
// protocol when the sweep has -A's columns, per configuration of cc-perf
// tune --all output (best and auto without --all). Sweeps plot their
// out-of-place half. Points of size 0 (a log2 axis has no place for them)
// and values that are not finite (and, for time, not positive) are left
// out. Files of different collectives are refused unless allowMixed.
func PlotOf(files []*File, y Measure, allowMixed bool) (*Plot, error) {
	p := &Plot{Y: y}
	colls := map[string][]string{} // collective -> files
	var order []string
	addColl := func(c, file string) {
		if c == "" {
			return
		}
		if colls[c] == nil {
			order = append(order, c)
		}
		colls[c] = append(colls[c], file)
	}
	var scopes []string
	for _, f := range files {
		switch f.Kind {
		case KindSweep:
			for i, s := range f.Sweeps {
				name := f.Base()
				if len(f.Sweeps) > 1 {
					name = fmt.Sprintf("%s #%d", name, i+1)
				}
				addColl(s.Collective, f.Base())
				scopes = append(scopes, s.scope())
				p.Series = append(p.Series, sweepSeries(name, s, y)...)
			}
		case KindTune:
			if y != Time {
				return nil, fmt.Errorf("%s: cc-perf tune output holds times only: plot it with --y time", f.Name)
			}
			addColl(f.Tune.Collective, f.Base())
			scopes = append(scopes, f.Tune.scope())
			p.Series = append(p.Series, tuneSeries(f.Base(), f.Tune)...)
		default:
			return nil, fmt.Errorf("%s: %s has no sweep to plot: give it to cc-perf report", f.Name, f.Kind)
		}
	}
	if len(order) > 1 && !allowMixed {
		var parts []string
		for _, c := range order {
			parts = append(parts, fmt.Sprintf("%s (%s)", c, strings.Join(colls[c], ", ")))
		}
		return nil, fmt.Errorf("mixed collectives %s: plot one at a time, or pass --allow-mixed", strings.Join(parts, " and "))
	}
	var kept []Series
	for _, s := range p.Series {
		if len(s.Points) > 0 {
			kept = append(kept, s)
		}
	}
	if len(kept) == 0 {
		names := make([]string, len(files))
		for i, f := range files {
			names[i] = f.Name
		}
		return nil, fmt.Errorf("nothing to plot in %s: no row with a size above 0 and a finite %s", strings.Join(names, ", "), y)
	}
	p.Series = kept
	p.Title = strings.Join(order, ", ")
	if u := uniq(scopes); len(u) > 0 {
		p.Title = strings.TrimPrefix(p.Title+": "+strings.Join(u, "; "), ": ")
	}
	return p, nil
}

// scope says on what a run ran: "2 ranks on 1 host, 2026-11-27 09:09:08".
func (m Meta) scope() string {
	var parts []string
	switch {
	case m.Ranks > 0 && m.Hosts > 0:
		parts = append(parts, fmt.Sprintf("%s on %s", plural(m.Ranks, "rank"), plural(m.Hosts, "host")))
	case m.Ranks > 0:
		parts = append(parts, plural(m.Ranks, "rank"))
	}
	if m.Date != "" {
		parts = append(parts, m.Date)
	}
	return strings.Join(parts, ", ")
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

func uniq(ss []string) []string {
	var out []string
	seen := map[string]bool{}
	for _, s := range ss {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// value is the y of half h.
func value(h Half, y Measure) float64 {
	switch y {
	case Time:
		return h.TimeUS
	case AlgBW:
		return h.AlgBW
	}
	return h.BusBW
}

// add appends (bytes, v) to the series named label in ss (new ones in
// order of first appearance), unless the point has no place on the plot.
func add(ss *[]Series, index map[string]int, label string, bytes int64, v float64, y Measure) {
	i, ok := index[label]
	if !ok {
		i = len(*ss)
		index[label] = i
		*ss = append(*ss, Series{Label: label})
	}
	if bytes <= 0 || math.IsNaN(v) || math.IsInf(v, 0) || (y == Time && v <= 0) {
		return
	}
	(*ss)[i].Points = append((*ss)[i].Points, Point{Bytes: bytes, Y: v})
}

func sweepSeries(name string, s *Sweep, y Measure) []Series {
	var ss []Series
	index := map[string]int{}
	for _, r := range s.Rows {
		label := name
		if s.Algo {
			label = name + " " + r.Algo + "/" + r.Proto
		}
		add(&ss, index, label, r.Bytes, value(r.Out, y), y)
	}
	return sorted(ss)
}

func tuneSeries(name string, t *Tune) []Series {
	var ss []Series
	index := map[string]int{}
	if len(t.Configs) > 0 {
		for _, c := range t.Configs {
			add(&ss, index, name+" "+c.Config, c.Bytes, c.TimeUS, Time)
		}
		return sorted(ss)
	}
	for _, r := range t.Summary {
		add(&ss, index, name+" best", r.Bytes, r.TimeUS, Time)
		add(&ss, index, name+" auto", r.Bytes, r.AutoUS, Time)
	}
	return sorted(ss)
}

// sorted sorts each series' points by size.
func sorted(ss []Series) []Series {
	for _, s := range ss {
		sort.SliceStable(s.Points, func(i, j int) bool { return s.Points[i].Bytes < s.Points[j].Bytes })
	}
	return ss
}
