package figure

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/fabric"
)

// TestHeatMap: a cell per pair of hosts, each marked as cc-perf fabric's
// text matrix marks it, with the host names around.
func TestHeatMap(t *testing.T) {
	f := load(t, "fabric.json")[0]
	rec := f.Fabric
	var ms []fabric.Measurement
	for _, r := range rec.Rounds {
		ms = append(ms, r.Pairs...)
	}
	svg, err := HeatMap(rec.Hosts, ms, *rec.Verdict)
	if err != nil {
		t.Fatal(err)
	}
	s := parseSVG(t, []byte(svg))
	n := len(rec.Hosts)
	if s.rects != n*n || len(s.titles) != n*n {
		t.Fatalf("%d cells, %d tooltips, want %d", s.rects, len(s.titles), n*n)
	}
	// The row of tb5 (the slow host, index 4) in the fixture's text table:
	//   tb5 0.18 0.18 0.17 0.17    - 0.17 0.17 0.18
	row := []string{"0.18", "0.18", "0.17", "0.17", "-", "0.17", "0.17", "0.18"}
	var marks []string
	for _, tx := range s.texts {
		if regexp.MustCompile(`^([-.ET]|\d\.\d\d)?$`).MatchString(tx) {
			marks = append(marks, tx)
		}
	}
	if len(marks) != n*n {
		t.Fatalf("%d cell marks, want %d: %q", len(marks), n*n, marks)
	}
	if got := strings.Join(marks[4*n:5*n], " "); got != strings.Join(row, " ") {
		t.Errorf("tb5's row %q, want %q", got, strings.Join(row, " "))
	}
	for _, h := range rec.Hosts {
		if c := strings.Count(strings.Join(s.texts, "\n")+"\n", h.Name+"\n"); c != 2 {
			t.Errorf("host %s named %d times around the map, want 2 (row and column)", h.Name, c)
		}
	}
	if !strings.Contains(strings.Join(s.titles, "\n"), "tb5 with tb1: ratio 0.18 over") {
		t.Errorf("no tooltip of tb5 with tb1: %q", s.titles[:n+1])
	}
}

// TestReport: one page for every kind of input, self-contained (no
// script, nothing fetched), a section per file, well-formed inline SVG
// figures, and the tables' values.
func TestReport(t *testing.T) {
	files := load(t, "sweep.json", "algo.txt", "tune.txt", "calibrate.txt", "fabric.json")
	var b bytes.Buffer
	if err := Report(&b, files); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, bad := range []string{"<script", "src=", "href=", "url(", "@import", "<link", "<iframe"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page holds %q: it must not fetch or run anything", bad)
		}
	}
	if got := strings.Count(page, "<section>"); got != len(files) {
		t.Errorf("%d sections, want %d", got, len(files))
	}
	// Figures: the two sweeps' and the tune run's plots, the fabric's heat map.
	svgs := regexp.MustCompile(`(?s)<svg.*?</svg>`).FindAllString(page, -1)
	if len(svgs) != 4 {
		t.Fatalf("%d inline SVG figures, want 4", len(svgs))
	}
	for _, svg := range svgs {
		parseSVG(t, []byte(svg))
	}
	if got := parseSVG(t, []byte(svgs[1])).series(); len(got) != 2 {
		t.Errorf("algo.txt's figure has series %v, want 2 (OneShot/Simple, Ring/Simple)", got)
	}
	cell := func(v string) string { return "<td>" + v + "</td>" }
	for _, want := range []string{
		// sweep.json's last row, out-of-place time and busbw.
		cell("2097152") + cell("524288") + cell("float") + cell("sum") + cell("-1") + cell("3719.50"),
		// tune.txt: the 262144 B row's best, auto and regret.
		cell("262144") + cell("65536") + cell("OneShot/Simple/1") + cell("1222.10") + cell("0.21") + cell("Ring/Simple/1") + cell("2783.80") + cell("2.28"),
		// calibrate.txt: gamma LL128 before and after.
		cell("gamma LL128") + cell("us") + cell("0.626") + cell("44.3"),
		// fabric.json: the slow host's verdict.
		cell("tb5"), cell("slow-host"), "verdict: FAIL 2 hosts (tb9 unreachable, tb5 slow-host)",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
}
