//go:build linux

package shm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seed-760dd1f1/cc/protocols"
)

// childEnv selects what a re-executed test binary does as a local rank.
const childEnv = "CC_SHM_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(childMain(mode))
	}
	goleak.VerifyTestMain(m)
}

// hangGuard bounds every wait of a test on other goroutines or processes;
// reaching it is a hang, not a slow run.
const hangGuard = 5 * time.Minute

// smallBuff keeps test FIFOs small: Simple steps of 8 KiB, LL steps of 64
// lines (512 B payload), LL128 steps of 12 lines (1440 B payload).
var smallBuff = sizes(64<<10, 8<<10, 8*12*128)

// sizes is a BuffSize array from the Simple, LL and LL128 sizes.
func sizes(simple, ll, ll128 int) [protocols.NumProtos]int {
	var b [protocols.NumProtos]int
	b[protocols.Simple], b[protocols.LL], b[protocols.LL128] = simple, ll, ll128
	return b
}

// barrier is a reusable in-process barrier for n goroutine ranks.
type barrier struct {
	mu    sync.Mutex
	n     int
	count int
	gen   chan struct{}
}

func newBarrier(n int) *barrier { return &barrier{n: n, gen: make(chan struct{})} }

func (b *barrier) wait(ctx context.Context) error {
	b.mu.Lock()
	ch := b.gen
	b.count++
	if b.count == b.n {
		close(ch)
		b.gen, b.count = make(chan struct{}), 0
		b.mu.Unlock()
		return nil
	}
	b.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// openGroup opens one segment per local rank, each in its own goroutine as
// ranks of one host would, and closes them at the end of the test.
func openGroup(t *testing.T, o Options) []*Segment {
	t.Helper()
	n := o.LocalNRanks
	segs := make([]*Segment, n)
	errs := make([]error, n)
	b := newBarrier(n)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ro := o
			ro.LocalRank = r
			ro.Barrier = b.wait
			segs[r], errs[r] = Open(ctx, ro)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("local rank %d: Open: %v", r, err)
		}
	}
	t.Cleanup(func() {
		for _, s := range segs {
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
	})
	return segs
}

func testOptions(t *testing.T, n int) Options {
	return Options{Dir: t.TempDir(), JobID: "job-" + t.Name(), Host: "host-a", LocalNRanks: n, Channels: protocols.NumProtos,
		BuffSize: smallBuff, Spin: 20 * time.Microsecond, Logf: t.Logf}
}

// listDir returns the names in dir, sorted.
func listDir(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// child is a local rank in its own OS process. It talks to the test over
// its stdio: it prints "barrier" at each barrier and waits for "go".
type child struct {
	rank   int
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // stdout, line by line; closed at EOF
	stderr *syncBuffer
	done   chan error // the exit status, after stdout is drained
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// childConfig is what a child rank needs, passed in its environment.
type childConfig struct {
	dir, job            string
	rank, nranks, count int
	buff                [protocols.NumProtos]int
	spin                time.Duration
	cores               int
	proto, size         int // benchmarks: the protocol and the message size
	oneShot             int // Options.OneShotBytes
}

func (c childConfig) env(mode string) []string {
	return append(os.Environ(), childEnv+"="+mode,
		"CC_SHM_T_DIR="+c.dir, "CC_SHM_T_JOB="+c.job,
		"CC_SHM_T_RANK="+strconv.Itoa(c.rank), "CC_SHM_T_NRANKS="+strconv.Itoa(c.nranks),
		"CC_SHM_T_COUNT="+strconv.Itoa(c.count), "CC_SHM_T_SPIN="+c.spin.String(),
		"CC_SHM_T_CORES="+strconv.Itoa(c.cores),
		"CC_SHM_T_PROTO="+strconv.Itoa(c.proto), "CC_SHM_T_SIZE="+strconv.Itoa(c.size),
		"CC_SHM_T_ONESHOT="+strconv.Itoa(c.oneShot),
		fmt.Sprintf("CC_SHM_T_BUFF=%d,%d,%d", c.buff[0], c.buff[1], c.buff[2]))
}

func readChildConfig() (childConfig, error) {
	var c childConfig
	var err error
	atoi := func(k string) int {
		v, e := strconv.Atoi(os.Getenv(k))
		if e != nil && err == nil {
			err = fmt.Errorf("%s: %w", k, e)
		}
		return v
	}
	c.dir, c.job = os.Getenv("CC_SHM_T_DIR"), os.Getenv("CC_SHM_T_JOB")
	c.rank, c.nranks, c.count, c.cores = atoi("CC_SHM_T_RANK"), atoi("CC_SHM_T_NRANKS"), atoi("CC_SHM_T_COUNT"), atoi("CC_SHM_T_CORES")
	c.proto, c.size, c.oneShot = atoi("CC_SHM_T_PROTO"), atoi("CC_SHM_T_SIZE"), atoi("CC_SHM_T_ONESHOT")
	if _, e := fmt.Sscanf(os.Getenv("CC_SHM_T_BUFF"), "%d,%d,%d", &c.buff[0], &c.buff[1], &c.buff[2]); e != nil && err == nil {
		err = fmt.Errorf("CC_SHM_T_BUFF: %w", e)
	}
	spin, e := time.ParseDuration(os.Getenv("CC_SHM_T_SPIN"))
	if e != nil && err == nil {
		err = e
	}
	c.spin = spin
	return c, err
}

func (c childConfig) options(barrier func(context.Context) error) Options {
	return Options{Dir: c.dir, JobID: c.job, Host: "host-a", LocalRank: c.rank, LocalNRanks: c.nranks,
		Channels: protocols.NumProtos, BuffSize: c.buff, Spin: c.spin, Cores: c.cores, OneShotBytes: c.oneShot, Barrier: barrier}
}

// startChildren starts the given local ranks as processes of this test
// binary; the test kills and reaps what is left at its end.
func startChildren(t testing.TB, mode string, cfg childConfig, ranks []int) []*child {
	t.Helper()
	var kids []*child
	t.Cleanup(func() {
		for _, c := range kids {
			c.cmd.Process.Kill()
			c.stdin.Close()
			for range c.lines {
			}
			<-c.done
		}
	})
	for _, r := range ranks {
		cc := cfg
		cc.rank = r
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = cc.env(mode)
		c := &child{rank: r, cmd: cmd, lines: make(chan string, 64), stderr: &syncBuffer{}, done: make(chan error, 1)}
		cmd.Stderr = c.stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if c.stdin, err = cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				c.lines <- sc.Text()
			}
			close(c.lines)
			c.done <- cmd.Wait() // Wait closes the pipe: only after reading
		}()
		kids = append(kids, c)
	}
	return kids
}

// next returns the child's next stdout line, or an error at EOF or after
// the hang guard.
func (c *child) next() (string, error) {
	select {
	case l, ok := <-c.lines:
		if !ok {
			return "", fmt.Errorf("local rank %d exited early; stderr:\n%s", c.rank, c.stderr.String())
		}
		return l, nil
	case <-time.After(hangGuard):
		return "", fmt.Errorf("local rank %d: no output for %v (hang); stderr:\n%s", c.rank, hangGuard, c.stderr.String())
	}
}

func (c *child) expect(want string) error {
	got, err := c.next()
	if err != nil {
		return err
	}
	if got != want {
		return fmt.Errorf("local rank %d said %q, want %q; stderr:\n%s", c.rank, got, want, c.stderr.String())
	}
	return nil
}

// barrierAll is one barrier round with the children: each says "barrier",
// then all are told "go". The test calls it at its own barrier point.
func barrierAll(kids []*child) error {
	var errs []error
	for _, c := range kids {
		errs = append(errs, c.expect("barrier"))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, c := range kids {
		if _, err := io.WriteString(c.stdin, "go\n"); err != nil {
			return fmt.Errorf("local rank %d: %w", c.rank, err)
		}
	}
	return nil
}

// exit waits for the child to exit and returns its status.
func (c *child) exit() error {
	for range c.lines {
	}
	select {
	case err := <-c.done:
		c.done <- err // for the cleanup
		if err != nil {
			return fmt.Errorf("local rank %d: %v; stderr:\n%s", c.rank, err, c.stderr.String())
		}
		return nil
	case <-time.After(hangGuard):
		return fmt.Errorf("local rank %d did not exit within %v (hang); stderr:\n%s", c.rank, hangGuard, c.stderr.String())
	}
}
