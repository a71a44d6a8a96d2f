package figure

import (
	"bytes"
	"flag"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/results"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata")

// fixtures are package results' test files, made from real runs.
const fixtures = "../results/testdata"

func load(t *testing.T, names ...string) []*results.File {
	t.Helper()
	var files []*results.File
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(fixtures, n))
		if err != nil {
			t.Fatal(err)
		}
		f, err := results.Parse(n, data)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update to rewrite):\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}

// TestRenderSVGGolden: the SVG of fixed inputs has the expected series,
// points per series, axis labels, tick labels and legend, read back from
// the SVG itself (not compared pixel by pixel).
func TestRenderSVGGolden(t *testing.T) {
	for _, c := range []struct {
		name   string
		files  []string
		y      results.Measure
		series []int // points per series, sorted
		texts  []string
	}{
		{"two_sweeps", []string{"sweep.json", "algo_ll.txt"}, results.BusBW, []int{10, 10},
			[]string{"all_reduce: 2 ranks on 1 host, 2026-11-27 09:09:08; 2 ranks on 1 host", "message size (B), out of place",
				"busbw (GB/s)", "8B", "2K", "512K", "2M", "sweep.json", "algo_ll.txt Ring/LL"}},
		{"algo", []string{"algo.txt"}, results.AlgBW, []int{4, 6},
			[]string{"algbw (GB/s)", "algo.txt OneShot/Simple", "algo.txt Ring/Simple"}},
		{"tune_all", []string{"tune_all.txt"}, results.Time, []int{4, 4, 4, 4, 4, 4, 4, 4, 4},
			[]string{"time (us)", "tune_all.txt auto", "tune_all.txt Ring/LL/auto", "8B", "8K"}},
		{"tune", []string{"tune.txt"}, results.Time, []int{4, 4}, []string{"tune.txt best", "tune.txt auto"}},
		// Size-0 rows (all_gather's first) are left out.
		{"all_gather", []string{"all_gather.csv", "all_gather_rccl.csv", "all_gather_ts.txt"}, results.BusBW, []int{9, 9, 9},
			[]string{"all_gather: 2 ranks on 1 host; 2 ranks; 2 ranks on 1 host, 2026-11-27 09:09:10"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := results.PlotOf(load(t, c.files...), c.y, false)
			if err != nil {
				t.Fatal(err)
			}
			var b bytes.Buffer
			if err := Render(&b, p, "svg"); err != nil {
				t.Fatal(err)
			}
			s := parseSVG(t, b.Bytes())
			if got := s.series(); !slices.Equal(got, c.series) {
				t.Errorf("points per series %v, want %v", got, c.series)
			}
			for _, want := range c.texts {
				if !s.has(want) {
					t.Errorf("no text %q in the SVG; texts: %q", want, s.texts)
				}
			}
			golden(t, c.name+".svg.golden", s.dump())
		})
	}
}

// TestRenderFormats: PNG decodes to an image that is not blank, PDF has
// its header, and an unknown format fails.
func TestRenderFormats(t *testing.T) {
	p, err := results.PlotOf(load(t, "sweep.json"), results.BusBW, false)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Render(&b, p, "png"); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	bg, other := img.At(0, 0), 0
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			if img.At(x, y) != bg {
				other++
			}
		}
	}
	if other < 1000 {
		t.Errorf("PNG has %d pixels off the background: blank", other)
	}
	b.Reset()
	if err := Render(&b, p, "pdf"); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(b.Bytes(), []byte("%PDF-")) {
		t.Errorf("PDF starts %q", b.Bytes()[:min(8, b.Len())])
	}
	if err := Render(&b, p, "gif"); err == nil {
		t.Error("format gif: no error")
	}
}

func TestSizeLabel(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{8, "8B"}, {512, "512B"}, {1000, "1000B"}, {1024, "1K"}, {1536, "1536B"}, {3 << 10, "3K"}, {1 << 20, "1M"}, {64 << 20, "64M"}, {1 << 30, "1G"}, {2 << 40, "2T"}} {
		if got := SizeLabel(c.n); got != c.want {
			t.Errorf("SizeLabel(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}

// TestSizeTicks: ticks at every power of two over the range, at most
// maxTicks of them labelled, the labels evenly spaced.
func TestSizeTicks(t *testing.T) {
	for _, c := range []struct{ min, max float64 }{{8, 8}, {8, 1 << 20}, {1, 1 << 40}, {1000, 3000}} {
		ticks := sizeTicks{}.Ticks(c.min, c.max)
		labelled := 0
		for i, tk := range ticks {
			if i > 0 && tk.Value != 2*ticks[i-1].Value {
				t.Errorf("%v..%v: tick %v after %v", c.min, c.max, tk.Value, ticks[i-1].Value)
			}
			if tk.Label != "" {
				labelled++
			}
		}
		if ticks[0].Value > c.min || ticks[len(ticks)-1].Value < c.max || labelled == 0 || labelled > maxTicks {
			t.Errorf("%v..%v: %d ticks %v..%v, %d labelled", c.min, c.max, len(ticks), ticks[0].Value, ticks[len(ticks)-1].Value, labelled)
		}
	}
}
