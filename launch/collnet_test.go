package launch

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/runtime/bootstrap"
	"github.com/seed-760dd1f1/cc/runtime/collnet"
)

// testServerEnv makes the test binary the aggregation server: its value is
// "serve", or "exit-after=D" to exit with status 3 after D, or "no-listen"
// to exit at once without listening.
const testServerEnv = "LAUNCH_TEST_COLLNET_SERVER"

// testServer is the test binary's server mode, as ccrun's hidden mode.
func testServer() int {
	mode := os.Getenv(testServerEnv)
	if mode == "no-listen" {
		fmt.Fprintln(os.Stderr, "cannot listen")
		return 4
	}
	job, err := bootstrap.JobFromEnv(os.LookupEnv)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	s, err := collnet.Listen(collnet.Options{Job: job, Addr: "127.0.0.1:0"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s.Close()
	fmt.Printf("%s %s%s\n", collnet.Name, CollNetListening, s.Addr())
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	var after <-chan time.Time
	if d, ok := strings.CutPrefix(mode, "exit-after="); ok {
		dd, _ := time.ParseDuration(d)
		after = time.After(dd)
	}
	select {
	case <-term:
		return 0
	case <-after:
		return 3
	}
}

// collnetJob is localJob with the test binary as the server in mode.
func collnetJob(t *testing.T, np int, script, mode string) (Options, *syncBuffer, *syncBuffer) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	o, out, errb := localJob(np, script)
	o.Environ = append(o.Environ, testServerEnv+"="+mode)
	o.CollNet = &CollNetServer{Host: "localhost", Argv: []string{exe}}
	return o, out, errb
}

// serverGone fails if the job's server process is still alive.
func serverGone(t *testing.T, rep *Report) {
	t.Helper()
	if rep.Server == nil || rep.Server.Pid == 0 {
		t.Fatal("no server in the report")
	}
	if err := syscall.Kill(rep.Server.Pid, 0); err == nil {
		t.Errorf("server pid %d still alive after Run", rep.Server.Pid)
		syscall.Kill(rep.Server.Pid, syscall.SIGKILL)
	}
}

// TestCollNetServerSupervised: ranks get CC_COLLNET_SERVER, the server
// outlives them and is stopped after them, which is no failure.
func TestCollNetServerSupervised(t *testing.T) {
	o, out, errb := collnetJob(t, 2, `echo "server=$CC_COLLNET_SERVER"`, "serve")
	rep := run(t, context.Background(), o)
	if rep.Cause != nil || rep.ExitCode() != 0 {
		t.Fatalf("cause %+v, exit %d; stderr:\n%s", rep.Cause, rep.ExitCode(), errb)
	}
	want := "server=" + rep.Server.Addr
	if !strings.HasPrefix(rep.Server.Addr, "127.0.0.1:") || strings.Count(out.String(), want+"\n") != 2 {
		t.Errorf("server at %q; ranks printed:\n%s", rep.Server.Addr, out)
	}
	if rep.Server.Died {
		t.Errorf("server died: %v", rep.Server.Exit)
	}
	if !strings.Contains(errb.String(), "collnet-server: collnet aggregation server listening on") {
		t.Errorf("stderr lacks the server's line:\n%s", errb)
	}
	serverGone(t, rep)
}

// TestCollNetServerDies: the server exits while the ranks run: it is the
// job's cause, named first, exit status 1, and the ranks are torn down
// after the ranks' wait.
func TestCollNetServerDies(t *testing.T) {
	defer func(d time.Duration) { collnetFailWait = d }(collnetFailWait)
	collnetFailWait = 500 * time.Millisecond
	o, _, _ := collnetJob(t, 2, `sleep 30`, "exit-after=300ms")
	rep := run(t, context.Background(), o)
	if rep.Cause == nil || rep.Cause.Kind != CauseServer || rep.ExitCode() != 1 {
		t.Fatalf("cause %+v, exit %d: want the server, 1", rep.Cause, rep.ExitCode())
	}
	var b strings.Builder
	rep.WriteSummary(&b)
	lines := strings.Split(b.String(), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[1], "collnet aggregation server "+rep.Server.Addr+" (host localhost") {
		t.Errorf("summary does not name the server first:\n%s", b.String())
	}
	if !strings.Contains(b.String(), "exit code 3") {
		t.Errorf("summary does not say how it ended:\n%s", b.String())
	}
	serverGone(t, rep)
}

// TestCollNetServerDoesNotStart: a server that ends before it listens is
// Run's error, naming it; no rank starts.
func TestCollNetServerDoesNotStart(t *testing.T) {
	o, out, _ := collnetJob(t, 2, `echo started`, "no-listen")
	_, err := Run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "collnet aggregation server on localhost ended before it listened: exit code 4") {
		t.Errorf("Run: %v, want the server's early end", err)
	}
	if strings.Contains(out.String(), "started") {
		t.Errorf("a rank started:\n%s", out)
	}
}
