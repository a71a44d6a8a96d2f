package sshspawn

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/seed-760dd1f1/cc/hw"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// sshd is a private OpenSSH server on 127.0.0.1 for one test.
type sshd struct {
	cmd        *exec.Cmd
	port       int
	key        string // client private key file
	knownHosts string
	hostKey    ssh.PublicKey
}

// startSSHD runs /usr/sbin/sshd on a free loopback port with a fresh host key and client
// key. It skips the test where that is impossible (not root, no sshd).
func startSSHD(t *testing.T, extra ...string) *sshd {
	t.Helper()
	const bin = "/usr/sbin/sshd"
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a private sshd that accepts root logins")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skipf("needs %s (apt-get install openssh-server)", bin)
	}
	if _, err := os.Stat("/run/sshd"); err != nil {
		t.Skip("needs sshd's privilege separation directory /run/sshd")
	}
	dir := t.TempDir()
	writeKey := func(name string) (ssh.PublicKey, string) {
		pub, priv, _ := ed25519.GenerateKey(rand.Reader)
		block, err := ssh.MarshalPrivateKey(priv, "")
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		k, _ := ssh.NewPublicKey(pub)
		return k, p
	}
	hostPub, hostKey := writeKey("host_ed25519")
	clientPub, clientKey := writeKey("id_ed25519")
	os.WriteFile(filepath.Join(dir, "authorized_keys"), ssh.MarshalAuthorizedKey(clientPub), 0o600)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cfg := fmt.Sprintf(`Port %d
ListenAddress 127.0.0.1
HostKey %s
AuthorizedKeysFile %s
PidFile %s
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
LogLevel ERROR
%s
`, port, hostKey, filepath.Join(dir, "authorized_keys"), filepath.Join(dir, "sshd.pid"), strings.Join(extra, "\n"))
	cfgFile := filepath.Join(dir, "sshd_config")
	os.WriteFile(cfgFile, []byte(cfg), 0o600)
	kh := filepath.Join(dir, "known_hosts")
	os.WriteFile(kh, []byte(knownhosts.Line([]string{fmt.Sprintf("[127.0.0.1]:%d", port)}, hostPub)+"\n"), 0o600)
	cmd := exec.Command(bin, "-D", "-e", "-f", cfgFile)
	var logb bytes.Buffer
	cmd.Stderr = &logb
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err == nil {
			c.Close()
			break
		}
		if i == 100 {
			t.Fatalf("sshd did not listen on %d: %v; log:\n%s", port, err, logb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &sshd{cmd: cmd, port: port, key: clientKey, knownHosts: kh, hostKey: hostPub}
}

func (d *sshd) config() Config {
	return Config{
		Port: d.port, User: "root", Identities: []string{d.key}, KnownHosts: []string{d.knownHosts},
		ConfigFile: "none", Home: "/nonexistent", LocalUser: "root",
		ConnectTimeout: 5 * time.Second, KeepaliveInterval: 200 * time.Millisecond, KeepaliveCountMax: 3,
	}
}

func newSpawner(t *testing.T, cfg Config) *Spawner {
	t.Helper()
	sp, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sp.Close() })
	return sp
}

// buf is a goroutine-safe buffer.
type buf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestSSHRunAndExit(t *testing.T) {
	d := startSSHD(t)
	sp := newSpawner(t, d.config())
	ctx := context.Background()
	if err := sp.Connect(ctx, []Target{{Name: "127.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	if local, remote := sp.Addrs("127.0.0.1"); local != "127.0.0.1" || remote != "127.0.0.1" {
		t.Errorf("Addrs = %s, %s; want 127.0.0.1 twice", local, remote)
	}
	var out, errb buf
	p, err := sp.Start(ctx, "127.0.0.1", Command{
		Argv:   []string{"sh", "-c", `echo "v=$V secret=$(cat $CC_JOB_SECRET_FILE)"; echo oops >&2; exit 7`},
		Env:    []string{"V=it's here"},
		Secret: "abc123",
	}, &out, &errb)
	if err != nil {
		t.Fatal(err)
	}
	if p.Pid() <= 0 {
		t.Errorf("pid %d, want > 0", p.Pid())
	}
	code, sig, err := p.Wait()
	if code != 7 || sig != 0 || err != nil {
		t.Errorf("Wait = %d, %v, %v; want 7", code, sig, err)
	}
	if got, want := out.String(), "v=it's here secret=abc123\n"; got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if got := errb.String(); got != "oops\n" {
		t.Errorf("stderr %q, want %q", got, "oops\n")
	}
}

func TestSSHSignalAndManySessions(t *testing.T) {
	d := startSSHD(t)
	cfg := d.config()
	cfg.MaxSessions = 2 // 5 ranks need 3 connections
	sp := newSpawner(t, cfg)
	ctx := context.Background()
	if err := sp.Connect(ctx, []Target{{Name: "127.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	var procs []*Process
	for range 5 {
		p, err := sp.Start(ctx, "127.0.0.1", Command{Argv: []string{"sleep", "30"}, Secret: "s"}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
	}
	h, _ := sp.host("127.0.0.1")
	h.mu.Lock()
	nconns := len(h.conns)
	h.mu.Unlock()
	if nconns != 3 {
		t.Errorf("%d connections for 5 sessions of at most 2, want 3", nconns)
	}
	var wg sync.WaitGroup
	for _, p := range procs {
		wg.Go(func() {
			if err := p.Signal(syscall.SIGTERM); err != nil {
				t.Errorf("Signal: %v", err)
			}
		})
	}
	wg.Wait()
	for i, p := range procs {
		if code, sig, err := p.Wait(); sig != syscall.SIGTERM || err != nil {
			t.Errorf("rank %d: Wait = %d, %v, %v; want SIGTERM", i, code, sig, err)
		}
		if err := syscall.Kill(-p.Pid(), 0); !errors.Is(err, syscall.ESRCH) {
			// The watcher may still be cleaning up; it ends within its 3 s bound.
			waitGone(t, p.Pid())
		}
	}
}

func waitGone(t *testing.T, pgid int) {
	t.Helper()
	for i := 0; i < 100; i++ {
		if errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("process group %d still exists", pgid)
}

func TestSSHLostConnection(t *testing.T) {
	d := startSSHD(t)
	sp := newSpawner(t, d.config())
	ctx := context.Background()
	if err := sp.Connect(ctx, []Target{{Name: "127.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	p, err := sp.Start(ctx, "127.0.0.1", Command{Argv: []string{"sleep", "30"}, Secret: "s"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Kill the server side of the connection (the listener's children), as a crashed host
	// would: the connection drops and the rank's lifeline (its stdin) ends with it.
	out, _ := exec.Command("pgrep", "-P", strconv.Itoa(d.cmd.Process.Pid)).Output()
	for _, f := range strings.Fields(string(out)) {
		pid, _ := strconv.Atoi(f)
		syscall.Kill(pid, syscall.SIGKILL)
	}
	_, _, err = p.Wait()
	var le *LostError
	if !errors.As(err, &le) || le.Host != "127.0.0.1" || !strings.HasPrefix(err.Error(), "lost the SSH connection to host 127.0.0.1: ") {
		t.Errorf("Wait error %v, want a *LostError naming the host", err)
	}
	waitGone(t, p.Pid())
	if _, err := sp.Start(ctx, "127.0.0.1", Command{Argv: []string{"true"}, Secret: "s"}, nil, nil); !errors.As(err, &le) {
		t.Errorf("Start on a lost host: %v, want a *LostError", err)
	}
}

func TestSSHPreload(t *testing.T) {
	d := startSSHD(t)
	sp := newSpawner(t, d.config())
	ctx := context.Background()
	if err := sp.Connect(ctx, []Target{{Name: "127.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	prog := filepath.Join(t.TempDir(), "hello.sh")
	os.WriteFile(prog, []byte("#!/bin/sh\necho preloaded \"$@\"\n"), 0o755)
	remote, err := sp.Preload(ctx, "127.0.0.1", prog)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := sp.Preload(ctx, "127.0.0.1", prog); again != remote {
		t.Errorf("second Preload = %s, want the first copy %s", again, remote)
	}
	if remote == prog || filepath.Base(remote) != "hello.sh" {
		t.Errorf("remote path %s, want a copy named hello.sh elsewhere", remote)
	}
	var out buf
	p, err := sp.Start(ctx, "127.0.0.1", Command{Argv: []string{remote, "x"}, Secret: "s"}, &out, nil)
	if err != nil {
		t.Fatal(err)
	}
	if code, _, err := p.Wait(); code != 0 || err != nil || out.String() != "preloaded x\n" {
		t.Errorf("Wait = %d, %v; out %q", code, err, out.String())
	}
	sp.Close()
	if _, err := os.Stat(filepath.Dir(remote)); !os.IsNotExist(err) {
		t.Errorf("preload directory %s still there after Close: %v", filepath.Dir(remote), err)
	}
}

func TestSSHConnectErrors(t *testing.T) {
	d := startSSHD(t)
	ctx := context.Background()

	cfg := d.config()
	cfg.KnownHosts = []string{writeKnownHosts(t, knownhosts.Line([]string{fmt.Sprintf("[127.0.0.1]:%d", d.port)}, newHostKey(t)))}
	err := newSpawner(t, cfg).Connect(ctx, []Target{{Name: "127.0.0.1"}})
	if err == nil || !strings.Contains(err.Error(), "host 127.0.0.1: host key of 127.0.0.1:"+strconv.Itoa(d.port)+" does not match") ||
		!strings.Contains(err.Error(), "ssh-keygen -R") {
		t.Errorf("wrong host key: %v", err)
	}
	if unreachable(err) {
		t.Errorf("wrong host key: %v is an UnreachableError: the host answered", err)
	}

	cfg = d.config()
	cfg.KnownHosts = []string{filepath.Join(t.TempDir(), "kh")}
	cfg.AcceptNew = true
	if err := newSpawner(t, cfg).Connect(ctx, []Target{{Name: "127.0.0.1"}}); err != nil {
		t.Errorf("--ssh-accept-new on first contact: %v", err)
	}

	cfg = d.config()
	_, other := newKeyFile(t)
	cfg.Identities = []string{other}
	err = newSpawner(t, cfg).Connect(ctx, []Target{{Name: "127.0.0.1"}})
	if err == nil || !strings.HasPrefix(err.Error(), "host 127.0.0.1: authentication as root failed (tried "+other+")") {
		t.Errorf("unauthorised key: %v", err)
	}
	if unreachable(err) {
		t.Errorf("unauthorised key: %v is an UnreachableError: the host answered", err)
	}

	cfg = d.config()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	cfg.Port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	err = newSpawner(t, cfg).Connect(ctx, []Target{{Name: "127.0.0.1"}, {Name: "localhost"}})
	if err == nil || !strings.Contains(err.Error(), "host 127.0.0.1: dial tcp 127.0.0.1:") || !strings.Contains(err.Error(), "connection refused") ||
		!strings.HasSuffix(err.Error(), "(and 1 more hosts failed)") {
		t.Errorf("refused port: %v", err)
	}
	if !unreachable(err) {
		t.Errorf("refused port: %v is not an UnreachableError", err)
	}

	// A server that accepts and hangs up at once: no SSH handshake.
	ln, _ = net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	cfg = d.config()
	cfg.Port = ln.Addr().(*net.TCPAddr).Port
	err = newSpawner(t, cfg).Connect(ctx, []Target{{Name: "127.0.0.1"}})
	if err == nil || !strings.HasPrefix(err.Error(), "host 127.0.0.1: SSH handshake with 127.0.0.1:") || !unreachable(err) {
		t.Errorf("server hanging up: %v, want an UnreachableError naming the handshake", err)
	}

	cfg = d.config()
	err = newSpawner(t, cfg).Connect(ctx, []Target{{Name: "no-such-host.invalid"}})
	if err == nil || !strings.HasPrefix(err.Error(), "host no-such-host.invalid: dial tcp: lookup no-such-host.invalid") {
		t.Errorf("unknown host: %v", err)
	}
	if !unreachable(err) {
		t.Errorf("unknown host: %v is not an UnreachableError", err)
	}
}

// unreachable reports whether err is an UnreachableError.
func unreachable(err error) bool {
	var u *UnreachableError
	return errors.As(err, &u) && u.Unreachable()
}

func newKeyFile(t *testing.T) (ssh.PublicKey, string) {
	t.Helper()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	block, _ := ssh.MarshalPrivateKey(priv, "")
	p := filepath.Join(t.TempDir(), "id")
	os.WriteFile(p, pem.EncodeToMemory(block), 0o600)
	k, _ := ssh.NewPublicKey(pub)
	return k, p
}

// TestSSHHostID: one command tells which machine a connected host is; the test sshd runs
// on this machine, so it is this machine's identity.
func TestSSHHostID(t *testing.T) {
	d := startSSHD(t)
	sp := newSpawner(t, d.config())
	ctx := context.Background()
	if err := sp.Connect(ctx, []Target{{Name: "127.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	want, err := hw.HostIdentity(hw.Root())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := sp.HostID(ctx, "127.0.0.1"); got != want || err != nil {
		t.Errorf("HostID = %+v, %v; want %+v", got, err, want)
	}
	if _, err := sp.HostID(ctx, "elsewhere"); err == nil || !strings.Contains(err.Error(), "host elsewhere: not connected") {
		t.Errorf("HostID of a host not connected: %v, want host elsewhere: not connected", err)
	}
}

// TestSSHListenLoopback: a port on the host's loopback reaches ccrun through the SSH
// connection (what a rank there writes arrives on Accept); a host whose sshd refuses
// forwarding says so.
func TestSSHListenLoopback(t *testing.T) {
	d := startSSHD(t)
	sp := newSpawner(t, d.config())
	ctx := context.Background()
	if err := sp.Connect(ctx, []Target{{Name: "127.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	ln, err := sp.ListenLoopback("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	addr, ok := ln.Addr().(*net.TCPAddr)
	if !ok || !addr.IP.Equal(net.IPv4(127, 0, 0, 1)) || addr.Port == 0 {
		t.Fatalf("Addr %v, want 127.0.0.1 and the port sshd chose", ln.Addr())
	}
	var out, errb buf
	p, err := sp.Start(ctx, "127.0.0.1", Command{
		Argv: []string{"bash", "-c", fmt.Sprintf(`echo "hello from the host" >/dev/tcp/127.0.0.1/%d`, addr.Port)},
	}, &out, &errb)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(30 * time.Second)) // hang guard
	got, _ := io.ReadAll(nc)
	if string(got) != "hello from the host\n" {
		t.Errorf("read %q, want %q", got, "hello from the host\n")
	}
	if code, sig, err := p.Wait(); code != 0 || sig != 0 || err != nil {
		t.Errorf("Wait = %d, %v, %v; stderr %q", code, sig, err, errb.String())
	}

	d = startSSHD(t, "AllowTcpForwarding no")
	sp = newSpawner(t, d.config())
	if err := sp.Connect(ctx, []Target{{Name: "127.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	if ln, err := sp.ListenLoopback("127.0.0.1"); err == nil || !strings.Contains(err.Error(), "host 127.0.0.1: remote port forward to its 127.0.0.1: ") {
		t.Errorf("with AllowTcpForwarding no: %v, %v; want the refusal", ln, err)
	}
}
