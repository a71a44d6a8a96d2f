package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// sweepArgs is a short sweep: 8 rows of all_reduce on 2 ranks.
var sweepArgs = []string{"cc-perf", "all_reduce", "-t", "2", "-b", "8", "-e", "1K", "-f", "2", "-n", "2", "-w", "1"}

// runStderr runs args with stdout in a buffer and stderr on the given file
// (a pseudo-terminal's or a pipe's writing end, closed when the run is
// done), while read drains the other end; the clock jumps an hour at every
// reading, so a sweep's delay before its progress line has passed at once.
func runStderr(t *testing.T, stderr *os.File, read io.Reader, environ []string, args ...string) (code int, stdout, errText string) {
	t.Helper()
	var out bytes.Buffer
	var got bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(&got, read) // ends with EOF (pipe) or EIO (pty) once stderr is closed
	}()
	e := newEnv(args, append(append([]string(nil), baseEnv...), environ...), &out, stderr)
	base, calls := time.Now(), 0
	e.now = func() time.Time { calls++; return base.Add(time.Duration(calls) * time.Hour) }
	code = execute(context.Background(), e)
	stderr.Close()
	wg.Wait()
	return code, out.String(), got.String()
}

// onPTY runs args with stderr on a fresh pseudo-terminal.
func onPTY(t *testing.T, environ []string, args ...string) (int, string, string) {
	t.Helper()
	master, slave, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	defer master.Close()
	return runStderr(t, slave, master, environ, args...)
}

// onPipe runs args with stderr on a pipe.
func onPipe(t *testing.T, environ []string, args ...string) (int, string, string) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	return runStderr(t, w, r, environ, args...)
}

// numbers are the measured values of a table with their padding, which
// differ run to run.
var numbers = regexp.MustCompile(` *[0-9]+\.[0-9]+(e[-+][0-9]+)?`)

// TestProgressTerminal: a sweep with stderr on a pseudo-terminal shows the
// progress line (rows done of all, elapsed, estimate) and erases it; with a
// pipe, under CI or with --progress=never it does not; --progress=always
// draws it on a pipe too. The table on stdout is the same every time but
// for the measured numbers, and never holds the line's control characters.
func TestProgressTerminal(t *testing.T) {
	code, ttyOut, ttyErr := onPTY(t, nil, sweepArgs...)
	if code != 0 {
		t.Fatalf("on a terminal: exit %d, stderr %q", code, ttyErr)
	}
	line := regexp.MustCompile(`\rall_reduce +[0-9]+% \|[^|]*\| \(([0-9])/8\) \[[0-9]+s:[0-9]+s\]`)
	m := line.FindAllStringSubmatch(ttyErr, -1)
	if len(m) == 0 || m[len(m)-1][1] != "7" {
		t.Errorf("terminal: no progress line up to 7/8 rows (the 8th ends it): %q", ttyErr)
	}
	if !regexp.MustCompile(`\r +\r$`).MatchString(ttyErr) {
		t.Errorf("terminal: the progress line is not erased at the end: %q", ttyErr)
	}

	pipeCode, pipeOut, pipeErr := onPipe(t, nil, sweepArgs...)
	if pipeCode != 0 || pipeErr != "" {
		t.Errorf("pipe: exit %d, stderr %q; want 0 and nothing", pipeCode, pipeErr)
	}
	if a, b := numbers.ReplaceAllString(ttyOut, "N"), numbers.ReplaceAllString(pipeOut, "N"); a != b || strings.ContainsAny(ttyOut, "\r\x1b") {
		t.Errorf("stdout differs between a terminal and a pipe on stderr:\n%s\n---\n%s", ttyOut, pipeOut)
	}
	if n := strings.Count(ttyOut, "\n"); n < 8 {
		t.Errorf("stdout has %d lines, want the table", n)
	}

	for _, tt := range []struct {
		name    string
		environ []string
		args    []string
	}{
		{"CI", []string{"CI=true"}, sweepArgs},
		{"never", nil, append(append([]string(nil), sweepArgs...), "--progress=never")},
		{"env never", []string{"CC_PERF_PROGRESS=never"}, sweepArgs},
	} {
		code, _, errText := onPTY(t, tt.environ, tt.args...)
		if code != 0 || errText != "" {
			t.Errorf("%s on a terminal: exit %d, stderr %q; want 0 and nothing", tt.name, code, errText)
		}
	}
	for _, tt := range []struct {
		name    string
		environ []string
		args    []string
		want    bool
	}{
		{"--progress always", nil, append(append([]string(nil), sweepArgs...), "--progress", "always"), true},
		{"under a ccrun on a terminal", []string{"CC_PROGRESS_TERMINAL=1"}, sweepArgs, true},
		{"under a ccrun on a terminal, in CI", []string{"CC_PROGRESS_TERMINAL=1", "CI=1"}, sweepArgs, false},
	} {
		code, _, errText := onPipe(t, tt.environ, tt.args...)
		if code != 0 || line.MatchString(errText) != tt.want {
			t.Errorf("%s, on a pipe: exit %d, stderr %q; want the progress line: %v", tt.name, code, errText, tt.want)
		}
	}
}

// TestProgressBadValue: a bad --progress (flag or variable) is one line
// naming it and the allowed values, exit 6.
func TestProgressBadValue(t *testing.T) {
	for _, r := range []result{
		runCmd(t, nil, "cc-perf", "all_reduce", "--progress=sometimes"),
		runCmd(t, nil, "cc-perf", "tune", "all_reduce", "--progress", "yes"),
		runCmd(t, []string{"CC_PERF_PROGRESS=on"}, "cc-perf", "all_reduce"),
	} {
		checkOneLineError(t, r, exitUsage, []string{"progress", "want auto, always or never"})
	}
}

// TestFabricProgress: with --progress=always, rank 0 alone counts the
// rounds on one line of stderr, erased before each round's own line (which
// starts a line of its own) and at the end.
func TestFabricProgress(t *testing.T) {
	outs := fabricProcsEnv(t, 2, true, []string{"CC_PERF_PROGRESS=always"}, "--size", "64K", "--lat-size", "0", "--pair-time", "50ms", "--schedule", "full")
	for rank, r := range outs {
		if r.code != 0 && r.code != exitFabric {
			t.Fatalf("rank %d: exit %d, stderr %q", rank, r.code, r.stderr)
		}
	}
	s := outs[0].stderr
	if !strings.Contains(s, "fabric: rounds") || !strings.Contains(s, "(1/-") {
		t.Errorf("rank 0's stderr lacks the progress line counting 1 round: %q", s)
	}
	if !regexp.MustCompile(`(^|\r +\r)# round 0 `).MatchString(s) || !regexp.MustCompile(`\r +\r$`).MatchString(s) {
		t.Errorf("rank 0's stderr: the round's line does not start a clean line, or the progress line is not erased at the end: %q", s)
	}
	if strings.Contains(outs[1].stderr, "fabric: rounds") {
		t.Errorf("rank 1 drew a progress line: %q", outs[1].stderr)
	}
}
