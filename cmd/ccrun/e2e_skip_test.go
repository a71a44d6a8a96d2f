package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// namesHostfile writes a hostfile naming the testbed's hosts tb1..tbN (the ssh config maps
// the names to addresses), one slot each, and returns its path.
func (tb *testbed) namesHostfile(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for k := range tb.addrs {
		fmt.Fprintf(&b, "tb%d slots=1\n", k+1)
	}
	p := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestE2ESkipUnreachable: with tb7 cut off, ccrun --skip-unreachable runs one rank on each
// of the other seven hosts, says it skipped tb7, and every rank sees CC_UNREACHABLE_HOSTS=tb7.
func TestE2ESkipUnreachable(t *testing.T) {
	tb := needTestbed(t)
	tb.cut(t, "tb7")
	j := startCCRun(t, "--skip-unreachable", "--hostfile", tb.namesHostfile(t), "--ssh-config", tb.sshConfig, "--ssh-connect-timeout", "3s",
		"-N", "1", "/bin/sh", "-c", `echo "$(hostname) $CC_RANK/$CC_NRANKS unreachable=$CC_UNREACHABLE_HOSTS"`)
	if code := j.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, j.out, j.err)
	}
	var want []string
	for r, k := range []int{1, 2, 3, 4, 5, 6, 8} {
		want = append(want, fmt.Sprintf("tb%d %d/7 unreachable=tb7", k, r))
	}
	if got := sortedLines(j.out.String()); !slices.Equal(got, want) {
		t.Errorf("ranks printed:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if msg := strings.TrimSpace(j.err.String()); !strings.HasPrefix(msg, "ccrun: skipping tb7: dial tcp "+tb.addr(7)+":22: i/o timeout") || strings.Contains(msg, "\n") {
		t.Errorf("stderr %q, want one line skipping tb7", msg)
	}
}
