package report

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
)

// JSONVersion is the nccl-tests JSON file version this writer produces.
const JSONVersion = 3

// JSON writes the nccl-tests -J document (src/util.cu, JSON_FILE_VERSION 3):
// keys in nccl-tests' order, doubles printed like C's %lf, booleans as the
// strings "true"/"false" and the root as a %6i-padded string, as nccl-tests
// writes them.
//
// Like nccl-tests it writes each row as it completes, keeping nothing in
// memory, and unlike nccl-tests the file is a complete JSON document at
// every moment: each write puts the closing "]}" after what it adds, and
// the next one writes over that closing. NewJSON writes the start, Devices
// rewrites it with the device listing, Row adds a row, and End (a finished
// run: footer, end time) or Abort (what stopped the run, end time) writes
// the end. Every write makes the file longer, so none leaves stale bytes.
// Write errors are kept and returned by Err.
type JSON struct {
	w       io.WriterAt
	head    jsonHead
	cpuTime bool
	off     int64 // where the "]" closing the results list goes
	rows    int   // rows written
	err     error
}

// jsonHead is the document up to its results.
type jsonHead struct {
	Version     int        `json:"version"`
	StartTime   string     `json:"start_time"`
	Args        []string   `json:"args"`
	Env         []string   `json:"env"`
	NCCLVersion int        `json:"nccl_version"`
	Config      jsonConfig `json:"config"`
}

// jsonTail is the document after its results: the footer of a finished
// run, or only the errors of one that failed.
type jsonTail struct {
	OutOfBounds *jsonOOB   `json:"out_of_bounds,omitempty"`
	AvgBusBW    *jsonAvgBW `json:"average_bus_bandwidth,omitempty"`
	Errors      []string   `json:"errors"`
	EndTime     string     `json:"end_time"`
}

type jsonConfig struct {
	NThreads     int          `json:"nthreads"`
	NGpus        int          `json:"ngpus"`
	MinBytes     int64        `json:"minimum_bytes"`
	MaxBytes     int64        `json:"maximum_bytes"`
	StepFactor   *int64       `json:"step_factor,omitempty"`
	StepBytes    *int64       `json:"step_bytes,omitempty"`
	WarmupIters  int          `json:"warmup_iters"`
	Iters        int          `json:"iterations"`
	AggIters     int          `json:"aggregated_iterations"`
	Validation   int          `json:"validation"`
	Graph        int          `json:"graph"`
	Blocking     jsonBool     `json:"blocking_collectives"`
	PerIter      jsonBool     `json:"per_iter_timing"`
	PerIterSkip  int          `json:"per_iter_skip"`
	ParallelInit jsonBool     `json:"parallel_init"`
	Devices      []jsonDevice `json:"devices"`
}

type jsonDevice struct {
	Rank       int    `json:"rank"`
	Group      int    `json:"group"`
	Pid        int    `json:"pid"`
	Hostname   string `json:"hostname"`
	Device     int    `json:"device"`
	DeviceHex  string `json:"device_hex"`
	DeviceInfo string `json:"device_info"`
}

type jsonResult struct {
	Size           int64     `json:"size"`
	Count          int64     `json:"count"`
	Type           string    `json:"type"`
	RedOp          string    `json:"redop"`
	Root           string    `json:"root"`
	OutOfPlace     jsonHalf  `json:"out_of_place"`
	OutOfPlaceIter *jsonIter `json:"out_of_place_per_iter,omitempty"`
	InPlace        jsonHalf  `json:"in_place"`
	InPlaceIter    *jsonIter `json:"in_place_per_iter,omitempty"`
	ActualIters    int       `json:"actual_iterations"`
	ExperimentName string    `json:"experiment_name"`
}

type jsonHalf struct {
	Time    *cnum `json:"time,omitempty"`
	CPUTime *cnum `json:"cpu_time,omitempty"`
	AlgBW   cnum  `json:"alg_bw"`
	BusBW   cnum  `json:"bus_bw"`
	NWrong  *cnum `json:"nwrong"`
}

type jsonIter struct {
	Skipped int    `json:"skipped_iterations"`
	Min     cnum   `json:"min_us"`
	Max     cnum   `json:"max_us"`
	Avg     cnum   `json:"avg_us"`
	P50     cnum   `json:"p50_us"`
	P95     cnum   `json:"p95_us"`
	P99     cnum   `json:"p99_us"`
	Stdev   cnum   `json:"stdev_us"`
	CVPct   cnum   `json:"cv_pct"`
	Times   []cnum `json:"times_us"`
}

type jsonOOB struct {
	Count int      `json:"count"`
	Okay  jsonBool `json:"okay"`
}

type jsonAvgBW struct {
	Bandwidth cnum `json:"bandwidth"`
	Okay      any  `json:"okay"` // "unchecked", or a jsonBool
}

// cnum is a double as nccl-tests writes it: %lf, and the string "nan" for
// NaN (and "inf"/"-inf", which C would print as invalid JSON).
type cnum float64

func (c cnum) MarshalJSON() ([]byte, error) {
	if s, ok := cSpecial(float64(c)); ok {
		return []byte(`"` + s + `"`), nil
	}
	return []byte(cDouble(float64(c))), nil
}

// jsonBool is a boolean as nccl-tests writes it: the string "true" or "false".
type jsonBool bool

func (b jsonBool) MarshalJSON() ([]byte, error) {
	if b {
		return []byte(`"true"`), nil
	}
	return []byte(`"false"`), nil
}

// NewJSON starts the document in w (at offset 0): args is the command
// line (program first), env every "KEY=value" of the environment, start
// the time the run began.
func NewJSON(w io.WriterAt, h Header, f Format, args, env []string, start time.Time) *JSON {
	cfg := jsonConfig{
		NThreads: h.NThreads, NGpus: h.NGpus, MinBytes: h.MinBytes, MaxBytes: h.MaxBytes,
		WarmupIters: h.WarmupIters, Iters: h.Iters, AggIters: h.AggIters, Validation: h.Check, Graph: h.Graph,
		Blocking: h.Blocking != 0, PerIter: jsonBool(f.PerIter), PerIterSkip: f.PerIterSkip, ParallelInit: jsonBool(h.ParallelInit),
		Devices: []jsonDevice{},
	}
	if h.StepFactor > 1 {
		v := h.StepFactor
		cfg.StepFactor = &v
	} else {
		v := h.StepBytes
		cfg.StepBytes = &v
	}
	j := &JSON{
		w: w, cpuTime: f.CPUTime,
		head: jsonHead{
			Version: JSONVersion, StartTime: Timestamp(start),
			Args: nonNil(args), Env: nonNil(env), NCCLVersion: h.NCCLLibrary, Config: cfg,
		},
	}
	j.writeHead()
	return j
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Err returns the first write error.
func (j *JSON) Err() error { return j.err }

// writeHead writes the document up to the open results list, then the
// closing, from the start of the file.
func (j *JSON) writeHead() {
	b, err := encode(j.head)
	if err != nil {
		j.err = err
		return
	}
	b = append(b[:len(b)-1], `,"results":[`...) // reopen the object after config
	j.off = 0
	j.write(b, "]}")
}

// write writes b and then closing at the current end of the results and
// moves that end past b.
func (j *JSON) write(b []byte, closing string) {
	if j.err != nil {
		return
	}
	if _, j.err = j.w.WriteAt(append(b, closing...), j.off); j.err == nil {
		j.off += int64(len(b))
	}
}

// Devices records the device listing. Call it before the first Row.
func (j *JSON) Devices(ds []bench.Device) {
	for _, d := range ds {
		j.head.Config.Devices = append(j.head.Config.Devices, jsonDevice{
			Rank: d.Rank, Group: d.Group, Pid: d.Pid, Hostname: d.Host, Device: d.Device, DeviceHex: d.CPUs, DeviceInfo: d.Model,
		})
	}
	if j.rows == 0 {
		j.writeHead()
	}
}

// Row writes one table row.
func (j *JSON) Row(r bench.Result) {
	b, err := encode(jsonResult{
		Size: r.Bytes, Count: r.Count, Type: r.Type, RedOp: r.RedOp, Root: fmt.Sprintf("%6d", r.Root),
		OutOfPlace: j.half(r.OutOfPlace), OutOfPlaceIter: iter(r.OutOfPlace.Iter),
		InPlace: j.half(r.InPlace), InPlaceIter: iter(r.InPlace.Iter),
		ActualIters: r.Iters,
	})
	if err != nil {
		j.err = cmp.Or(j.err, err)
		return
	}
	if j.rows > 0 {
		b = append([]byte{','}, b...)
	}
	j.write(b, "]}")
	j.rows++
}

func (j *JSON) half(h bench.Half) jsonHalf {
	t := cnum(h.TimeUS)
	out := jsonHalf{AlgBW: cnum(h.AlgBW), BusBW: cnum(h.BusBW)}
	if j.cpuTime {
		out.CPUTime = &t
	} else {
		out.Time = &t
	}
	if h.Checked {
		w := cnum(h.Wrong)
		out.NWrong = &w
	}
	return out
}

func iter(s *bench.IterStats) *jsonIter {
	if s == nil {
		return nil
	}
	times := make([]cnum, len(s.TimesUS))
	for i, v := range s.TimesUS {
		times[i] = cnum(v)
	}
	return &jsonIter{Skipped: s.Skipped, Min: cnum(s.Min), Max: cnum(s.Max), Avg: cnum(s.Avg), P50: cnum(s.P50),
		P95: cnum(s.P95), P99: cnum(s.P99), Stdev: cnum(s.Stdev), CVPct: cnum(s.CVPct), Times: times}
}

// End finishes the document of a finished run with the footer and the end
// time, and a newline.
func (j *JSON) End(f Footer, end time.Time) {
	t := jsonTail{
		OutOfBounds: &jsonOOB{Count: f.OutOfBounds, Okay: f.OutOfBounds == 0},
		AvgBusBW:    &jsonAvgBW{Bandwidth: cnum(f.AvgBusBW), Okay: "unchecked"},
		Errors:      []string{},
	}
	if f.MinBWSet {
		t.AvgBusBW.Okay = jsonBool(!f.MinBWFailed())
	}
	if f.Error != "" {
		t.Errors = []string{f.Error}
	}
	j.tail(t, end)
}

// Abort finishes the document of a run that failed: no footer (the run has
// none, as the table has none), errs, what stopped it, and the end time.
func (j *JSON) Abort(errs []string, end time.Time) {
	j.tail(jsonTail{Errors: nonNil(errs)}, end)
}

func (j *JSON) tail(t jsonTail, end time.Time) {
	t.EndTime = Timestamp(end)
	b, err := encode(t)
	if err != nil {
		j.err = cmp.Or(j.err, err)
		return
	}
	j.write([]byte("]"), ","+string(b[1:])+"\n") // the tail object's keys continue the document
}

// encode is v as one line of JSON without the newline, with <, > and &
// kept as they are (nccl-tests does not escape them).
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
