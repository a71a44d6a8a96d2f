package main

import "testing"

// FuzzFlagValues feeds arbitrary strings to the flag parsers: they never
// panic, and what they accept is in range.
func FuzzFlagValues(f *testing.F) {
	for _, s := range []string{"0", "1", "-1", "0x10", "010", "all", "ALL", "sum", "mulsum", "float", "bf16", " 7 ", "1e3", "", "9999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var n int
		if err := (intFlag{&n, 0, 3}).Set(s); err == nil && (n < 0 || n > 3) {
			t.Fatalf("intFlag{0,3}.Set(%q) accepted %d", s, n)
		}
		var r rootFlag
		if err := r.Set(s); err == nil && r.rank < -1 {
			t.Fatalf("rootFlag.Set(%q) accepted %d", s, r.rank)
		}
		var ops opList
		if err := ops.Set(s); err == nil {
			for _, op := range ops.ops {
				if !op.Valid() {
					t.Fatalf("opList.Set(%q) accepted %v", s, op)
				}
			}
		}
		var types typeList
		if err := types.Set(s); err == nil {
			for _, dt := range types.types {
				if !dt.Valid() || dt.Size() == 0 {
					t.Fatalf("typeList.Set(%q) accepted %v", s, dt)
				}
			}
		}
	})
}
