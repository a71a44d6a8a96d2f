package tune

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestConstsRoundTrip: what MarshalJSON writes, ParseConsts reads back
// unchanged, for the built-in constants and the fixed test calibration.
func TestConstsRoundTrip(t *testing.T) {
	cpu := fixedConsts(t)
	cpu.Class[Net].AlphaCPU = [3]float64{0.5, 0, 1} // optional: written only when set
	for _, c := range []*Consts{Default(), fixedConsts(t), cpu} {
		b, err := json.MarshalIndent(c, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseConsts("x.json", b)
		if err != nil {
			t.Fatalf("%s: %v\n%s", c.Source, err, b)
		}
		if !reflect.DeepEqual(got, c) {
			t.Errorf("%s: round trip changed the constants:\n got %+v\nwant %+v", c.Source, got, c)
		}
	}
}

// TestBadConsts: a file the model cannot use is an error naming the
// entry and what is allowed.
func TestBadConsts(t *testing.T) {
	good, err := json.Marshal(fixedConsts(t))
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(m map[string]any)) []byte {
		var m map[string]any
		if err := json.Unmarshal(good, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		b, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	class := func(m map[string]any, cl string) map[string]any {
		return m["classes"].(map[string]any)[cl].(map[string]any)
	}
	for _, c := range []struct {
		name string
		file []byte
		want string
	}{
		{"not json", []byte("{"), "x.json: unexpected end of JSON input"},
		{"unknown field", edit(func(m map[string]any) { m["alpha"] = 1 }), `x.json: json: unknown field "alpha"`},
		{"missing class", edit(func(m map[string]any) { delete(m["classes"].(map[string]any), "net") }), `x.json: classes: no "net"`},
		{"unknown class", edit(func(m map[string]any) { m["classes"].(map[string]any)["nvlink"] = class(m, "shm") }), `x.json: classes: unknown class "nvlink"`},
		{"missing proto", edit(func(m map[string]any) { delete(class(m, "shm")["alpha_us"].(map[string]any), "LL128") }),
			"x.json: shm.alpha_us: want exactly the protocols LL, LL128 and Simple, got 2 entries"},
		{"unknown algo", edit(func(m map[string]any) { class(m, "net")["efficiency"].(map[string]any)["Hypercube"] = 1.0 }),
			`x.json: net.efficiency: unknown algorithm "Hypercube"`},
		{"negative alpha", edit(func(m map[string]any) { class(m, "shm-busy")["alpha_us"].(map[string]any)["LL"] = -1.0 }),
			"x.json: class shm-busy: alpha LL = -1 µs: want a finite latency >= 0"},
		{"ceiling below beta", edit(func(m map[string]any) { class(m, "net")["beta_max_gbs"].(map[string]any)["Simple"] = 0.5 }),
			"x.json: class net: beta_max Simple = 0.5 GB/s: want a finite ceiling >= beta (1.15)"},
		{"alpha_cpu negative", edit(func(m map[string]any) {
			class(m, "net")["alpha_cpu_us"] = map[string]any{"LL": 0.0, "LL128": 0.0, "Simple": -1}
		}), "x.json: class net: alpha_cpu Simple = -1 µs: want a finite time >= 0"},
		{"alpha_cpu short", edit(func(m map[string]any) { class(m, "net")["alpha_cpu_us"] = map[string]any{"LL": 0.0} }),
			"x.json: net.alpha_cpu_us: want exactly the protocols LL, LL128 and Simple, got 1 entries"},
		{"no ring", edit(func(m map[string]any) { delete(class(m, "shm")["efficiency"].(map[string]any), "Ring") }),
			"x.json: class shm: efficiency ring = 0"},
	} {
		_, err := ParseConsts("x.json", c.file)
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to start with %q", c.name, err, c.want)
		}
	}
}
