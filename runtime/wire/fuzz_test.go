package wire

import (
	"bytes"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/runtime/fuzzcheck"
)

// FuzzVerifyAck: the only ack a client accepts is the one EncodeAck makes
// for its job and hello; anything else fails with one line.
func FuzzVerifyAck(f *testing.F) {
	hello, err := EncodeHello(testJob, Hello{Kind: KindBootstrap, Rank: 1}, testNonce())
	if err != nil {
		f.Fatal(err)
	}
	good := EncodeAck(testJob, hello[:])
	f.Add(good[:])
	f.Add(good[:AckSize-1])
	other := EncodeAck(Job{ID: testJob.ID, Secret: []byte("other")}, hello[:])
	f.Add(other[:])
	f.Add(hello[:AckSize])
	f.Fuzz(func(t *testing.T, frame []byte) {
		err := VerifyAck(frame, testJob, hello[:])
		fuzzcheck.OneLine(t, err)
		if (err == nil) != bytes.Equal(frame, good[:]) {
			t.Fatalf("VerifyAck(%x) = %v; the one good ack is %x", frame, err, good)
		}
	})
}

// pipeConn is the server's side of a connection whose peer sent a fixed
// input: reads come from the input, writes are recorded, deadlines are
// accepted and ignored.
type pipeConn struct {
	net.Conn
	in      *fuzzcheck.Reader
	written bytes.Buffer
}

func (c *pipeConn) Read(p []byte) (int, error)      { return c.in.Read(p) }
func (c *pipeConn) Write(p []byte) (int, error)     { return c.written.Write(p) }
func (c *pipeConn) SetDeadline(time.Time) error     { return nil }
func (c *pipeConn) RemoteAddr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 4242} }
func (c *pipeConn) SetReadDeadline(time.Time) error { return nil }

// FuzzServer: whatever a stranger sends, the server reads at most one
// hello's bytes, answers only a hello DecodeHello accepts, and then with
// exactly its ack; a refusal writes nothing and is one line naming the
// peer.
func FuzzServer(f *testing.F) {
	good, err := EncodeHello(testJob, Hello{Kind: KindData, Rank: 2, Channel: 1}, testNonce())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good[:])
	f.Add(append(good[:], "trailing bytes the server leaves alone"...))
	f.Add(good[:20])
	f.Add([]byte("SSH-2.0-OpenSSH_9.6\r\n"))
	f.Add([]byte("cc-hel"))
	f.Fuzz(func(t *testing.T, in []byte) {
		c := &pipeConn{in: fuzzcheck.NewReader(in)}
		c.in.Chunk = 7
		h, err := Server(c, testJob, time.Time{})
		if c.in.Delivered() > HelloSize {
			t.Fatalf("the server read %d bytes, more than a hello", c.in.Delivered())
		}
		want, werr := DecodeHello(in[:min(len(in), HelloSize)], testJob)
		if err != nil {
			fuzzcheck.OneLine(t, err)
			if !strings.Contains(err.Error(), "192.0.2.1:4242") || c.written.Len() != 0 || werr == nil {
				t.Fatalf("refused with %q after writing %d bytes; DecodeHello says %v", err, c.written.Len(), werr)
			}
			return
		}
		ack := EncodeAck(testJob, in[:HelloSize])
		if werr != nil || h != want || !bytes.Equal(c.written.Bytes(), ack[:]) {
			t.Fatalf("accepted %+v (DecodeHello: %+v, %v) and wrote %x", h, want, werr, c.written.Bytes())
		}
	})
}
