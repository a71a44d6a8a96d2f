package tune

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/runtime/fuzzcheck"
)

// FuzzParseConsts: a constants file parses to the same constants every
// time, or fails with one line naming the file; what parses is written by
// MarshalJSON as a file that parses back to the same constants.
func FuzzParseConsts(f *testing.F) {
	for _, c := range []*Consts{Default(), fixedConsts(f)} {
		b, err := json.Marshal(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"classes":{}}`))
	f.Add([]byte(`{"source":"x","classes":{"shm":{"gamma_us":{"LL":1,"LL128":1,"Simple":1},"efficiency":{"Ring":1,"ring":0.5}}}}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConsts("f.json", b)
		if err != nil {
			fuzzcheck.OneLine(t, err)
			if !strings.HasPrefix(err.Error(), "f.json: ") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if again, err := ParseConsts("f.json", b); err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("a second parse of the same file differs (%v):\n got %+v\nwant %+v", err, again, c)
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("marshal parsed constants: %v", err)
		}
		back, err := ParseConsts("g.json", out)
		if err != nil || !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip (%v):\n got %+v\nwant %+v\nfile %s", err, back, c, out)
		}
	})
}

// TestConstsAlgoTwice: an algorithm named twice in one table, in two
// cases, is an error; it was read as either value, by the map's order.
func TestConstsAlgoTwice(t *testing.T) {
	b, err := json.Marshal(Default())
	if err != nil {
		t.Fatal(err)
	}
	twice := strings.Replace(string(b), `"efficiency":{`, `"efficiency":{"ring":0.5,`, 1)
	if twice == string(b) {
		t.Fatal("no efficiency table in the marshalled constants")
	}
	_, err = ParseConsts("x.json", []byte(twice))
	if want := "efficiency: algorithm Ring named twice"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v, want one containing %q", err, want)
	}
}
