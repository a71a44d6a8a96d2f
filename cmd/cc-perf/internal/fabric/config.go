package fabric

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Config is the run's settings: the flags of `cc-perf fabric`, defaults in
// brackets (DefaultConfig).
type Config struct {
	Schedule      string    `json:"schedule"`           // quick|full|directed|random|bisect [quick]
	Op            string    `json:"op"`                 // per-pair operation: sendrecv|all_reduce [sendrecv]
	Rounds        int       `json:"rounds"`             // random: rounds [3]
	Seed          int64     `json:"seed"`               // random: seed (the runner picks one when unset and records it)
	Confirm       int       `json:"confirm"`            // quick and bisect: known-good partners per suspect [2]
	MaxConcurrent int       `json:"max_concurrent"`     // tests per round, 0 = all [0]; 1 = serial
	Tolerance     float64   `json:"tolerance"`          // slow when ratio < 1-Tolerance [0.20], in (0,1)
	ZMax          float64   `json:"zmax"`               // modified-z gate [3.5]
	MADFloor      float64   `json:"mad_floor"`          // MAD floor as a fraction of the median score [0.02]
	LatTolerance  float64   `json:"lat_tolerance"`      // latency slow when lat ratio > 1+LatTolerance [0.5]
	LatFloorUS    float64   `json:"lat_floor_us"`       // latency below this is never reported [20]
	Expect        float64   `json:"expect,omitempty"`   // GB/s reference per pair (--expect), 0 = none
	Baseline      *Baseline `json:"baseline,omitempty"` // --baseline FILE, nil = none
	Size          int64     `json:"size"`               // bandwidth size in bytes [32M]
	LatSize       int64     `json:"lat_size"`           // latency size in bytes [8]; 0 skips latency
}

// Schedules are the allowed values of Config.Schedule, the default first.
var Schedules = []string{"quick", "full", "directed", "random", "bisect"}

// Ops are the allowed values of Config.Op, the default first.
var Ops = []string{"sendrecv", "all_reduce"}

// DefaultConfig is the configuration of a plain `cc-perf fabric`.
func DefaultConfig() Config {
	return Config{
		Schedule:     "quick",
		Op:           "sendrecv",
		Rounds:       3,
		Confirm:      2,
		Tolerance:    0.20,
		ZMax:         3.5,
		MADFloor:     0.02,
		LatTolerance: 0.5,
		LatFloorUS:   20,
		Size:         32 << 20,
		LatSize:      8,
	}
}

// Validate checks c for a run over nhosts hosts and returns the first
// problem as a one-line error naming the flag, the bad value and what is
// allowed. A baseline is checked against the run's size, latency size, op
// and host count here; CheckBaseline checks its host names.
func (c *Config) Validate(nhosts int) error {
	switch {
	case nhosts < 2:
		return fmt.Errorf("fabric needs at least 2 hosts (one rank per host), got %d", nhosts)
	case !slices.Contains(Schedules, c.Schedule):
		return fmt.Errorf("--schedule %q: unknown schedule (allowed: %s)", c.Schedule, strings.Join(Schedules, ", "))
	case !slices.Contains(Ops, c.Op):
		return fmt.Errorf("--op %q: unknown operation (allowed: %s)", c.Op, strings.Join(Ops, ", "))
	case c.Schedule == "random" && c.Rounds < 1:
		return fmt.Errorf("--rounds %d: random needs at least 1 round", c.Rounds)
	case c.Confirm < 0:
		return fmt.Errorf("--confirm %d: must be 0 or more", c.Confirm)
	case c.MaxConcurrent < 0:
		return fmt.Errorf("--max-concurrent %d: must be 0 (all tests of a round at once) or more", c.MaxConcurrent)
	case !(c.Tolerance > 0 && c.Tolerance < 1):
		return fmt.Errorf("--tolerance %g: must be in (0,1)", c.Tolerance)
	case !(c.ZMax > 0) || math.IsInf(c.ZMax, 0):
		return fmt.Errorf("--zmax %g: must be a number > 0", c.ZMax)
	case !(c.MADFloor > 0 && c.MADFloor < 1):
		return fmt.Errorf("--mad-floor %g: must be in (0,1)", c.MADFloor)
	case !(c.LatTolerance > 0) || math.IsInf(c.LatTolerance, 0):
		return fmt.Errorf("--lat-tolerance %g: must be a number > 0", c.LatTolerance)
	case !(c.LatFloorUS >= 0) || math.IsInf(c.LatFloorUS, 0):
		return fmt.Errorf("--lat-floor %gus: must be 0 or more", c.LatFloorUS)
	case !(c.Expect >= 0) || math.IsInf(c.Expect, 0):
		return fmt.Errorf("--expect %g: must be a bandwidth > 0 GB/s (or 0 for none)", c.Expect)
	case c.Expect > 0 && c.Baseline != nil:
		return fmt.Errorf("--expect %g and --baseline %s: give one reference, not both", c.Expect, c.Baseline.Path)
	case c.Size <= 0:
		return fmt.Errorf("--size %d: must be more than 0 bytes", c.Size)
	case c.LatSize < 0:
		return fmt.Errorf("--lat-size %d: must be 0 (no latency) or more bytes", c.LatSize)
	}
	if b := c.Baseline; b != nil {
		switch {
		case len(b.Hosts) != nhosts:
			return fmt.Errorf("baseline %s: %d hosts, this run has %d", b.Path, len(b.Hosts), nhosts)
		case b.Size != c.Size:
			return fmt.Errorf("baseline %s: size %d bytes, this run measures %d (--size)", b.Path, b.Size, c.Size)
		case b.LatSize != 0 && b.LatSize != c.LatSize:
			return fmt.Errorf("baseline %s: lat_size %d bytes, this run measures %d (--lat-size)", b.Path, b.LatSize, c.LatSize)
		case b.Op != c.Op:
			return fmt.Errorf("baseline %s: op %s, this run measures %s (--op)", b.Path, b.Op, c.Op)
		}
	}
	return nil
}

// CheckBaseline checks that c's baseline, if any, was saved over the same
// host names as hosts (in any order), naming the hosts that differ.
func (c *Config) CheckBaseline(hosts []Host) error {
	b := c.Baseline
	if b == nil {
		return nil
	}
	run := make([]string, len(hosts))
	for i, h := range hosts {
		run[i] = h.Name
	}
	var missing, extra []string
	for _, h := range b.Hosts {
		if !slices.Contains(run, h) {
			missing = append(missing, h)
		}
	}
	for _, h := range run {
		if !slices.Contains(b.Hosts, h) {
			extra = append(extra, h)
		}
	}
	if len(missing)+len(extra) == 0 {
		return nil
	}
	msg := fmt.Sprintf("baseline %s: another host set:", b.Path)
	if len(missing) > 0 {
		msg += " not in this run: " + strings.Join(missing, ",")
		if len(extra) > 0 {
			msg += ";"
		}
	}
	if len(extra) > 0 {
		msg += " not in the baseline: " + strings.Join(extra, ",")
	}
	return fmt.Errorf("%s", msg)
}

// directed says whether c's tests have a direction (tx and rx judged apart).
func (c *Config) directed() bool { return c.Schedule == "directed" }

// voting says whether c's hosts are judged by a vote over few tests (quick
// and bisect) rather than by their score's modified z.
func (c *Config) voting() bool { return c.Schedule == "quick" || c.Schedule == "bisect" }
