package results

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Tune is cc-perf tune's output: per size the best configuration, the
// tuner's pick (auto) and the regret, and with --all every configuration's
// time.
type Tune struct {
	Meta
	Type, RedOp string
	Summary     []TuneRow
	Configs     []TuneConfig // --all's table; nil without it
	Notes       []string     // the "#" lines after the summary (regret, wrong data)
}

// TuneRow is one size of tune's summary table.
type TuneRow struct {
	Bytes, Count int64
	Best         string  // the fastest configuration, as it ran: "Ring/Simple/1"
	TimeUS       float64 // its time
	BusBW        float64 // its busbw
	Auto         string  // what the tuner picked, as it ran
	AutoUS       float64 // the time of what auto ran
	Regret       float64 // AutoUS / TimeUS
	Wrong        string
}

// TuneConfig is one row of tune --all's table: a configuration at a size.
type TuneConfig struct {
	Bytes     int64
	Config    string  // as asked: "auto", "Ring/LL/auto"
	Ran       string  // as it ran: "Ring/LL/1"
	TimeUS    float64 // its own time
	SameRanUS float64 // over every configuration that ran the same
	VsBest    float64
}

var tuneHead = regexp.MustCompile(`^# cc-perf tune (\S+): (\d+) ranks? on (\d+) hosts?, (\S+)(?: (\S+))?$`)

// parseTune reads cc-perf tune's output (report.WriteTune).
func parseTune(lines []string) (*File, error) {
	t := &Tune{Meta: Meta{Format: "cc-perf tune output"}}
	var table string // the table whose rows follow: "summary" or "all"
	for i, l := range lines {
		if m := tuneHead.FindStringSubmatch(l); m != nil {
			t.Collective, t.Type, t.RedOp = m[1], m[4], m[5]
			t.Ranks, _ = strconv.Atoi(m[2])
			t.Hosts, _ = strconv.Atoi(m[3])
			continue
		}
		fs := strings.Fields(l)
		switch {
		case len(fs) == 0:
			continue
		case strings.HasPrefix(l, "#"):
			if note := strings.TrimSpace(strings.TrimPrefix(l, "#")); table == "summary" && note != "" {
				t.Notes = append(t.Notes, note)
			}
			continue
		case strings.HasPrefix(strings.TrimSpace(l), "size (B)"):
			table = "all"
			if len(fs) > 2 && fs[2] == "count" {
				table = "summary"
			}
			continue
		}
		var err error
		switch table {
		case "summary":
			err = t.summaryRow(fs)
		case "all":
			err = t.configRow(fs)
		}
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
	}
	if t.Collective == "" {
		return nil, fmt.Errorf("cc-perf tune output without its first line (# cc-perf tune COLLECTIVE: N ranks on N hosts, TYPE OP)")
	}
	return &File{Kind: KindTune, Tune: t}, nil
}

// floats parses fs as numbers into dst, naming the column of a bad one.
func floats(fs []string, names []string, dst ...*float64) error {
	for i, p := range dst {
		v, err := strconv.ParseFloat(fs[i], 64)
		if err != nil {
			return fmt.Errorf("%s %q is not a number", names[i], fs[i])
		}
		*p = v
	}
	return nil
}

func (t *Tune) summaryRow(fs []string) error {
	if len(fs) != 9 {
		return fmt.Errorf("%d fields in a row of tune's summary: want 9 (size count best time busbw auto time regret #wrong)", len(fs))
	}
	var r TuneRow
	var size, count float64
	if err := floats([]string{fs[0], fs[1], fs[3], fs[4], fs[6], fs[7]}, []string{"size", "count", "time", "busbw", "auto time", "regret"},
		&size, &count, &r.TimeUS, &r.BusBW, &r.AutoUS, &r.Regret); err != nil {
		return err
	}
	r.Bytes, r.Count, r.Best, r.Auto, r.Wrong = int64(size), int64(count), fs[2], fs[5], fs[8]
	t.Summary = append(t.Summary, r)
	return nil
}

func (t *Tune) configRow(fs []string) error {
	if len(fs) != 6 {
		return fmt.Errorf("%d fields in a row of tune --all's table: want 6 (size configuration ran time same-ran vs-best)", len(fs))
	}
	var c TuneConfig
	var size float64
	if err := floats([]string{fs[0], fs[3], fs[4], fs[5]}, []string{"size", "time", "same ran", "vs best"},
		&size, &c.TimeUS, &c.SameRanUS, &c.VsBest); err != nil {
		return err
	}
	c.Bytes, c.Config, c.Ran = int64(size), fs[1], fs[2]
	t.Configs = append(t.Configs, c)
	return nil
}
