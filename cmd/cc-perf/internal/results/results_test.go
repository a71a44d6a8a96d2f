package results

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata")

// dump is a parsed file as text, every field the plot and the report use.
func dump(f *File) string {
	var b strings.Builder
	fmt.Fprintf(&b, "kind %s\n", f.Kind)
	meta := func(m Meta) {
		fmt.Fprintf(&b, "format %q collective %q ranks %d hosts %d date %q\n", m.Format, m.Collective, m.Ranks, m.Hosts, m.Date)
	}
	for i, s := range f.Sweeps {
		fmt.Fprintf(&b, "sweep %d algo %v\n", i, s.Algo)
		meta(s.Meta)
		for _, r := range s.Rows {
			fmt.Fprintf(&b, "  %d %d %s %s %q out %g %g %g %q in %g %g %g %q %q %q %q %q\n", r.Bytes, r.Count, r.Type, r.RedOp, r.Root,
				r.Out.TimeUS, r.Out.AlgBW, r.Out.BusBW, r.Out.Wrong, r.In.TimeUS, r.In.AlgBW, r.In.BusBW, r.In.Wrong,
				r.Algo, r.Proto, r.Channels, r.Timestamp)
		}
	}
	if t := f.Tune; t != nil {
		meta(t.Meta)
		fmt.Fprintf(&b, "type %s redop %s\n", t.Type, t.RedOp)
		for _, r := range t.Summary {
			fmt.Fprintf(&b, "  summary %+v\n", r)
		}
		for _, c := range t.Configs {
			fmt.Fprintf(&b, "  config %+v\n", c)
		}
		for _, n := range t.Notes {
			fmt.Fprintf(&b, "  note %q\n", n)
		}
	}
	if c := f.Calib; c != nil {
		meta(c.Meta)
		fmt.Fprintf(&b, "class %s\n", c.Class)
		for _, h := range c.Header {
			fmt.Fprintf(&b, "  header %q\n", h)
		}
		for _, k := range c.Consts {
			fmt.Fprintf(&b, "  const %q %q %g %g %q\n", k.Name, k.Unit, k.Before, k.After, k.Basis)
		}
		for _, n := range c.Notes {
			fmt.Fprintf(&b, "  note %q\n", n)
		}
	}
	if r := f.Fabric; r != nil {
		fmt.Fprintf(&b, "hosts %d rounds %d verdict %q\n", len(r.Hosts), len(r.Rounds), r.Summary.Verdict)
	}
	return b.String()
}

// TestParseGolden: each fixture (from a real run of cc-perf, or the fabric
// package's record) parses into the records of its golden file.
func TestParseGolden(t *testing.T) {
	for _, c := range []struct{ file, kind string }{
		{"sweep.json", "sweep"}, {"sweep.txt", "sweep"}, {"algo.txt", "sweep"}, {"algo_ll.txt", "sweep"}, {"all_gather_ts.txt", "sweep"},
		{"all_gather.csv", "sweep"}, {"all_gather_rccl.csv", "sweep"}, {"rccl.json", "sweep"},
		{"tune.txt", "cc-perf tune output"}, {"tune_all.txt", "cc-perf tune output"},
		{"calibrate.txt", "cc-perf calibrate output"}, {"fabric.json", "cc-perf fabric record"},
	} {
		t.Run(c.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", c.file))
			if err != nil {
				t.Fatal(err)
			}
			f, err := Parse(c.file, data)
			if err != nil {
				t.Fatal(err)
			}
			if f.Kind.String() != c.kind {
				t.Errorf("kind %s, want %s", f.Kind, c.kind)
			}
			got := dump(f)
			golden := filepath.Join("testdata", c.file+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if got != string(want) {
				t.Errorf("parsed %s differs from %s (go test -update to rewrite):\ngot:\n%s\nwant:\n%s", c.file, golden, got, want)
			}
		})
	}
}

// TestParseBad: what is no known format fails with one line naming the
// file and what was expected.
func TestParseBad(t *testing.T) {
	for _, c := range []struct{ name, data, want string }{
		{"notes.txt", "hello, this is not a result\n", "notes.txt: not a result file: want cc-perf or nccl-tests -J JSON"},
		{"empty.json", "  \n", "empty.json: empty file: want"},
		{"other.json", `{"a": 1}`, "other.json: not a result file: want"},
		{"broken.json", `{"version": 3, "config": {}, "results": [`, "broken.json: not valid JSON"},
		{"v4.json", `{"version": 4, "config": {}, "results": []}`, "v4.json: nccl-tests JSON: want version 1, 2 or 3"},
		{"bad.csv", "collective, size\nall_reduce, 8\n", `bad.csv: CSV without a "inplace" column`},
		{"half.csv", "collective,size,inplace,time,algbw,busbw\nall_reduce,8,1,1,1,1\n", "half.csv: record 1: an in-place half of 8 B without its out-of-place half"},
		{"row.txt", "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n 8 2 float sum -1 x 0 0 0 1 0 0 0\n", `row.txt: line 2: time "x" is not a number`},
		{"tune.txt", "# cc-perf tune all_reduce: 2 ranks on 1 host, float sum\n size (B)  count  best\n 8 2 x\n", "tune.txt: line 3: 3 fields in a row of tune's summary: want 9"},
		{"cal.txt", "# cc-perf calibrate: 2 ranks on 1 host: link class shm\n", "cal.txt: cc-perf calibrate output without its first line or its table"},
	} {
		_, err := Parse(c.name, []byte(c.data))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Parse(%s): %v, want one line starting %q", c.name, err, c.want)
		}
	}
}
