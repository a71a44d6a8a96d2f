package comm

import "testing"

// TestParseSettings: the settings line carries the channel proposal, the
// cores and whether the rank's machine has a core per rank; a line of
// another version (two fields, as before the machine's roomy bit) or with
// anything after or out of range is malformed, so that a rank never takes
// another's chunking for its own.
func TestParseSettings(t *testing.T) {
	for _, tc := range []struct {
		line            string
		channels, cores int
		roomy, ok       bool
	}{
		{"2 1 1", 2, 1, true, true},
		{"4 2 0", 4, 2, false, true},
		{"2 1", 0, 0, false, false},
		{"2 1 2", 0, 0, false, false},
		{"2 1 -1", 0, 0, false, false},
		{"0 1 1", 0, 0, false, false},
		{"2 0 1", 0, 0, false, false},
		{"2 1 1 7", 0, 0, false, false},
		{"", 0, 0, false, false},
	} {
		ch, cores, roomy, err := parseSettings([]byte(tc.line))
		if (err == nil) != tc.ok || ch != tc.channels || cores != tc.cores || roomy != tc.roomy {
			t.Errorf("parseSettings(%q) = %d, %d, %v, %v; want %d, %d, %v, ok %v", tc.line, ch, cores, roomy, err, tc.channels, tc.cores, tc.roomy, tc.ok)
		}
	}
}
