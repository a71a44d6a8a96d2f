package comm

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/runtime/bootstrap"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// childEnv selects what a re-executed test binary does as a rank.
const childEnv = "CC_COMM_TEST_CHILD"

// childModes are the modes in which a rank runs its collectives, then
// prints "ok" and closes the communicator.
var childModes = map[string]func(c *Comm) error{
	"allreduce":        childAllReduceThrice,
	"allreduce-matrix": childAllReduce,
	"allreduce-types":  childAllReduceTypes,
	"allgather-matrix": childAllGather,
	"matrix":           childMatrix,
	"decisions":        childDecisions,
	"split":            childSplit,
	"nvls":             childNVLS,
	"oneshot":          childOneShot,
	"cma":              childCMA,
	"registered":       childRegistered,
}

// childAllReduceThrice runs three all-reduces of 64 Ki int32 and checks them.
func childAllReduceThrice(c *Comm) error {
	const count = 1 << 16
	r, n := c.Rank(), c.NRanks()
	send := i32s(count, func(i int) int32 { return input(r, i) })
	recv := make([]byte, 4*count)
	for range 3 {
		if err := c.AllReduce(send, recv, count, reduce.Int32, reduce.Sum); err != nil {
			return err
		}
		for i := 0; i < count; i++ {
			if got, want := getI32(recv, i), sumOver(n, i); got != want {
				return fmt.Errorf("rank %d elem %d = %d, want %d", r, i, got, want)
			}
		}
	}
	return nil
}

// childMain is a rank in its own OS process: it joins the job from the
// CC_* environment (as under ccrun) and runs the mode's collectives.
func childMain() int {
	mode := os.Getenv(childEnv)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := InitFromEnv(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "init:", err)
		return 2
	}
	if run, ok := childModes[mode]; ok {
		if err := run(c); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", mode, err)
			return 3
		}
		fmt.Println("ok")
		if err := c.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "close:", err)
			return 5
		}
		return 0
	}
	switch mode {
	case "shmbench":
		if err := shmBenchChild(c); err != nil {
			fmt.Fprintln(os.Stderr, "shmbench:", err)
			return 3
		}
		return 0
	case "bench":
		if err := benchChild(c); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 3
		}
		return 0
	case "forever-allgather": // 256 KiB blocks
		const count = 1 << 16
		send := i32s(count, func(i int) int32 { return input(c.Rank(), i) })
		recv := make([]byte, 4*count*c.NRanks())
		fmt.Println("started")
		for {
			if err := c.AllGather(send, recv, count, reduce.Int32); err != nil {
				fmt.Fprintln(os.Stderr, "allgather:", err)
				c.Close()
				return 3
			}
		}
	case "forever", "forever-small":
		count := 1 << 16
		if mode == "forever-small" {
			count = 2 // 8 B: inline one-shot calls, repeated
		}
		send := i32s(count, func(i int) int32 { return input(c.Rank(), i) })
		recv := make([]byte, 4*count)
		fmt.Println("started")
		for {
			if err := c.AllReduce(send, recv, count, reduce.Int32, reduce.Sum); err != nil {
				fmt.Fprintln(os.Stderr, "allreduce:", err)
				c.Close()
				return 3
			}
		}
	}
	fmt.Fprintln(os.Stderr, "unknown mode", mode)
	return 1
}

type rankProc struct {
	job    string // the job id all ranks share
	cmd    *exec.Cmd
	lines  chan string // stdout, line by line; closed at EOF
	stderr strings.Builder
	done   chan error // the exit status, after stdout is drained
}

// line returns the next stdout line, or "" at EOF.
func (p *rankProc) line() string { return <-p.lines }

// startRanks hosts a bootstrap root in the test and starts n ranks as
// processes of this test binary.
func startRanks(t testing.TB, n int, mode string, env ...func(rank int) []string) []*rankProc {
	t.Helper()
	job, err := NewJob()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	root := bootstrap.NewRoot(ln, n, job, t.Logf)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { defer close(served); root.Serve(ctx) }()
	var procs []*rankProc
	t.Cleanup(func() {
		for _, p := range procs {
			p.cmd.Process.Kill()
			for range p.lines {
			}
			<-p.done
		}
		cancel()
		root.Close()
		<-served
	})
	for r := 0; r < n; r++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+mode,
			"CC_RANK="+strconv.Itoa(r), "CC_NRANKS="+strconv.Itoa(n),
			"CC_ROOT_ADDR="+root.Addr(), "CC_JOB_ID="+job.ID, "CC_JOB_SECRET="+string(job.Secret),
			"NCCL_BUFFSIZE="+buffSizeFor(mode))
		for _, e := range env {
			cmd.Env = append(cmd.Env, e(r)...)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		p := &rankProc{job: job.ID, cmd: cmd, lines: make(chan string, 64), done: make(chan error, 1)}
		cmd.Stderr = &syncWriter{b: &p.stderr}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				p.lines <- sc.Text()
			}
			close(p.lines)
			p.done <- cmd.Wait() // Wait closes the pipe: only after reading
		}()
		procs = append(procs, p)
	}
	return procs
}

type syncWriter struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// transports run the process tests over TCP only, shared memory only, and a
// mix: two host identities (CC_HOST_ID) of two ranks each, so ranks 0-1
// and 2-3 use shared memory and the ring's other links TCP.
var transports = []struct {
	name string
	env  func(rank int) []string
}{
	{"tcp", func(int) []string { return []string{"NCCL_SHM_DISABLE=1"} }},
	{"shm", func(int) []string { return []string{"NCCL_SHM_DISABLE=0"} }},
	{"mixed", func(r int) []string {
		return []string{"NCCL_SHM_DISABLE=0", fmt.Sprintf("CC_HOST_ID=test-host-%d", r/2)}
	}},
}

// TestRanksAsProcesses runs every collective with every rank its own OS
// process, joined through the CC_* variables ccrun exports, over each
// transport, with counts in all three protocols' size classes.
func TestRanksAsProcesses(t *testing.T) {
	for _, tr := range transports {
		for _, n := range []int{2, 4} {
			t.Run(fmt.Sprintf("%s/n%d", tr.name, n), func(t *testing.T) {
				procs := startRanks(t, n, "matrix", tr.env)
				waitOK(t, procs)
				if left := shmFiles(t, procs[0].job); left != "" {
					t.Errorf("the job left segments in %s: %s", shmDir, left)
				}
			})
		}
	}
}

// TestEightRanksSHM: 8 processes on this 2-core machine complete over
// shared memory without livelock (a hang guard, not a time bound).
func TestEightRanksSHM(t *testing.T) {
	if testing.Short() {
		t.Skip("8 processes skipped in -short mode")
	}
	waitOK(t, startRanks(t, 8, "matrix", transports[1].env))
}

// shmFiles lists the segments of job in /dev/shm (other packages' tests
// may have segments of their own there at the same time).
func shmFiles(t testing.TB, job string) string {
	ents, err := os.ReadDir(shmDir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if strings.Contains(e.Name(), job) {
			names = append(names, e.Name())
		}
	}
	return strings.Join(names, ",")
}

func waitOK(t *testing.T, procs []*rankProc) {
	t.Helper()
	for r, p := range procs {
		var err error
		hangGuard(t, 60*time.Second, fmt.Sprintf("rank %d process", r), func() { err = <-p.done; p.done <- err })
		if err != nil {
			t.Errorf("rank %d: %v\n%s", r, err, p.cmd.Stderr.(*syncWriter).String())
		}
		if l := p.line(); l != "ok" {
			t.Errorf("rank %d printed %q, want ok", r, l)
		}
	}
}

// TestKilledPeer kills one rank with SIGKILL in the middle of a stream of
// all-reduces: every other rank's call must fail with an error naming the
// dead rank, and exit (hang guard, not a speed bound); over each transport.
func TestKilledPeer(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) { killPeer(t, "forever", tr.env) })
	}
}

func killPeer(t *testing.T, mode string, env func(int) []string) {
	const n, victim = 4, 2
	procs := startRanks(t, n, mode, env)
	for r, p := range procs {
		l := ""
		hangGuard(t, 60*time.Second, fmt.Sprintf("rank %d start", r), func() { l = p.line() })
		if l != "started" {
			t.Fatalf("rank %d did not start: %s", r, p.cmd.Stderr.(*syncWriter).String())
		}
	}
	time.Sleep(200 * time.Millisecond) // let collectives run
	procs[victim].cmd.Process.Signal(syscall.SIGKILL)
	for r, p := range procs {
		if r == victim {
			continue
		}
		var err error
		hangGuard(t, 30*time.Second, fmt.Sprintf("rank %d after the kill", r), func() { err = <-p.done; p.done <- err })
		stderr := p.cmd.Stderr.(*syncWriter).String()
		if err == nil {
			t.Errorf("rank %d exited 0 after its peer died", r)
		}
		if !strings.Contains(stderr, "rank "+strconv.Itoa(victim)) {
			t.Errorf("rank %d error does not name rank %d:\n%s", r, victim, stderr)
		}
		t.Logf("rank %d: %s", r, strings.TrimSpace(stderr))
	}
}

// buffSizeFor keeps the failure tests' FIFOs small (more steps, more
// chances to be mid-transfer) and the benchmark on the default.
func buffSizeFor(mode string) string {
	if mode == "bench" || mode == "shmbench" {
		if v := os.Getenv("NCCL_BUFFSIZE"); v != "" {
			return v
		}
		return "4194304"
	}
	return "65536"
}

// childAllReduce runs AllReduce in and out of place at counts in the LL,
// LL128 and Simple size classes, checking every element.
func childAllReduce(c *Comm) error { return childCounts(c, collCases()[0]) }

// childAllReduceTypes is childAllReduce, then every data type x op.
func childAllReduceTypes(c *Comm) error {
	if err := childAllReduce(c); err != nil {
		return err
	}
	return everyTypeAndOp(c)
}

// childCounts runs the collective case cc in and out of place at counts in
// all three protocols' size classes and checks every element.
func childCounts(c *Comm, cc collCase) error {
	n, r := c.NRanks(), c.Rank()
	for _, count := range []int{1, 1000, 20000, 300000} {
		for _, inPlace := range []bool{false, true} {
			send, recv := caseBuffers(cc, r, n, count, inPlace)
			if err := cc.run(c, send, recv, count); err != nil {
				return fmt.Errorf("count %d: %w", count, err)
			}
			if err := checkCase(cc, r, n, count, inPlace, recv); err != nil {
				return err
			}
		}
	}
	return nil
}

// childMatrix runs every collective case in and out of place at counts in
// the LL, LL128 and Simple size classes, checking every element.
func childMatrix(c *Comm) error {
	n, r := c.NRanks(), c.Rank()
	for _, cc := range collCases() {
		for _, count := range []int{1, 1000, 20000, 300000} {
			for _, inPlace := range []bool{false, true} {
				if inPlace && cc.inPlace == nil && cc.name != "ReduceScatter" {
					continue
				}
				send, recv := caseBuffers(cc, r, n, count, inPlace)
				if err := cc.run(c, send, recv, count); err != nil {
					return fmt.Errorf("%s count %d: %w", cc.name, count, err)
				}
				if err := checkCase(cc, r, n, count, inPlace, recv); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
