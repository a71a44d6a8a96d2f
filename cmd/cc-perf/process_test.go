package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	stderr bytes.Buffer  // read it after done
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
	cmd.Stderr = &p.stderr
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

// waitLine returns when a line of stdout starts with prefix.
func (p *proc) waitLine(t *testing.T, prefix string) {
	t.Helper()
	hang := time.After(2 * time.Minute) // a bound on a hang, not a timing assertion
	for {
		p.mu.Lock()
		found := slices.ContainsFunc(p.stdout, func(l string) bool { return strings.HasPrefix(l, prefix) })
		p.mu.Unlock()
		if found {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("cc-perf exited before a line %q: %v\n%s", prefix, p.err, p.output())
		case <-hang:
			t.Fatalf("no line %q after 2 minutes:\n%s", prefix, p.output())
		case <-time.After(10 * time.Millisecond):
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

// TestSIGUSR1EndsAfterSweep: in an endless two-process run (-N 0, sweeps of
// 4 rows), SIGUSR1 to rank 1's process alone ends both after the same
// sweep, as if it had been the last: exit 0, whole sweeps, the footer,
// and a -J file ended by it. Then a one-sweep run goes on through SIGUSR1.
func TestSIGUSR1EndsAfterSweep(t *testing.T) {
	dir := t.TempDir()
	port := freePort(t)
	procs := make([]*proc, 2)
	for r := range procs {
		procs[r] = startProc(t, launched(r, 2, port), "all_reduce", "-b", "8", "-e", "64", "-f", "2", "-n", "2", "-w", "0", "-N", "0",
			"-J", filepath.Join(dir, "r"+strconv.Itoa(r)+".json"))
	}
	procs[0].waitRows(t, 5)
	if err := procs[1].cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	for r, p := range procs {
		if code, _ := p.wait(t); code != 0 {
			t.Errorf("rank %d: exit %d, want 0; stderr:\n%s", r, code, &p.stderr)
		}
	}
	_, lines := procs[0].wait(t)
	rows := completeRows(lines)
	if rows < 8 || rows%4 != 0 {
		t.Errorf("%d rows, want whole sweeps of 4, two or more:\n%s", rows, procs[0].output())
	}
	if !slices.Contains(lines, "# Out of bounds values : 0 OK") {
		t.Errorf("no footer:\n%s", procs[0].output())
	}
	b, err := os.ReadFile(filepath.Join(dir, "r0.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Results     []json.RawMessage `json:"results"`
		OutOfBounds *json.RawMessage  `json:"out_of_bounds"`
		Errors      []string          `json:"errors"`
	}
	if err := json.Unmarshal(b, &doc); err != nil || len(doc.Results) != rows || doc.OutOfBounds == nil || len(doc.Errors) != 0 {
		t.Errorf("r0.json: %d rows, footer %v, errors %q, parse error %v; want %d rows, a footer, no error", len(doc.Results), doc.OutOfBounds != nil, doc.Errors, err, rows)
	}

	// A one-sweep run goes on through SIGUSR1 (the default action would end
	// the process). Rank 0 gets it while it waits for rank 1 to join: its
	// header is out, so its handler is in, and it cannot have ended.
	port = freePort(t)
	one := []string{"all_reduce", "-b", "8", "-e", "64", "-f", "2", "-n", "2", "-w", "0"}
	p0 := startProc(t, launched(0, 2, port), one...)
	p0.waitLine(t, "# nThread ")
	if err := p0.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	p1 := startProc(t, launched(1, 2, port), one...)
	for r, p := range []*proc{p0, p1} {
		if code, lines := p.wait(t); code != 0 || (r == 0 && completeRows(lines) != 4) {
			t.Errorf("one sweep, SIGUSR1 to rank 0 before it: rank %d exit %d, %d rows; want 0 and rank 0 all 4; stderr:\n%s", r, code, completeRows(lines), &p.stderr)
		}
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
	port := freePort(t)
	procs := make([]*proc, 2)
	for r := range procs {
		procs[r] = startProc(t, launched(r, 2, port), "all_reduce", "-b", "1K", "-e", "1K", "-n", "2", "-w", "0", "-N", "0", "-J", path)
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

// launched is the environment of rank r of an nranks torchrun-style job
// whose bootstrap root (hosted by rank 0) listens on 127.0.0.1:rootPort
// (MASTER_PORT+1).
func launched(r, nranks, rootPort int) []string {
	return []string{"RANK=" + strconv.Itoa(r), "WORLD_SIZE=" + strconv.Itoa(nranks), "LOCAL_RANK=" + strconv.Itoa(r),
		"LOCAL_WORLD_SIZE=" + strconv.Itoa(nranks), "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + strconv.Itoa(rootPort-1)}
}

// joinBound bounds how long a -T 2 join may take here: generous (the
// machine is shared), yet far below the runtime's own connect retries or a
// hang.
const joinBound = 20 * time.Second

// TestJoinTimeoutNamesMissingRank runs rank 0 of a two-rank job whose rank 1
// never starts, with -T 2: it ends in about 2 s with exit 4, the table and
// one stderr line naming rank 1, and a valid -J file; tune and calibrate
// bound their join the same way.
func TestJoinTimeoutNamesMissingRank(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"all_reduce", "-b", "8", "-e", "8", "-n", "2", "-J", filepath.Join(dir, "r.json")},
		{"tune", "all_reduce", "-b", "8", "-e", "64"},
		{"calibrate", "-o", filepath.Join(dir, "consts.json")},
	} {
		t.Run(args[0], func(t *testing.T) {
			t.Parallel()
			port := freePort(t)
			start := time.Now()
			p := startProc(t, launched(0, 2, port), append(args, "-T", "2")...)
			code, lines := p.wait(t)
			if took := time.Since(start); took > joinBound {
				t.Errorf("took %v, want about 2s (bound %v)", took, joinBound)
			}
			if code != 4 {
				t.Fatalf("exit %d, want 4:\n%s\nstderr: %s", code, p.output(), p.stderr.String())
			}
			who := "rank 1 of 2 never joined the bootstrap root at 127.0.0.1:" + strconv.Itoa(port) + "; joined: 0 ("
			if stderr := p.stderr.String(); strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "test timeout (2s) joining the job: "+who) {
				t.Errorf("stderr %q, want one line naming rank 1", stderr)
			}
			if args[0] != "all_reduce" {
				return
			}
			if last := lines[len(lines)-1]; !strings.Contains(last, ": Test timeout (2s) joining the job: "+who) {
				t.Errorf("last line %q, want the timeout naming rank 1", last)
			}
			checkJSONFile(t, filepath.Join(dir, "r.json"), 0, "Test timeout (2s) joining the job: "+who)
		})
	}
}

// TestJoinTimeoutRootNeverAppears runs rank 1 of a two-rank job whose rank
// 0 (and so the bootstrap root) never starts, with -T 2: exit 4 in about
// 2 s, naming the root's address.
func TestJoinTimeoutRootNeverAppears(t *testing.T) {
	port := freePort(t)
	start := time.Now()
	p := startProc(t, launched(1, 2, port), "all_reduce", "-b", "8", "-e", "8", "-n", "2", "-T", "2")
	code, _ := p.wait(t)
	if took := time.Since(start); took > joinBound {
		t.Errorf("took %v, want about 2s (bound %v)", took, joinBound)
	}
	if code != 4 {
		t.Errorf("exit %d, want 4", code)
	}
	want := "rank 1: could not reach the bootstrap root at 127.0.0.1:" + strconv.Itoa(port)
	if stderr := p.stderr.String(); strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, want) || !strings.Contains(stderr, "test timeout (2s)") {
		t.Errorf("stderr %q, want one line saying %q and the timeout", stderr, want)
	}
}

// TestJoinTimeoutWaitingRankLearnsWhoIsMissing runs ranks 0 and 1 of a
// three-rank job whose rank 2 never starts: both exit 4 naming rank 2,
// whichever of them gave up first (the root tells the other).
func TestJoinTimeoutWaitingRankLearnsWhoIsMissing(t *testing.T) {
	port := freePort(t)
	procs := make([]*proc, 2)
	for r := range procs {
		procs[r] = startProc(t, launched(r, 3, port), "all_reduce", "-b", "8", "-e", "8", "-n", "2", "-T", "2")
	}
	who := "rank 2 of 3 never joined the bootstrap root at 127.0.0.1:" + strconv.Itoa(port) + "; joined: 0-1 ("
	for r, p := range procs {
		if code, _ := p.wait(t); code != 4 {
			t.Errorf("rank %d: exit %d, want 4", r, code)
		}
		if stderr := p.stderr.String(); !strings.Contains(stderr, who) {
			t.Errorf("rank %d: stderr %q, want it to say %q", r, stderr, who)
		}
	}
}

// TestTimeoutAllowsNormalJoin: a two-process job with -T joins and runs as
// without it.
func TestTimeoutAllowsNormalJoin(t *testing.T) {
	port := freePort(t)
	procs := make([]*proc, 2)
	for r := range procs {
		procs[r] = startProc(t, launched(r, 2, port), "all_reduce", "-b", "8", "-e", "1K", "-f", "4", "-n", "2", "-T", "60")
	}
	for r, p := range procs {
		code, lines := p.wait(t)
		if code != 0 {
			t.Errorf("rank %d: exit %d, want 0:\n%s\nstderr: %s", r, code, p.output(), p.stderr.String())
		}
		if r == 0 && completeRows(lines) != 4 {
			t.Errorf("%d rows, want 4:\n%s", completeRows(lines), p.output())
		}
	}
}
