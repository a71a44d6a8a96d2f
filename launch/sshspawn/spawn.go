// Package sshspawn starts processes on remote hosts over SSH for ccrun, with
// golang.org/x/crypto/ssh (the only package of cc that imports it).
//
// A Spawner reads ~/.ssh/config (Host, HostName, Port, User, IdentityFile, IdentitiesOnly,
// UserKnownHostsFile, GlobalKnownHostsFile; Match and ProxyJump are not supported),
// authenticates with ssh-agent keys and key files, and checks host keys strictly against
// known_hosts, asking only for the key types known_hosts holds for the host. Connect dials
// hosts concurrently (MaxParallel at a time), one connection per host (more when a host runs
// more than MaxSessions ranks), each watched by keepalive@openssh.com requests.
//
//	sp, err := sshspawn.New(sshspawn.Config{AgentSocket: os.Getenv("SSH_AUTH_SOCK"), ...})
//	err = sp.Connect(ctx, []sshspawn.Target{{Name: "node01"}, {Name: "node02"}})
//	p, err := sp.Start(ctx, "node01", sshspawn.Command{Argv: argv, Env: env, Secret: s}, os.Stdout, os.Stderr)
//	code, sig, err := p.Wait()
//	sp.Close()
//
// How a rank runs remotely (environment in the command, secret over stdin, the stdin
// lifeline, killing the process group from a second session) is described at rankScript.
package sshspawn

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"sync"
	"time"

	"github.com/kevinburke/ssh_config"
	"golang.org/x/crypto/ssh"
)

// Target is a host to reach.
type Target struct {
	Name string
	// User overrides the login name for this host (a hostfile's user=).
	User string
	// Port overrides the port for this host (a hostfile's port=); 0: --ssh-port, the ssh
	// config's Port, else 22.
	Port int
}

// Spawner reaches hosts and starts processes on them. Its methods are safe for concurrent
// use. Goroutines: per connection a keepalive loop and a watcher of the connection's end;
// per process the copy of its stdout. Close ends them all.
type Spawner struct {
	cfg    Config
	sshCfg *ssh_config.Config
	keys   keyring
	hk     hostKeys

	mu     sync.Mutex
	hosts  map[string]*host
	closed bool
	wg     sync.WaitGroup
}

// host is one remote host and its connections.
type host struct {
	set          settings
	clientConfig *ssh.ClientConfig
	tried        []string // key sources offered, for error messages

	mu         sync.Mutex
	conns      []*conn
	dialMu     sync.Mutex // one extra connection dialled at a time
	preloadMu  sync.Mutex
	preloadDir string
	preloaded  map[string]bool // names copied to preloadDir
}

// New checks cfg and reads the ssh config. It does not touch the network.
func New(cfg Config) (*Spawner, error) {
	if cfg.Home == "" {
		cfg.Home, _ = os.UserHomeDir()
	}
	if cfg.LocalUser == "" {
		if u, err := user.Current(); err == nil {
			cfg.LocalUser = u.Username
		} else {
			cfg.LocalUser = os.Getenv("USER")
		}
	}
	if cfg.ConnectTimeout < 0 || cfg.KeepaliveInterval < 0 || cfg.KeepaliveCountMax < 0 || cfg.MaxParallel < 0 || cfg.MaxSessions < 0 {
		return nil, fmt.Errorf("negative SSH setting (connect timeout %v, keepalive %v x %d, parallel %d, sessions %d): want 0 (the default) or more",
			cfg.ConnectTimeout, cfg.KeepaliveInterval, cfg.KeepaliveCountMax, cfg.MaxParallel, cfg.MaxSessions)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = DefaultConnectTimeout
	}
	if cfg.KeepaliveInterval == 0 {
		cfg.KeepaliveInterval = DefaultKeepaliveInterval
	}
	if cfg.KeepaliveCountMax == 0 {
		cfg.KeepaliveCountMax = DefaultKeepaliveCountMax
	}
	if cfg.MaxParallel == 0 {
		cfg.MaxParallel = DefaultMaxParallel
	}
	if cfg.MaxSessions == 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.Port < 0 || cfg.Port > 65535 {
		return nil, fmt.Errorf("bad --ssh-port %d: want 1-65535", cfg.Port)
	}
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	sshCfg, err := loadConfig(cfg)
	if err != nil {
		return nil, err
	}
	s := &Spawner{cfg: cfg, sshCfg: sshCfg, hosts: map[string]*host{}}
	s.keys.agentSocket = cfg.AgentSocket
	s.hk.acceptNew, s.hk.logf = cfg.AcceptNew, cfg.Logf
	return s, nil
}

// Connect opens a connection to every target, MaxParallel at a time. It returns the error
// of the first target (in the given order) that failed, noting how many others failed.
func (s *Spawner) Connect(ctx context.Context, targets []Target) error {
	errs := make([]error, len(targets))
	sem := make(chan struct{}, s.cfg.MaxParallel)
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = fmt.Errorf("host %s: %w", t.Name, context.Cause(ctx))
				return
			}
			defer func() { <-sem }()
			errs[i] = s.connect(ctx, t)
		})
	}
	wg.Wait()
	var first error
	failed := 0
	for _, err := range errs {
		if err != nil {
			if first == nil {
				first = err
			}
			failed++
		}
	}
	if failed > 1 {
		return fmt.Errorf("%w (and %d more hosts failed)", first, failed-1)
	}
	return first
}

// connect resolves, authenticates and dials one target.
func (s *Spawner) connect(ctx context.Context, t Target) error {
	set, err := resolve(s.cfg, s.sshCfg, t.Name, t.User)
	if err != nil {
		return err
	}
	if t.Port != 0 {
		set.port = t.Port // a hostfile's port= wins, as its user= does
	}
	auth, tried, err := s.keys.auth(set)
	if err != nil {
		return err
	}
	check, err := s.hk.check(set.knownHosts)
	if err != nil {
		return fmt.Errorf("host %s: %w", t.Name, err)
	}
	h := &host{set: set, tried: tried, clientConfig: &ssh.ClientConfig{
		User:              set.user,
		Auth:              auth,
		HostKeyCallback:   check,
		HostKeyAlgorithms: s.hk.algorithms(set.knownHosts, set.addr()),
		Timeout:           s.cfg.ConnectTimeout,
	}}
	c, err := s.dial(ctx, h)
	if err != nil {
		return err
	}
	h.conns = []*conn{c}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		c.die(errClosed)
		return fmt.Errorf("host %s: %w", t.Name, errClosed)
	}
	if old := s.hosts[t.Name]; old != nil {
		c.die(errClosed) // connected twice: keep the first
		return nil
	}
	s.hosts[t.Name] = h
	s.cfg.Logf("connected to %s (%s@%s)", t.Name, set.user, set.addr())
	return nil
}

func (s *Spawner) host(name string) (*host, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.hosts[name]
	if h == nil {
		return nil, fmt.Errorf("host %s: not connected", name)
	}
	return h, nil
}

// Addrs returns ccrun's address on the connection to host (where processes there can reach
// this machine) and the host's address, as IP strings.
func (s *Spawner) Addrs(name string) (local, remote string) {
	h, err := s.host(name)
	if err != nil {
		return "", ""
	}
	c := h.conns[0]
	return ipOf(c.client.LocalAddr()), ipOf(c.client.RemoteAddr())
}

func ipOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	h, _, _ := net.SplitHostPort(a.String())
	return h
}

// acquire returns a live connection to h with a free session slot, dialling another one
// when all are full.
func (s *Spawner) acquire(ctx context.Context, h *host) (*conn, error) {
	for {
		h.mu.Lock()
		for _, c := range h.conns {
			if err := c.deadErr(); err != nil {
				h.mu.Unlock()
				return nil, c.lost(err)
			}
			if c.sessions < s.cfg.MaxSessions {
				c.sessions++
				h.mu.Unlock()
				return c, nil
			}
		}
		n := len(h.conns)
		h.mu.Unlock()
		h.dialMu.Lock()
		h.mu.Lock()
		grown := len(h.conns) != n
		h.mu.Unlock()
		if grown { // someone else dialled meanwhile; look again
			h.dialMu.Unlock()
			continue
		}
		c, err := s.dial(ctx, h)
		if err == nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				c.die(errClosed)
				err = &LostError{Host: h.set.alias, Err: errClosed}
			} else {
				h.mu.Lock()
				h.conns = append(h.conns, c)
				h.mu.Unlock()
			}
		}
		h.dialMu.Unlock()
		if err != nil {
			return nil, err
		}
	}
}

func (h *host) release(c *conn) {
	h.mu.Lock()
	c.sessions--
	h.mu.Unlock()
}

// Close removes preloaded copies, closes every connection and waits for the Spawner's
// goroutines. Processes still running are left to their lifeline (their stdin ends).
func (s *Spawner) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	hosts := make([]*host, 0, len(s.hosts))
	for _, h := range s.hosts {
		hosts = append(hosts, h)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, h := range hosts {
		h.preloadMu.Lock()
		dir := h.preloadDir
		h.preloadMu.Unlock()
		if dir == "" || h.conns[0].deadErr() != nil {
			continue
		}
		wg.Go(func() {
			c := h.conns[0]
			t := time.AfterFunc(s.cfg.ConnectTimeout, func() { c.die(errors.New("cleanup timed out")) })
			defer t.Stop()
			if _, err := c.run("rm -rf -- "+shellQuote(dir), nil); err != nil {
				s.cfg.Logf("host %s: remove %s: %v", h.set.alias, dir, err)
			}
		})
	}
	wg.Wait()
	for _, h := range hosts {
		h.mu.Lock()
		conns := append([]*conn(nil), h.conns...)
		h.mu.Unlock()
		for _, c := range conns {
			c.die(errClosed)
		}
	}
	s.keys.close()
	s.wg.Wait()
	return nil
}
