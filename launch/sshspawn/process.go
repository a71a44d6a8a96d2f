package sshspawn

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/crypto/ssh"
)

// Process is a program running on a remote host.
type Process struct {
	host     string
	conn     *conn
	sess     *ssh.Session
	stdin    io.WriteCloser
	pid      int
	copyDone chan struct{}
	waitOnce sync.Once
	code     int
	sig      syscall.Signal
	err      error
}

// Start runs cmd on host, its stdout and stderr copied to stdout and stderr. It returns
// once the remote side has reported the process id, or earlier with pid 0 if the remote
// wrapper failed before (Wait then tells why).
func (s *Spawner) Start(ctx context.Context, hostName string, cmd Command, stdout, stderr io.Writer) (*Process, error) {
	if len(cmd.Argv) == 0 {
		return nil, errors.New("no program to run")
	}
	if strings.ContainsAny(cmd.Secret, "\n\r") {
		return nil, errors.New("job secret contains a newline")
	}
	c, err := s.sessionSlot(ctx, hostName)
	if err != nil {
		return nil, err
	}
	p, err := s.start(ctx, c, cmd, stdout, stderr)
	if err != nil {
		c.host.release(c)
		return nil, err
	}
	return p, nil
}

func (s *Spawner) start(ctx context.Context, c *conn, cmd Command, stdout, stderr io.Writer) (*Process, error) {
	alias := c.host.set.alias
	sess, stdin, out, err := c.startSession(remoteCommand(cmd), stderr)
	if err != nil {
		return nil, err
	}
	if stdout == nil {
		stdout = io.Discard
	}
	stop := context.AfterFunc(ctx, func() { sess.Close() })
	_, werr := io.WriteString(stdin, cmd.Secret+"\n")
	br := bufio.NewReader(out)
	line, rerr := br.ReadString('\n')
	if !stop() {
		sess.Close()
		return nil, fmt.Errorf("host %s: start: %w", alias, context.Cause(ctx))
	}
	p := &Process{host: alias, conn: c, sess: sess, stdin: stdin, copyDone: make(chan struct{})}
	if pid, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), pidPrefix); ok && werr == nil && rerr == nil {
		p.pid, _ = strconv.Atoi(pid)
	} else if line != "" {
		io.WriteString(stdout, line)
	}
	s.wg.Go(func() {
		io.Copy(stdout, br)
		close(p.copyDone)
	})
	return p, nil
}

// startSession runs command in a new session whose stderr goes to stderr, and returns
// the session and its stdin and stdout.
func (c *conn) startSession(command string, stderr io.Writer) (*ssh.Session, io.WriteCloser, io.Reader, error) {
	alias := c.host.set.alias
	sess, err := c.client.NewSession()
	if err != nil {
		if c.deadErr() != nil {
			return nil, nil, nil, c.lost(err)
		}
		return nil, nil, nil, fmt.Errorf("host %s: open session: %w", alias, err)
	}
	stdin, err := sess.StdinPipe()
	if err != nil {
		sess.Close()
		return nil, nil, nil, err
	}
	out, err := sess.StdoutPipe()
	if err != nil {
		sess.Close()
		return nil, nil, nil, err
	}
	if stderr == nil {
		stderr = io.Discard
	}
	sess.Stderr = stderr
	if err := sess.Start(command); err != nil {
		sess.Close()
		return nil, nil, nil, fmt.Errorf("host %s: start: %w", alias, err)
	}
	return sess, stdin, out, nil
}

// Pid is the process id on the remote host (also its process group); 0 if the remote
// wrapper failed before starting it.
func (p *Process) Pid() int { return p.pid }

// Signal sends sig to the process group, from a control session on the same connection
// (signal requests over SSH are dropped by sshd for root logins).
func (p *Process) Signal(sig syscall.Signal) error {
	if p.pid <= 0 {
		return nil
	}
	return p.conn.signal(sig, p.pid)
}

// Wait waits for the process to end and its output to be copied, and returns its exit code,
// or the signal that killed it, or a *LostError when the connection broke first.
func (p *Process) Wait() (code int, sig syscall.Signal, err error) {
	p.waitOnce.Do(func() {
		werr := p.sess.Wait()
		<-p.copyDone
		p.stdin.Close()
		p.sess.Close()
		p.conn.host.release(p.conn)
		var ee *ssh.ExitError
		switch {
		case werr == nil:
		case errors.As(werr, &ee) && ee.Signal() != "":
			p.sig = signalNames[ee.Signal()]
			if p.sig == 0 {
				p.code = 128 + 64 // unknown signal name: a status no signal produces
			}
		case errors.As(werr, &ee):
			p.code = ee.ExitStatus()
		default:
			p.err = p.conn.lost(werr)
		}
	})
	return p.code, p.sig, p.err
}

// Preload copies the executable at localPath to host once and returns its path there, in a
// fresh directory that Close removes.
func (s *Spawner) Preload(ctx context.Context, hostName, localPath string) (string, error) {
	return s.PreloadAs(ctx, hostName, localPath, filepath.Base(localPath))
}

// PreloadAs copies the executable at localPath to host under name, once per name, into
// the host's preload directory (created by the first copy, removed by Close), and returns
// its path there.
func (s *Spawner) PreloadAs(ctx context.Context, hostName, localPath, name string) (string, error) {
	h, err := s.host(hostName)
	if err != nil {
		return "", err
	}
	h.preloadMu.Lock()
	defer h.preloadMu.Unlock()
	if h.preloaded[name] {
		return path.Join(h.preloadDir, name), nil
	}
	f, err := os.Open(localPath)
	if err != nil {
		return "", err
	}
	defer f.Close()
	c := h.conns[0]
	stop := context.AfterFunc(ctx, func() { c.die(context.Cause(ctx)) })
	defer stop()
	out, err := c.run(preloadCommand(h.preloadDir, name), f)
	if err != nil {
		return "", fmt.Errorf("copy %s: %w", localPath, err)
	}
	dir := strings.TrimSpace(string(out))
	if !strings.HasPrefix(dir, "/") || strings.Contains(dir, "\n") {
		return "", fmt.Errorf("copy %s: unexpected answer %q", localPath, trimOutput(out))
	}
	h.preloadDir = dir
	if h.preloaded == nil {
		h.preloaded = map[string]bool{}
	}
	h.preloaded[name] = true
	s.cfg.Logf("copied %s to %s:%s", localPath, hostName, path.Join(dir, name))
	return path.Join(dir, name), nil
}
