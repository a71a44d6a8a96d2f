package results

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func parseFixture(t *testing.T, name string) *File {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse(name, data)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestPlotOf: series per file, per algo/proto, per tune configuration,
// and the title from what the files say.
func TestPlotOf(t *testing.T) {
	for _, c := range []struct {
		files  []string
		y      Measure
		mixed  bool
		labels []string
		points []int
		title  string
	}{
		{[]string{"sweep.json", "sweep.txt"}, BusBW, false, []string{"sweep.json", "sweep.txt"}, []int{10, 10},
			"all_reduce: 2 ranks on 1 host, 2026-11-27 09:09:08; 2 ranks on 1 host"},
		{[]string{"algo.txt"}, Time, false, []string{"algo.txt OneShot/Simple", "algo.txt Ring/Simple"}, []int{4, 6}, "all_reduce: 2 ranks on 1 host"},
		{[]string{"tune.txt"}, Time, false, []string{"tune.txt best", "tune.txt auto"}, []int{4, 4}, "all_reduce: 2 ranks on 1 host"},
		{[]string{"sweep.json", "all_gather.csv"}, AlgBW, true, []string{"sweep.json", "all_gather.csv"}, []int{10, 9},
			"all_reduce, all_gather: 2 ranks on 1 host, 2026-11-27 09:09:08; 2 ranks on 1 host"},
	} {
		var files []*File
		for _, n := range c.files {
			files = append(files, parseFixture(t, n))
		}
		p, err := PlotOf(files, c.y, c.mixed)
		if err != nil {
			t.Errorf("%v: %v", c.files, err)
			continue
		}
		var labels []string
		var points []int
		for _, s := range p.Series {
			labels = append(labels, s.Label)
			points = append(points, len(s.Points))
			for i := 1; i < len(s.Points); i++ {
				if s.Points[i].Bytes <= s.Points[i-1].Bytes {
					t.Errorf("%v: %s: sizes out of order at %d", c.files, s.Label, i)
				}
			}
		}
		if strings.Join(labels, "|") != strings.Join(c.labels, "|") || len(points) != len(c.points) {
			t.Errorf("%v: series %q, want %q", c.files, labels, c.labels)
			continue
		}
		for i := range points {
			if points[i] != c.points[i] {
				t.Errorf("%v: %s has %d points, want %d", c.files, labels[i], points[i], c.points[i])
			}
		}
		if p.Title != c.title {
			t.Errorf("%v: title %q, want %q", c.files, p.Title, c.title)
		}
	}
}

// TestPlotOfRefuses: mixed collectives, nothing to plot, files that hold
// no sweep and tune output with a bandwidth: one-line errors naming why.
func TestPlotOfRefuses(t *testing.T) {
	zero, err := Parse("zero.csv", []byte("collective, nodes, ranks, rankspernode, gpusperrank, size, type, redop, inplace, time, algbw, busbw, #wrong\n"+
		"all_gather, 1, 2, 2, 1, 0, float, none, 0, 0.2, 0, 0, 0\nall_gather, 1, 2, 2, 1, 0, float, none, 1, 0.2, 0, 0, 0\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		files []*File
		y     Measure
		want  string
	}{
		{[]*File{parseFixture(t, "sweep.json"), parseFixture(t, "all_gather.csv")}, BusBW,
			"mixed collectives all_reduce (sweep.json) and all_gather (all_gather.csv): plot one at a time, or pass --allow-mixed"},
		{[]*File{zero}, BusBW, "nothing to plot in zero.csv: no row with a size above 0 and a finite busbw"},
		{[]*File{parseFixture(t, "calibrate.txt")}, BusBW, "calibrate.txt: cc-perf calibrate output has no sweep to plot: give it to cc-perf report"},
		{[]*File{parseFixture(t, "fabric.json")}, Time, "fabric.json: cc-perf fabric record has no sweep to plot"},
		{[]*File{parseFixture(t, "tune.txt")}, BusBW, "tune.txt: cc-perf tune output holds times only: plot it with --y time"},
	} {
		_, err := PlotOf(c.files, c.y, false)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("PlotOf: %v, want one line starting %q", err, c.want)
		}
	}
	if _, err := ParseMeasure("speed"); err == nil || err.Error() != `--y "speed": want busbw, algbw or time` {
		t.Errorf("ParseMeasure(speed): %v", err)
	}
}

// TestParseNCCLTestsLog: a log as nccl-tests prints it on GPUs, a job of
// two hosts (the device lines of releases before 2.13 have no Group), with
// a launcher's line in between: the collective, ranks and hosts, the rows.
func TestParseNCCLTestsLog(t *testing.T) {
	log := `# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  41001 on      gpu-a device  0 [0000:07:00] NVIDIA A100-SXM4-80GB
#  Rank  1 Group  0 Pid  41002 on      gpu-a device  1 [0000:0f:00] NVIDIA A100-SXM4-80GB
#  Rank  2 Pid  52001 on      gpu-b device  0 [0000:07:00] NVIDIA A100-SXM4-80GB
#  Rank  3 Pid  52002 on      gpu-b device  1 [0000:0f:00] NVIDIA A100-SXM4-80GB
#
#                                                              out-of-place                       in-place          
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)       
           8             2     float     sum      -1    31.52    0.00    0.00      0    30.91    0.00    0.00      0
Warning: a launcher's line
  1073741824     268435456     float     sum      -1   9876.5  108.72  163.08      0   9870.1  108.79  163.18      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 81.54
`
	f, err := Parse("a100.log", []byte(log))
	if err != nil {
		t.Fatal(err)
	}
	s := f.Sweeps[0]
	if s.Collective != "" || s.Ranks != 4 || s.Hosts != 2 || len(s.Rows) != 2 || s.Rows[1].Out.BusBW != 163.08 || s.Rows[1].In.TimeUS != 9870.1 {
		t.Errorf("collective %q, %d ranks on %d hosts, rows %+v", s.Collective, s.Ranks, s.Hosts, s.Rows)
	}
	f, err = Parse("a100.log", []byte("# Collective test starting: all_reduce_perf_mpi\n"+log))
	if err != nil || f.Sweeps[0].Collective != "all_reduce" || f.Sweeps[0].Ranks != 4 {
		t.Errorf("with the starting line: %v, %+v", err, f.Sweeps[0].Meta)
	}
}

// TestParseNCCLTestsJSONv1: the first nccl-tests JSON (version 1, no
// per-iteration keys): "nan" as a string, nwrong null when not checked, an
// out_of_place null (trace replay), the program's path in args.
func TestParseNCCLTestsJSONv1(t *testing.T) {
	doc := `{"version":1,"start_time":"2025-06-02 08:15:00","args":["/opt/nccl-tests/build/reduce_scatter_perf","-b","8","-e","1M"],
"env":[],"nccl_version":22703,"config":{"nthreads":1,"ngpus":8,"minimum_bytes":8,"maximum_bytes":1048576,"step_factor":2,
"warmup_iters":5,"iterations":20,"aggregated_iterations":1,"validation":1,"graph":0,"blocking_collectives":"false","parallel_init":"false",
"devices":[{"rank":0,"group":0,"pid":7,"hostname":"dgx1","device":0,"device_hex":"0000:07:00","device_info":"H100"},
{"rank":1,"group":0,"pid":8,"hostname":"dgx2","device":0,"device_hex":"0000:07:00","device_info":"H100"}]},
"results":[{"size":1024,"count":32,"type":"float","redop":"sum","root":"    -1","out_of_place":{"time":12.5,"alg_bw":0.08,"bus_bw":"nan","nwrong":null},
"in_place":{"time":12.0,"alg_bw":0.085,"bus_bw":0.075,"nwrong":0.000000},"actual_iterations":20,"experiment_name":""},
{"size":2048,"count":64,"type":"float","redop":"sum","root":"    -1","out_of_place":null,
"in_place":{"time":13.0,"alg_bw":0.16,"bus_bw":0.14,"nwrong":0.000000},"actual_iterations":20,"experiment_name":""}],
"out_of_bounds":{"count":0,"okay":"true"},"average_bus_bandwidth":{"bandwidth":0.1,"okay":"unchecked"},"errors":[],"end_time":"2025-06-02 08:15:02"}`
	f, err := Parse("v1.json", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	s := f.Sweeps[0]
	if s.Collective != "reduce_scatter" || s.Ranks != 2 || s.Hosts != 2 || s.Date != "2025-06-02 08:15:00" || len(s.Rows) != 2 {
		t.Fatalf("meta %+v, %d rows", s.Meta, len(s.Rows))
	}
	if r := s.Rows[0]; r.Out.Wrong != "N/A" || r.In.Wrong != "0" || r.In.BusBW != 0.075 || r.Root != "-1" {
		t.Errorf("row 0 %+v", r)
	}
	// NaN busbw and a null half are left out of the plot; time is there.
	if _, err := PlotOf([]*File{f}, BusBW, false); err == nil || !strings.HasPrefix(err.Error(), "nothing to plot in v1.json") {
		t.Errorf("busbw: %v, want nothing to plot", err)
	}
	p, err := PlotOf([]*File{f}, Time, false)
	if err != nil || len(p.Series) != 1 || len(p.Series[0].Points) != 1 || p.Series[0].Points[0] != (Point{Bytes: 1024, Y: 12.5}) {
		t.Errorf("time: %v, %+v", err, p)
	}
}
