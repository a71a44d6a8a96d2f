package results

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/fabric"
)

// Kind is what a file holds.
type Kind int

// The kinds of result files.
const (
	KindSweep       Kind = iota + 1 // a size sweep of one collective (nccl-tests table, -J, CSV)
	KindTune                        // cc-perf tune output
	KindCalibration                 // cc-perf calibrate output
	KindFabric                      // cc-perf fabric -J document
)

// String names the kind for messages.
func (k Kind) String() string {
	switch k {
	case KindSweep:
		return "sweep"
	case KindTune:
		return "cc-perf tune output"
	case KindCalibration:
		return "cc-perf calibrate output"
	case KindFabric:
		return "cc-perf fabric record"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Meta is what a file says about the run: the labels of its plot.
type Meta struct {
	Collective string // "all_reduce"; "" when the file does not say
	Ranks      int    // 0 when the file does not say
	Hosts      int    // distinct hosts; 0 when the file does not say
	Date       string // when the run started, as the file writes it; "" when it does not say
	Format     string // the format recognised, e.g. "nccl-tests JSON"
}

// File is one parsed input file.
type File struct {
	Name   string // as given on the command line
	Kind   Kind
	Sweeps []*Sweep // KindSweep: one per run (a log may hold several)
	Tune   *Tune
	Calib  *Calibration
	Fabric *fabric.Record
}

// Sweep is one run of a collective over sizes.
type Sweep struct {
	Meta
	Rows []Row
	Algo bool // the rows carry -A's algo, proto and nchannels
}

// Row is one size of a sweep.
type Row struct {
	Bytes       int64
	Count       int64 // elements; -1 when the file does not say (CSV, rccl-tests JSON)
	Type, RedOp string
	Root        string
	Out, In     Half
	// Algo, Proto and Channels are -A's columns ("" without -A, "N/A" for
	// collectives made of point-to-point calls).
	Algo, Proto, Channels string
	Timestamp             string // -S, "" without
}

// Half is the out-of-place or in-place half of a row.
type Half struct {
	TimeUS, AlgBW, BusBW float64
	Wrong                string // "#wrong" as written: a count, "N/A" or ""
}

// Parse reads data, the contents of the file called name. The error of a
// file that is no known format names it and says what was expected.
func Parse(name string, data []byte) (*File, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return nil, fmt.Errorf("%s: empty file: %s", name, expected)
	}
	var f *File
	var err error
	switch first := firstLine(trimmed); {
	case trimmed[0] == '{':
		f, err = parseJSONObject(trimmed)
	case trimmed[0] == '[':
		f, err = parseRCCLJSON(trimmed)
	case strings.HasPrefix(first, "collective,") || strings.HasPrefix(first, "numCycle,"):
		f, err = parseCSV(trimmed)
	default:
		f, err = parseText(string(data))
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if f == nil {
		return nil, fmt.Errorf("%s: not a result file: %s", name, expected)
	}
	f.Name = name
	return f, nil
}

// expected is what Parse accepts, for its errors.
const expected = "want cc-perf or nccl-tests -J JSON, -J/-X CSV, rccl-tests -X JSON, a cc-perf or nccl-tests log, " +
	"cc-perf tune or calibrate output, or a cc-perf fabric -J file"

func firstLine(b []byte) string {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	return strings.TrimSpace(string(line))
}

// Base is the name of f for labels: its base name.
func (f *File) Base() string { return filepath.Base(f.Name) }

// hostCount is the number of distinct names in hosts.
func hostCount(hosts []string) int {
	seen := map[string]bool{}
	for _, h := range hosts {
		seen[h] = true
	}
	return len(seen)
}

// collectiveOf is the collective of a program name or cc-perf subcommand:
// "all_reduce" from all_reduce_perf, all_reduce_perf_mpi, /x/all_reduce_perf
// or all_reduce.
func collectiveOf(prog string) string {
	prog = filepath.Base(prog)
	if i := strings.Index(prog, "_perf"); i > 0 {
		return prog[:i]
	}
	return prog
}
