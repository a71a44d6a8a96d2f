package doclinks

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRepositoryLinks: every relative link of every markdown document of the
// repository resolves (the README and the documents moved next to the code).
func TestRepositoryLinks(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	lookup := func(p string) (string, bool, bool) {
		st, err := os.Stat(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil {
			return "", false, false
		}
		if st.IsDir() {
			return "", true, true
		}
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil {
			return "", false, false
		}
		return string(b), false, true
	}
	n, links := 0, 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".md") {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		doc := Doc{Path: filepath.ToSlash(rel), Text: string(b)}
		n++
		links += len(Links(doc.Text))
		for _, e := range Check(doc, lookup) {
			t.Error(e)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 7 || links < 20 {
		t.Fatalf("checked %d documents and %d links; the walk is not seeing the repository", n, links)
	}
}

// TestCheck: the checker itself finds each kind of broken link and passes
// good ones.
func TestCheck(t *testing.T) {
	files := map[string]string{
		"README.md":   "# Top\n\n## Exit status\n\n## Exit status\n\n### Accept a cluster: cc-perf fabric\n\n## `cc-perf tune` (to be moved)\n",
		"a/README.md": "# A\n\n## Registered buffers (NCCL's ncclMemAlloc)\n",
		"a/x.go":      "package a\n",
	}
	lookup := func(p string) (string, bool, bool) {
		if p == "a" {
			return "", true, true
		}
		s, ok := files[p]
		return s, false, ok
	}
	tests := []struct {
		text string
		want string // "" = no error; else a substring of the only error
	}{
		{"[a](a/README.md)", ""},
		{"[a](a/)", ""},
		{"[a](a/x.go)", ""},
		{"[x](https://example.com/#nothing)", ""},
		{"[self](#top)", ""},
		{"[dup](#exit-status-1)", ""},
		{"[colon](#accept-a-cluster-cc-perf-fabric)", ""},
		{"[code](#cc-perf-tune-to-be-moved)", ""},
		{"[reg](a/README.md#registered-buffers-nccls-ncclmemalloc)", ""},
		{"`[not a link](nowhere.md)`", ""},
		{"```\n[not a link](nowhere.md)\n```", ""},
		{"[b](b/README.md)", "b/README.md does not exist"},
		{"[gone](#exit-status-2)", "no heading with anchor #exit-status-2"},
		{"[gone](a/README.md#registered-buffers)", "a/README.md has no heading"},
		{"[dir](a/#x)", "is a directory"},
		{"[go](a/x.go#L1)", "not markdown"},
		{"[abs](/README.md)", "an absolute path"},
	}
	for _, tt := range tests {
		// The document under test is README.md with the case's text after its headings.
		got := Check(Doc{Path: "README.md", Text: files["README.md"] + tt.text}, lookup)
		switch {
		case tt.want == "" && len(got) != 0:
			t.Errorf("Check(%q) = %q, want no error", tt.text, got)
		case tt.want != "" && (len(got) != 1 || !strings.Contains(got[0], tt.want)):
			t.Errorf("Check(%q) = %q, want one error containing %q", tt.text, got, tt.want)
		}
	}
}
