package main

import (
	"flag"
	"testing"

	"github.com/seed-760dd1f1/cc/cmd/internal/clidoc"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite doc/ (markdown reference and man pages) from the commands")

// TestGeneratedDocs: doc/ holds what cobra's doc package makes of the
// commands now (go generate ./cmd/cc-perf rewrites it).
func TestGeneratedDocs(t *testing.T) {
	root := newRoot(&env{lookup: func(string) (string, bool) { return "", false }})
	clidoc.Check(t, root, "doc", *updateDocs, "go generate ./cmd/cc-perf")
}
