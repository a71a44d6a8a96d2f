//go:build !linux

package tcp

import (
	"net"
	"time"
)

// setUserTimeout does nothing where TCP_USER_TIMEOUT does not exist: the
// keepalives alone detect a silent peer.
func setUserTimeout(*net.TCPConn, time.Duration) {}
