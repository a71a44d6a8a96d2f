package collnet

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/runtime/wire"
)

// logged collects a server's log lines.
type logged struct {
	mu    sync.Mutex
	lines []string
	grew  chan struct{}
}

func (l *logged) logf(format string, args ...any) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
	l.grew <- struct{}{}
}

// next waits for the next log line.
func (l *logged) next(t *testing.T) string {
	t.Helper()
	select {
	case <-l.grew:
	case <-time.After(30 * time.Second):
		t.Fatal("no log line within 30s")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lines[len(l.lines)-1]
}

// TestStrangersDropped: garbage, a data stream's hello, a wrong secret
// and a bad join record each cost one log line, and the server keeps
// serving.
func TestStrangersDropped(t *testing.T) {
	job := wire.Job{ID: "j", Secret: []byte("s")}
	l := &logged{grew: make(chan struct{}, 16)}
	s, err := Listen(Options{Job: job, Addr: "127.0.0.1:0", Logf: l.logf})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	dial := func(j wire.Job, k wire.Kind) net.Conn {
		c, err := wire.Dial(ctx, s.Addr(), j, wire.Hello{Kind: k}, 0, time.Millisecond)
		if err != nil && j.ID == job.ID && string(j.Secret) == string(job.Secret) {
			t.Fatal(err)
		}
		return c
	}
	for _, tc := range []struct {
		name string
		do   func()
		want string
	}{
		{"garbage", func() {
			c, err := net.Dial("tcp", s.Addr())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
		}, "magic"},
		{"data stream", func() { dial(job, wire.KindData).Close() }, "kind data, want collnet"},
		{"wrong secret", func() { dial(wire.Job{ID: "j", Secret: []byte("x")}, wire.KindCollNet) }, "different job secret"},
		{"bad join", func() {
			c := dial(job, wire.KindCollNet)
			defer c.Close()
			c.Write(make([]byte, JoinSize))
		}, "join record starts"},
	} {
		tc.do()
		line := l.next(t)
		if !strings.Contains(line, "dropped connection") || !strings.Contains(line, tc.want) || strings.Contains(line, "\n") {
			t.Errorf("%s: logged %q, want one line with %q", tc.name, line, tc.want)
		}
	}
}
