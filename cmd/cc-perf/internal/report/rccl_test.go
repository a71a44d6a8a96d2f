package report

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
)

// rcclRow is a row whose every printed value is worked by hand: 1024 bytes
// in 12.5 us out of place (0.08192 GB/s, busbw x 3/4), 13 us in place,
// unchecked; the second sweep (-N).
func rcclRow() bench.Result {
	r := bench.Result{Bytes: 1024, Count: 64, Type: "float", RedOp: "none", Root: -1, Cycle: 1}
	r.OutOfPlace = bench.Half{TimeUS: 12.5, AlgBW: 0.08192, BusBW: 0.06144, Checked: true}
	r.InPlace = bench.Half{TimeUS: 13, AlgBW: 0.0787692307, BusBW: 0.0590769230}
	return r
}

// TestReporterLines pins the current rccl-tests records of rcclRow, as its
// Reporter writes them (strings quoted, std::to_string numbers, no spaces
// in the CSV, ", " between JSON fields), for one process and for a job of
// several (rccl-tests' MPI build).
func TestReporterLines(t *testing.T) {
	for _, tt := range []struct {
		csv   bool
		procs int
		want  string
	}{
		{true, 1, `numCycle,collective,gpus,size,type,redop,inplace,time,algbw,busbw,#wrong
1,"AlltoAll",4,1024,"float","none",0,12.500000,0.081920,0.061440,"0"
1,"AlltoAll",4,1024,"float","none",1,13.000000,0.078769,0.059077,"N/A"
`},
		{true, 2, `numCycle,collective,nodes,ranks,ranksPerNode,gpusPerRank,size,type,redop,inplace,time,algbw,busbw,#wrong
1,"AlltoAll",1,2,2,4,1024,"float","none",0,12.500000,0.081920,0.061440,"0"
1,"AlltoAll",1,2,2,4,1024,"float","none",1,13.000000,0.078769,0.059077,"N/A"
`},
		{false, 1, `[
{"numCycle":1, "name":"AlltoAll", "gpus":4, "size":1024, "type":"float", "redop":"none", "inPlace":0, "time":12.500000, "algBw":0.081920, "busBw":0.061440, "wrong":"0"},
{"numCycle":1, "name":"AlltoAll", "gpus":4, "size":1024, "type":"float", "redop":"none", "inPlace":1, "time":13.000000, "algBw":0.078769, "busBw":0.059077, "wrong":"N/A"}
]
`},
		{false, 2, `[
{"numCycle":1, "name":"AlltoAll", "nodes":1, "ranks":2, "ranksPerNode":2, "gpusPerRank":4, "size":1024, "type":"float", "redop":"none", "inPlace":0, "time":12.500000, "algBw":0.081920, "busBw":0.061440, "wrong":"0"},
{"numCycle":1, "name":"AlltoAll", "nodes":1, "ranks":2, "ranksPerNode":2, "gpusPerRank":4, "size":1024, "type":"float", "redop":"none", "inPlace":1, "time":13.000000, "algBw":0.078769, "busBw":0.059077, "wrong":"N/A"}
]
`},
	} {
		var f memFile
		r := NewReporter(&f, tt.csv, "AlltoAll", tt.procs, 4)
		r.Devices(devices(4))
		r.Row(rcclRow())
		r.End(Footer{}, end)
		if got := string(f.b); got != tt.want || r.Err() != nil {
			t.Errorf("csv %v, %d processes: %v\n got %s\nwant %s", tt.csv, tt.procs, r.Err(), got, tt.want)
		}
	}
}

// TestReporterGolden pins whole -X files of alltoallv over several rows,
// and checks them as their readers would: the CSV's every line has the
// header's field count, the JSON parses after every row (the array closed
// each time) into two records a row.
func TestReporterGolden(t *testing.T) {
	c, _ := bench.Lookup("alltoallv")
	rs := rows(c, 4, "float", -1)
	for i := range rs {
		rs[i].Cycle = i / 2
	}
	for _, tt := range []struct {
		name  string
		csv   bool
		procs int
	}{{"rccl.csv", true, 1}, {"rccl_procs.csv", true, 2}, {"rccl.json", false, 1}, {"rccl_procs.json", false, 4}} {
		var f memFile
		r := NewReporter(&f, tt.csv, c.TestName, tt.procs, 4/tt.procs)
		if !tt.csv && string(f.b) != "[\n]\n" {
			t.Errorf("%s with no rows: %q, want an empty array", tt.name, f.b)
		}
		for i, row := range rs {
			r.Row(row)
			if tt.csv {
				continue
			}
			var recs []map[string]any
			if err := json.Unmarshal(f.b, &recs); err != nil || len(recs) != 2*(i+1) {
				t.Fatalf("%s after %d rows: %d records, %v:\n%s", tt.name, i+1, len(recs), err, f.b)
			}
		}
		r.Abort([]string{"stopped"}, end)
		golden(t, tt.name, f.b)
		if !tt.csv {
			continue
		}
		lines := strings.Split(strings.TrimSuffix(string(f.b), "\n"), "\n")
		if len(lines) != 1+2*len(rs) {
			t.Errorf("%s: %d lines, want the header and 2 per row", tt.name, len(lines))
		}
		for _, l := range lines {
			if n, want := strings.Count(l, ","), strings.Count(lines[0], ","); n != want {
				t.Errorf("%s: %q has %d commas, the header %d", tt.name, l, n, want)
			}
		}
	}
}
