package wire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"time"
)

// ConnectTimeout bounds one TCP connect attempt, so that a host that drops SYNs costs a
// retry rather than the kernel's two minutes.
const ConnectTimeout = 10 * time.Second

// Dial connects to addr and runs Client on the connection.
//
// A connect that fails with "refused", "unreachable", a timeout, EINTR/EAGAIN or a temporary
// DNS error is retried up to retryCnt times; before retry i (1-based) Dial sleeps i*sleep,
// NCCL's linear backoff. With NCCL's defaults (NCCL_SOCKET_RETRY_CNT=34,
// NCCL_SOCKET_RETRY_SLEEP_MSEC=100) that is 35 attempts and 100ms*(1+2+...+34) = 59.5 s of
// sleep. Other connect errors and handshake errors are not retried: a server that rejects our
// hello will reject it again. ctx cancels the sleeps, the connects and the handshake. The
// handshake deadline is ctx's deadline or HandshakeTimeout, whichever is earlier.
//
// Every error names addr and the number of attempts made.
func Dial(ctx context.Context, addr string, job Job, h Hello, retryCnt int, sleep time.Duration) (net.Conn, error) {
	if retryCnt < 0 {
		return nil, fmt.Errorf("dial %s: retry count %d, want >= 0", addr, retryCnt)
	}
	if err := job.Validate(); err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	d := net.Dialer{Timeout: ConnectTimeout}
	attempts := 0
	for {
		attempts++
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			if err := handshake(ctx, conn, job, h); err != nil {
				conn.Close()
				return nil, fmt.Errorf("dial %s: attempt %d: %w", addr, attempts, err)
			}
			return conn, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("dial %s: gave up after %d attempts: %w (last error: %v)", addr, attempts, context.Cause(ctx), err)
		}
		if !retryable(err) {
			return nil, fmt.Errorf("dial %s: attempt %d: %w", addr, attempts, err)
		}
		if attempts > retryCnt {
			return nil, fmt.Errorf("dial %s: gave up after %d attempts: %w", addr, attempts, err)
		}
		t := time.NewTimer(time.Duration(attempts) * sleep)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("dial %s: gave up after %d attempts: %w (last error: %v)", addr, attempts, context.Cause(ctx), err)
		}
	}
}

// handshake runs Client with ctx able to cut it short.
func handshake(ctx context.Context, conn net.Conn, job Job, h Hello) error {
	deadline := time.Now().Add(HandshakeTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	// The AfterFunc only moves the deadline into the past; Client returns at once and its
	// error is replaced by ctx's cause below.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	err := Client(conn, job, h, deadline)
	if !stop() && ctx.Err() != nil {
		if err == nil {
			// The handshake completed but the deadline may have been poisoned after it.
			return context.Cause(ctx)
		}
		return fmt.Errorf("%w (%v)", context.Cause(ctx), err)
	}
	return err
}

// retryable reports whether a connect error is worth another attempt, as NCCL's socket
// connect loop decides (ECONNREFUSED, ETIMEDOUT, EHOSTUNREACH, EINTR, EAGAIN), plus
// ENETUNREACH and temporary name-resolution failures that show up while a cluster boots.
func retryable(err error) bool {
	for _, e := range []error{syscall.ECONNREFUSED, syscall.ETIMEDOUT, syscall.EHOSTUNREACH,
		syscall.ENETUNREACH, syscall.EINTR, syscall.EAGAIN} {
		if errors.Is(err, e) {
			return true
		}
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns.IsTemporary || dns.IsTimeout
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
