// Package clidoc writes a command's reference with cobra's doc package: one
// markdown file per command (GenMarkdownTree) and one man page per command
// (GenMan, section 1) under man/. The output is deterministic: no "auto
// generated on <date>" footer and an empty date in the man pages' .TH line,
// so that a test can regenerate the files and compare them with the checked-in
// ones. Only tests import it (the binaries do not carry cobra/doc).
package clidoc

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// Generate writes root's reference into dir: dir/<command>.md for root and
// every visible subcommand, and dir/man/<command>.1. dir and dir/man are
// created; files already there are overwritten, others left alone.
func Generate(root *cobra.Command, dir string) error {
	visit(root, func(c *cobra.Command) { c.DisableAutoGenTag = true })
	if err := os.MkdirAll(filepath.Join(dir, "man"), 0o755); err != nil {
		return err
	}
	if err := doc.GenMarkdownTree(root, dir); err != nil {
		return fmt.Errorf("markdown reference of %s: %w", root.Name(), err)
	}
	var err error
	visit(root, func(c *cobra.Command) {
		if err != nil || !c.IsAvailableCommand() && c != root {
			return
		}
		err = genMan(c, filepath.Join(dir, "man"))
	})
	return err
}

// visit calls f on c and every command below it.
func visit(c *cobra.Command, f func(*cobra.Command)) {
	f(c)
	for _, sub := range c.Commands() {
		visit(sub, f)
	}
}

// thDate matches the date field of the .TH line that GenMan writes from
// the fixed zero date (third quoted field).
var thDate = regexp.MustCompile(`(?m)^(\.TH "[^"]*" "[^"]*" )"[^"]*"`)

// genMan writes c's man page as dir/<command-path with dashes>.1.
func genMan(c *cobra.Command, dir string) error {
	var zero time.Time
	h := &doc.GenManHeader{Section: "1", Date: &zero, Source: "cc", Manual: "cc manual"}
	var b bytes.Buffer
	if err := doc.GenMan(c, h, &b); err != nil {
		return fmt.Errorf("man page of %s: %w", c.CommandPath(), err)
	}
	page := thDate.ReplaceAll(b.Bytes(), []byte(`$1""`))
	name := strings.ReplaceAll(c.CommandPath(), " ", "-") + ".1"
	return os.WriteFile(filepath.Join(dir, name), page, 0o644)
}

// Diff compares the reference in got (just generated) with the one in want
// (checked in) and returns one line per file that is missing, extra or
// different, by path relative to the directories.
func Diff(want, got string) ([]string, error) {
	w, err := files(want)
	if err != nil {
		return nil, err
	}
	g, err := files(got)
	if err != nil {
		return nil, err
	}
	var out []string
	for name, gb := range g {
		wb, ok := w[name]
		switch {
		case !ok:
			out = append(out, name+": missing")
		case !bytes.Equal(wb, gb):
			out = append(out, name+": out of date")
		}
	}
	for name := range w {
		if _, ok := g[name]; !ok {
			out = append(out, name+": no longer generated")
		}
	}
	sort.Strings(out)
	return out, nil
}

// files reads every regular file under dir, keyed by slash path relative to it.
func files(dir string) (map[string][]byte, error) {
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && p == dir {
				return filepath.SkipDir
			}
			return err
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	return out, err
}

// Check is the test of a command's checked-in reference: it regenerates
// root's reference into a temporary directory and fails t when dir differs,
// naming each stale file and the command that refreshes them. With update it
// replaces dir with the fresh reference instead.
func Check(t *testing.T, root *cobra.Command, dir string, update bool, refresh string) {
	t.Helper()
	if update {
		if err := os.RemoveAll(dir); err != nil {
			t.Fatal(err)
		}
		if err := Generate(root, dir); err != nil {
			t.Fatal(err)
		}
		return
	}
	tmp := t.TempDir()
	if err := Generate(root, tmp); err != nil {
		t.Fatal(err)
	}
	stale, err := Diff(dir, tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stale {
		t.Errorf("%s/%s", dir, s)
	}
	if len(stale) > 0 {
		t.Errorf("the generated reference in %s is stale; refresh it with: %s", dir, refresh)
	}
}
