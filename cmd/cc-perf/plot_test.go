package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fixtures are the results package's test files, made from real runs.
const fixtures = "internal/results/testdata"

// ccPerfOnce builds cc-perf for the tests that run the real binary.
var ccPerfOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "cc-perf-plot-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "cc-perf")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/seed-760dd1f1/cc/cmd/cc-perf").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build cc-perf: %v\n%s", err, out)
	}
	return bin, nil
})

// runBinary runs the built cc-perf in dir.
func runBinary(t *testing.T, dir string, args ...string) result {
	t.Helper()
	bin, err := ccPerfOnce()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = baseEnv
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

// fixture is the absolute path of a fixture.
func fixture(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(fixtures, name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// svgTexts is the text of every <text> of a well-formed SVG document.
func svgTexts(t *testing.T, data []byte) []string {
	t.Helper()
	var texts []string
	d := xml.NewDecoder(bytes.NewReader(data))
	in := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return texts
		}
		if err != nil {
			t.Fatalf("not well-formed SVG: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			in = e.Name.Local == "text"
			if in {
				texts = append(texts, "")
			}
		case xml.CharData:
			if in {
				texts[len(texts)-1] += string(e)
			}
		case xml.EndElement:
			in = false
		}
	}
}

// TestPlotBinary runs cc-perf plot and report: the files they write, in
// each format, and their exit statuses.
func TestPlotBinary(t *testing.T) {
	dir := t.TempDir()
	r := runBinary(t, dir, "plot", fixture(t, "sweep.json"), fixture(t, "algo.txt"), "-o", "out.svg", "--title", "two runs")
	if r.code != 0 || r.stdout != "# wrote out.svg: 3 series, 20 points, busbw\n" || r.stderr != "" {
		t.Fatalf("plot svg: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	data, err := os.ReadFile(filepath.Join(dir, "out.svg"))
	if err != nil {
		t.Fatal(err)
	}
	texts := strings.Join(svgTexts(t, data), "\n") + "\n"
	for _, want := range []string{"two runs", "sweep.json", "algo.txt OneShot/Simple", "algo.txt Ring/Simple", "busbw (GB/s)", "2K", "2M"} {
		if !strings.Contains(texts, want+"\n") {
			t.Errorf("out.svg lacks the text %q", want)
		}
	}

	// Tune output alone plots time without --y.
	if r := runBinary(t, dir, "plot", fixture(t, "tune_all.txt"), "-o", "tune.png"); r.code != 0 || r.stdout != "# wrote tune.png: 9 series, 36 points, time\n" {
		t.Fatalf("plot png: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	f, err := os.Open(filepath.Join(dir, "tune.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("tune.png: %v", err)
	}
	if r := runBinary(t, dir, "plot", fixture(t, "sweep.txt"), "--y", "time", "-o", "out.PDF"); r.code != 0 {
		t.Fatalf("plot pdf: exit %d, stderr %q", r.code, r.stderr)
	}
	if data, err := os.ReadFile(filepath.Join(dir, "out.PDF")); err != nil || !bytes.HasPrefix(data, []byte("%PDF-")) {
		t.Errorf("out.PDF is no PDF (%v)", err)
	}
	if r := runBinary(t, dir, "plot", "--allow-mixed", fixture(t, "sweep.json"), fixture(t, "all_gather.csv"), "-o", "mixed.svg"); r.code != 0 {
		t.Errorf("--allow-mixed: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := runBinary(t, dir, "report", fixture(t, "sweep.json"), fixture(t, "tune.txt"), fixture(t, "calibrate.txt"), fixture(t, "fabric.json"), "-o", "report.html"); r.code != 0 || r.stdout != "# wrote report.html: 4 file(s)\n" {
		t.Errorf("report: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// TestPlotBinaryBadInput: each bad input is one line on stderr naming the
// bad value and what is allowed, a non-zero exit, and no file written: an
// existing output keeps its contents and no temporary file is left.
func TestPlotBinaryBadInput(t *testing.T) {
	dir := t.TempDir()
	zero := filepath.Join(dir, "zero.csv")
	if err := os.WriteFile(zero, []byte("collective, nodes, ranks, rankspernode, gpusperrank, size, type, redop, inplace, time, algbw, busbw, #wrong\n"+
		"all_gather, 1, 2, 2, 1, 0, float, none, 0, 0.2, 0, 0, 0\nall_gather, 1, 2, 2, 1, 0, float, none, 1, 0.2, 0, 0, 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	notes := fixture(t, "notes.txt")
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"not a result", []string{"plot", notes, "-o", "out.svg"}, exitUsage, notes + ": not a result file: want cc-perf or nccl-tests -J JSON"},
		{"mixed", []string{"plot", fixture(t, "sweep.json"), fixture(t, "all_gather.csv"), "-o", "out.svg"}, exitUsage,
			"mixed collectives all_reduce (sweep.json) and all_gather (all_gather.csv): plot one at a time, or pass --allow-mixed"},
		{"empty", []string{"plot", zero, "-o", "out.svg"}, exitUsage, "nothing to plot in " + zero},
		{"extension", []string{"plot", fixture(t, "sweep.json"), "-o", "out.jpg"}, exitUsage, `-o/--output "out.jpg": want a .svg, .png or .pdf file`},
		{"no extension", []string{"plot", fixture(t, "sweep.json"), "-o", "out"}, exitUsage, `-o/--output "out": want a .svg, .png or .pdf file`},
		{"y", []string{"plot", fixture(t, "sweep.json"), "--y", "speed", "-o", "out.svg"}, exitUsage, `--y "speed": want busbw, algbw or time`},
		{"tune busbw", []string{"plot", fixture(t, "tune.txt"), "--y", "busbw", "-o", "out.svg"}, exitUsage, "cc-perf tune output holds times only: plot it with --y time"},
		{"calibration", []string{"plot", fixture(t, "calibrate.txt"), "-o", "out.svg"}, exitUsage, "cc-perf calibrate output has no sweep to plot: give it to cc-perf report"},
		{"no files", []string{"plot", "-o", "out.svg"}, exitUsage, "missing FILE: cc-perf plot takes the result files to read"},
		{"missing", []string{"plot", filepath.Join(dir, "nope.json"), "-o", "out.svg"}, exitSystem, "cannot read"},
		{"report extension", []string{"report", fixture(t, "sweep.json"), "-o", "out.htm"}, exitUsage, `-o/--output "out.htm": want a .html file`},
		{"report not a result", []string{"report", fixture(t, "sweep.json"), notes, "-o", "out.html"}, exitUsage, notes + ": not a result file"},
		{"report no files", []string{"report", "-o", "out.html"}, exitUsage, "missing FILE: cc-perf report takes the result files to read"},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, out := range []string{"out.svg", "out.html"} {
				if err := os.WriteFile(filepath.Join(dir, out), []byte("old"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r := runBinary(t, dir, c.args...)
			if r.code != c.code || r.stdout != "" || !strings.HasPrefix(r.stderr, "cc-perf: ") || !strings.Contains(r.stderr, c.want) ||
				strings.Count(r.stderr, "\n") != 1 {
				t.Errorf("exit %d (want %d), stdout %q, stderr %q (want one line with %q)", r.code, c.code, r.stdout, r.stderr, c.want)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if got := strings.Join(names, " "); got != "out.html out.svg zero.csv" {
				t.Errorf("the directory holds %s, want only out.html out.svg zero.csv", got)
			}
			for _, out := range []string{"out.svg", "out.html"} {
				if b, _ := os.ReadFile(filepath.Join(dir, out)); string(b) != "old" {
					t.Errorf("%s was overwritten: %.40q", out, b)
				}
			}
		})
	}
}

// chromium is the path of a headless-capable Chromium: skipped when there
// is none, except under CI (CI=true), where its absence fails.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed: CI needs it for the report test (scripts/test.sh installs it as root: apt-get install chromium)")
	}
	t.Skip("chromium is not installed (scripts/test.sh installs it as root: apt-get install chromium): skipping the browser test of cc-perf report")
	return ""
}

// browse runs headless Chromium with args on url, with its own profile
// directory, and returns its stdout. The timeout only stops a hung
// browser.
func browse(t *testing.T, bin, profile, url string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=" + profile}, args...)
	cmd := exec.CommandContext(ctx, bin, append(all, url)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\n%s", bin, args, err, errb.String())
	}
	return out.Bytes()
}

// TestReportInChromium renders cc-perf report's page in a real browser,
// offline: the screenshot is not blank, and the text of the page holds the
// values of its tables.
func TestReportInChromium(t *testing.T) {
	bin := chromium(t)
	dir := t.TempDir()
	r := runBinary(t, dir, "report", fixture(t, "sweep.json"), fixture(t, "algo.txt"), fixture(t, "tune.txt"),
		fixture(t, "calibrate.txt"), fixture(t, "fabric.json"), "-o", "report.html")
	if r.code != 0 {
		t.Fatalf("report: exit %d, stderr %q", r.code, r.stderr)
	}
	url := "file://" + filepath.Join(dir, "report.html")
	shot := filepath.Join(dir, "report.png")
	browse(t, bin, filepath.Join(dir, "profile"), url, "--hide-scrollbars", "--window-size=1280,6000", "--screenshot="+shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	bg, other, total := img.At(0, 0), 0, 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			total++
			if img.At(x, y) != bg {
				other++
			}
		}
	}
	t.Logf("screenshot %s: %dx%d, %d of %d pixels (%.1f%%) off the background", shot, b.Dx(), b.Dy(), other, total, 100*float64(other)/float64(total))
	if other < total/50 {
		t.Errorf("screenshot is blank: %d of %d pixels off the background", other, total)
	}
	dom := string(browse(t, bin, filepath.Join(dir, "profile"), url, "--dump-dom"))
	for _, want := range []string{
		"<td>2097152</td><td>524288</td><td>float</td><td>sum</td><td>-1</td><td>3719.50</td>", // sweep.json's last row
		"<td>OneShot</td><td>Simple</td>",                                        // algo.txt's -A columns
		"<td>262144</td><td>65536</td><td>OneShot/Simple/1</td><td>1222.10</td>", // tune.txt: best at 256K
		"<td>gamma LL128</td><td>us</td><td>0.626</td><td>44.3</td>",             // calibrate.txt
		"<td>tb5</td>", "<td>slow-host</td>", // fabric.json
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered page lacks %q", want)
		}
	}
}
