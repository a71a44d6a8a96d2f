package results

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Calibration is cc-perf calibrate's output: each constant of the link
// class before and after the fit.
type Calibration struct {
	Meta
	Class  string     // the link class fitted: "shm", "net"
	Header []string   // the "#" lines above the table, without "# "
	Consts []Constant // in the table's order
	Notes  []string   // the "#" lines below it: model error, warnings
}

// Constant is one row of the calibration table.
type Constant struct {
	Name, Unit    string
	Before, After float64
	Basis         string // what the fitted value rests on
}

var calibHead = regexp.MustCompile(`^# cc-perf calibrate: (\d+) ranks? on (\d+) hosts?: link class (\S+)`)

// parseCalibration reads report.WriteCalibration's output. The table's
// columns are found by the header's positions: a name and a basis hold
// spaces, a unit may be blank.
func parseCalibration(lines []string) (*File, error) {
	c := &Calibration{Meta: Meta{Collective: "calibrate", Format: "cc-perf calibrate output"}}
	unitAt, basisAt := -1, -1
	done := false // the constants table ended
	for i, l := range lines {
		if m := calibHead.FindStringSubmatch(l); m != nil {
			c.Ranks, _ = strconv.Atoi(m[1])
			c.Hosts, _ = strconv.Atoi(m[2])
			c.Class = m[3]
		}
		switch {
		case strings.TrimSpace(l) == "" || strings.TrimSpace(l) == "#":
			if unitAt >= 0 && strings.HasPrefix(l, "#") {
				done = true
			}
		case strings.HasPrefix(l, "#"):
			text := strings.TrimSpace(strings.TrimPrefix(l, "#"))
			if unitAt < 0 {
				c.Header = append(c.Header, text)
			} else {
				c.Notes = append(c.Notes, text)
			}
		case unitAt < 0 && strings.HasPrefix(strings.TrimSpace(l), "constant "):
			unitAt, basisAt = strings.Index(l, "unit"), strings.Index(l, "basis")
			if unitAt < 0 || basisAt < unitAt {
				return nil, fmt.Errorf("line %d: calibration table header without its unit and basis columns", i+1)
			}
		case unitAt >= 0 && !done:
			k, err := constantRow(l, unitAt, basisAt)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", i+1, err)
			}
			c.Consts = append(c.Consts, k)
		}
	}
	if c.Class == "" || len(c.Consts) == 0 {
		return nil, fmt.Errorf("cc-perf calibrate output without its first line or its table of constants")
	}
	return &File{Kind: KindCalibration, Calib: c}, nil
}

// constantRow is a row of the constants table whose unit column starts at
// unitAt and basis column at basisAt.
func constantRow(l string, unitAt, basisAt int) (Constant, error) {
	if len(l) < basisAt {
		return Constant{}, fmt.Errorf("calibration row %q is shorter than its header", l)
	}
	k := Constant{Name: strings.TrimSpace(l[:unitAt]), Basis: strings.TrimSpace(l[basisAt:])}
	mid := strings.Fields(l[unitAt:basisAt])
	if len(mid) == 3 {
		k.Unit, mid = mid[0], mid[1:]
	}
	if len(mid) != 2 {
		return k, fmt.Errorf("calibration row %q: want unit, before and after between the name and the basis", l)
	}
	if err := floats(mid, []string{"before", "after"}, &k.Before, &k.After); err != nil {
		return k, err
	}
	return k, nil
}
