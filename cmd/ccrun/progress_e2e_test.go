package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestE2EProgressOnTerminal: with ccrun's stderr on a pseudo-terminal, rank
// 0 of cc-perf tune (whose own stderr is a pipe to ccrun) draws its progress
// line there, as ccrun's status line, erased at the end; with stderr on a
// pipe ccrun passes nothing of the kind. The table on stdout has no control
// characters either way.
func TestE2EProgressOnTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	ccrun, perf := binaries(t)
	args := []string{"-np", "2", "--oversubscribe", perf, "tune", "reduce_scatter", "-b", "1K", "-e", "2K", "-f", "2", "-n", "1", "--reps", "2"}
	var environ []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CI=") && !strings.HasPrefix(kv, "CC_PROGRESS_TERMINAL=") {
			environ = append(environ, kv)
		}
	}
	run := func(stderr *os.File, read io.Reader) (code int, stdout, errText string) {
		t.Helper()
		cmd := exec.Command(ccrun, args...)
		var out, got bytes.Buffer
		cmd.Stdout, cmd.Stderr, cmd.Env = &out, stderr, environ
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stderr.Close() // ccrun holds its own copy
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); _, _ = io.Copy(&got, read) }() // ends at EOF (pipe) or EIO (pty)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(5 * time.Minute): // a hang guard, not a speed requirement
			cmd.Process.Kill()
			<-done
			t.Fatalf("ccrun still running after 5 minutes")
		}
		wg.Wait()
		return cmd.ProcessState.ExitCode(), out.String(), got.String()
	}

	master, slave, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pseudo-terminal: %v", err)
	}
	defer master.Close()
	code, out, term := run(slave, master)
	if code != 0 {
		t.Fatalf("on a terminal: exit %d, terminal %q", code, term)
	}
	// 5 configurations x 2 repetitions and room for a confirmation round
	// of 2 x 2: 14 measurements per size, 28 in all.
	if !regexp.MustCompile(`\rtune reduce_scatter: size 2/2 \(2048 B\) +[0-9]+% \|[^|]*\| \([0-9]+/28\) \[[0-9]+s:[0-9]+s\]`).MatchString(term) {
		t.Errorf("the terminal shows no progress line of rank 0: %q", term)
	}
	if !strings.HasSuffix(term, "\r\x1b[K") {
		t.Errorf("the status line is not erased at the end: ...%q", term[max(0, len(term)-200):])
	}
	if !strings.Contains(out, "# cc-perf tune reduce_scatter: 2 ranks") || strings.ContainsAny(out, "\r\x1b") {
		t.Errorf("stdout is not the plain tune table:\n%q", out)
	}

	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	code, out2, errText := run(w, r)
	if code != 0 || strings.Contains(errText, "tune reduce_scatter") || strings.ContainsAny(errText, "\r\x1b") {
		t.Errorf("stderr on a pipe: exit %d, %q; want 0 and no progress line", code, errText)
	}
	if strings.Count(out2, "\n") != strings.Count(out, "\n") {
		t.Errorf("the table differs in length between a terminal and a pipe:\n%s\n---\n%s", out, out2)
	}
}
