package main

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestREADMEDocumentsEveryFlag: every ccrun flag appears by its long name in
// cmd/ccrun/README.md, the document that owns ccrun's flags.
func TestREADMEDocumentsEveryFlag(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	cmd := newRoot(&Options{}, io.Discard, io.Discard, func(context.Context, []string) error { return nil })
	n := 0
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" || f.Hidden {
			return
		}
		n++
		if !strings.Contains(readme, "--"+f.Name) {
			t.Errorf("cmd/ccrun/README.md does not document ccrun --%s", f.Name)
		}
	})
	if n < 15 {
		t.Fatalf("found only %d flags; the test is not seeing the command", n)
	}
}
