package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
)

// JSONVersion is the nccl-tests JSON file version this writer produces.
const JSONVersion = 3

// JSON builds the nccl-tests -J document (src/util.cu, JSON_FILE_VERSION 3):
// keys in nccl-tests' order, doubles printed like C's %lf, booleans as the
// strings "true"/"false" and the root as a %6i-padded string, as nccl-tests
// writes them. Call Devices and Row as the run goes, then Bytes at the end.
type JSON struct {
	doc     jsonDoc
	cpuTime bool
}

type jsonDoc struct {
	Version     int          `json:"version"`
	StartTime   string       `json:"start_time"`
	Args        []string     `json:"args"`
	Env         []string     `json:"env"`
	NCCLVersion int          `json:"nccl_version"`
	Config      jsonConfig   `json:"config"`
	Results     []jsonResult `json:"results"`
	OutOfBounds jsonOOB      `json:"out_of_bounds"`
	AvgBusBW    jsonAvgBW    `json:"average_bus_bandwidth"`
	Errors      []string     `json:"errors"`
	EndTime     string       `json:"end_time"`
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

// NewJSON starts the document: args is the command line (program first),
// env every "KEY=value" of the environment, start the time the run began.
func NewJSON(h Header, f Format, args, env []string, start time.Time) *JSON {
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
	return &JSON{
		cpuTime: f.CPUTime,
		doc: jsonDoc{
			Version: JSONVersion, StartTime: Timestamp(start),
			Args: nonNil(args), Env: nonNil(env), NCCLVersion: h.NCCLLibrary,
			Config: cfg, Results: []jsonResult{}, Errors: []string{},
		},
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Devices records the device listing.
func (j *JSON) Devices(ds []bench.Device) {
	for _, d := range ds {
		j.doc.Config.Devices = append(j.doc.Config.Devices, jsonDevice{
			Rank: d.Rank, Group: d.Group, Pid: d.Pid, Hostname: d.Host, Device: d.Device, DeviceHex: d.CPUs, DeviceInfo: d.Model,
		})
	}
}

// Row records one table row.
func (j *JSON) Row(r bench.Result) {
	j.doc.Results = append(j.doc.Results, jsonResult{
		Size: r.Bytes, Count: r.Count, Type: r.Type, RedOp: r.RedOp, Root: fmt.Sprintf("%6d", r.Root),
		OutOfPlace: j.half(r.OutOfPlace), OutOfPlaceIter: iter(r.OutOfPlace.Iter),
		InPlace: j.half(r.InPlace), InPlaceIter: iter(r.InPlace.Iter),
		ActualIters: r.Iters,
	})
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

// Bytes finishes the document with the footer and the end time and returns
// it, one line, newline-terminated.
func (j *JSON) Bytes(f Footer, end time.Time) ([]byte, error) {
	d := j.doc
	d.OutOfBounds = jsonOOB{Count: f.OutOfBounds, Okay: f.OutOfBounds == 0}
	d.AvgBusBW = jsonAvgBW{Bandwidth: cnum(f.AvgBusBW), Okay: "unchecked"}
	if f.MinBWSet {
		d.AvgBusBW.Okay = jsonBool(!f.MinBWFailed())
	}
	if f.Error != "" {
		d.Errors = []string{f.Error}
	}
	d.EndTime = Timestamp(end)
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
