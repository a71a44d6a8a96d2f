package fabric

import (
	"math"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	base := &Baseline{Version: 1, Hosts: []string{"a", "b", "c"}, Op: "sendrecv", Size: 32 << 20, LatSize: 8, GBps: 1, LatUS: 50, Path: "base.json"}
	for _, tc := range []struct {
		name   string
		nhosts int
		edit   func(c *Config)
		want   string // a substring of the error; "" for none
	}{
		{"defaults", 3, nil, ""},
		{"one host", 1, nil, "at least 2 hosts (one rank per host), got 1"},
		{"unknown schedule", 3, func(c *Config) { c.Schedule = "ring" }, `--schedule "ring": unknown schedule (allowed: quick, full, directed, random, bisect)`},
		{"unknown op", 3, func(c *Config) { c.Op = "alltoall" }, `--op "alltoall": unknown operation (allowed: sendrecv, all_reduce)`},
		{"random without rounds", 3, func(c *Config) { c.Schedule, c.Rounds = "random", 0 }, "--rounds 0"},
		{"rounds ignored elsewhere", 3, func(c *Config) { c.Rounds = 0 }, ""},
		{"negative confirm", 3, func(c *Config) { c.Confirm = -1 }, "--confirm -1"},
		{"negative max-concurrent", 3, func(c *Config) { c.MaxConcurrent = -2 }, "--max-concurrent -2"},
		{"tolerance 0", 3, func(c *Config) { c.Tolerance = 0 }, "--tolerance 0: must be in (0,1)"},
		{"tolerance 1", 3, func(c *Config) { c.Tolerance = 1 }, "--tolerance 1: must be in (0,1)"},
		{"tolerance 1.5", 3, func(c *Config) { c.Tolerance = 1.5 }, "--tolerance 1.5: must be in (0,1)"},
		{"tolerance NaN", 3, func(c *Config) { c.Tolerance = math.NaN() }, "--tolerance NaN"},
		{"zmax 0", 3, func(c *Config) { c.ZMax = 0 }, "--zmax 0"},
		{"mad floor 0", 3, func(c *Config) { c.MADFloor = 0 }, "--mad-floor 0"},
		{"lat tolerance -1", 3, func(c *Config) { c.LatTolerance = -1 }, "--lat-tolerance -1"},
		{"lat floor -5", 3, func(c *Config) { c.LatFloorUS = -5 }, "--lat-floor -5us"},
		{"expect -1", 3, func(c *Config) { c.Expect = -1 }, "--expect -1"},
		{"expect inf", 3, func(c *Config) { c.Expect = math.Inf(1) }, "--expect +Inf"},
		{"size 0", 3, func(c *Config) { c.Size = 0 }, "--size 0"},
		{"lat size -1", 3, func(c *Config) { c.LatSize = -1 }, "--lat-size -1"},
		{"lat size 0 skips", 3, func(c *Config) { c.LatSize = 0; b := *base; b.LatSize, b.LatUS = 0, 0; c.Baseline = &b }, ""},
		{"baseline", 3, func(c *Config) { c.Baseline = base }, ""},
		{"baseline and expect", 3, func(c *Config) { c.Baseline, c.Expect = base, 1 }, "--expect 1 and --baseline base.json: give one reference, not both"},
		{"baseline of 3 hosts, run of 4", 4, func(c *Config) { c.Baseline = base }, "baseline base.json: 3 hosts, this run has 4"},
		{"baseline of another size", 3, func(c *Config) { c.Baseline, c.Size = base, 1<<20 }, "baseline base.json: size 33554432 bytes, this run measures 1048576 (--size)"},
		{"baseline of another lat size", 3, func(c *Config) { c.Baseline, c.LatSize = base, 64 }, "baseline base.json: lat_size 8 bytes, this run measures 64 (--lat-size)"},
		{"baseline of another op", 3, func(c *Config) { c.Baseline, c.Op = base, "all_reduce" }, "baseline base.json: op sendrecv, this run measures all_reduce (--op)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			if tc.edit != nil {
				tc.edit(&c)
			}
			err := c.Validate(tc.nhosts)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("got %v, want no error", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Errorf("got a multi-line error %q", err)
			}
		})
	}
}

func TestCheckBaseline(t *testing.T) {
	c := DefaultConfig()
	if err := c.CheckBaseline(testHosts(3)); err != nil {
		t.Errorf("no baseline: got %v", err)
	}
	c.Baseline = &Baseline{Hosts: []string{"tb3", "tb1", "tb2"}, Path: "b.json"}
	if err := c.CheckBaseline(testHosts(3)); err != nil {
		t.Errorf("same hosts in another order: got %v", err)
	}
	c.Baseline.Hosts = []string{"tb1", "tb2", "tb9"}
	got := c.CheckBaseline(testHosts(3))
	want := "baseline b.json: another host set: not in this run: tb9; not in the baseline: tb3"
	if got == nil || got.Error() != want {
		t.Errorf("got %v, want %q", got, want)
	}
}

func TestParseBaseline(t *testing.T) {
	good := `{"version":1,"hosts":["tb1","tb2"],"op":"sendrecv","size":33554432,"lat_size":8,"gbps":0.8,"lat_us":120,"created":"2026-11-27T06:00:00Z"}`
	b, err := ParseBaseline("b.json", []byte(good))
	if err != nil {
		t.Fatalf("got %v", err)
	}
	if b.Path != "b.json" || b.GBps != 0.8 || b.LatUS != 120 || len(b.Hosts) != 2 {
		t.Errorf("got %+v", b)
	}
	// Marshal and parse again: the same baseline.
	out, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	again, err := ParseBaseline("b.json", out)
	if err != nil || again.GBps != b.GBps || again.Created != b.Created || again.Path != b.Path {
		t.Errorf("round trip: got %+v, %v", again, err)
	}
	for _, tc := range []struct{ name, data, want string }{
		{"not json", `{`, "baseline b.json: unexpected EOF"},
		{"unknown field", `{"version":1,"gbs":1}`, `baseline b.json: json: unknown field "gbs"`},
		{"two objects", good + good, "baseline b.json: data after the JSON object"},
		{"version", strings.Replace(good, `"version":1`, `"version":2`, 1), "baseline b.json: field version: 2, this cc-perf reads version 1"},
		{"one host", strings.Replace(good, `["tb1","tb2"]`, `["tb1"]`, 1), "baseline b.json: field hosts: 1 hosts, want at least 2"},
		{"twice", strings.Replace(good, `["tb1","tb2"]`, `["tb1","tb1"]`, 1), `baseline b.json: field hosts: "tb1" is empty or given twice`},
		{"op", strings.Replace(good, `"sendrecv"`, `"bcast"`, 1), `baseline b.json: field op: "bcast" is not one of [sendrecv all_reduce]`},
		{"size", strings.Replace(good, `33554432`, `0`, 1), "baseline b.json: field size: 0, want more than 0 bytes"},
		{"gbps", strings.Replace(good, `0.8`, `-1`, 1), "baseline b.json: field gbps: -1, want a bandwidth > 0"},
		{"lat_us", strings.Replace(good, `"lat_us":120`, `"lat_us":0`, 1), "baseline b.json: field lat_us: 0 with lat_size 8"},
		{"lat_size", strings.Replace(good, `"lat_size":8`, `"lat_size":-8`, 1), "baseline b.json: field lat_size: -8"},
	} {
		if _, err := ParseBaseline("b.json", []byte(tc.data)); err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error starting %q", tc.name, err, tc.want)
		}
	}
}

func FuzzParseBaseline(f *testing.F) {
	f.Add([]byte(`{"version":1,"hosts":["a","b"],"op":"sendrecv","size":1,"lat_size":0,"gbps":1,"lat_us":0,"created":""}`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := ParseBaseline("f", data)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("multi-line error %q", err)
			}
			return
		}
		// what parses validates against a config of its own
		c := DefaultConfig()
		c.Baseline, c.Size, c.LatSize, c.Op = b, b.Size, b.LatSize, b.Op
		if err := c.Validate(len(b.Hosts)); err != nil {
			t.Errorf("parsed baseline %+v: Validate: %v", b, err)
		}
	})
}

func TestNewBaseline(t *testing.T) {
	hosts := testHosts(8)
	cfg := cfgOf("full", nil)
	m := newModel(8, 0, 1).slow(4, 0.1)
	m.base = 0.8
	_, ms := run(t, cfg, m)
	v := Judge(hosts, nil, ms, nil, cfg)
	b := NewBaseline(hosts, v, cfg)
	// The fleet without tb5 measures 0.8 GB/s exactly (no noise) and 50 us.
	if b.Version != 1 || len(b.Hosts) != 8 || b.Hosts[4] != "tb5" || b.Op != "sendrecv" || b.Size != cfg.Size ||
		b.LatSize != cfg.LatSize || math.Abs(b.GBps-0.8) > 1e-9 || math.Abs(b.LatUS-50) > 1e-9 {
		t.Errorf("got %+v, want 8 hosts, 0.8 GB/s, 50 us", b)
	}
	out, err := b.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseBaseline("b.json", out); err != nil {
		t.Errorf("a saved baseline does not parse: %v", err)
	}
}
