package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
)

// sshArgs are SSH flags with a fresh key and an empty known_hosts, so that reaching a host
// fails only on the network.
func sshArgs(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	key, kh := filepath.Join(dir, "id"), filepath.Join(dir, "known_hosts")
	os.WriteFile(key, pem.EncodeToMemory(block), 0o600)
	os.WriteFile(kh, nil, 0o600)
	return []string{"--ssh-config", "none", "-i", key, "--ssh-known-hosts", kh}
}

// TestSkipUnreachable: hosts whose names do not resolve cannot be reached; with
// --skip-unreachable the job runs on the rest, says which it skipped, and the ranks get
// their names; without it, or with too few hosts left, the job fails.
func TestSkipUnreachable(t *testing.T) {
	hosts := []string{"-H", "localhost:2,no-such-host.invalid:1,other-host.invalid:1", "-N", "1"}
	prog := []string{"/bin/sh", "-c", `echo "$CC_RANK/$CC_NRANKS $CC_UNREACHABLE_HOSTS"`}
	args := append(append(append(sshArgs(t), "--skip-unreachable"), hosts...), prog...)
	code, out, errs := ccrun(t, context.Background(), nil, args...)
	if want := "0/1 no-such-host.invalid,other-host.invalid\n"; code != 0 || out != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want 0 and %q", code, out, errs, want)
	}
	lines := strings.Split(strings.TrimSpace(errs), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "ccrun: skipping no-such-host.invalid: dial tcp: lookup no-such-host.invalid") ||
		!strings.HasPrefix(lines[1], "ccrun: skipping other-host.invalid: dial tcp: lookup other-host.invalid") {
		t.Errorf("stderr %q, want one line per skipped host, in order", errs)
	}

	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"without the flag", append(append(sshArgs(t), hosts...), prog...), 1, "ccrun: host no-such-host.invalid: dial tcp: lookup no-such-host.invalid"},
		{"too few hosts left", append(append(append(sshArgs(t), "--skip-unreachable", "-np", "3"), hosts...), prog...), 1,
			"ccrun: --skip-unreachable dropped no-such-host.invalid, other-host.invalid: "},
		{"set by ccrun", append(append(sshArgs(t), "--skip-unreachable", "-x", "CC_UNREACHABLE_HOSTS=a", "-np", "1"), prog...), exitUsage,
			`ccrun: -x "CC_UNREACHABLE_HOSTS=a": CC_UNREACHABLE_HOSTS is set by ccrun for each rank`},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errs := ccrun(t, context.Background(), nil, c.args...)
			msg := strings.TrimSpace(errs)
			lines := strings.Split(msg, "\n")
			if code != c.code || out != "" || !strings.HasPrefix(lines[len(lines)-1], c.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want %d and a last line starting %q", code, out, errs, c.code, c.want)
			}
		})
	}
}
