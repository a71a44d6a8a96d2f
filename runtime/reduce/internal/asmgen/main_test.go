package main

import (
	"bytes"
	"os"
	"testing"
)

// TestGeneratedFilesUpToDate fails when the committed kernels differ from what the generator
// writes: run `go generate ./runtime/reduce` after changing it.
func TestGeneratedFilesUpToDate(t *testing.T) {
	asm, decl := generate()
	for _, f := range []struct {
		path string
		want []byte
	}{{"../../kernels_amd64.s", asm}, {"../../kernels_gen_amd64.go", decl}} {
		got, err := os.ReadFile(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, f.want) {
			t.Errorf("%s is stale: run go generate ./runtime/reduce", f.path)
		}
	}
}
