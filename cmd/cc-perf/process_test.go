package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// childEnv makes the test binary run as cc-perf (main's cli.Main(run), with
// its signal handling) instead of running tests: see TestMain.
const childEnv = "CCPERF_TEST_AS_MAIN"

// proc is cc-perf running in a process of its own.
type proc struct {
	cmd    *exec.Cmd
	rows   chan int // the count of complete data rows on stdout, as they come
	mu     sync.Mutex
	stdout []string
	done   chan struct{} // stdout is read to its end and the process waited for
	err    error         // Wait's
}

// startProc runs cc-perf with args (the subcommand first) and env on top of
// baseEnv.
func startProc(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append([]string{childEnv + "=1"}, baseEnv...), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{cmd: cmd, rows: make(chan int, 1<<16), done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(out)
		rows := 0
		for sc.Scan() {
			p.mu.Lock()
			p.stdout = append(p.stdout, sc.Text())
			p.mu.Unlock()
			if len(strings.Fields(sc.Text())) == 13 && !strings.HasPrefix(sc.Text(), "#") {
				rows++
				select {
				case p.rows <- rows:
				default:
				}
			}
		}
		p.err = cmd.Wait() // Wait closes the pipe: only after reading
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
	})
	return p
}

// waitRows returns when n complete data rows are on stdout.
func (p *proc) waitRows(t *testing.T, n int) {
	t.Helper()
	hang := time.After(2 * time.Minute) // a bound on a hang, not a timing assertion
	for {
		select {
		case got := <-p.rows:
			if got >= n {
				return
			}
		case <-p.done:
			t.Fatalf("cc-perf exited before %d rows: %v\n%s", n, p.err, p.output())
		case <-hang:
			t.Fatalf("no %d rows after 2 minutes:\n%s", n, p.output())
		}
	}
}

// wait returns the exit status and stdout's lines.
func (p *proc) wait(t *testing.T) (int, []string) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(2 * time.Minute): // a bound on a hang
		t.Fatalf("cc-perf still running after 2 minutes:\n%s", p.output())
	}
	return p.cmd.ProcessState.ExitCode(), p.stdout
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.stdout, "\n")
}

// completeRows counts stdout's data rows with every column: an interrupted
// row is a preamble only.
func completeRows(lines []string) int {
	n := 0
	for _, l := range lines {
		if !strings.HasPrefix(l, "#") && len(strings.Fields(l)) == 13 {
			n++
		}
	}
	return n
}

// checkJSONFile checks that path is a JSON document holding rows results
// and, as the end of a failed run, no footer and errors containing want.
func checkJSONFile(t *testing.T, path string, rows int, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Results []struct {
			Size int64 `json:"size"`
		} `json:"results"`
		OutOfBounds *struct{} `json:"out_of_bounds"`
		Errors      []string  `json:"errors"`
		EndTime     string    `json:"end_time"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s is not JSON: %v\n%s", path, err, b)
	}
	if len(doc.Results) != rows {
		t.Errorf("%s holds %d rows, the table %d", path, len(doc.Results), rows)
	}
	if doc.OutOfBounds != nil || len(doc.Errors) != 1 || !strings.Contains(doc.Errors[0], want) || doc.EndTime == "" {
		t.Errorf("%s ends with footer %v, errors %q, end time %q; want no footer, an error containing %q, an end time",
			path, doc.OutOfBounds != nil, doc.Errors, doc.EndTime, want)
	}
}

// TestSignalLeavesResults interrupts an endless run (-N 0) with SIGINT and
// SIGTERM: exit 128+n, and the -J file holds every row the table completed,
// a JSON document ended with what stopped it, or CSV rows.
func TestSignalLeavesResults(t *testing.T) {
	for _, tt := range []struct {
		sig  syscall.Signal
		file string
		code int
	}{{syscall.SIGINT, "r.json", 130}, {syscall.SIGTERM, "r.csv", 143}} {
		t.Run(tt.sig.String(), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), tt.file)
			p := startProc(t, nil, "all_reduce", "-t", "2", "-b", "1K", "-e", "1K", "-n", "2", "-w", "0", "-N", "0", "-J", path)
			p.waitRows(t, 3)
			if err := p.cmd.Process.Signal(tt.sig); err != nil {
				t.Fatal(err)
			}
			code, lines := p.wait(t)
			if code != tt.code {
				t.Errorf("exit %d, want %d", code, tt.code)
			}
			if last := lines[len(lines)-1]; !strings.Contains(last, ": Test interrupted: interrupted by signal "+strconv.Itoa(int(tt.sig))) {
				t.Errorf("last line %q, want the interruption", last)
			}
			rows := completeRows(lines)
			if rows < 3 {
				t.Fatalf("%d complete rows on stdout, want 3 or more", rows)
			}
			if strings.HasSuffix(path, ".json") {
				checkJSONFile(t, path, rows, "Test interrupted")
				return
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			csv := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
			if len(csv) != 1+2*rows {
				t.Errorf("%d CSV lines, want the header and 2 per complete row (%d)", len(csv), rows)
			}
			for _, l := range csv {
				if len(strings.Split(l, ", ")) != 13 {
					t.Errorf("CSV line %q: want 13 fields", l)
				}
			}
		})
	}
}

// TestTimeoutLeavesJSON times out (-T 1) in the second row, 64 MiB (300
// iterations of it take many seconds): exit 4, and the JSON file holds the
// first row.
func TestTimeoutLeavesJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	p := startProc(t, nil, "all_reduce", "-t", "2", "-b", "64", "-e", "64M", "-f", "1048576", "-n", "300", "-w", "0", "-T", "1", "-J", path)
	code, lines := p.wait(t)
	if code != 4 {
		t.Fatalf("exit %d, want 4:\n%s", code, p.output())
	}
	rows := completeRows(lines)
	if rows != 1 {
		t.Errorf("%d complete rows, want the 64-byte one:\n%s", rows, p.output())
	}
	checkJSONFile(t, path, rows, "Test timeout (1s)")
}

// TestLostRankLeavesJSON kills the process of rank 1 in a two-process job:
// rank 0's process fails (exit 3) and its JSON file holds every row its
// table completed.
func TestLostRankLeavesJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	port := strconv.Itoa(freePort(t) - 1) // the root listens on MASTER_PORT+1
	procs := make([]*proc, 2)
	for r := range procs {
		env := []string{"RANK=" + strconv.Itoa(r), "WORLD_SIZE=2", "LOCAL_RANK=" + strconv.Itoa(r), "LOCAL_WORLD_SIZE=2",
			"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port}
		procs[r] = startProc(t, env, "all_reduce", "-b", "1K", "-e", "1K", "-n", "2", "-w", "0", "-N", "0", "-J", path)
	}
	procs[0].waitRows(t, 3)
	if err := procs[1].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	code, lines := procs[0].wait(t)
	if code != 3 {
		t.Errorf("exit %d, want 3", code)
	}
	checkJSONFile(t, path, completeRows(lines), "lost")
}
