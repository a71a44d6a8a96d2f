package sshspawn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
)

// Stream is a program running on a remote host in a session of its own whose stdin and
// stdout belong to the caller: the session of ccrun's per-host agent (launch/agent). The
// session is the program's lifeline: when ccrun closes Stdin, closes the Stream or dies,
// or the connection breaks, the program reads EOF.
type Stream struct {
	// Stdin and Stdout are the program's standard input and output.
	Stdin  io.WriteCloser
	Stdout io.Reader

	host      *host
	conn      *conn
	sess      *ssh.Session
	closeOnce sync.Once
}

// OpenScript runs `exec /bin/sh -c SCRIPT NAME ARGS...` on host in a new session (one
// of the connection's MaxSessions) and returns its streams; the program's stderr goes to
// stderr. It returns as soon as the session has started.
func (s *Spawner) OpenScript(ctx context.Context, hostName, script, name string, args []string, stderr io.Writer) (*Stream, error) {
	c, err := s.sessionSlot(ctx, hostName)
	if err != nil {
		return nil, err
	}
	st, err := c.openStream(script, name, args, stderr)
	if err != nil {
		c.host.release(c)
		return nil, err
	}
	return st, nil
}

// sessionSlot takes a session slot on a live connection to host; release it when the
// session ends.
func (s *Spawner) sessionSlot(ctx context.Context, hostName string) (*conn, error) {
	h, err := s.host(hostName)
	if err != nil {
		return nil, err
	}
	return s.acquire(ctx, h)
}

func (c *conn) openStream(script, name string, args []string, stderr io.Writer) (*Stream, error) {
	parts := []string{"exec", "/bin/sh", "-c", shellQuote(script), shellQuote(name)}
	for _, a := range args {
		parts = append(parts, shellQuote(a))
	}
	sess, stdin, stdout, err := c.startSession(strings.Join(parts, " "), stderr)
	if err != nil {
		return nil, err
	}
	return &Stream{Stdin: stdin, Stdout: stdout, host: c.host, conn: c, sess: sess}, nil
}

// Wait waits for the program to end: nil for exit status 0, an error naming the status or
// signal, or a *LostError when the connection broke first. Call it once Stdout has ended.
func (st *Stream) Wait() error {
	err := st.sess.Wait()
	var ee *ssh.ExitError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ee) && ee.Signal() != "":
		return fmt.Errorf("killed by signal %s", ee.Signal())
	case errors.As(err, &ee):
		return fmt.Errorf("exit status %d", ee.ExitStatus())
	}
	return st.conn.lost(err)
}

// Lost returns the *LostError of the stream's connection if it is dead, else nil.
func (st *Stream) Lost() error {
	if st.conn.deadErr() == nil {
		return nil
	}
	return st.conn.lost(nil)
}

// Close ends the session (the program reads EOF) and frees its slot on the connection.
func (st *Stream) Close() error {
	st.closeOnce.Do(func() {
		st.Stdin.Close()
		st.sess.Close()
		st.host.release(st.conn)
	})
	return nil
}
