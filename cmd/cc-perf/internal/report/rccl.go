package report

import (
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
)

// Reporter writes the result file of current rccl-tests' -X FILE -Z csv|json
// (ROCm/rocm-systems projects/rccl-tests src/common.cu @491c996, class
// Reporter): one record per half row, with these fields in this order:
//
//	numCycle   the sweep (-N) the row belongs to, from 0 for each type, op and root
//	collective nccl-tests' test name, "AllReduce" (JSON key "name")
//	gpus       one process: its ranks, -t x -g; or, for a job of several
//	           processes (rccl-tests' MPI build), four fields:
//	             nodes        1 (rccl-tests' processes / processes in the
//	                          communicator, which differ only with NCCL_TESTS_SPLIT)
//	             ranks        the processes
//	             ranksPerNode the processes (rccl-tests' count of the
//	                          communicator's processes)
//	             gpusPerRank  ranks per process, -t x -g
//	size       the row's size, bytes
//	type       "float"
//	redop      "sum", "none", ...
//	inplace    0 out of place, 1 in place (JSON key "inPlace")
//	time       us (%f)
//	algbw      GB/s (%f, JSON key "algBw")
//	busbw      GB/s (%f, JSON key "busBw")
//	#wrong     "0", or "N/A" when not checked (JSON key "wrong")
//
// Strings are quoted, numbers are C++'s std::to_string. CSV: a header line
// (rccl-tests' own, without spaces), then one line per record. JSON: an
// array, "[", one {"key":value, ...} object per line, "]".
//
// rccl-tests keeps the records in memory and writes the file at the end;
// Reporter writes each row as it completes, and, as the JSON writer does,
// keeps the JSON array closed after every row, so that the file is the
// same as rccl-tests' when the run ends and valid whenever it stops. Write
// errors are kept and returned by Err.
type Reporter struct {
	w      io.WriterAt
	csv    bool
	prefix []string // numCycle's followers up to size: collective and the rank fields
	keys   []string // JSON: every field's key
	off    int64    // where the next record goes (JSON: the closing's start)
	rows   int      // records written
	err    error
}

// NewReporter starts the -X file in w (at offset 0): csv selects the
// format (else JSON), test is nccl-tests' name of the test ("AllReduce"),
// procs the job's processes and ranksPerProc -t x -g.
func NewReporter(w io.WriterAt, csv bool, test string, procs, ranksPerProc int) *Reporter {
	r := &Reporter{w: w, csv: csv, keys: rcclKeys[0]}
	r.prefix = []string{quote(test), strconv.Itoa(ranksPerProc)}
	header := "numCycle,collective,gpus,size,type,redop,inplace,time,algbw,busbw,#wrong\n"
	if procs > 1 {
		p := strconv.Itoa(procs)
		r.prefix = []string{quote(test), "1", p, p, strconv.Itoa(ranksPerProc)}
		r.keys = rcclKeys[1]
		header = "numCycle,collective,nodes,ranks,ranksPerNode,gpusPerRank,size,type,redop,inplace,time,algbw,busbw,#wrong\n"
	}
	if csv {
		r.write(header, "")
	} else {
		r.write("[\n", "]\n")
	}
	return r
}

// rcclKeys are the JSON keys of a record's fields, one process and several.
var rcclKeys = [2][]string{
	{"numCycle", "name", "gpus", "size", "type", "redop", "inPlace", "time", "algBw", "busBw", "wrong"},
	{"numCycle", "name", "nodes", "ranks", "ranksPerNode", "gpusPerRank", "size", "type", "redop", "inPlace", "time", "algBw", "busBw", "wrong"},
}

func quote(s string) string { return `"` + s + `"` }

// write writes s then closing at the end of the records and moves that end
// past s.
func (r *Reporter) write(s, closing string) {
	if r.err != nil {
		return
	}
	if _, r.err = r.w.WriteAt([]byte(s+closing), r.off); r.err == nil {
		r.off += int64(len(s))
	}
}

// Err returns the first write error.
func (r *Reporter) Err() error { return r.err }

// Devices does nothing: the file lists no devices.
func (r *Reporter) Devices([]bench.Device) {}

// Row writes the two records of a row, out of place first.
func (r *Reporter) Row(res bench.Result) {
	var b strings.Builder
	for inPlace, h := range []bench.Half{res.OutOfPlace, res.InPlace} {
		fields := append([]string{strconv.Itoa(res.Cycle)}, r.prefix...)
		fields = append(fields, strconv.FormatInt(res.Bytes, 10), quote(res.Type), quote(res.RedOp), strconv.Itoa(inPlace),
			cDouble(h.TimeUS), cDouble(h.AlgBW), cDouble(h.BusBW), quote(wrongField(h)))
		if r.csv {
			b.WriteString(strings.Join(fields, ","))
			b.WriteString("\n")
			continue
		}
		if r.rows > 0 {
			b.WriteString(",\n")
		}
		b.WriteString("{")
		for i, f := range fields {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(quote(r.keys[i]) + ":" + f)
		}
		b.WriteString("}")
		r.rows++
	}
	closing := ""
	if !r.csv {
		closing = "\n]\n"
	}
	r.write(b.String(), closing)
}

// End does nothing: the file has no footer.
func (r *Reporter) End(Footer, time.Time) {}

// Abort does nothing: the rows written so far are the file.
func (r *Reporter) Abort([]string, time.Time) {}
