package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/fabric"
)

// ncclJSON is the part of the nccl-tests -J document a plot needs: the
// same keys in JSON_FILE_VERSION 1 (nccl-tests' first, src/util.cu) to 3
// (what cc-perf writes, with nccl-tests 2.17's per-iteration keys).
type ncclJSON struct {
	Version   *int     `json:"version"`
	StartTime string   `json:"start_time"`
	Args      []string `json:"args"`
	Config    struct {
		Devices []struct {
			Hostname string `json:"hostname"`
		} `json:"devices"`
	} `json:"config"`
	Results *[]struct {
		Size       int64     `json:"size"`
		Count      int64     `json:"count"`
		Type       string    `json:"type"`
		RedOp      string    `json:"redop"`
		Root       string    `json:"root"`
		OutOfPlace *jsonHalf `json:"out_of_place"` // null for a trace replay's in-place-only rows
		InPlace    *jsonHalf `json:"in_place"`
	} `json:"results"`
}

type jsonHalf struct {
	Time    *cnum `json:"time"`
	CPUTime *cnum `json:"cpu_time"`
	AlgBW   cnum  `json:"alg_bw"`
	BusBW   cnum  `json:"bus_bw"`
	NWrong  *cnum `json:"nwrong"`
}

func (h *jsonHalf) half() Half {
	if h == nil {
		return Half{TimeUS: math.NaN(), AlgBW: math.NaN(), BusBW: math.NaN()}
	}
	out := Half{AlgBW: float64(h.AlgBW), BusBW: float64(h.BusBW)}
	switch {
	case h.Time != nil:
		out.TimeUS = float64(*h.Time)
	case h.CPUTime != nil:
		out.TimeUS = float64(*h.CPUTime)
	}
	if h.NWrong != nil {
		out.Wrong = strconv.FormatFloat(float64(*h.NWrong), 'f', -1, 64)
	} else {
		out.Wrong = "N/A"
	}
	return out
}

// cnum is a double as nccl-tests writes it: a number, or "nan", "inf",
// "-inf" as strings.
type cnum float64

func (c *cnum) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		switch strings.ToLower(s) {
		case "nan", "-nan":
			*c = cnum(math.NaN())
		case "inf":
			*c = cnum(math.Inf(1))
		case "-inf":
			*c = cnum(math.Inf(-1))
		default:
			return fmt.Errorf("%q is not a number", s)
		}
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*c = cnum(f)
	return nil
}

// parseJSONObject reads an nccl-tests -J document or a cc-perf fabric one;
// nil, nil when it is neither.
func parseJSONObject(data []byte) (*File, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(data, &keys); err != nil {
		return nil, fmt.Errorf("not valid JSON (%v): %s", err, expected)
	}
	switch {
	case keys["results"] != nil && keys["config"] != nil:
		return parseNCCLJSON(data)
	case keys["rounds"] != nil && keys["hosts"] != nil:
		var rec fabric.Record
		if err := json.Unmarshal(data, &rec); err != nil {
			return nil, fmt.Errorf("cc-perf fabric record: %w", err)
		}
		return &File{Kind: KindFabric, Fabric: &rec}, nil
	}
	return nil, nil
}

func parseNCCLJSON(data []byte) (*File, error) {
	var doc ncclJSON
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("nccl-tests JSON: %w", err)
	}
	if doc.Version == nil || *doc.Version < 1 || *doc.Version > 3 {
		return nil, errors.New("nccl-tests JSON: want version 1, 2 or 3")
	}
	if doc.Results == nil {
		return nil, errors.New("nccl-tests JSON: results is null: want a list")
	}
	s := &Sweep{Meta: Meta{Collective: jsonCollective(doc.Args), Ranks: len(doc.Config.Devices), Date: doc.StartTime,
		Format: "nccl-tests JSON"}}
	hosts := make([]string, len(doc.Config.Devices))
	for i, d := range doc.Config.Devices {
		hosts[i] = d.Hostname
	}
	s.Hosts = hostCount(hosts)
	for _, r := range *doc.Results {
		s.Rows = append(s.Rows, Row{Bytes: r.Size, Count: r.Count, Type: r.Type, RedOp: r.RedOp, Root: strings.TrimSpace(r.Root),
			Out: r.OutOfPlace.half(), In: r.InPlace.half()})
	}
	return &File{Kind: KindSweep, Sweeps: []*Sweep{s}}, nil
}

// jsonCollective is the collective of a -J document's command line: the
// nccl-tests binary (all_reduce_perf ...) or cc-perf's subcommand (cc-perf
// all_reduce ...).
func jsonCollective(args []string) string {
	if len(args) == 0 {
		return ""
	}
	if c := collectiveOf(args[0]); isCollective(c) {
		return c
	}
	for _, a := range args[1:] {
		if c := collectiveOf(a); isCollective(c) {
			return c
		}
	}
	return ""
}

// isCollective reports whether name is one of cc-perf's benchmarks.
func isCollective(name string) bool {
	_, ok := bench.Lookup(name)
	return ok
}

// testName maps nccl-tests' test names (rccl-tests' "AllReduce") to
// cc-perf's subcommands.
func testName(name string) string {
	for _, c := range bench.Collectives {
		if strings.EqualFold(c.TestName, name) || c.Name == name {
			return c.Name
		}
	}
	return name
}

// rcclRecord is one record of current rccl-tests' -X JSON.
type rcclRecord struct {
	Name        string `json:"name"`
	GPUs        *int   `json:"gpus"`
	Ranks       *int   `json:"ranks"`
	GPUsPerRank *int   `json:"gpusPerRank"`
	Size        *int64 `json:"size"`
	Type        string `json:"type"`
	RedOp       string `json:"redop"`
	InPlace     int    `json:"inPlace"`
	Time        cnum   `json:"time"`
	AlgBW       cnum   `json:"algBw"`
	BusBW       cnum   `json:"busBw"`
	Wrong       string `json:"wrong"`
}

func parseRCCLJSON(data []byte) (*File, error) {
	var recs []rcclRecord
	if err := json.Unmarshal(data, &recs); err != nil {
		return nil, fmt.Errorf("not valid JSON (%v): %s", err, expected)
	}
	var halves []halfRecord
	for i, r := range recs {
		if r.Name == "" || r.Size == nil {
			return nil, fmt.Errorf("record %d: want rccl-tests -X JSON records (name, size, inPlace, time, algBw, busBw)", i)
		}
		ranks := 0
		switch {
		case r.GPUs != nil:
			ranks = *r.GPUs
		case r.Ranks != nil && r.GPUsPerRank != nil:
			ranks = *r.Ranks * *r.GPUsPerRank
		}
		halves = append(halves, halfRecord{coll: testName(r.Name), ranks: ranks, bytes: *r.Size, typ: r.Type, redop: r.RedOp,
			inPlace: r.InPlace != 0, h: Half{TimeUS: float64(r.Time), AlgBW: float64(r.AlgBW), BusBW: float64(r.BusBW), Wrong: r.Wrong}})
	}
	return sweepOfHalves(halves, "rccl-tests JSON")
}

// halfRecord is one line of a CSV or rccl-tests JSON: half a row.
type halfRecord struct {
	coll         string
	ranks, hosts int
	bytes        int64
	typ, redop   string
	inPlace      bool
	h            Half
}

// sweepOfHalves joins each out-of-place record with the in-place one after
// it into rows; a record of another collective starts another sweep.
func sweepOfHalves(halves []halfRecord, format string) (*File, error) {
	f := &File{Kind: KindSweep}
	var s *Sweep
	for i, r := range halves {
		if s == nil || s.Collective != r.coll {
			s = &Sweep{Meta: Meta{Collective: r.coll, Ranks: r.ranks, Hosts: r.hosts, Format: format}}
			f.Sweeps = append(f.Sweeps, s)
		}
		if !r.inPlace {
			s.Rows = append(s.Rows, Row{Bytes: r.bytes, Count: -1, Type: r.typ, RedOp: r.redop, Out: r.h})
			continue
		}
		n := len(s.Rows)
		if n == 0 || s.Rows[n-1].Bytes != r.bytes || s.Rows[n-1].In != (Half{}) {
			return nil, fmt.Errorf("record %d: an in-place half of %d B without its out-of-place half before it", i+1, r.bytes)
		}
		s.Rows[n-1].In = r.h
	}
	if len(f.Sweeps) == 0 {
		return nil, fmt.Errorf("no records: %s", expected)
	}
	return f, nil
}
