package wire

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// hangGuard bounds every blocking step of a test; it is a safety net, never a speed check.
const hangGuard = 20 * time.Second

// pair returns both ends of a fresh loopback TCP connection.
func pair(t *testing.T) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() {
		c, err := ln.Accept()
		ch <- res{c, err}
	}()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		client.Close()
		t.Fatal(r.err)
	}
	t.Cleanup(func() { client.Close(); r.c.Close() })
	return client, r.c
}

func TestHandshakeGood(t *testing.T) {
	for _, job := range []Job{testJob, {ID: "no-secret"}} {
		c, s := pair(t)
		want := Hello{Kind: KindData, Rank: 7, Channel: 3, Index: 1}
		errc := make(chan error, 1)
		go func() { errc <- Client(c, job, want, time.Now().Add(hangGuard)) }()
		got, err := Server(s, job, time.Now().Add(hangGuard))
		if err != nil {
			t.Fatalf("Server: %v", err)
		}
		if cerr := <-errc; cerr != nil {
			t.Fatalf("Client: %v", cerr)
		}
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
		// The connection is usable afterwards, with no deadline left behind.
		go func() { _, err := c.Write([]byte("ping")); errc <- err }()
		buf := make([]byte, 4)
		if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "ping" {
			t.Errorf("after handshake: read %q, %v", buf, err)
		}
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}
}

// TestServerRejects feeds the server bad openings. Each must fail with the named reason and
// the remote address, and the server must write nothing back.
func TestServerRejects(t *testing.T) {
	hello := func(job Job) []byte {
		f, err := EncodeHello(job, Hello{Kind: KindBootstrap, Rank: 1}, testNonce())
		if err != nil {
			t.Fatal(err)
		}
		return f[:]
	}
	badMagic := hello(testJob)
	badMagic[3] = 'X'
	for _, tc := range []struct {
		name     string
		send     []byte
		hold     bool          // keep the connection open after sending
		deadline time.Duration // server deadline
		want     error
		wantText string
	}{
		{"wrong secret", hello(Job{ID: testJob.ID, Secret: []byte("nope")}), false, hangGuard, ErrMAC, ""},
		{"wrong job", hello(Job{ID: "other-job", Secret: testJob.Secret}), false, hangGuard, ErrJob, `"other-job"`},
		{"wrong magic", badMagic, true, hangGuard, ErrMagic, ""},
		{"garbage", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), true, hangGuard, ErrMagic, `"GET / HT"`},
		{"short garbage then close", []byte("GE"), false, hangGuard, ErrMagic, ""},
		{"truncated", hello(testJob)[:50], false, hangGuard, ErrTruncated, "50 of 136"},
		{"empty", nil, false, hangGuard, ErrTruncated, "0 of 136"},
		{"slowloris", hello(testJob)[:20], true, 300 * time.Millisecond, ErrTruncated, "deadline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, s := pair(t)
			if len(tc.send) > 0 {
				if _, err := c.Write(tc.send); err != nil {
					t.Fatal(err)
				}
			}
			if !tc.hold {
				c.(*net.TCPConn).CloseWrite()
			}
			_, err := Server(s, testJob, time.Now().Add(tc.deadline))
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			msg := err.Error()
			if !strings.Contains(msg, s.RemoteAddr().String()) || !strings.Contains(msg, tc.wantText) {
				t.Errorf("error %q should name %s and contain %q", msg, s.RemoteAddr(), tc.wantText)
			}
			s.Close()
			c.SetReadDeadline(time.Now().Add(hangGuard))
			if n, rerr := io.ReadAll(c); len(n) != 0 {
				t.Errorf("server wrote %q back (%v), want nothing", n, rerr)
			}
		})
	}
}

func TestClientSeesRejection(t *testing.T) {
	c, s := pair(t)
	errc := make(chan error, 1)
	go func() {
		_, err := Server(s, Job{ID: testJob.ID, Secret: []byte("other")}, time.Now().Add(hangGuard))
		s.Close()
		errc <- err
	}()
	err := Client(c, testJob, Hello{Kind: KindBootstrap}, time.Now().Add(hangGuard))
	if err == nil || !strings.Contains(err.Error(), "without an ack") || !strings.Contains(err.Error(), c.RemoteAddr().String()) {
		t.Errorf("client: got %v, want a rejection naming %s", err, c.RemoteAddr())
	}
	if serr := <-errc; !errors.Is(serr, ErrMAC) {
		t.Errorf("server: got %v, want %v", serr, ErrMAC)
	}
}

// A server that knows the job id but not the secret cannot forge the ack.
func TestClientRejectsForgedAck(t *testing.T) {
	c, s := pair(t)
	errc := make(chan error, 1)
	go func() {
		var f [HelloSize]byte
		if _, err := io.ReadFull(s, f[:]); err != nil {
			errc <- err
			return
		}
		ack := EncodeAck(Job{ID: testJob.ID}, f[:])
		_, err := s.Write(ack[:])
		errc <- err
	}()
	err := Client(c, testJob, Hello{Kind: KindData}, time.Now().Add(hangGuard))
	if !errors.Is(err, ErrMAC) {
		t.Errorf("got %v, want %v", err, ErrMAC)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// A server that never answers is bounded by the client's deadline.
func TestClientDeadline(t *testing.T) {
	c, _ := pair(t)
	err := Client(c, testJob, Hello{Kind: KindData}, time.Now().Add(200*time.Millisecond))
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("got %v, want a timeout", err)
	}
}

func TestDialGood(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type res struct {
		h   Hello
		err error
	}
	ch := make(chan res, 1)
	go func() {
		s, err := ln.Accept()
		if err != nil {
			ch <- res{err: err}
			return
		}
		defer s.Close()
		h, err := Server(s, testJob, time.Now().Add(hangGuard))
		ch <- res{h, err}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	want := Hello{Kind: KindBootstrap, Rank: 9}
	conn, err := Dial(ctx, ln.Addr().String(), testJob, want, 0, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	r := <-ch
	if r.err != nil || r.h != want {
		t.Errorf("server got %+v, %v; want %+v", r.h, r.err, want)
	}
}

// freeAddr returns a loopback address where nothing listens (it was just released).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestDialRefusedGivesUp(t *testing.T) {
	addr := freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	_, err := Dial(ctx, addr, testJob, Hello{Kind: KindBootstrap}, 3, time.Millisecond)
	if err == nil {
		t.Fatal("dial to a closed port succeeded")
	}
	for _, want := range []string{addr, "after 4 attempts", "refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

func TestDialCancelled(t *testing.T) {
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Dial(ctx, addr, testJob, Hello{Kind: KindBootstrap}, 1000, time.Hour)
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), addr) {
		t.Errorf("got %v, want context.Canceled naming %s", err, addr)
	}
}

// The server comes up while Dial is retrying.
func TestDialRetriesUntilListening(t *testing.T) {
	addr := freeAddr(t)
	ready := make(chan net.Listener, 1)
	go func() {
		time.Sleep(100 * time.Millisecond)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			ready <- nil
			return
		}
		ready <- ln
		if s, err := ln.Accept(); err == nil {
			Server(s, testJob, time.Now().Add(hangGuard))
			s.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	conn, err := Dial(ctx, addr, testJob, Hello{Kind: KindData}, 1000, 5*time.Millisecond)
	ln := <-ready
	if ln == nil {
		t.Skip("port was taken by another process before the test could listen again")
	}
	defer ln.Close()
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
}

// A handshake that the server never answers is cut short by ctx.
func TestDialHandshakeHonoursCtx(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		s, err := ln.Accept()
		if err == nil {
			accepted <- s
		}
		close(accepted)
	}()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		if s, ok := <-accepted; ok {
			defer s.Close()
			io.ReadFull(s, make([]byte, HelloSize)) // read the hello, never answer
			cancel()
		}
	}()
	_, err = Dial(ctx, ln.Addr().String(), testJob, Hello{Kind: KindData}, 0, time.Millisecond)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want context.Canceled", err)
	}
	cancel()
}

// BenchmarkDial measures connect + handshake over loopback.
func BenchmarkDial(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			s, err := ln.Accept()
			if err != nil {
				return
			}
			Server(s, testJob, time.Now().Add(hangGuard))
			s.Close()
		}
	}()
	ctx := context.Background()
	for i := 0; i < b.N; i++ {
		c, err := Dial(ctx, ln.Addr().String(), testJob, Hello{Kind: KindData}, 0, 0)
		if err != nil {
			b.Fatal(err)
		}
		c.Close()
	}
}
