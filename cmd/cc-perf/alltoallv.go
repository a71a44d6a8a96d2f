package main

import (
	"math"
	"strconv"
	"strings"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
)

// The knobs of nccl-tests v2.19.6's alltoallv_perf (src/alltoallv.cu),
// which only the alltoallv benchmark reads.
const (
	envMatrixFile   = "NCCL_TESTS_ALLTOALLV_MATRIX_FILE"
	envMatrixScale  = "NCCL_TESTS_ALLTOALLV_MATRIX_SCALE"
	envSpread       = "NCCL_TESTS_ALLTOALLV_SPREAD"
	envPrintSummary = "NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY"
)

// alltoallvEnv reads alltoallv's traffic matrix and whether to print the
// per-rank summary. Where nccl-tests reads a knob as nothing (an empty
// spread or scale: the default; an empty summary switch: off), so does
// cc-perf. What nccl-tests would clamp, ignore or misread is an error here,
// exit 6: a spread outside 0..1, a negative scale, text that is not a
// number, a spread with a matrix file, a scale without one, and any flaw of
// the file (file:line).
func alltoallvEnv(lookup func(string) (string, bool), readFile func(string) ([]byte, error)) (*bench.Traffic, bool, error) {
	summary := false
	if s, ok := lookup(envPrintSummary); ok && strings.TrimSpace(s) != "" {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return nil, false, usagef("%s=%q: want 0 (off) or another integer (on)", envPrintSummary, s)
		}
		summary = v != 0
	}
	t := bench.DefaultTraffic
	spread, spreadSet, err := envFraction(lookup, envSpread, 0, 1, "a number from 0 (the same to every peer) to 1 (in proportion to the distance)")
	if err != nil {
		return nil, false, err
	}
	if spreadSet {
		t.Spread = spread
	}
	scale, scaleSet, err := envFraction(lookup, envMatrixScale, 0, math.MaxFloat64, "a number >= 0 (1: the file's bytes)")
	if err != nil {
		return nil, false, err
	}
	path, fileSet := lookup(envMatrixFile)
	switch {
	case !fileSet && scaleSet:
		return nil, false, usagef("%s is set without %s, whose values it scales: set both, or neither", envMatrixScale, envMatrixFile)
	case !fileSet:
		return &t, summary, nil
	case spreadSet:
		return nil, false, usagef("%s is set with %s: the spread shapes the generated matrix, not a file's: unset one", envSpread, envMatrixFile)
	case strings.TrimSpace(path) == "":
		return nil, false, usagef("%s is empty: want a traffic matrix file, or unset it", envMatrixFile)
	}
	if !scaleSet {
		scale = 1
	}
	data, err := readFile(path)
	if err != nil {
		return nil, false, usagef("%s: %v", envMatrixFile, err)
	}
	m, err := bench.ParseMatrix(path, data, scale)
	if err != nil {
		return nil, false, usagef("%s: %v", envMatrixFile, err)
	}
	t.Matrix = m
	return &t, summary, nil
}

// envFraction reads variable name as a number from min to max; set is
// false when it is unset or empty.
func envFraction(lookup func(string) (string, bool), name string, min, max float64, want string) (v float64, set bool, err error) {
	s, ok := lookup(name)
	if !ok || strings.TrimSpace(s) == "" {
		return 0, false, nil
	}
	v, err = strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(v) || v < min || v > max {
		return 0, false, usagef("%s=%q: want %s", name, s, want)
	}
	return v, true, nil
}

// checkTraffic validates alltoallv's matrix file against the job's rank
// count and -e, as nccl-tests does before the run (AlltoAllvInit,
// AlltoAllvGetBuffSize).
func checkTraffic(t *bench.Traffic, nranks int, maxBytes int64) error {
	if t == nil || t.Matrix == nil {
		return nil
	}
	m := t.Matrix
	if m.Dim() < nranks {
		return usagef("%s=%s: a %dx%d matrix for %d ranks: want at least %d rows and columns (the first %d are used)",
			envMatrixFile, m.Name, m.Dim(), m.Dim(), nranks, nranks, nranks)
	}
	if need := t.Need(nranks); need > maxBytes {
		return usagef("-e/--maxbytes %d is below the %d bytes one rank sends or receives by %s=%s: want -b and -e >= %d",
			maxBytes, need, envMatrixFile, m.Name, need)
	}
	return nil
}
