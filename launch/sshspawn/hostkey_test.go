package sshspawn

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

func newHostKey(t *testing.T) ssh.PublicKey {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writeKnownHosts(t *testing.T, lines ...string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "known_hosts")
	if err := os.WriteFile(f, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

var addr = &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 22}

func TestHostKeyKnown(t *testing.T) {
	key := newHostKey(t)
	f := writeKnownHosts(t, knownhosts.Line([]string{"node1", "10.0.0.1"}, key))
	hk := &hostKeys{logf: t.Logf}
	cb, err := hk.check([]string{f})
	if err != nil {
		t.Fatal(err)
	}
	if err := cb("10.0.0.1:22", addr, key); err != nil {
		t.Errorf("known key refused: %v", err)
	}
	if err := cb("node1:22", addr, key); err != nil {
		t.Errorf("known key by name refused: %v", err)
	}
}

func TestHostKeyMismatch(t *testing.T) {
	known, offered := newHostKey(t), newHostKey(t)
	f := writeKnownHosts(t, "# comment", knownhosts.Line([]string{"10.0.0.1"}, known))
	cb, _ := (&hostKeys{logf: t.Logf}).check([]string{f})
	err := cb("10.0.0.1:22", addr, offered)
	var he *HostKeyError
	if !errors.As(err, &he) {
		t.Fatalf("got %v, want a *HostKeyError", err)
	}
	for _, want := range []string{
		"host key of 10.0.0.1:22 does not match " + f + ":2",
		"offered ssh-ed25519 " + ssh.FingerprintSHA256(offered),
		"known ssh-ed25519 " + ssh.FingerprintSHA256(known),
		"ssh-keygen -R '10.0.0.1' -f " + f,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message lacks %q:\n%s", want, err)
		}
	}
}

func TestHostKeyUnknown(t *testing.T) {
	f := writeKnownHosts(t, knownhosts.Line([]string{"other"}, newHostKey(t)))
	key := newHostKey(t)
	cb, _ := (&hostKeys{logf: t.Logf}).check([]string{f})
	err := cb("10.0.0.1:2222", addr, key)
	want := "host key of 10.0.0.1:2222 is not known (offered ssh-ed25519 " + ssh.FingerprintSHA256(key) + "; looked in " + f +
		"): check the fingerprint, then add it with `ssh-keyscan -p 2222 10.0.0.1 >> " + f + "`, or run ccrun with --ssh-accept-new to record it on first contact"
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
	// No file at all: every host is unknown, the message still names where ccrun looked.
	missing := filepath.Join(t.TempDir(), "none")
	cb, _ = (&hostKeys{logf: t.Logf}).check([]string{missing})
	if err := cb("10.0.0.1:22", addr, key); err == nil || !strings.Contains(err.Error(), "looked in "+missing) {
		t.Errorf("missing file: got %v", err)
	}
}

func TestHostKeyAcceptNew(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "sub", "known_hosts") // created on first contact
	key, other := newHostKey(t), newHostKey(t)
	hk := &hostKeys{acceptNew: true, logf: t.Logf}
	cb, err := hk.check([]string{f})
	if err != nil {
		t.Fatal(err)
	}
	if err := cb("10.0.0.1:2222", addr, key); err != nil {
		t.Fatalf("first contact with --ssh-accept-new: %v", err)
	}
	b, _ := os.ReadFile(f)
	if want := knownhosts.Line([]string{"[10.0.0.1]:2222"}, key) + "\n"; string(b) != want {
		t.Errorf("known_hosts = %q, want %q", b, want)
	}
	if err := cb("10.0.0.1:2222", addr, key); err != nil {
		t.Errorf("second contact: %v", err)
	}
	// A changed key is refused even with --ssh-accept-new.
	if err := cb("10.0.0.1:2222", addr, other); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("changed key with --ssh-accept-new: got %v, want a mismatch", err)
	}
}

func TestHostKeyRevoked(t *testing.T) {
	key := newHostKey(t)
	f := writeKnownHosts(t, "@revoked * "+strings.TrimSpace(string(ssh.MarshalAuthorizedKey(key))))
	cb, _ := (&hostKeys{logf: t.Logf}).check([]string{f})
	if err := cb("10.0.0.1:22", addr, key); err == nil || !strings.Contains(err.Error(), "is marked @revoked") {
		t.Errorf("got %v, want revoked", err)
	}
}

func TestHostKeyAlgorithms(t *testing.T) {
	rk, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	rsaPub, _ := ssh.NewPublicKey(&rk.PublicKey)
	edPub := newHostKey(t)
	f := writeKnownHosts(t, knownhosts.Line([]string{"a"}, rsaPub), knownhosts.Line([]string{"a", "b"}, edPub))
	hk := &hostKeys{logf: t.Logf}
	tests := []struct {
		host string
		want []string
	}{
		{"a:22", []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA, ssh.KeyAlgoED25519}},
		{"b:22", []string{ssh.KeyAlgoED25519}},
		{"c:22", nil},
	}
	for _, tt := range tests {
		if d := cmp.Diff(tt.want, hk.algorithms([]string{f}, tt.host)); d != "" {
			t.Errorf("algorithms(%s) (-want +got):\n%s", tt.host, d)
		}
	}
}

func TestAuthNoKeys(t *testing.T) {
	home := t.TempDir()
	s, err := resolve(Config{Home: home, LocalUser: "me"}, nil, "h", "")
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = (&keyring{}).auth(s)
	want := "no usable SSH key for me@h: no ssh-agent (SSH_AUTH_SOCK unset); " + home + "/.ssh/id_ed25519: not there; " +
		home + "/.ssh/id_ecdsa: not there; " + home + "/.ssh/id_rsa: not there: pass -i/--ssh-identity FILE or add a key to ssh-agent"
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
}

func TestAuthKeyFiles(t *testing.T) {
	dir := t.TempDir()
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good")
	os.WriteFile(good, pem.EncodeToMemory(block), 0o600)
	locked := filepath.Join(dir, "locked")
	lb, _ := ssh.MarshalPrivateKeyWithPassphrase(priv, "", []byte("pw"))
	os.WriteFile(locked, pem.EncodeToMemory(lb), 0o600)
	garbage := filepath.Join(dir, "garbage")
	os.WriteFile(garbage, []byte("not a key"), 0o600)

	s := settings{alias: "h", user: "u", identities: []string{locked, good}, explicit: map[string]bool{}}
	m, tried, err := (&keyring{}).auth(s)
	if err != nil || len(m) != 1 || len(tried) != 1 || tried[0] != good {
		t.Errorf("auth = %d methods, tried %v, %v; want the good key only", len(m), tried, err)
	}
	s.identities = []string{locked}
	if _, _, err := (&keyring{}).auth(s); err == nil || !strings.Contains(err.Error(), locked+": protected by a passphrase (load it into ssh-agent)") {
		t.Errorf("only a locked key: got %v", err)
	}
	s.identities, s.explicit = []string{garbage}, map[string]bool{garbage: true}
	if _, _, err := (&keyring{}).auth(s); err == nil || !strings.HasPrefix(err.Error(), "identity file "+garbage+": ") {
		t.Errorf("garbage key: got %v", err)
	}
	missing := filepath.Join(dir, "missing")
	s.identities, s.explicit = []string{missing}, map[string]bool{missing: true}
	if _, _, err := (&keyring{}).auth(s); err == nil || !strings.HasPrefix(err.Error(), "identity file "+missing+": ") {
		t.Errorf("missing explicit key: got %v", err)
	}
}
