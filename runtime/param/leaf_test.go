package param

import (
	"go/build"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

// TestLeaf: param is a leaf. It and everything it imports use only the
// standard library and the other leaves whose vocabulary it shares (algos,
// protocols), so any program can load the knobs without pulling in the
// runtime.
func TestLeaf(t *testing.T) {
	const module = "github.com/seed-760dd1f1/cc"
	leaves := map[string]bool{"algos": true, "protocols": true}
	seen := map[string]bool{}
	var walk func(rel string)
	walk = func(rel string) {
		if seen[rel] {
			return
		}
		seen[rel] = true
		pkg, err := build.ImportDir(filepath.Join("..", "..", filepath.FromSlash(rel)), 0)
		if err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		for _, imp := range pkg.Imports {
			dep, ok := strings.CutPrefix(imp, module+"/")
			switch {
			case ok && leaves[dep]:
				walk(dep)
			case ok:
				t.Errorf("%s imports %s, which is not a leaf (allowed: the standard library, algos, protocols)", rel, imp)
			case strings.Contains(strings.Split(imp, "/")[0], "."):
				t.Errorf("%s imports %s, outside the standard library", rel, imp)
			}
		}
	}
	walk(path.Join("runtime", "param"))
}
