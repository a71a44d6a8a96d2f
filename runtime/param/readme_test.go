package param

import (
	"os"
	"strings"
	"testing"
)

// TestREADMEDocumentsEveryKnob: every variable of the table appears in the
// knob table of runtime/README.md (as a `NAME` cell).
func TestREADMEDocumentsEveryKnob(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, k := range Knobs() {
		if !strings.Contains(readme, "`"+k.Name+"`") {
			t.Errorf("runtime/README.md does not document %s", k.Name)
		}
	}
}
