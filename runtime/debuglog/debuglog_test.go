package debuglog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/runtime/param"
)

func load(t *testing.T, pairs ...string) *param.Params {
	t.Helper()
	m := map[string]string{}
	for _, kv := range pairs {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	p, err := param.Load(func(k string) (string, bool) { v, ok := m[k]; return v, ok })
	if err != nil {
		t.Fatalf("param.Load(%q): %v", pairs, err)
	}
	return p
}

// fixedClock makes the logger's clock return start, then start+step, ...
func fixedClock(l *Logger, start time.Time, step time.Duration) {
	var mu sync.Mutex
	now := start
	l.start = start
	l.now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(step)
		return now
	}
}

func TestLineFormats(t *testing.T) {
	var buf bytes.Buffer
	l := NewWriter(&buf, load(t, "NCCL_DEBUG=TRACE", "NCCL_DEBUG_SUBSYS=ALL"), "node7.cluster.example", 4242, 3)
	fixedClock(l, time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC), 1500*time.Microsecond)

	l.Version("cc version %s", "0.1")
	l.Info(param.SubsysInit, "comm %d ranks", 8)
	_, _, line, _ := runtime.Caller(0)
	l.Warn("connect to %s: %v", "10.0.0.2:1234", "refused")
	_, _, tline, _ := runtime.Caller(0)
	l.Trace(param.SubsysColl, "step %d", 5)
	l.Trace(param.SubsysCall, "AllReduce(%d)", 1024)

	want := "cc version 0.1\n" +
		"node7:4242:0 [3] NCCL INFO comm 8 ranks\n" +
		fmt.Sprintf("\n[2025-03-04 05:06:07] node7:4242:0 [3] debuglog_test.go:%d (debuglog.TestLineFormats) NCCL WARN connect to 10.0.0.2:1234: refused\n", line+1) +
		fmt.Sprintf("node7:4242:0 [3] 3.000000 debuglog.TestLineFormats:%d NCCL TRACE step 5\n", tline+1) +
		"node7:4242:0 NCCL CALL AllReduce(1024)\n"
	if got := buf.String(); got != want {
		t.Errorf("output:\n got  %q\n want %q", got, want)
	}
	if got := l.LastWarn(); got != "connect to 10.0.0.2:1234: refused" {
		t.Errorf("LastWarn() = %q", got)
	}
}

func TestFiltering(t *testing.T) {
	type call struct {
		name string
		do   func(l *Logger)
	}
	info := call{"Info(INIT)", func(l *Logger) { l.Info(param.SubsysInit, "i") }}
	infoColl := call{"Info(COLL)", func(l *Logger) { l.Info(param.SubsysColl, "c") }}
	warn := call{"Warn", func(l *Logger) { l.Warn("w") }}
	version := call{"Version", func(l *Logger) { l.Version("v") }}
	trace := call{"Trace(INIT)", func(l *Logger) { l.Trace(param.SubsysInit, "t") }}
	all := []call{info, infoColl, warn, version, trace}
	tests := []struct {
		env    []string
		writes []string // names of the calls that produce output
	}{
		{nil, nil},
		{[]string{"NCCL_DEBUG=VERSION"}, []string{"Version"}},
		{[]string{"NCCL_DEBUG=WARN"}, []string{"Warn", "Version"}},
		{[]string{"NCCL_DEBUG=INFO"}, []string{"Info(INIT)", "Warn", "Version"}},
		{[]string{"NCCL_DEBUG=ABORT"}, []string{"Info(INIT)", "Warn", "Version"}},
		{[]string{"NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=COLL"}, []string{"Info(COLL)", "Warn", "Version"}},
		{[]string{"NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=^INIT"}, []string{"Info(COLL)", "Warn", "Version"}},
		{[]string{"NCCL_DEBUG=TRACE"}, []string{"Info(INIT)", "Warn", "Version", "Trace(INIT)"}},
		// ^ALL masks everything, WARN included, as NCCL's (flags & mask) test does.
		{[]string{"NCCL_DEBUG=TRACE", "NCCL_DEBUG_SUBSYS=^ALL"}, nil},
	}
	for _, tt := range tests {
		var got []string
		for _, c := range all {
			var buf bytes.Buffer
			c.do(NewWriter(&buf, load(t, tt.env...), "h", 1, 0))
			if buf.Len() > 0 {
				got = append(got, c.name)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(tt.writes) {
			t.Errorf("env %q: calls that wrote %v, want %v", tt.env, got, tt.writes)
		}
	}
}

func TestEnabled(t *testing.T) {
	l := NewWriter(&bytes.Buffer{}, load(t, "NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=TUNING,NET"), "h", 1, 0)
	tests := []struct {
		level  param.DebugLevel
		subsys param.Subsys
		want   bool
	}{
		{param.DebugInfo, param.SubsysTuning, true},
		{param.DebugInfo, param.SubsysNet | param.SubsysInit, true},
		{param.DebugInfo, param.SubsysInit, false},
		{param.DebugWarn, param.SubsysAll, true},
		{param.DebugTrace, param.SubsysTuning, false},
		{param.DebugNone, param.SubsysAll, false},
	}
	for _, tt := range tests {
		if got := l.Enabled(tt.level, tt.subsys); got != tt.want {
			t.Errorf("Enabled(%v, %v) = %v, want %v", tt.level, tt.subsys, got, tt.want)
		}
	}
	var nilLogger *Logger
	if nilLogger.Enabled(param.DebugWarn, param.SubsysAll) {
		t.Error("nil Logger reports enabled")
	}
	nilLogger.Info(param.SubsysInit, "x")
	nilLogger.Warn("x")
	nilLogger.Trace(param.SubsysInit, "x")
	nilLogger.Version("x")
	if err := nilLogger.Close(); err != nil || nilLogger.LastWarn() != "" {
		t.Errorf("nil Logger: Close %v, LastWarn %q", err, nilLogger.LastWarn())
	}
}

func TestLastWarnKeptBelowWarnLevel(t *testing.T) {
	var buf bytes.Buffer
	l := NewWriter(&buf, load(t), "h", 1, 0)
	l.Warn("peer %d died", 3)
	if buf.Len() != 0 || l.LastWarn() != "peer 3 died" {
		t.Errorf("NCCL_DEBUG unset: wrote %q, LastWarn %q; want nothing written, message kept", buf.String(), l.LastWarn())
	}
}

func TestExpandFile(t *testing.T) {
	tests := []struct{ pattern, host, want string }{
		{"nccl.%h.%p", "node1", "nccl.node1.77"},
		{"/tmp/%h/%p.log", "node1.example.com", "/tmp/node1/77.log"},
		{"100%%-%p", "h", "100%-77"},
		{"a%xb%", "h", "a%xb%"},
		{"%h", "we%ird/name.x", "we-ird-name"},
		{"%h", "", "unknown"},
		{"plain", "h", "plain"},
		{"%%h", "h", "%h"},
	}
	for _, tt := range tests {
		if got := ExpandFile(tt.pattern, tt.host, 77); got != tt.want {
			t.Errorf("ExpandFile(%q, %q, 77) = %q, want %q", tt.pattern, tt.host, got, tt.want)
		}
	}
}

func TestNewOpensDebugFile(t *testing.T) {
	dir := t.TempDir()
	pattern := filepath.Join(dir, "nccl.%h.%p.log")
	path := filepath.Join(dir, "nccl.node2.99.log")
	if err := os.WriteFile(path, []byte("stale content from an earlier run\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := New(load(t, "NCCL_DEBUG=INFO", "NCCL_DEBUG_FILE="+pattern), "node2.lan", 99, 1)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	l.Info(param.SubsysInit, "hello")
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	l.Info(param.SubsysInit, "after close") // dropped, no panic
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "node2:99:0 [1] NCCL INFO hello\n"; string(got) != want {
		t.Errorf("file holds %q, want %q (truncated, then one line)", got, want)
	}
}

func TestNewSkipsFileAtVersionLevel(t *testing.T) {
	dir := t.TempDir()
	for _, level := range []string{"", "VERSION"} {
		env := []string{"NCCL_DEBUG_FILE=" + filepath.Join(dir, "f.%p")}
		if level != "" {
			env = append(env, "NCCL_DEBUG="+level)
		}
		l, err := New(load(t, env...), "h", 5, 0)
		if err != nil {
			t.Fatalf("New(%q): %v", env, err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "f.5")); !os.IsNotExist(err) {
			t.Errorf("New(%q) created the debug file (stat err %v); NCCL opens it only above VERSION", env, err)
		}
	}
}

func TestNewFileError(t *testing.T) {
	pattern := filepath.Join(t.TempDir(), "missing-dir", "nccl.%p")
	_, err := New(load(t, "NCCL_DEBUG=WARN", "NCCL_DEBUG_FILE="+pattern), "h", 5, 0)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("NCCL_DEBUG_FILE=%q", pattern)) ||
		!strings.Contains(err.Error(), filepath.Join("missing-dir", "nccl.5")) {
		t.Errorf("New with an unwritable file: got %v, want an error naming NCCL_DEBUG_FILE and the expanded path", err)
	}
}

// TestConcurrentLinesDoNotInterleave writes from many goroutines and checks
// every line arrives whole. Run with -race.
func TestConcurrentLinesDoNotInterleave(t *testing.T) {
	var buf bytes.Buffer
	l := NewWriter(&buf, load(t, "NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=ALL"), "h", 1, 0)
	const goroutines, lines = 8, 200
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range lines {
				l.Info(param.SubsysColl, "g%d line %d %s", g, i, strings.Repeat("x", 100))
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, ln := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
		var g, i int
		var tail string
		if _, err := fmt.Sscanf(ln, "h:1:0 [0] NCCL INFO g%d line %d %s", &g, &i, &tail); err != nil || tail != strings.Repeat("x", 100) {
			t.Fatalf("mangled line %q (%v)", ln, err)
		}
		seen[ln] = true
	}
	if len(seen) != goroutines*lines {
		t.Errorf("got %d distinct lines, want %d", len(seen), goroutines*lines)
	}
}
