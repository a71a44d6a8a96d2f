package tcp

import (
	"net"
	"time"

	"github.com/seed-760dd1f1/cc/protocols"
)

// Duplex returns both ends of a two-way Simple connection over one socket
// that has passed its handshake: what is posted on the sender goes out on
// sock, what the peer posts arrives at the receiver. The CollNet
// aggregation server and its heads talk this way (the head dials, once
// per channel), so that the server needs no listener on the ranks' side
// and the ranks none for the server. peer names the other end in errors;
// onError is told when the receiving side fails on its own.
//
// The socket gets TCP keepalives and a user timeout of a few seconds, so
// that a peer cut off the network (no reset, no FIN) is an error within
// about that time even on a connection with nothing to send, instead of
// a wait for TCP's retransmission timeout.
func Duplex(sock net.Conn, stepBytes int, peer string, onError func(error)) (*SendConn, *RecvConn) {
	setSockOpts(sock)
	SetLiveness(sock, DuplexTimeout)
	// A Simple receiver has a reader goroutine, no drainer: no group.
	return newSendConn([]net.Conn{sock}, stepBytes, peer, nil),
		newRecvConn(protocols.Simple, []net.Conn{sock}, stepBytes, peer, onError, 0, nil)
}

// DuplexTimeout is how long a Duplex socket's peer may stay silent to
// keepalive probes, or leave sent data unacknowledged, before the
// connection fails.
const DuplexTimeout = 5 * time.Second

// SetLiveness turns on keepalive probes every second after a second of
// silence and TCP_USER_TIMEOUT = d, where the socket allows it: a peer cut
// off the network is an error within about d.
func SetLiveness(c net.Conn, d time.Duration) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return
	}
	tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: time.Second, Interval: time.Second, Count: int(d / time.Second)})
	setUserTimeout(tc, d)
}
