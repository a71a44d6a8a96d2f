//go:build !linux

package bootstrap

import (
	"net"
	"time"
)

// setUserTimeout is a no-op where TCP_USER_TIMEOUT is not available; keepalive remains.
func setUserTimeout(*net.TCPConn, time.Duration) {}
