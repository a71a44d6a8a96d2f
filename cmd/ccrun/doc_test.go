package main

import (
	"context"
	"flag"
	"io"
	"testing"

	"github.com/seed-760dd1f1/cc/cmd/internal/clidoc"
)

var updateDocs = flag.Bool("update-docs", false, "rewrite doc/ (markdown reference and man pages) from the command")

// TestGeneratedDocs: doc/ holds what cobra's doc package makes of the
// command now (go generate ./cmd/ccrun rewrites it).
func TestGeneratedDocs(t *testing.T) {
	root := newRoot(&Options{}, io.Discard, io.Discard, func(context.Context, []string) error { return nil })
	clidoc.Check(t, root, "doc", *updateDocs, "go generate ./cmd/ccrun")
}
