package main

import (
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// TestREADMEDocumentsEveryFlag: every flag of every subcommand appears in
// cmd/cc-perf/README.md (the document that owns them) by its long name.
func TestREADMEDocumentsEveryFlag(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	root := newRoot(&env{lookup: func(string) (string, bool) { return "", false }})
	seen := map[string]bool{}
	var visit func(cmd *cobra.Command)
	visit = func(cmd *cobra.Command) {
		cmd.Flags().VisitAll(func(f *pflag.Flag) {
			if seen[f.Name] || f.Name == "help" {
				return
			}
			seen[f.Name] = true
			if !strings.Contains(readme, "--"+f.Name) {
				t.Errorf("cmd/cc-perf/README.md does not document cc-perf %s --%s", cmd.Name(), f.Name)
			}
		})
		for _, sub := range cmd.Commands() {
			visit(sub)
		}
	}
	visit(root)
	if len(seen) < 20 {
		t.Fatalf("found only %d flags; the test is not seeing the commands", len(seen))
	}
}
