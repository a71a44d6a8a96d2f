package results

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse: any bytes parse or fail with one line naming the file, and
// never panic; what parses can be plotted or refused without panicking.
func FuzzParse(f *testing.F) {
	names, _ := filepath.Glob("testdata/*")
	for _, n := range names {
		if strings.HasSuffix(n, ".golden") {
			continue
		}
		if data, err := os.ReadFile(n); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"version":3,"config":{},"results":null}`))
	f.Add([]byte("# cc-perf tune x: 1 rank on 1 host, float sum\n size (B)\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("in", data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "in: ") || strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q: want one line starting with the file's name", err)
			}
			return
		}
		for _, y := range []Measure{BusBW, Time} {
			PlotOf([]*File{file}, y, true)
		}
	})
}
