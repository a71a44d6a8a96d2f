package proctest

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func TestFinds(t *testing.T) {
	mark := "PROCTEST_MARK=" + strconv.Itoa(os.Getpid())
	cmd := exec.Command("sleep", "300")
	cmd.Env = append(os.Environ(), mark)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	for name, got := range map[string][]int{
		"WithEnv": WithEnv(mark), "WithCmdline": WithCmdline("sleep\x00300"), "InGroup": InGroup(pid),
	} {
		if !slices.Contains(got, pid) {
			t.Errorf("%s = %v, want it to hold %d", name, got, pid)
		}
	}
	if got := WithEnv(mark + "x"); len(got) != 0 {
		t.Errorf("WithEnv(other marker) = %v, want none", got)
	}
	cmd.Process.Kill()
	// Reaped or not, a dead process is not listed.
	if left := WaitNone(func() []int { return WithEnv(mark) }, time.Minute); len(left) != 0 {
		t.Errorf("after kill: %s", Describe(left))
	}
	cmd.Wait()
}
