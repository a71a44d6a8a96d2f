package results

import (
	"encoding/csv"
	"fmt"
	"strconv"
	"strings"
)

// parseCSV reads the CSV of -J FILE.csv (the old rccl-tests' columns:
// collective, nodes, ranks, rankspernode, gpusperrank, size, ...) or of -X
// FILE -Z csv (numCycle, collective, gpus or nodes/ranks/..., size, ...),
// by the names of its header.
func parseCSV(data []byte) (*File, error) {
	r := csv.NewReader(strings.NewReader(string(data)))
	r.TrimLeadingSpace = true
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("CSV: %w", err)
	}
	col := map[string]int{}
	for i, name := range recs[0] {
		col[strings.ToLower(strings.TrimSpace(name))] = i
	}
	for _, need := range []string{"collective", "size", "inplace", "time", "algbw", "busbw"} {
		if _, ok := col[need]; !ok {
			return nil, fmt.Errorf("CSV without a %q column: want the columns of cc-perf's -J FILE.csv or -X FILE -Z csv", need)
		}
	}
	format := "rccl-tests CSV"
	if _, ok := col["numcycle"]; !ok {
		format = "cc-perf CSV"
	}
	var halves []halfRecord
	for i, rec := range recs[1:] {
		line := i + 2
		get := func(name string) string {
			if j, ok := col[name]; ok && j < len(rec) {
				return strings.TrimSpace(rec[j])
			}
			return ""
		}
		num := func(name string) (float64, error) {
			v, err := strconv.ParseFloat(get(name), 64)
			if err != nil {
				return 0, fmt.Errorf("line %d: %s %q is not a number", line, name, get(name))
			}
			return v, nil
		}
		var vals [3]float64
		for k, name := range []string{"time", "algbw", "busbw"} {
			if vals[k], err = num(name); err != nil {
				return nil, err
			}
		}
		size, err := strconv.ParseInt(get("size"), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("line %d: size %q is not a byte count", line, get("size"))
		}
		h := halfRecord{coll: testName(get("collective")), bytes: size, typ: get("type"), redop: get("redop"),
			inPlace: get("inplace") == "1", h: Half{TimeUS: vals[0], AlgBW: vals[1], BusBW: vals[2], Wrong: get("#wrong")}}
		h.ranks, _ = strconv.Atoi(get("ranks"))
		if g, err := strconv.Atoi(get("gpus")); err == nil {
			h.ranks = g
		} else if per, err := strconv.Atoi(get("gpusperrank")); err == nil && format == "rccl-tests CSV" {
			h.ranks *= per
		}
		if format == "cc-perf CSV" { // rccl-tests' own "nodes" is always 1
			h.hosts, _ = strconv.Atoi(get("nodes"))
		}
		halves = append(halves, h)
	}
	return sweepOfHalves(halves, format)
}
