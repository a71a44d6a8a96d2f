package bootstrap

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
)

// LivenessTimeout is how long a silent peer host may go unnoticed on a bootstrap
// connection: TCP keepalive probes after 10 s idle, every 5 s, 4 unanswered probes; and on
// Linux TCP_USER_TIMEOUT, which also covers a connection with unacknowledged data (where
// keepalive does not apply and the kernel would otherwise retransmit for ~15 minutes).
// Probes are answered by the peer's kernel, so a busy or stopped process never trips it.
const LivenessTimeout = 30 * time.Second

// tuneConn sets the liveness options on a TCP connection; other connections are left alone.
func tuneConn(c net.Conn) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: 10 * time.Second, Interval: 5 * time.Second, Count: 4})
	setUserTimeout(tc, LivenessTimeout)
}

// lostCause words the error that ended a rank's connection, for the abort message.
func lostCause(err error) string {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "its bootstrap connection closed without a clean Close (the process exited or was killed)"
	case errors.Is(err, syscall.ECONNRESET):
		return "its bootstrap connection was reset (the process exited or was killed)"
	case errors.Is(err, syscall.ETIMEDOUT):
		return "its host stopped answering for " + LivenessTimeout.String() + " (down or cut off)"
	}
	return "its bootstrap connection failed: " + err.Error()
}

// rootLostCause words the error that ended the connection to the root.
func rootLostCause(err error) error {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("the root closed the connection (it exited, was killed or shut down): %w", err)
	case errors.Is(err, syscall.ECONNRESET):
		return fmt.Errorf("the connection was reset (the root exited or was killed): %w", err)
	case errors.Is(err, syscall.ETIMEDOUT):
		return fmt.Errorf("the root's host stopped answering for %v (down or cut off): %w", LivenessTimeout, err)
	}
	return err
}
