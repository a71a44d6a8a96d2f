package results

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// parseText reads a log: cc-perf tune or calibrate output, or the
// nccl-tests table of cc-perf or nccl-tests; nil, nil when it is none.
func parseText(data string) (*File, error) {
	lines := strings.Split(strings.ReplaceAll(data, "\r\n", "\n"), "\n")
	for _, l := range lines {
		switch {
		case strings.HasPrefix(l, "# cc-perf tune "):
			return parseTune(lines)
		case strings.HasPrefix(l, "# cc-perf calibrate: "):
			return parseCalibration(lines)
		}
	}
	return parseLog(lines)
}

var (
	startLine  = regexp.MustCompile(`^# Collective test starting: (\S+)`)
	deviceLine = regexp.MustCompile(`^#\s+Rank\s+\d+\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device`)
)

// parseLog reads the nccl-tests tables of a log: each "Collective test
// starting" line (or a column header without one) starts a sweep, the
// device lines count its ranks and hosts, and the column header names the
// fields of its rows. Lines that are neither (a launcher's, the footer)
// are skipped.
func parseLog(lines []string) (*File, error) {
	f := &File{Kind: KindSweep}
	var s *Sweep
	var hosts []string
	var cols map[string][]int // column name -> field indexes, in order
	newSweep := func(coll string) {
		s = &Sweep{Meta: Meta{Collective: coll, Format: "nccl-tests log"}}
		f.Sweeps = append(f.Sweeps, s)
		hosts, cols = nil, nil
	}
	for i, l := range lines {
		if m := startLine.FindStringSubmatch(l); m != nil {
			newSweep(collectiveOf(m[1]))
			continue
		}
		if m := deviceLine.FindStringSubmatch(l); m != nil {
			if s == nil {
				newSweep("")
			}
			hosts = append(hosts, m[1])
			s.Ranks, s.Hosts = len(hosts), hostCount(hosts)
			continue
		}
		if fs := strings.Fields(strings.TrimPrefix(l, "#")); strings.HasPrefix(l, "#") && len(fs) > 2 && fs[0] == "size" && fs[1] == "count" {
			if s == nil || cols != nil {
				newSweep("")
			}
			cols = map[string][]int{}
			for j, name := range fs {
				cols[name] = append(cols[name], j)
			}
			s.Algo = cols["algo"] != nil
			continue
		}
		if cols == nil || strings.HasPrefix(l, "#") || strings.TrimSpace(l) == "" {
			continue
		}
		fs := strings.Fields(l)
		if _, err := strconv.ParseInt(fs[0], 10, 64); err != nil || len(fs) < len(cols)-1 {
			continue // not a row of the table
		}
		r, err := logRow(fs, cols)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		s.Rows = append(s.Rows, r)
	}
	if len(f.Sweeps) == 0 {
		return nil, nil
	}
	for _, s := range f.Sweeps {
		if len(s.Rows) > 0 {
			s.Date = s.Rows[0].Timestamp // -S's, else none
		}
	}
	return f, nil
}

// logRow is the row of fields fs under the column header cols.
func logRow(fs []string, cols map[string][]int) (Row, error) {
	field := func(name string, k int) string {
		if idx := cols[name]; k < len(idx) && idx[k] < len(fs) {
			return fs[idx[k]]
		}
		return ""
	}
	var r Row
	var err error
	if r.Bytes, err = strconv.ParseInt(field("size", 0), 10, 64); err != nil {
		return r, fmt.Errorf("size %q is not a byte count", field("size", 0))
	}
	r.Count, _ = strconv.ParseInt(field("count", 0), 10, 64)
	r.Type, r.RedOp, r.Root = field("type", 0), field("redop", 0), field("root", 0)
	timeCol := "time"
	if cols["cputime"] != nil {
		timeCol = "cputime"
	}
	for k, h := range []*Half{&r.Out, &r.In} {
		for _, v := range []struct {
			name string
			dst  *float64
		}{{timeCol, &h.TimeUS}, {"algbw", &h.AlgBW}, {"busbw", &h.BusBW}} {
			s := field(v.name, k)
			if *v.dst, err = strconv.ParseFloat(s, 64); err != nil {
				return r, fmt.Errorf("%s %q is not a number", v.name, s)
			}
		}
		h.Wrong = field("#wrong", k)
	}
	r.Algo, r.Proto, r.Channels = field("algo", 0), field("proto", 0), field("nchannels", 0)
	if idx := cols["timestamp"]; idx != nil && idx[0]+1 < len(fs) {
		r.Timestamp = fs[idx[0]] + " " + fs[idx[0]+1]
	}
	return r, nil
}
