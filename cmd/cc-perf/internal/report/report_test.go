package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
	"github.com/seed-760dd1f1/cc/protocols"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs from the golden file (-want +got):\n%s", name, diff)
	}
}

var (
	start = time.Date(2025, 11, 21, 10, 30, 0, 0, time.UTC)
	end   = start.Add(42 * time.Second)
)

func header(program string) Header {
	return Header{
		Program: program, Version: "2.19.6+cc", NCCLHeaders: 23007, NCCLLibrary: 23007,
		NThreads: 4, NGpus: 1, MinBytes: 8, MaxBytes: 134217728, StepFactor: 2, StepBytes: 1 << 20,
		WarmupIters: 1, Iters: 20, AggIters: 1, Check: 1,
	}
}

func devices(n int) []bench.Device {
	ds := make([]bench.Device, n)
	for i := range ds {
		ds[i] = bench.Device{Rank: i, Pid: 4242, Host: "node01.example.com", Device: i, CPUs: "cpu 0-7", Model: "AMD EPYC 7B13"}
	}
	return ds
}

// rows makes deterministic rows for coll over nranks as bench would: real
// counts and bandwidth formulas, made-up times.
func rows(c *bench.Coll, nranks int, typ string, root int) []bench.Result {
	var out []bench.Result
	for _, size := range []int64{8, 1024, 1 << 20, 128 << 20} {
		elt := int64(4)
		cn := c.Counts(size/elt, elt, nranks)
		r := bench.Result{Bytes: cn.Bytes(elt), Count: cn.Param, Type: typ, RedOp: c.OpColumn("sum"), Root: root, Iters: 20,
			Time: start.Add(time.Duration(size))}
		for i, h := range []*bench.Half{&r.OutOfPlace, &r.InPlace} {
			us := 9.87 + float64(size)/3000 + float64(i)*0.31
			h.TimeUS = us
			h.AlgBW, h.BusBW = c.Bandwidth(cn, elt, nranks, us/1e6)
			h.Checked = i == 0 || c.InPlaceChecked
		}
		out = append(out, r)
	}
	return out
}

func render(f Format, h Header, ds []bench.Device, rs []bench.Result, ft Footer) []byte {
	var b bytes.Buffer
	t := &Text{W: &b, Fmt: f}
	t.Start(h)
	t.Devices(ds)
	t.Columns()
	for _, r := range rs {
		t.RowStart(r)
		t.RowDone(r)
	}
	t.End(ft)
	return b.Bytes()
}

func avgBus(rs []bench.Result) float64 {
	var s float64
	for _, r := range rs {
		s += r.OutOfPlace.BusBW + r.InPlace.BusBW
	}
	return s / float64(2*len(rs))
}

// TestTextGolden pins the whole table of every collective.
func TestTextGolden(t *testing.T) {
	for _, c := range bench.Collectives {
		root := -1
		if c.Rooted {
			root = 0
		}
		rs := rows(c, 4, "float", root)
		out := render(Format{}, header(c.Name+"_perf"), devices(4), rs, Footer{Program: c.Name + "_perf", AvgBusBW: avgBus(rs)})
		golden(t, c.Name+".txt", out)
	}
}

func TestTextVariantsGolden(t *testing.T) {
	ar, _ := bench.Lookup("all_reduce")
	rs := rows(ar, 2, "half", -1)
	rs[1].OutOfPlace.Wrong = 1234567
	rs[2].InPlace.Wrong = 3
	ft := Footer{Program: "all_reduce_perf", OutOfBounds: 2, AvgBusBW: avgBus(rs)}
	golden(t, "legacy.txt", render(Format{Legacy: true}, header("all_reduce_perf"), devices(2), rs, ft))

	for i := range rs {
		for _, h := range []*bench.Half{&rs[i].OutOfPlace, &rs[i].InPlace} {
			h.Iter = &bench.IterStats{Skipped: 2, Min: h.TimeUS * 0.9, Max: h.TimeUS * 1.7, P99: h.TimeUS * 1.6, CVPct: 12.345}
		}
	}
	h := header("all_reduce_perf")
	h.Blocking, h.ParallelInit, h.Unalign = 3, true, 1
	ft.MinBW, ft.MinBWSet = 1000, true
	ft.Memory = &Memory{Init: 3 << 20, User: 1536 << 20, Collective: 12345}
	ft.Error = "rank 1: connection reset by peer"
	golden(t, "periter.txt", render(Format{PerIter: true, PerIterSkip: 2, Timestamps: true, CPUTime: true}, h, devices(2), rs, ft))

	h.Blocking = 1
	golden(t, "timestamps.txt", render(Format{Timestamps: true}, h, devices(2), rs[:2], Footer{Program: "all_reduce_perf", AvgBusBW: 1.5, MinBW: 1, MinBWSet: true}))
	h.Blocking = 2
	golden(t, "blocking2.txt", render(Format{}, h, devices(1), rs[:1], Footer{Program: "all_reduce_perf", AvgBusBW: math.NaN()}))
}

// TestTextAbortGolden pins a failure report: the row being measured is
// ended, and every line of a multi-line message becomes a '#' line.
func TestTextAbortGolden(t *testing.T) {
	ar, _ := bench.Lookup("all_reduce")
	rs := rows(ar, 2, "float", -1)
	var b bytes.Buffer
	tw := &Text{W: &b}
	tw.Start(header("all_reduce_perf"))
	tw.Devices(devices(2))
	tw.Columns()
	tw.RowStart(rs[0])
	tw.RowDone(rs[0])
	tw.RowStart(rs[1])
	tw.Abort("node01: Test failure: ranks 0-1: send: connection reset\nnode01: Test failure: rank 2: recv: timeout\n")
	golden(t, "abort.txt", b.Bytes())
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	for _, l := range lines[len(lines)-2:] {
		if !strings.HasPrefix(l, "# node01: Test failure: ") {
			t.Errorf("failure line %q, want a '#' line", l)
		}
	}
}

// TestTextAlgoGolden pins -A: three columns after the in-place half (and
// its -I columns), before -S's timestamp; N/A where nothing was recorded, and
// "out-of-place|in-place" where the halves disagree.
func TestTextAlgoGolden(t *testing.T) {
	ar, _ := bench.Lookup("all_reduce")
	rs := rows(ar, 4, "float", -1)
	ran := []*bench.Ran{
		{Algo: algos.Ring, Proto: protocols.LL128, Channels: 1},
		{Algo: algos.CTRing, Proto: protocols.Simple, Channels: 2},
		{Algo: algos.Tree, Proto: protocols.LL, Channels: 1},
	}
	rs[0].OutOfPlace.Ran, rs[0].InPlace.Ran = ran[0], ran[0]
	rs[1].OutOfPlace.Ran, rs[1].InPlace.Ran = ran[2], ran[0] // the halves disagree
	rs[2].OutOfPlace.Ran, rs[2].InPlace.Ran = ran[1], ran[1]
	// rs[3]: nothing recorded
	ft := Footer{Program: "all_reduce_perf", AvgBusBW: avgBus(rs)}
	golden(t, "algo.txt", render(Format{Algo: true}, header("all_reduce_perf"), devices(4), rs, ft))

	for i := range rs {
		for _, h := range []*bench.Half{&rs[i].OutOfPlace, &rs[i].InPlace} {
			h.Iter = &bench.IterStats{Min: h.TimeUS * 0.9, Max: h.TimeUS * 1.7, P99: h.TimeUS * 1.6, CVPct: 12.345}
		}
	}
	golden(t, "algo_periter.txt", render(Format{Algo: true, PerIter: true, Timestamps: true}, header("all_reduce_perf"), devices(4), rs[:3], ft))
	golden(t, "algo_legacy.txt", render(Format{Algo: true, Legacy: true}, header("all_reduce_perf"), devices(4), rs[:3], ft))

	// Whitespace-split rows: 13 columns + 3, the last three what ran.
	out := render(Format{Algo: true}, header("all_reduce_perf"), devices(4), rs, ft)
	var got [][]string
	for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			f := strings.Fields(line)
			if len(f) != 16 {
				t.Fatalf("%d fields in %q, want 16", len(f), line)
			}
			got = append(got, f[13:])
		}
	}
	want := [][]string{{"Ring", "LL128", "1"}, {"Tree|Ring", "LL|LL128", "1"}, {"CTRing", "Simple", "2"}, {"N/A", "N/A", "N/A"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("-A columns (-want +got):\n%s", diff)
	}
}

// TestRowColumns splits every data row of every collective's table on
// whitespace: the column count is fixed and busbw = algbw x bus factor
// holds to the printed precision.
func TestRowColumns(t *testing.T) {
	for _, c := range bench.Collectives {
		for _, n := range []int{2, 4, 8} {
			root := -1
			if c.Rooted {
				root = n - 1
			}
			rs := rows(c, n, "float", root)
			out := render(Format{}, header(c.Name+"_perf"), devices(n), rs, Footer{Program: c.Name})
			factor := c.BusFactor(n)
			want := 13
			if c.OpColumn("sum") == "" {
				want = 12 // hypercube: the empty redop column vanishes
			}
			var data int
			for _, line := range strings.Split(strings.TrimRight(string(out), "\n"), "\n") {
				if line == "" || strings.HasPrefix(line, "#") {
					continue
				}
				data++
				f := strings.Fields(line)
				if len(f) != want {
					t.Fatalf("%s: %d fields in %q, want %d", c.Name, len(f), line, want)
				}
				for _, i := range []int{want - 7, want - 3} { // algbw of each half
					alg, err1 := strconv.ParseFloat(f[i], 64)
					bus, err2 := strconv.ParseFloat(f[i+1], 64)
					if err1 != nil || err2 != nil {
						t.Fatalf("%s: unparsable bandwidths in %q", c.Name, line)
					}
					if d := math.Abs(bus - alg*factor); d > 0.0051*(1+factor)+1e-3*bus {
						t.Errorf("%s n=%d: busbw %v != algbw %v x %v in %q", c.Name, n, bus, alg, factor, line)
					}
				}
			}
			if data != len(rs) {
				t.Errorf("%s: %d data rows, want %d", c.Name, data, len(rs))
			}
		}
	}
}

// memFile is an in-memory file: WriteAt as pwrite(2) does it.
type memFile struct{ b []byte }

func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	if end := int(off) + len(p); end > len(m.b) {
		m.b = append(m.b, make([]byte, end-len(m.b))...)
	}
	copy(m.b[off:], p)
	return len(p), nil
}

// jsonState parses the -J file as it is now.
type jsonState struct {
	Config struct {
		Devices []map[string]any `json:"devices"`
	} `json:"config"`
	Results     []map[string]any `json:"results"`
	OutOfBounds *struct{}        `json:"out_of_bounds"`
	Errors      []string         `json:"errors"`
	EndTime     *string          `json:"end_time"`
}

func parseJSON(t *testing.T, b []byte) jsonState {
	t.Helper()
	var st jsonState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatalf("the file is not JSON: %v\n%s", err, b)
	}
	return st
}

// newTestJSON starts the document TestJSON and TestJSONAbort write.
func newTestJSON(w io.WriterAt) *JSON {
	return NewJSON(w, header("all_reduce_perf"), Format{}, []string{"cc-perf", "all_reduce", "-b", "8"}, []string{"HOME=/root", `Q="x"/y`}, start)
}

// TestJSON pins the -J document of a finished run, checks that the file
// is a JSON document after every write, with the rows so far, and that it
// carries the table's numbers.
func TestJSON(t *testing.T) {
	ar, _ := bench.Lookup("all_reduce")
	rs := rows(ar, 4, "float", -1)
	rs[0].InPlace.Wrong = 2
	rs[3].OutOfPlace.TimeUS = math.NaN()
	var f memFile
	j := newTestJSON(&f)
	if st := parseJSON(t, f.b); len(st.Config.Devices) != 0 || len(st.Results) != 0 || st.EndTime != nil {
		t.Errorf("new document %+v, want no devices, results or end", st)
	}
	j.Devices(devices(4))
	for i, r := range rs {
		if st := parseJSON(t, f.b); len(st.Config.Devices) != 4 || len(st.Results) != i {
			t.Fatalf("before row %d: %d devices and %d results, want 4 and %d", i, len(st.Config.Devices), len(st.Results), i)
		}
		j.Row(r)
	}
	ft := Footer{Program: "all_reduce_perf", OutOfBounds: 1, AvgBusBW: avgBus(rs)}
	j.End(ft, end)
	if err := j.Err(); err != nil {
		t.Fatal(err)
	}
	b := f.b
	golden(t, "all_reduce.json", b)

	var doc struct {
		Version int
		Config  struct{ Devices []map[string]any }
		Results []struct {
			Size, Count int64
			Root        string
			OutOfPlace  map[string]any `json:"out_of_place"`
			InPlace     map[string]any `json:"in_place"`
		}
		OutOfBounds struct{ Count int } `json:"out_of_bounds"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("the JSON does not parse: %v", err)
	}
	if doc.Version != 3 || len(doc.Results) != len(rs) || len(doc.Config.Devices) != 4 || doc.OutOfBounds.Count != 1 {
		t.Fatalf("parsed %+v", doc)
	}
	var text bytes.Buffer
	tw := &Text{W: &text}
	for _, r := range rs {
		tw.RowDone(r)
	}
	for i, line := range strings.Split(strings.TrimSpace(text.String()), "\n") {
		f := strings.Fields(line)
		res := doc.Results[i]
		if res.Size != rs[i].Bytes || res.Count != rs[i].Count || res.Root != "    -1" {
			t.Errorf("row %d: size/count/root %d %d %q", i, res.Size, res.Count, res.Root)
		}
		for h, half := range []map[string]any{res.OutOfPlace, res.InPlace} {
			for k, key := range []string{"time", "alg_bw", "bus_bw"} {
				printed := f[4*h+k]
				v, ok := half[key].(float64)
				if !ok {
					if half[key] != "nan" || printed != "nan" {
						t.Errorf("row %d %s = %v, table %q", i, key, half[key], printed)
					}
					continue
				}
				p, _ := strconv.ParseFloat(printed, 64)
				if math.Abs(p-v) > 0.051+1e-3*math.Abs(v) {
					t.Errorf("row %d %s: JSON %v, table %v", i, key, v, p)
				}
			}
		}
	}
}

// TestJSONAbort pins the file of a run stopped after two rows: the rows,
// no footer, the failure report as errors, the end time.
func TestJSONAbort(t *testing.T) {
	ar, _ := bench.Lookup("all_reduce")
	var f memFile
	j := newTestJSON(&f)
	j.Devices(devices(2))
	for _, r := range rows(ar, 2, "float", -1)[:2] {
		j.Row(r)
	}
	j.Abort([]string{"node01: Test timeout (5s) all_reduce float sum, 1048576 bytes, in-place"}, end)
	golden(t, "all_reduce_aborted.json", f.b)
	st := parseJSON(t, f.b)
	if len(st.Results) != 2 || st.OutOfBounds != nil || len(st.Errors) != 1 || st.EndTime == nil {
		t.Errorf("aborted document %+v, want 2 results, no footer, 1 error, an end time", st)
	}
}

// discardAt is a file that forgets what is written.
type discardAt struct{}

func (discardAt) WriteAt(p []byte, _ int64) (int, error) { return len(p), nil }

// TestJSONKeepsNoRows writes as many rows as a long -N 0 run: the writer's
// memory does not grow with them.
func TestJSONKeepsNoRows(t *testing.T) {
	ar, _ := bench.Lookup("all_reduce")
	r := rows(ar, 2, "float", -1)[1]
	for _, h := range []*bench.Half{&r.OutOfPlace, &r.InPlace} {
		h.Iter = &bench.IterStats{TimesUS: make([]float64, 10)}
	}
	j := newTestJSON(discardAt{})
	heap := func() uint64 {
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	for range 20000 { // about 10 MB if each row were kept
		j.Row(r)
	}
	grown := int64(heap()) - int64(before)
	runtime.KeepAlive(j)
	if grown > 2<<20 {
		t.Errorf("the heap grew by %d bytes over 20000 rows", grown)
	}
}

func TestCSV(t *testing.T) {
	at, _ := bench.Lookup("alltoall")
	var b bytes.Buffer
	c := NewCSV(&b, "alltoall", 4, 1)
	ds := devices(4)
	ds[2].Host, ds[3].Host = "node02", "node02"
	c.Devices(ds)
	for _, r := range rows(at, 4, "float", -1)[:2] {
		c.Row(r)
	}
	out := b.Bytes()
	golden(t, "alltoall.csv", out)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	n := len(strings.Split(lines[0], ", "))
	for _, l := range lines[1:] {
		if got := len(strings.Split(l, ", ")); got != n {
			t.Errorf("CSV row has %d fields, header %d: %q", got, n, l)
		}
	}
}

// TestCSVNonFinite pins B14 of the audit: a time of 0 (infinite bandwidth)
// or a NaN prints as rccl-tests' std::to_string does, "inf", "-inf", "nan",
// not Go's "+Inf" and "NaN".
func TestCSVNonFinite(t *testing.T) {
	ar, _ := bench.Lookup("all_reduce")
	r := rows(ar, 2, "float", -1)[0]
	r.OutOfPlace.TimeUS, r.OutOfPlace.AlgBW, r.OutOfPlace.BusBW = 0, math.Inf(1), math.Inf(1)
	r.InPlace.TimeUS, r.InPlace.AlgBW, r.InPlace.BusBW = math.NaN(), math.NaN(), math.Inf(-1)
	var b bytes.Buffer
	c := NewCSV(&b, "all_reduce", 2, 1)
	c.Devices(devices(2))
	c.Row(r)
	out := b.Bytes()
	golden(t, "nonfinite.csv", out)
	for _, bad := range []string{"Inf", "NaN"} {
		if strings.Contains(string(out), bad) {
			t.Errorf("CSV spells a non-finite double %q:\n%s", bad, out)
		}
	}
}

func TestDeviceLine(t *testing.T) {
	got := DeviceLine(bench.Device{Rank: 3, Group: 0, Pid: 12345, Host: "node01.cluster", Device: 1, CPUs: "cpu 0-3", Model: "Intel Xeon"})
	want := "#  Rank  3 Group  0 Pid  12345 on     node01 device  1 [cpu 0-3] Intel Xeon\n"
	if got != want {
		t.Errorf("DeviceLine = %q, want %q", got, want)
	}
}

func TestMemString(t *testing.T) {
	for _, tt := range []struct {
		n    int64
		want string
	}{{0, "0.00 B"}, {999, "999 B"}, {1536, "1.50 KB"}, {50 << 20, "50.0 MB"}, {3 << 30, "3.00 GB"}, {200 << 30, "200 GB"}} {
		if got := memString(tt.n); got != tt.want {
			t.Errorf("memString(%d) = %q, want %q", tt.n, got, tt.want)
		}
	}
}

// TestOutput creates result files next to existing ones: never replaced,
// the next free name taken.
func TestOutput(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.json")
	for p, data := range map[string]string{path: "old", path + ".0": "other"} {
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	o, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if o.Path != path+".1" {
		t.Errorf("Create picked %q, want %q", o.Path, path+".1")
	}
	if _, err := o.Write([]byte("new")); err != nil {
		t.Fatal(err)
	}
	if _, err := o.WriteAt([]byte("N"), 0); err != nil {
		t.Fatal(err)
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]string{path: "old", path + ".0": "other", path + ".1": "New"} {
		if got, _ := os.ReadFile(p); string(got) != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("%d files in the directory, want 3", len(entries))
	}
}

func TestCreateUnwritable(t *testing.T) {
	dir := t.TempDir()
	_, err := Create(filepath.Join(dir, "missing", "r.json"))
	if err == nil || !strings.Contains(err.Error(), "missing/r.json") {
		t.Errorf("Create in a missing directory: %v, want an error naming the path", err)
	}
	if os.Geteuid() != 0 { // root writes anywhere
		ro := filepath.Join(dir, "ro")
		os.Mkdir(ro, 0o555)
		if _, err := Create(filepath.Join(ro, "r.json")); err == nil {
			t.Error("Create in a read-only directory: nil error")
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) > 1 {
		t.Errorf("Create left files behind: %v", entries)
	}
}

func TestKindOf(t *testing.T) {
	for _, tt := range []struct {
		path string
		kind Kind
		ok   bool
	}{{"a.json", KindJSON, true}, {"A.JSON", KindJSON, true}, {"x/y.csv", KindCSV, true}, {"a.txt", 0, false}, {"json", 0, false}} {
		if k, ok := KindOf(tt.path); k != tt.kind || ok != tt.ok {
			t.Errorf("KindOf(%q) = %v, %v; want %v, %v", tt.path, k, ok, tt.kind, tt.ok)
		}
	}
}
