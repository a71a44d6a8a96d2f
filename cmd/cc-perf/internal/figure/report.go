package figure

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/fabric"
	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/results"
)

// section is one input file in the report.
type section struct {
	Title   string
	Meta    string
	Summary string          // the verdict, in bold under Meta
	Figures []template.HTML // inline SVG
	Tables  []table
	Notes   []string
}

// table is a table of the report; Class names each row's CSS class ("" none).
type table struct {
	Caption string
	Head    []string
	Rows    [][]string
	Class   []string
}

func (t *table) add(class string, cells ...string) {
	t.Rows = append(t.Rows, cells)
	t.Class = append(t.Class, class)
}

var reportTmpl = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{.Title}}</title>
<style>
body { font-family: sans-serif; margin: 2em; color: #222; background: #fff; }
h1 { font-size: 1.5em; }
h2 { font-size: 1.2em; border-bottom: 1px solid #aaa; margin-top: 2em; }
.meta { color: #555; }
.summary { font-weight: bold; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.85em; }
caption { text-align: left; font-weight: bold; padding: 0.3em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; }
th { background: #eee; }
td:first-child, th:first-child { text-align: left; }
tr.bad td { background: #fbd5d5; }
tr.warn td { background: #fff1c2; }
tr.good td { background: #e3f5e1; }
figure { margin: 1em 0; }
svg { max-width: 100%; height: auto; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="meta">{{len .Sections}} file(s): {{range $i, $s := .Sections}}{{if $i}}, {{end}}{{$s.Title}}{{end}}</p>
{{- range .Sections}}
<section>
<h2>{{.Title}}</h2>
<p class="meta">{{.Meta}}</p>
{{- with .Summary}}
<p class="summary">{{.}}</p>
{{- end}}
{{- range .Figures}}
<figure>{{.}}</figure>
{{- end}}
{{- range .Tables}}
<table>
<caption>{{.Caption}}</caption>
<thead><tr>{{range .Head}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>
{{- $t := .}}
{{- range $i, $r := .Rows}}
<tr{{with index $t.Class $i}} class="{{.}}"{{end}}>{{range $r}}<td>{{.}}</td>{{end}}</tr>
{{- end}}
</tbody>
</table>
{{- end}}
{{- range .Notes}}
<p>{{.}}</p>
{{- end}}
</section>
{{- end}}
</body>
</html>
`))

// Report writes the HTML report of files to w: one self-contained page
// (inline CSS, figures as inline SVG, no script, nothing fetched) with a
// section per file: a sweep's plot and table; a tune run's per-size best,
// auto pick and regret, and its configurations' plot; a calibration's
// constants before and after; a fabric run's host table, pair-ratio heat
// map, links and verdict.
func Report(w io.Writer, files []*results.File) error {
	page := struct {
		Title    string
		Sections []section
	}{Title: "cc-perf report"}
	for _, f := range files {
		var s []section
		var err error
		switch f.Kind {
		case results.KindSweep:
			s, err = sweepSections(f)
		case results.KindTune:
			s, err = tuneSections(f)
		case results.KindCalibration:
			s = calibrationSections(f)
		case results.KindFabric:
			s, err = fabricSections(f)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
		page.Sections = append(page.Sections, s...)
	}
	var b bytes.Buffer
	if err := reportTmpl.Execute(&b, page); err != nil {
		return err
	}
	_, err := w.Write(b.Bytes())
	return err
}

// inlineSVG is p drawn as SVG without its XML prologue, to sit in HTML.
func inlineSVG(p *results.Plot) (template.HTML, error) {
	var b bytes.Buffer
	if err := Render(&b, p, "svg"); err != nil {
		return "", err
	}
	s := b.String()
	if i := strings.Index(s, "<svg"); i >= 0 {
		s = s[i:]
	}
	return template.HTML(s), nil // gonum escapes the text it draws
}

// plotFigure is the figure of f alone, or none when nothing in it can be
// plotted (every size 0).
func plotFigure(f *results.File, y results.Measure) ([]template.HTML, error) {
	p, err := results.PlotOf([]*results.File{f}, y, true)
	if err != nil {
		return nil, nil // the tables say what there is
	}
	svg, err := inlineSVG(p)
	if err != nil {
		return nil, err
	}
	return []template.HTML{svg}, nil
}

// Number formats of the tables.
func us(v float64) string   { return strconv.FormatFloat(v, 'f', 2, 64) }
func gbps(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// metaLine says what a file is and on what it ran.
func metaLine(m results.Meta) string {
	parts := []string{m.Format}
	if m.Collective != "" {
		parts = append(parts, m.Collective)
	}
	if m.Ranks > 0 {
		parts = append(parts, plural(m.Ranks, "rank"))
	}
	if m.Hosts > 0 {
		parts = append(parts, plural(m.Hosts, "host"))
	}
	if m.Date != "" {
		parts = append(parts, m.Date)
	}
	return strings.Join(parts, " · ")
}

func sweepSections(f *results.File) ([]section, error) {
	var out []section
	for i, s := range f.Sweeps {
		title := f.Name
		if len(f.Sweeps) > 1 {
			title = fmt.Sprintf("%s, run %d", f.Name, i+1)
		}
		one := &results.File{Name: f.Name, Kind: results.KindSweep, Sweeps: []*results.Sweep{s}}
		figs, err := plotFigure(one, results.BusBW)
		if err != nil {
			return nil, err
		}
		t := table{Caption: "sweep: out of place, then in place",
			Head: []string{"size (B)", "count", "type", "redop", "root", "time (us)", "algbw (GB/s)", "busbw (GB/s)", "#wrong",
				"time (us)", "algbw (GB/s)", "busbw (GB/s)", "#wrong"}}
		if s.Algo {
			t.Head = append(t.Head, "algo", "proto", "nchannels")
		}
		for _, r := range s.Rows {
			count := ""
			if r.Count >= 0 {
				count = strconv.FormatInt(r.Count, 10)
			}
			cells := []string{strconv.FormatInt(r.Bytes, 10), count, r.Type, r.RedOp, r.Root,
				us(r.Out.TimeUS), gbps(r.Out.AlgBW), gbps(r.Out.BusBW), r.Out.Wrong, us(r.In.TimeUS), gbps(r.In.AlgBW), gbps(r.In.BusBW), r.In.Wrong}
			if s.Algo {
				cells = append(cells, r.Algo, r.Proto, r.Channels)
			}
			class := ""
			if bad(r.Out.Wrong) || bad(r.In.Wrong) {
				class = "bad"
			}
			t.add(class, cells...)
		}
		out = append(out, section{Title: title, Meta: metaLine(s.Meta), Figures: figs, Tables: []table{t}})
	}
	return out, nil
}

// bad reports whether a #wrong field counts wrong elements.
func bad(wrong string) bool {
	v, err := strconv.ParseFloat(wrong, 64)
	return err == nil && v != 0
}

func tuneSections(f *results.File) ([]section, error) {
	tn := f.Tune
	figs, err := plotFigure(f, results.Time)
	if err != nil {
		return nil, err
	}
	t := table{Caption: "per size: the best configuration, the tuner's pick (auto) and its regret (auto time / best time)",
		Head: []string{"size (B)", "count", "best", "time (us)", "busbw (GB/s)", "auto", "auto (us)", "regret", "#wrong"}}
	for _, r := range tn.Summary {
		class := "good"
		switch {
		case bad(r.Wrong):
			class = "bad"
		case r.Regret > 1.25:
			class = "warn"
		}
		t.add(class, strconv.FormatInt(r.Bytes, 10), strconv.FormatInt(r.Count, 10), r.Best, us(r.TimeUS), gbps(r.BusBW),
			r.Auto, us(r.AutoUS), strconv.FormatFloat(r.Regret, 'f', 2, 64), r.Wrong)
	}
	return []section{{Title: f.Name, Meta: metaLine(tn.Meta) + " · " + tn.Type + " " + tn.RedOp, Figures: figs,
		Tables: []table{t}, Notes: tn.Notes}}, nil
}

func calibrationSections(f *results.File) []section {
	c := f.Calib
	t := table{Caption: "the " + c.Class + " link class's constants before and after the fit",
		Head: []string{"constant", "unit", "before", "after", "after / before", "basis"}}
	for _, k := range c.Consts {
		ratio := "-"
		if k.Before != 0 {
			ratio = strconv.FormatFloat(k.After/k.Before, 'f', 2, 64)
		}
		class := ""
		if k.Before != k.After {
			class = "warn"
		}
		t.add(class, k.Name, k.Unit, strconv.FormatFloat(k.Before, 'g', 3, 64), strconv.FormatFloat(k.After, 'g', 3, 64), ratio, k.Basis)
	}
	return []section{{Title: f.Name, Meta: metaLine(c.Meta) + " · link class " + c.Class, Tables: []table{t},
		Notes: append(append([]string(nil), c.Header...), c.Notes...)}}
}

func fabricSections(f *results.File) ([]section, error) {
	rec := f.Fabric
	s := section{Title: f.Name, Meta: fmt.Sprintf("cc-perf fabric record · %s schedule · %d hosts · %s", rec.Config.Schedule, len(rec.Hosts), rec.Started)}
	var ms []fabric.Measurement
	for _, r := range rec.Rounds {
		ms = append(ms, r.Pairs...)
	}
	if rec.Verdict == nil {
		s.Notes = append(s.Notes, fmt.Sprintf("not judged: the run stopped after %d rounds", len(rec.Rounds)))
		return []section{s}, nil
	}
	v := *rec.Verdict
	s.Summary = "verdict: " + v.Summary
	hosts := table{Caption: "hosts, worst first", Head: []string{"host", "tests", "measured", "slow", "median GB/s", "ratio", "modz", "verdict"}}
	for _, h := range v.Hosts {
		hosts.add(verdictClass(h.Verdict), h.Host, strconv.Itoa(h.Tests), strconv.Itoa(h.Measured), strconv.Itoa(h.Slow),
			gbps(h.GBps), strconv.FormatFloat(h.Score, 'f', 2, 64), strconv.FormatFloat(h.ModZ, 'f', 1, 64), h.Verdict)
	}
	links := table{Caption: "links", Head: []string{"a", "b", "ratio", "modz", "tests", "slow", "verdict"}}
	for _, l := range v.Links {
		links.add(verdictClass(l.Verdict), l.A, l.B, strconv.FormatFloat(l.Ratio, 'f', 2, 64), strconv.FormatFloat(l.ModZ, 'f', 1, 64),
			strconv.Itoa(l.Tests), strconv.Itoa(l.Slow), l.Verdict)
	}
	s.Tables = []table{hosts, links}
	heat, err := HeatMap(rec.Hosts, ms, v)
	if err != nil {
		return nil, err
	}
	s.Figures = []template.HTML{heat}
	s.Notes = append(s.Notes, fmt.Sprintf("heat map: each pair's median bandwidth over %.3f GB/s (%s reference); '.' ok, a number: slow, T timed out, E error, grey: not measured",
		v.RatioOf, v.Reference.Source))
	return []section{s}, nil
}

func verdictClass(v string) string {
	switch v {
	case fabric.VerdictOK:
		return "good"
	case fabric.VerdictInconclusive:
		return "warn"
	}
	return "bad"
}

// plural is "1 host", "2 hosts".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
