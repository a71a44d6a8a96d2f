package sshspawn

import (
	"fmt"
	"net"
	"sync"
)

// ListenLoopback opens a port on host's loopback (127.0.0.1, a port sshd picks) whose
// connections reach the returned listener through the host's SSH connection: a remote
// port forward (RFC 4254 "tcpip-forward", ssh -R). Its Addr is the port as processes on
// host reach it; nothing listens on a routable address. It fails when the host's sshd
// refuses forwarding (AllowTcpForwarding no, DisableForwarding).
//
// Close cancels the forward without waiting for sshd's answer (a cut host never gives
// one): the cancellation finishes, or fails with the connection, before the Spawner's
// Close returns.
func (s *Spawner) ListenLoopback(hostName string) (net.Listener, error) {
	h, err := s.host(hostName)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	c := h.conns[0]
	h.mu.Unlock()
	ln, err := c.client.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("host %s: remote port forward to its 127.0.0.1: %w", hostName, err)
	}
	return &forwardListener{Listener: ln, wg: &s.wg}, nil
}

// forwardListener is a remote forward whose Close does not wait for the host.
type forwardListener struct {
	net.Listener
	wg   *sync.WaitGroup
	once sync.Once
}

// Close ends Accept at once and cancels the forward in the background.
func (l *forwardListener) Close() error {
	l.once.Do(func() { l.wg.Go(func() { l.Listener.Close() }) })
	return nil
}
