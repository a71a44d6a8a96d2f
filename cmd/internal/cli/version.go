package cli

import (
	"runtime/debug"
	"strings"
)

// Version describes the running binary: the module's version (or
// "devel"), the commit it was built from and whether the tree had
// uncommitted changes, and the Go release, as the build recorded them:
// "devel 8e0c7ff (modified) go1.26.0".
func Version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build information)"
	}
	v := bi.Main.Version
	if v == "" || v == "(devel)" {
		v = "devel"
	}
	parts := []string{v}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" {
		parts = append(parts, rev[:min(len(rev), 7)])
		if modified == "true" {
			parts = append(parts, "(modified)")
		}
	}
	return strings.Join(append(parts, bi.GoVersion), " ")
}
