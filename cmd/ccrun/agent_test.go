package main

// The real ccrun binary in its agent mode (ccrun --ccrun-agent), spoken to through
// pipes on this machine as ccrun speaks to it over SSH: a handshake, a rank, the agent
// killed with SIGKILL (its ranks and their children must go: each has a lifeline to it),
// and a peer of another protocol version (refused, with a message).

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/launch"
	"github.com/seed-760dd1f1/cc/launch/agent"
	"github.com/seed-760dd1f1/cc/launch/proctest"
)

// The in-process runs of ccrun (ccrun() in main_test.go) read /dev/null, not the test's
// stdin: a terminal or a pipe left open would keep the stdin copy running after the job.
func init() {
	if f, err := os.Open(os.DevNull); err == nil {
		stdinFile = f
	}
}

// startAgent runs the ccrun binary as an agent and returns it with its stdin and stdout.
func startAgent(t *testing.T) (*exec.Cmd, io.WriteCloser, io.ReadCloser, *syncBuf) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	bin, _ := binaries(t)
	cmd := exec.Command(bin, agent.Flag)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuf{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, stdin, stdout, stderr
}

func TestAgentBinaryKilled(t *testing.T) {
	cmd, stdin, stdout, _ := startAgent(t)
	exited := make(chan error, 1)
	c, err := agent.Dial(context.Background(), "here", stdout, stdin, stdin, time.Second, func(err error) error {
		return &agent.LostError{Host: "here", Err: <-exited}
	})
	if err != nil {
		t.Fatal(err)
	}
	if c.Agent.Pid != cmd.Process.Pid {
		t.Errorf("agent says pid %d, want %d", c.Agent.Pid, cmd.Process.Pid)
	}
	var b [8]byte
	rand.Read(b[:])
	kv := "CC_ORPHAN_MARK=" + hex.EncodeToString(b[:])
	list := func() []int { return proctest.WithEnv(kv) }
	out := &syncBuf{}
	proc, err := c.Start(context.Background(), launch.Spec{Slot: launch.Slot{Rank: 0}, Argv: []string{"/bin/sh", "-c", family},
		Env: []string{kv}, Stdout: out, Stderr: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); len(list()) < 5; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) { // the rank, 2 children, a grandchild, its watcher
			t.Fatalf("%d processes of the rank, want 5; output %q", len(list()), out)
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	exited <- cmd.Wait()
	var le *agent.LostError
	if got := proc.Wait(); !errors.As(got.Err, &le) || !strings.Contains(got.Err.Error(), "lost the agent on host here: signal: killed") {
		t.Errorf("rank after kill -9 of its agent: %+v, want a LostError naming the kill", got)
	}
	checkNoneOf(t, list, 20*time.Second)
	c.Close()
}

func TestAgentBinaryVersionMismatch(t *testing.T) {
	cmd, stdin, stdout, stderr := startAgent(t)
	// A ccrun of protocol version 99: the agent answers with its hello, then leaves.
	hello := `{"magic":"ccrun-agent","version":99}`
	stdin.Write(append(binary.BigEndian.AppendUint32(nil, uint32(1+len(hello))), append([]byte{1}, hello...)...))
	got, _ := io.ReadAll(stdout)
	err := cmd.Wait()
	if !strings.Contains(string(got), `"magic":"ccrun-agent","version":1`) {
		t.Errorf("agent said %q, want its hello", got)
	}
	if code := cmd.ProcessState.ExitCode(); code != 1 || !strings.Contains(stderr.String(), "agent protocol version 99, want 1") {
		t.Errorf("agent exit %d (%v), stderr %q; want 1 and the versions", code, err, stderr)
	}
}
