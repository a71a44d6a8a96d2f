package sshspawn

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/kevinburke/ssh_config"
)

// Config is how ccrun reaches hosts. Flags win over ~/.ssh/config, which wins over the
// built-in defaults, as with OpenSSH.
type Config struct {
	// User is the login name (--ssh-user). A hostfile's user= wins over it.
	User string
	// Port is the SSH port (--ssh-port); 0 means the ssh config's Port, else 22.
	Port int
	// Identities are private key files tried before the ssh config's IdentityFile and the
	// default ~/.ssh/id_ed25519, id_ecdsa, id_rsa (--ssh-identity).
	Identities []string
	// KnownHosts replaces the known_hosts files (--ssh-known-hosts); by default the ssh
	// config's UserKnownHostsFile, else ~/.ssh/known_hosts, plus /etc/ssh/ssh_known_hosts.
	KnownHosts []string
	// ConfigFile is the ssh config to read (--ssh-config); "" means ~/.ssh/config if it
	// exists, "none" means none.
	ConfigFile string
	// AcceptNew records the key of a host seen for the first time in the first known_hosts
	// file instead of refusing it (--ssh-accept-new). A changed key is always refused.
	AcceptNew bool
	// ConnectTimeout bounds the TCP connect plus the SSH handshake of one host. This field
	// and the four after it take their Default value when 0; a negative one is an error.
	ConnectTimeout time.Duration
	// KeepaliveInterval and KeepaliveCountMax: a connection that leaves KeepaliveCountMax
	// keepalives in a row unanswered, one every KeepaliveInterval, is declared lost.
	KeepaliveInterval time.Duration
	KeepaliveCountMax int
	// MaxParallel bounds the hosts contacted at once.
	MaxParallel int
	// MaxSessions bounds the rank sessions per connection; more ranks on a host open more
	// connections. OpenSSH's MaxSessions defaults to 10, and ccrun keeps one session free
	// for signals.
	MaxSessions int
	// Home is the local home directory (~ in paths); "" means $HOME.
	Home string
	// LocalUser is the local user name (%u, and the default login name); "" means $USER.
	LocalUser string
	// AgentSocket is the ssh-agent socket; "" means no agent.
	AgentSocket string
	// Logf receives diagnostics; nil discards them.
	Logf func(format string, args ...any)
}

// Defaults of Config.
const (
	DefaultConnectTimeout    = 10 * time.Second
	DefaultKeepaliveInterval = 5 * time.Second
	DefaultKeepaliveCountMax = 3
	DefaultMaxParallel       = 32
	DefaultMaxSessions       = 8
)

// settings is everything needed to reach one host, resolved from flags, ssh config and
// defaults.
type settings struct {
	alias      string   // the name as given
	hostname   string   // what is dialled
	port       int      // TCP port
	user       string   // login name
	identities []string // key files, in the order tried
	// explicit marks the identities the user named (a missing one is an error).
	explicit   map[string]bool
	knownHosts []string // known_hosts files; the first is where --ssh-accept-new writes
	noAgent    bool     // IdentitiesOnly yes
}

// addr is hostname:port.
func (s settings) addr() string {
	return joinHostPort(s.hostname, s.port)
}

func joinHostPort(h string, port int) string {
	if strings.Contains(h, ":") {
		return "[" + h + "]:" + strconv.Itoa(port)
	}
	return h + ":" + strconv.Itoa(port)
}

// loadConfig reads the ssh config named by c.ConfigFile.
func loadConfig(c Config) (*ssh_config.Config, error) {
	path := c.ConfigFile
	explicit := path != ""
	switch path {
	case "none":
		return nil, nil
	case "":
		path = filepath.Join(c.Home, ".ssh", "config")
	}
	f, err := os.Open(expandTilde(path, c.Home))
	if err != nil {
		if !explicit && os.IsNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("ssh config: %w", err)
	}
	defer f.Close()
	cfg, err := ssh_config.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("ssh config %s: %w", path, err)
	}
	return cfg, nil
}

// resolve computes the settings of alias. hostUser is the hostfile's user= for it.
func resolve(c Config, cfg *ssh_config.Config, alias, hostUser string) (settings, error) {
	get := func(key string) string {
		if cfg == nil {
			return ""
		}
		v, _ := cfg.Get(alias, key)
		return v
	}
	getAll := func(key string) []string {
		if cfg == nil {
			return nil
		}
		v, _ := cfg.GetAll(alias, key)
		return v
	}
	s := settings{alias: alias, explicit: map[string]bool{}}
	s.user = firstNonEmpty(hostUser, c.User, get("User"), c.LocalUser)
	if s.user == "" {
		return s, fmt.Errorf("host %s: no login name: pass --ssh-user", alias)
	}
	s.port = 22
	if c.Port != 0 {
		s.port = c.Port
	} else if p := get("Port"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return s, fmt.Errorf("host %s: ssh config Port %q: want 1-65535", alias, p)
		}
		s.port = n
	}
	tok := tokens{alias: alias, hostname: alias, port: s.port, user: s.user, localUser: c.LocalUser, home: c.Home}
	s.hostname = alias
	if h := get("HostName"); h != "" {
		s.hostname = tok.expand(h)
	}
	tok.hostname = s.hostname
	for _, id := range c.Identities {
		p := expandTilde(id, c.Home)
		s.identities = append(s.identities, p)
		s.explicit[p] = true
	}
	for _, id := range getAll("IdentityFile") {
		p := expandTilde(tok.expand(id), c.Home)
		s.identities = append(s.identities, p)
		s.explicit[p] = true
	}
	if len(s.identities) == 0 {
		for _, name := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
			s.identities = append(s.identities, filepath.Join(c.Home, ".ssh", name))
		}
	}
	s.noAgent = strings.EqualFold(get("IdentitiesOnly"), "yes")
	switch {
	case len(c.KnownHosts) > 0:
		for _, f := range c.KnownHosts {
			s.knownHosts = append(s.knownHosts, expandTilde(f, c.Home))
		}
	default:
		user := strings.Fields(get("UserKnownHostsFile"))
		if len(user) == 0 {
			user = []string{filepath.Join(c.Home, ".ssh", "known_hosts")}
		}
		global := strings.Fields(get("GlobalKnownHostsFile"))
		if len(global) == 0 {
			global = []string{"/etc/ssh/ssh_known_hosts"}
		}
		for _, f := range append(user, global...) {
			s.knownHosts = append(s.knownHosts, expandTilde(tok.expand(f), c.Home))
		}
	}
	return s, nil
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}

// expandTilde replaces a leading ~/ with home.
func expandTilde(p, home string) string {
	if p == "~" {
		return home
	}
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		return filepath.Join(home, rest)
	}
	return p
}

// tokens are the ssh_config(5) percent tokens ccrun understands.
type tokens struct {
	alias, hostname, user, localUser, home string
	port                                   int
}

// expand replaces %h %n %p %r %u %d %% in s; other tokens are left as they are.
func (t tokens) expand(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'h':
			b.WriteString(t.hostname)
		case 'n':
			b.WriteString(t.alias)
		case 'p':
			b.WriteString(strconv.Itoa(t.port))
		case 'r':
			b.WriteString(t.user)
		case 'u':
			b.WriteString(t.localUser)
		case 'd':
			b.WriteString(t.home)
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}
