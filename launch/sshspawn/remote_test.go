package sshspawn

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestShellQuoteRoundTrip(t *testing.T) {
	in := []string{"", "plain", "with space", "it's", `"dq"`, "$HOME", "`id`", "a\nb", "*", "-x", "a=b c", "\\", "'", "''", "é"}
	script := "for a; do printf '%s\\0' \"$a\"; done"
	line := "sh -c " + shellQuote(script) + " sh"
	for _, s := range in {
		line += " " + shellQuote(s)
	}
	out, err := exec.Command("/bin/sh", "-c", line).Output()
	if err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if len(got) != len(in) {
		t.Fatalf("got %d args %q, want %d", len(got), got, len(in))
	}
	for i := range in {
		if got[i] != in[i] {
			t.Errorf("arg %d: got %q, want %q", i, got[i], in[i])
		}
	}
}

func TestRankScriptHasNoSingleQuote(t *testing.T) {
	if strings.Contains(rankScript, "'") {
		t.Fatal("rankScript must not contain a single quote: it is single-quoted for the login shell")
	}
}

func TestKillCommand(t *testing.T) {
	got := killCommand([]signalReq{{sig: syscall.SIGTERM, pgid: 10}, {sig: syscall.SIGKILL, pgid: 11}, {sig: syscall.SIGTERM, pgid: 12}})
	want := "kill -15 -10 -12 2>/dev/null; kill -9 -11 2>/dev/null; exit 0"
	if got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

// localRank runs the remote command of c with this machine's /bin/sh standing in for the
// login shell sshd would use, so the rank script is tested without SSH.
type localRank struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *bytes.Buffer
}

func startLocalRank(t *testing.T, c Command) *localRank {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", remoteCommand(c))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // as sshd does
	stdin, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	io.WriteString(stdin, c.Secret+"\n")
	return &localRank{cmd: cmd, stdin: stdin, stdout: bufio.NewReader(out), stderr: &errb}
}

func (r *localRank) pid(t *testing.T) int {
	t.Helper()
	line, err := r.stdout.ReadString('\n')
	pid, ok := strings.CutPrefix(strings.TrimSpace(line), pidPrefix)
	n, cerr := strconv.Atoi(pid)
	if err != nil || !ok || cerr != nil {
		t.Fatalf("first line %q (%v), want %q", line, err, pidPrefix+"PID")
	}
	if n != r.cmd.Process.Pid {
		t.Errorf("reported pid %d, want the shell's %d (exec keeps it)", n, r.cmd.Process.Pid)
	}
	return n
}

func (r *localRank) wait() (string, int) {
	rest, _ := io.ReadAll(r.stdout)
	err := r.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(rest), ee.ExitCode()
	}
	return string(rest), 0
}

func TestRankScriptRunsProgram(t *testing.T) {
	// A private TMPDIR: other packages' tests create ccrun-secret files in
	// /tmp at the same time, and this test counts what the script leaves.
	t.Setenv("TMPDIR", t.TempDir())
	dir := t.TempDir()
	r := startLocalRank(t, Command{
		Argv:   []string{"/bin/sh", "-c", `echo "a=$A b=$B pwd=$(pwd) secret=$(cat "$CC_JOB_SECRET_FILE") stdin=$(cat)"; ls "${TMPDIR:-/tmp}" | grep -c ccrun-secret.; exit 3`},
		Env:    []string{"A=it's", "B=x y"},
		Dir:    dir,
		Secret: "s3cret",
	})
	r.pid(t)
	out, code := r.wait()
	if want := "a=it's b=x y pwd=" + dir + " secret=s3cret stdin=\n0\n"; out != want || code != 3 {
		t.Errorf("got %q exit %d\nwant %q exit 3 (stderr %q)", out, code, want, r.stderr)
	}
}

func TestRankScriptSecretNotInArgvOrEnv(t *testing.T) {
	r := startLocalRank(t, Command{Argv: []string{"sleep", "30"}, Secret: "topsecret-42"})
	pid := r.pid(t)
	for _, f := range []string{"cmdline", "environ"} {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), f))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte("topsecret-42")) {
			t.Errorf("/proc/%d/%s contains the secret", pid, f)
		}
	}
}

func TestRankScriptNotFound(t *testing.T) {
	r := startLocalRank(t, Command{Argv: []string{"no-such-program-ccrun"}, Secret: "s"})
	r.pid(t)
	_, code := r.wait()
	if code != 127 || !strings.Contains(r.stderr.String(), "ccrun: program no-such-program-ccrun not found on host") {
		t.Errorf("exit %d, stderr %q; want 127 and a message naming the program and host", code, r.stderr)
	}
}

func TestRankScriptDir(t *testing.T) {
	r := startLocalRank(t, Command{Argv: []string{"true"}, Dir: "/nonexistent-ccrun", Secret: "s"})
	r.pid(t)
	if _, code := r.wait(); code != 126 || !strings.Contains(r.stderr.String(), "cannot enter directory /nonexistent-ccrun") {
		t.Errorf("exit %d, stderr %q; want 126", code, r.stderr)
	}
	r = startLocalRank(t, Command{Argv: []string{"true"}, Dir: "/nonexistent-ccrun", DirOptional: true, Secret: "s"})
	r.pid(t)
	if _, code := r.wait(); code != 0 {
		t.Errorf("optional dir: exit %d, stderr %q; want 0", code, r.stderr)
	}
}

// TestRankScriptLifeline closes the rank's stdin, as a vanished ccrun or SSH connection
// does, and checks that the whole process group, children included, goes away.
func TestRankScriptLifeline(t *testing.T) {
	r := startLocalRank(t, Command{Argv: []string{"/bin/sh", "-c", `trap "" USR1 USR2; echo ready; sleep 30 & sleep 30; wait`}, Secret: "s"})
	pid := r.pid(t)
	if line, err := r.stdout.ReadString('\n'); line != "ready\n" {
		t.Fatalf("rank said %q, %v; want ready", line, err)
	}
	// Forwarded signals reach the whole group; the watcher must outlive them.
	for _, sig := range []syscall.Signal{syscall.SIGUSR1, syscall.SIGUSR2} {
		if err := syscall.Kill(-pid, sig); err != nil {
			t.Fatal(err)
		}
	}
	r.stdin.Close()
	_, _ = r.wait()
	if r.cmd.ProcessState.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Errorf("rank ended with %v, want SIGTERM", r.cmd.ProcessState)
	}
	// The watcher SIGKILLs the group (itself included) once the rank is gone; give it a
	// bounded while.
	for i := 0; ; i++ {
		err := syscall.Kill(-pid, 0)
		if errors.Is(err, syscall.ESRCH) {
			break
		}
		if i == 100 {
			t.Fatalf("process group %d still exists after the lifeline ended: %v", pid, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
