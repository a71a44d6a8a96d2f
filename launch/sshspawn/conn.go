package sshspawn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"
)

// LostError is a connection to a host that broke: the host went away, stopped answering
// keepalives, or closed the connection.
type LostError struct {
	Host string
	Err  error
}

// Error reads "lost the SSH connection to host tb3: no answer to 3 keepalives in 15s".
func (e *LostError) Error() string {
	return fmt.Sprintf("lost the SSH connection to host %s: %v", e.Host, e.Err)
}

// Unwrap returns the cause.
func (e *LostError) Unwrap() error { return e.Err }

// errClosed is the cause of connections ended by Close.
var errClosed = errors.New("connection closed by ccrun")

// conn is one SSH connection to a host.
//
// Goroutines: a keepalive loop (ends when the connection is dead) and at most one keepalive
// request in flight (ends when the request is answered or the client closes).
type conn struct {
	host   *host
	client *ssh.Client
	wg     *sync.WaitGroup // the Spawner's

	mu       sync.Mutex
	sessions int   // rank sessions open
	err      error // why the connection died; nil while alive
	dead     chan struct{}

	sigMu    sync.Mutex
	sigQueue []signalReq
	sigBusy  bool
}

type signalReq struct {
	sig  syscall.Signal
	pgid int
	done chan error
}

// dial opens one connection to h.
func (s *Spawner) dial(ctx context.Context, h *host) (*conn, error) {
	timeout := s.cfg.ConnectTimeout
	d := net.Dialer{Timeout: timeout, KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3}}
	nc, err := d.DialContext(ctx, "tcp", h.set.addr())
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("host %s: %w", h.set.alias, err)
		}
		return nil, &UnreachableError{Host: h.set.alias, Err: err}
	}
	nc.SetDeadline(time.Now().Add(timeout))
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	c, chans, reqs, err := ssh.NewClientConn(nc, h.set.addr(), h.clientConfig)
	stop()
	if err != nil {
		nc.Close()
		return nil, h.handshakeError(ctx, err)
	}
	nc.SetDeadline(time.Time{})
	cn := &conn{host: h, client: ssh.NewClient(c, chans, reqs), wg: &s.wg, dead: make(chan struct{})}
	s.wg.Go(func() { cn.keepalive(s.cfg.KeepaliveInterval, s.cfg.KeepaliveCountMax) })
	s.wg.Go(func() {
		err := cn.client.Wait()
		if err == nil {
			err = errors.New("the server closed the connection")
		}
		cn.die(err)
	})
	return cn, nil
}

// handshakeError turns an SSH handshake failure into one line naming the host and the fix.
func (h *host) handshakeError(ctx context.Context, err error) error {
	var hk *HostKeyError
	switch {
	case ctx.Err() != nil:
		return fmt.Errorf("host %s: %w", h.set.alias, context.Cause(ctx))
	case errors.As(err, &hk):
		return fmt.Errorf("host %s: %w", h.set.alias, hk)
	case isAuthFailure(err):
		return fmt.Errorf("host %s: authentication as %s failed (tried %s): add the public key to ~%s/.ssh/authorized_keys on %s, or pass -i/--ssh-identity",
			h.set.alias, h.set.user, strings.Join(h.tried, ", "), h.set.user, h.set.alias)
	case errors.Is(err, syscall.ECONNRESET), isTimeout(err):
		return &UnreachableError{Host: h.set.alias, Err: fmt.Errorf("SSH handshake with %s failed: %w", h.set.addr(), err)}
	}
	return &UnreachableError{Host: h.set.alias, Err: fmt.Errorf("SSH handshake with %s: %w", h.set.addr(), err)}
}

// UnreachableError is a host that could not be reached: no TCP connection, or no SSH
// handshake (a timeout, a reset, a server that hung up). A host that answered and refused
// (host key, authentication) is another error.
type UnreachableError struct {
	Host string
	Err  error
}

// Error reads "host tb7: dial tcp 10.252.0.7:22: i/o timeout".
func (e *UnreachableError) Error() string { return fmt.Sprintf("host %s: %v", e.Host, e.Err) }

// Unwrap returns the cause.
func (e *UnreachableError) Unwrap() error { return e.Err }

// Unreachable reports true: launch.Unreachable recognizes the error by this method.
func (e *UnreachableError) Unreachable() bool { return true }

func isAuthFailure(err error) bool {
	return err != nil && errorsContains(err, "unable to authenticate")
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func errorsContains(err error, s string) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if strings.Contains(err.Error(), s) {
			return true
		}
	}
	return false
}

// trimOutput shortens a control command's output for an error message.
func trimOutput(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 500 {
		s = s[:500] + "..."
	}
	return strings.ReplaceAll(s, "\n", "; ")
}

// keepalive sends keepalive@openssh.com every interval; countMax unanswered in a row
// declare the connection lost (like ServerAliveInterval/ServerAliveCountMax).
func (c *conn) keepalive(interval time.Duration, countMax int) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var pending chan error
	missed := 0
	for {
		select {
		case <-c.dead:
			return
		case err := <-pending:
			pending = nil
			if err != nil {
				c.die(err)
				return
			}
			missed = 0
		case <-t.C:
			if pending != nil {
				missed++
				if missed >= countMax {
					c.die(fmt.Errorf("no answer to %d keepalives in %v", countMax, time.Duration(countMax)*interval))
					return
				}
				continue
			}
			pending = make(chan error, 1)
			ch := pending
			c.wg.Go(func() {
				_, _, err := c.client.SendRequest("keepalive@openssh.com", true, nil)
				ch <- err
			})
		}
	}
}

// die marks the connection dead with err (the first cause wins) and closes it.
func (c *conn) die(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	close(c.dead)
	c.mu.Unlock()
	c.client.Close()
}

// deadErr returns why the connection died, or nil.
func (c *conn) deadErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// lost wraps the connection's death (or err, if it is still alive) as a LostError.
func (c *conn) lost(err error) error {
	if d := c.deadErr(); d != nil {
		err = d
	}
	return &LostError{Host: c.host.set.alias, Err: err}
}

// run runs a short control command and returns its combined output.
func (c *conn) run(cmd string, stdin io.Reader) ([]byte, error) {
	sess, err := c.client.NewSession()
	if err != nil {
		return nil, c.lost(err)
	}
	defer sess.Close()
	sess.Stdin = stdin
	out, err := sess.CombinedOutput(cmd)
	if err != nil {
		var ee *ssh.ExitError
		if errors.As(err, &ee) {
			return out, fmt.Errorf("%s: %s", ee, trimOutput(out))
		}
		return out, c.lost(err)
	}
	return out, nil
}

// signal sends sig to process group pgid. Concurrent requests on one connection share
// one control session: the first caller sends every request queued meanwhile.
func (c *conn) signal(sig syscall.Signal, pgid int) error {
	req := signalReq{sig: sig, pgid: pgid, done: make(chan error, 1)}
	c.sigMu.Lock()
	c.sigQueue = append(c.sigQueue, req)
	if c.sigBusy {
		c.sigMu.Unlock()
		return <-req.done
	}
	c.sigBusy = true
	c.sigMu.Unlock()
	for {
		c.sigMu.Lock()
		batch := c.sigQueue
		c.sigQueue = nil
		if len(batch) == 0 {
			c.sigBusy = false
			c.sigMu.Unlock()
			break
		}
		c.sigMu.Unlock()
		_, err := c.run(killCommand(batch), nil)
		for _, r := range batch {
			r.done <- err
		}
	}
	return <-req.done
}
