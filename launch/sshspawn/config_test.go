package sshspawn

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/kevinburke/ssh_config"
)

const testConfig = `
Host tb1
    HostName 10.251.0.1
Host bastion
    HostName %h.example.com
    Port 2222
    User ops
    IdentityFile ~/.ssh/ops_%r
    IdentityFile /keys/%n.key
    IdentitiesOnly yes
    UserKnownHostsFile ~/.ssh/kh_a /etc/kh_b
Host tb*
    User root
    Port 22
    IdentityFile /tmp/testbed/id_ed25519
    UserKnownHostsFile /tmp/testbed/known_hosts
    GlobalKnownHostsFile /dev/null
`

func decode(t *testing.T, text string) *ssh_config.Config {
	t.Helper()
	cfg, err := ssh_config.Decode(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestResolve(t *testing.T) {
	cfg := decode(t, testConfig)
	base := Config{Home: "/home/me", LocalUser: "me"}
	tests := []struct {
		name     string
		c        Config
		alias    string
		hostUser string
		want     settings
	}{
		{"testbed alias", base, "tb1", "", settings{
			alias: "tb1", hostname: "10.251.0.1", port: 22, user: "root",
			identities: []string{"/tmp/testbed/id_ed25519"}, explicit: map[string]bool{"/tmp/testbed/id_ed25519": true},
			knownHosts: []string{"/tmp/testbed/known_hosts", "/dev/null"}}},
		{"tokens, tilde, IdentitiesOnly", base, "bastion", "", settings{
			alias: "bastion", hostname: "bastion.example.com", port: 2222, user: "ops",
			identities: []string{"/home/me/.ssh/ops_ops", "/keys/bastion.key"},
			explicit:   map[string]bool{"/home/me/.ssh/ops_ops": true, "/keys/bastion.key": true},
			knownHosts: []string{"/home/me/.ssh/kh_a", "/etc/kh_b", "/etc/ssh/ssh_known_hosts"}, noAgent: true}},
		{"flags win over config, hostfile user wins over flag",
			Config{Home: "/home/me", LocalUser: "me", User: "flaguser", Port: 2200, Identities: []string{"~/k"}, KnownHosts: []string{"/kh"}},
			"bastion", "alice", settings{
				alias: "bastion", hostname: "bastion.example.com", port: 2200, user: "alice",
				identities: []string{"/home/me/k", "/home/me/.ssh/ops_alice", "/keys/bastion.key"},
				explicit:   map[string]bool{"/home/me/k": true, "/home/me/.ssh/ops_alice": true, "/keys/bastion.key": true},
				knownHosts: []string{"/kh"}, noAgent: true}},
		{"unknown host gets defaults", base, "node7", "", settings{
			alias: "node7", hostname: "node7", port: 22, user: "me",
			identities: []string{"/home/me/.ssh/id_ed25519", "/home/me/.ssh/id_ecdsa", "/home/me/.ssh/id_rsa"},
			explicit:   map[string]bool{},
			knownHosts: []string{"/home/me/.ssh/known_hosts", "/etc/ssh/ssh_known_hosts"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := resolve(tt.c, cfg, tt.alias, tt.hostUser)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got, cmp.AllowUnexported(settings{})); d != "" {
				t.Errorf("resolve(%s) (-want +got):\n%s", tt.alias, d)
			}
		})
	}
}

func TestResolveErrors(t *testing.T) {
	cfg := decode(t, "Host bad\n    Port 99999\n")
	if _, err := resolve(Config{LocalUser: "me"}, cfg, "bad", ""); err == nil || err.Error() != `host bad: ssh config Port "99999": want 1-65535` {
		t.Errorf("bad port: got %v", err)
	}
	if _, err := resolve(Config{}, nil, "x", ""); err == nil || err.Error() != "host x: no login name: pass --ssh-user" {
		t.Errorf("no user: got %v", err)
	}
}

func TestLoadConfig(t *testing.T) {
	home := t.TempDir()
	// No ~/.ssh/config: no error, no config.
	if cfg, err := loadConfig(Config{Home: home}); err != nil || cfg != nil {
		t.Errorf("missing default config: %v, %v", cfg, err)
	}
	// A named file that is missing is an error.
	if _, err := loadConfig(Config{Home: home, ConfigFile: filepath.Join(home, "nope")}); err == nil {
		t.Error("missing --ssh-config: want an error")
	}
	if cfg, err := loadConfig(Config{Home: home, ConfigFile: "none"}); err != nil || cfg != nil {
		t.Errorf("none: %v, %v", cfg, err)
	}
	os.MkdirAll(filepath.Join(home, ".ssh"), 0o700)
	os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte("Host a\n  Port 2022\n"), 0o600)
	cfg, err := loadConfig(Config{Home: home})
	if err != nil || cfg == nil {
		t.Fatalf("default config: %v, %v", cfg, err)
	}
	if p, _ := cfg.Get("a", "Port"); p != "2022" {
		t.Errorf("Port = %q, want 2022", p)
	}
}

func TestTokens(t *testing.T) {
	tok := tokens{alias: "n", hostname: "h.example", user: "r", localUser: "u", home: "/home/u", port: 2222}
	for in, want := range map[string]string{
		"%h":           "h.example",
		"%n-%p-%r-%u":  "n-2222-r-u",
		"%d/.ssh/%%x":  "/home/u/.ssh/%x",
		"%k %C plain%": "%k %C plain%",
		"no tokens":    "no tokens",
	} {
		if got := tok.expand(in); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}
