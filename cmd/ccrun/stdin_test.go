package main

// The real ccrun binary's stdin on this machine: rank 0 by default, --stdin all, a rank,
// none; and a ccrun in the background of a terminal that does not stop on SIGTTIN.

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestStdinLocal(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	bin, _ := binaries(t)
	tests := []struct {
		flags []string
		want  []string // each rank's line, sorted
	}{
		{nil, []string{"0 got hello world", "1 got ", "2 got "}},
		{[]string{"--stdin", "all"}, []string{"0 got hello world", "1 got hello world", "2 got hello world"}},
		{[]string{"--stdin", "2"}, []string{"0 got ", "1 got ", "2 got hello world"}},
		{[]string{"--stdin", "none"}, []string{"0 got ", "1 got ", "2 got "}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(append([]string{"stdin"}, tt.flags...), " "), func(t *testing.T) {
			args := append(append([]string{"-np", "3", "--oversubscribe"}, tt.flags...), "/bin/sh", "-c", `echo "$CC_RANK got $(cat | tr "\n" " " | sed "s/ $//")"`)
			cmd := exec.Command(bin, args...)
			cmd.Stdin = strings.NewReader("hello\nworld\n")
			out, err := cmd.CombinedOutput()
			lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
			sort.Strings(lines)
			if err != nil || fmt.Sprint(lines) != fmt.Sprint(tt.want) {
				t.Errorf("%v: %q, want %q", err, lines, tt.want)
			}
		})
	}
}

// TestStdinBackgroundTerminal: `ccrun ... &` in an interactive shell leaves its stdin, the
// terminal, alone (a read would stop it with SIGTTIN, and the job would never end); its
// ranks run and it exits.
func TestStdinBackgroundTerminal(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	bin, _ := binaries(t)
	ptmx, pts := openPTY(t)
	// sh -m: job control, so the background job has a process group of its own and the
	// shell's stays the terminal's foreground group.
	cmd := exec.Command("/bin/sh", "-m", "-c", bin+` -np 1 /bin/sh -c "echo rank ran" & wait $!; echo "ccrun exit $?"`)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = pts, pts, pts
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pts.Close()
	out := make(chan string, 1)
	go func() {
		var b strings.Builder
		buf := make([]byte, 4096)
		for {
			n, err := ptmx.Read(buf)
			b.Write(buf[:n])
			if err != nil || strings.Contains(b.String(), "ccrun exit") {
				out <- b.String()
				return
			}
		}
	}()
	select {
	case got := <-out:
		if !strings.Contains(got, "rank ran") || !strings.Contains(got, "ccrun exit 0") {
			t.Errorf("terminal shows %q, want the rank's line and ccrun exit 0", got)
		}
	case <-time.After(time.Minute): // a hang guard: a stopped ccrun never exits
		t.Errorf("ccrun in the background did not finish (stopped on SIGTTIN?)")
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	ptmx.Close()
	cmd.Wait()
}

// openPTY opens a pseudo-terminal pair.
func openPTY(t *testing.T) (ptmx, pts *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	fd := int(ptmx.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatalf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatalf("ptsname: %v", err)
	}
	pts, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatalf("open pts: %v", err)
	}
	return ptmx, pts
}
