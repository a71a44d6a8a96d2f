package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestRuntimeStats: the process's lead rank writes one line per sweep, counted from 1,
// with this process's pid and a goroutine count; other ranks write nothing.
func TestRuntimeStats(t *testing.T) {
	var b strings.Builder
	swept := runtimeStats(&b, 2)
	swept(3, 0)
	swept(2, 0)
	swept(3, 1)
	swept(2, 1)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %q, want two lines", b.String())
	}
	for i, l := range lines {
		re := regexp.MustCompile(fmt.Sprintf(`^# cc-perf runtime: pid %d sweep %d goroutines [1-9]\d* heap_inuse [1-9]\d* heap_live [1-9]\d*$`, os.Getpid(), i+1))
		if !re.MatchString(l) {
			t.Errorf("line %d: got %q, want %v", i, l, re)
		}
	}
}
