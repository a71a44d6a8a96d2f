package tune

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
)

// The file format is the one of NCCL's example tuner plugin
// (NVIDIA/nccl ext-tuner/example: README.md, nccl_tuner.conf, plugin.c),
// which reads the file named by NCCL_TUNER_CONFIG_FILE. One row a line, the
// fields separated by commas, spaces and tabs around a field ignored:
//
//	collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks[,numPipeOps[,regBuff]]
//
// numPipeOps and regBuff are optional (8, 9 or 10 fields); a missing one
// matches anything, as -1 does. Lines starting with '#' and blank lines are
// ignored. A row covers sizes min_bytes <= nBytes <= max_bytes, both ends
// inclusive, and the first row that covers a call wins.
//
// Where the plugin silently falls back (an unknown name becomes allreduce,
// ring or simple; a malformed line is skipped; "-1" in a size column wraps
// to SIZE_MAX), ParseConfig refuses the file instead, naming the line. Beyond
// the plugin it accepts names in any case, our algorithm "ctring", "-1" in the
// algorithm and protocol columns (keep the model's choice: the plugin would
// read it as ring or simple), and a header line naming the columns, as a
// spreadsheet writes it (the plugin's README suggests one; the plugin reads
// it as a row no communicator matches).

// configColumns are the names of the columns, in order, as NCCL's example
// file spells them.
var configColumns = [maxFields]string{
	"collective_type", "min_bytes", "max_bytes", "algorithm", "protocol",
	"channels", "nNodes", "nRanks", "numPipeOps", "regBuff",
}

const (
	minFields = 8  // up to nRanks
	maxFields = 10 // with numPipeOps and regBuff

	// maxChannels is NCCL's MAXCHANNELS, the most channels a row may ask for.
	maxChannels = 64
)

// The names of the file, lower case as NCCL's plugin spells them.
var (
	collNames = [algos.NumColls]string{
		algos.Broadcast:     "broadcast",
		algos.Reduce:        "reduce",
		algos.AllGather:     "allgather",
		algos.ReduceScatter: "reducescatter",
		algos.AllReduce:     "allreduce",
	}
	algoNames = [algos.NumAlgos]string{
		algos.Tree:          "tree",
		algos.Ring:          "ring",
		algos.CollNetDirect: "collnet_direct",
		algos.CollNetChain:  "collnet_chain",
		algos.NVLS:          "nvls",
		algos.NVLSTree:      "nvls_tree",
		algos.PAT:           "pat",
		algos.CTRing:        "ctring", // ours, as are the five below; NCCL's plugin does not know them
		algos.OneShot:       "oneshot",
		algos.RecDbl:        "recdbl",
		algos.Rabenseifner:  "rabenseifner",
		algos.HierRecDbl:    "hierrecdbl",
		algos.CMA:           "cma",
	}
	protoNames = [protocols.NumProtos]string{
		protocols.LL:     "ll",
		protocols.LL128:  "ll128",
		protocols.Simple: "simple",
	}
)

// KeepAlgo is ConfigRow.Algo for "-1" in the algorithm column: the row keeps
// the model's choice of algorithm.
const KeepAlgo algos.Algo = -1

// KeepProto is ConfigRow.Proto for "-1" in the protocol column: the row keeps
// the model's choice of protocol. protocols.Proto is unsigned, so the -1 of
// the file is stored as the largest Proto.
const KeepProto protocols.Proto = math.MaxUint8

// ConfigRow is one row of a tuner config file.
type ConfigRow struct {
	Coll     algos.Coll      // the collective
	MinBytes int64           // inclusive, >= 0
	MaxBytes int64           // inclusive, >= MinBytes (the plugin compares nBytes <= max_bytes)
	Algo     algos.Algo      // KeepAlgo (-1): keep the model's choice
	Proto    protocols.Proto // KeepProto (-1 in the file): keep the model's choice
	Channels int             // -1: keep the model's choice; else 1..64
	NNodes   int             // -1: any; else >= 1
	NRanks   int             // -1: any; else >= 1
	PipeOps  int             // -1: any (numPipeOps; we run one collective per launch, so only -1 or 1 matches)
	RegBuff  int             // -1: any (0/1: registered buffers; we never register, so only -1 or 0 matches)
	Line     int             // line number in the file; 0 for a row not read from a file
}

// Config is a parsed tuner config file.
type Config struct {
	Path string      // the file's name, as given to ParseConfig or LoadConfig
	Rows []ConfigRow // in file order: the first row that covers a call wins
}

// intColumn is an integer column other than the sizes: its name, the values
// it allows and how to say them.
type intColumn struct {
	name string
	ok   func(v int64) bool
	want string
}

var (
	channelsColumn = intColumn{"channels",
		func(v int64) bool { return v == -1 || v >= 1 && v <= maxChannels },
		fmt.Sprintf("-1 (keep the default) or 1..%d", maxChannels)}
	nNodesColumn  = countColumn("nNodes")
	nRanksColumn  = countColumn("nRanks")
	pipeOpsColumn = countColumn("numPipeOps")
	regBuffColumn = intColumn{"regBuff",
		func(v int64) bool { return v >= -1 && v <= 1 },
		"-1 (any), 0 or 1"}
)

// countColumn is a column that matches a count: -1 for any, or a positive
// int32 (NCCL compares it as a C int).
func countColumn(name string) intColumn {
	return intColumn{name,
		func(v int64) bool { return v == -1 || v >= 1 && v <= math.MaxInt32 },
		fmt.Sprintf("-1 (any) or 1..%d", math.MaxInt32)}
}

// wantSize says what a size column allows.
var wantSize = fmt.Sprintf("an integer 0..%d", int64(math.MaxInt64))

// ParseConfig parses the text of a config file; path names it in errors.
// An error names path:line, the bad value and what is allowed, one line.
func ParseConfig(path string, data []byte) (*Config, error) {
	c := &Config{Path: path}
	for i, line := range strings.Split(string(data), "\n") {
		line = trim(line)
		if line == "" || line[0] == '#' {
			continue
		}
		row, header, err := parseRow(line)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, i+1, err)
		}
		if header {
			continue
		}
		row.Line = i + 1
		c.Rows = append(c.Rows, row)
	}
	return c, nil
}

// LoadConfig reads and parses the file at path. A missing file is an error
// (errors.Is(err, fs.ErrNotExist)); NCCL's plugin instead runs without one.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tuner config: %w", err)
	}
	return ParseConfig(path, data)
}

// trim drops the spaces and tabs around s, and the '\r' of a CRLF line end.
func trim(s string) string { return strings.Trim(s, " \t\r") }

// parseRow parses one line that is neither blank nor a comment. header
// reports a line naming the columns, which is skipped.
func parseRow(line string) (row ConfigRow, header bool, err error) {
	f := strings.Split(line, ",")
	for i := range f {
		f[i] = trim(f[i])
	}
	if len(f) < minFields || len(f) > maxFields {
		return row, false, fmt.Errorf("%d fields in %q, want %d to %d: %s",
			len(f), line, minFields, maxFields, strings.Join(configColumns[:], ","))
	}
	if isHeader(f) {
		return row, true, nil
	}
	row.PipeOps, row.RegBuff = -1, -1
	if row.Coll, err = parseColl(f[0]); err != nil {
		return row, false, err
	}
	if row.MinBytes, err = parseSize("min_bytes", f[1]); err != nil {
		return row, false, err
	}
	if row.MaxBytes, err = parseSize("max_bytes", f[2]); err != nil {
		return row, false, err
	}
	if row.MinBytes > row.MaxBytes {
		return row, false, fmt.Errorf("min_bytes %d > max_bytes %d, want min_bytes <= max_bytes", row.MinBytes, row.MaxBytes)
	}
	if row.Algo, err = parseAlgo(f[3]); err != nil {
		return row, false, err
	}
	if row.Proto, err = parseProto(f[4]); err != nil {
		return row, false, err
	}
	ints := []struct {
		col intColumn
		dst *int
	}{
		{channelsColumn, &row.Channels},
		{nNodesColumn, &row.NNodes},
		{nRanksColumn, &row.NRanks},
		{pipeOpsColumn, &row.PipeOps},
		{regBuffColumn, &row.RegBuff},
	}
	for i, s := range f[5:] {
		if *ints[i].dst, err = ints[i].col.parse(s); err != nil {
			return row, false, err
		}
	}
	return row, false, nil
}

// isHeader reports whether the fields are the column names.
func isHeader(f []string) bool {
	for i, s := range f {
		if !strings.EqualFold(s, configColumns[i]) {
			return false
		}
	}
	return true
}

func parseColl(s string) (algos.Coll, error) {
	for c, name := range collNames {
		if strings.EqualFold(s, name) {
			return algos.Coll(c), nil
		}
	}
	return 0, fmt.Errorf("collective_type %q unknown, want one of %s", s, strings.Join(collNames[:], ", "))
}

func parseAlgo(s string) (algos.Algo, error) {
	if s == "-1" {
		return KeepAlgo, nil
	}
	for a, name := range algoNames {
		if strings.EqualFold(s, name) {
			return algos.Algo(a), nil
		}
	}
	return 0, fmt.Errorf("algorithm %q unknown, want -1 (keep the model's) or one of %s", s, strings.Join(algoNames[:], ", "))
}

func parseProto(s string) (protocols.Proto, error) {
	if s == "-1" {
		return KeepProto, nil
	}
	for p, name := range protoNames {
		if strings.EqualFold(s, name) {
			return protocols.Proto(p), nil
		}
	}
	return 0, fmt.Errorf("protocol %q unknown, want -1 (keep the model's) or one of %s", s, strings.Join(protoNames[:], ", "))
}

// parseSize parses min_bytes or max_bytes. The plugin has no "-1" for them
// (its strtoull would wrap it to SIZE_MAX), so a size is never negative.
func parseSize(name, s string) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%s %q invalid, want %s", name, s, wantSize)
	}
	return v, nil
}

func (c intColumn) parse(s string) (int, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || !c.ok(v) {
		return 0, fmt.Errorf("%s %q invalid, want %s", c.name, s, c.want)
	}
	return int(v), nil
}

// Covers reports whether r covers a call of coll moving nbytes on nNodes
// hosts and nRanks ranks: the test of Lookup, for a caller that must pass
// over a covering row, as NCCL's plugin passes over one whose algorithm and
// protocol the cost table marks unavailable and looks on.
func (r ConfigRow) Covers(coll algos.Coll, nbytes int64, nNodes, nRanks int) bool {
	return r.Coll == coll &&
		r.MinBytes <= nbytes && nbytes <= r.MaxBytes &&
		(r.NNodes == -1 || r.NNodes == nNodes) &&
		(r.NRanks == -1 || r.NRanks == nRanks) &&
		(r.PipeOps == -1 || r.PipeOps == 1) &&
		(r.RegBuff == -1 || r.RegBuff == 0)
}

// Lookup returns the first row that covers a call of coll moving nbytes (NCCL's nBytes)
// on nNodes hosts and nRanks ranks, and whether there is one.
func (c *Config) Lookup(coll algos.Coll, nbytes int64, nNodes, nRanks int) (ConfigRow, bool) {
	if c == nil {
		return ConfigRow{}, false
	}
	for _, r := range c.Rows {
		if r.Covers(coll, nbytes, nNodes, nRanks) {
			return r, true
		}
	}
	return ConfigRow{}, false
}

// Write writes c in the format ParseConfig reads, with a header comment naming the columns
// (and any comment lines the caller passes), so that a written file reads back to the same rows.
// Every row is written with all ten columns; Line is not written. A row
// ParseConfig would refuse is an error, and then nothing is written.
func (c *Config) Write(w io.Writer, comments ...string) error {
	var b bytes.Buffer
	b.WriteString("# NCCL tuner config (NCCL_TUNER_CONFIG_FILE), the format of NCCL's ext-tuner example plugin\n")
	b.WriteString("# " + strings.Join(configColumns[:], ",") + "\n")
	for _, com := range comments {
		for _, l := range strings.Split(com, "\n") {
			if l = strings.TrimRight(l, " \t\r"); l == "" {
				b.WriteString("#\n")
			} else {
				b.WriteString("# " + l + "\n")
			}
		}
	}
	if c != nil {
		for i, r := range c.Rows {
			line, err := r.format()
			if err != nil {
				return fmt.Errorf("tuner config %s: row %d (line %d): %v", c.Path, i, r.Line, err)
			}
			b.WriteString(line + "\n")
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

// format returns r as a line of the file, or why ParseConfig would refuse it.
func (r ConfigRow) format() (string, error) {
	if r.Coll < 0 || int(r.Coll) >= algos.NumColls {
		return "", fmt.Errorf("collective %v unknown", r.Coll)
	}
	if r.MinBytes < 0 || r.MaxBytes < 0 || r.MinBytes > r.MaxBytes {
		return "", fmt.Errorf("sizes %d..%d invalid, want 0 <= min_bytes <= max_bytes", r.MinBytes, r.MaxBytes)
	}
	algo := "-1"
	if r.Algo != KeepAlgo {
		if r.Algo < 0 || int(r.Algo) >= algos.NumAlgos {
			return "", fmt.Errorf("algorithm %v unknown", r.Algo)
		}
		algo = algoNames[r.Algo]
	}
	proto := "-1"
	if r.Proto != KeepProto {
		if !r.Proto.Valid() {
			return "", fmt.Errorf("protocol %v unknown", r.Proto)
		}
		proto = protoNames[r.Proto]
	}
	f := []string{collNames[r.Coll], strconv.FormatInt(r.MinBytes, 10), strconv.FormatInt(r.MaxBytes, 10), algo, proto}
	for _, x := range []struct {
		col intColumn
		v   int
	}{
		{channelsColumn, r.Channels},
		{nNodesColumn, r.NNodes},
		{nRanksColumn, r.NRanks},
		{pipeOpsColumn, r.PipeOps},
		{regBuffColumn, r.RegBuff},
	} {
		if !x.col.ok(int64(x.v)) {
			return "", fmt.Errorf("%s %d invalid, want %s", x.col.name, x.v, x.col.want)
		}
		f = append(f, strconv.Itoa(x.v))
	}
	return strings.Join(f, ","), nil
}
