package fabric

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
)

// BaselineVersion is the version of the baseline file this package writes
// and reads.
const BaselineVersion = 1

// Baseline is a saved reference (--save-baseline FILE, read back with
// --baseline FILE): the fleet's median pair bandwidth and latency over the
// hosts that passed, and what they were measured with.
//
//	{"version":1,"hosts":["tb1",...],"op":"sendrecv","size":33554432,
//	 "lat_size":8,"gbps":0.8,"lat_us":120,"created":"2026-11-27T06:00:00Z"}
type Baseline struct {
	Version int      `json:"version"`
	Hosts   []string `json:"hosts"`    // every host of the run it was saved from, in rank order
	Op      string   `json:"op"`       // Config.Op
	Size    int64    `json:"size"`     // bytes of the bandwidth tests
	LatSize int64    `json:"lat_size"` // bytes of the latency tests, 0 = none
	GBps    float64  `json:"gbps"`     // median pair bandwidth of the passing hosts
	LatUS   float64  `json:"lat_us"`   // their median latency, 0 = not measured
	Created string   `json:"created"`  // RFC 3339 time, set by the caller (this package has no clock)
	// Path is the file it was read from, for messages.
	Path string `json:"-"`
}

// NewBaseline is the reference to save after a run: v's fleet reference,
// which leaves out every test of a flagged host. Created is left for the
// caller to set.
func NewBaseline(hosts []Host, v Verdict, cfg Config) Baseline {
	names := make([]string, len(hosts))
	for i, h := range hosts {
		names[i] = h.Name
	}
	return Baseline{
		Version: BaselineVersion,
		Hosts:   names,
		Op:      cfg.Op,
		Size:    cfg.Size,
		LatSize: cfg.LatSize,
		GBps:    v.Fleet.GBps,
		LatUS:   v.Fleet.LatUS,
	}
}

// ParseBaseline reads a baseline file's contents; path names it in errors,
// which also name the bad field.
func ParseBaseline(path string, data []byte) (*Baseline, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	var b Baseline
	if err := d.Decode(&b); err != nil {
		return nil, fmt.Errorf("baseline %s: %w", path, err)
	}
	if d.More() {
		return nil, fmt.Errorf("baseline %s: data after the JSON object", path)
	}
	bad := func(field, format string, a ...any) error {
		return fmt.Errorf("baseline %s: field %s: %s", path, field, fmt.Sprintf(format, a...))
	}
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case b.Version != BaselineVersion:
		return nil, bad("version", "%d, this cc-perf reads version %d", b.Version, BaselineVersion)
	case len(b.Hosts) < 2:
		return nil, bad("hosts", "%d hosts, want at least 2", len(b.Hosts))
	case !slices.Contains(Ops, b.Op):
		return nil, bad("op", "%q is not one of %v", b.Op, Ops)
	case b.Size <= 0:
		return nil, bad("size", "%d, want more than 0 bytes", b.Size)
	case b.LatSize < 0:
		return nil, bad("lat_size", "%d, want 0 or more bytes", b.LatSize)
	case !(b.GBps > 0) || !finite(b.GBps):
		return nil, bad("gbps", "%g, want a bandwidth > 0", b.GBps)
	case !(b.LatUS >= 0) || !finite(b.LatUS):
		return nil, bad("lat_us", "%g, want a latency >= 0", b.LatUS)
	case b.LatSize > 0 && b.LatUS == 0:
		return nil, bad("lat_us", "0 with lat_size %d, want the latency measured at that size", b.LatSize)
	}
	seen := map[string]bool{}
	for _, h := range b.Hosts {
		if h == "" || seen[h] {
			return nil, bad("hosts", "%q is empty or given twice", h)
		}
		seen[h] = true
	}
	b.Path = path
	return &b, nil
}

// Marshal is the baseline file's contents: indented JSON with a final
// newline.
func (b Baseline) Marshal() ([]byte, error) {
	out, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}
