package pmi

import (
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/seed-760dd1f1/cc/runtime/fuzzcheck"
)

// FuzzServeConn serves one connection that sends any bytes, then hangs up,
// to a 2-rank job's server: it ends (no input leaves it waiting), reports
// at most one event, for a rank the connection claimed, and every error
// and log line is one line.
func FuzzServeConn(f *testing.F) {
	f.Add([]byte("cmd=initack pmiid=0\ncmd=init pmi_version=1 pmi_subversion=1\ncmd=get_maxes\n" +
		"cmd=get_my_kvsname\ncmd=put kvsname=kvs key=bc-0 value=2F6465\ncmd=barrier_in\n" +
		"cmd=get kvsname=kvs key=bc-0\ncmd=getbyidx kvsname=kvs idx=0\ncmd=finalize\n"))
	f.Add([]byte("cmd=initack pmiid=1\ncmd=abort exitcode=13\n"))
	f.Add([]byte("cmd=initack pmiid=0\ncmd=barrier_in\ncmd=barrier_in\n"))
	f.Add([]byte("cmd=initack pmiid=0\nmcmd=spawn\n"))
	f.Add([]byte("    26cmd=fullinit;pmirank=0;"))
	f.Add([]byte("cmd=init pmi_version=2 pmi_subversion=0\n"))
	f.Add([]byte("cmd=initack pmiid=0\n" + strings.Repeat("x", maxLine+1)))
	f.Fuzz(func(t *testing.T, in []byte) {
		var mu sync.Mutex
		var logged []string
		s := NewServer(Config{NRanks: 2, KVSName: "kvs", Logf: func(format string, args ...any) {
			mu.Lock()
			defer mu.Unlock()
			logged = append(logged, fmt.Sprintf(format, args...))
		}})
		srv, client := net.Pipe()
		c := &conn{nc: srv, peer: "fuzz", rank: -1}
		served, drained := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(served)
			s.serveConn(c)
		}()
		go func() {
			defer close(drained)
			io.Copy(io.Discard, client)
		}()
		client.Write(in) // fails once the server has closed its end: it stopped reading
		client.Close()
		<-served
		<-drained
		close(s.events) // no sender is left
		n := 0
		for ev := range s.events {
			n++
			fuzzcheck.OneLine(t, ev.Err)
			if ev.Rank != c.rank || c.rank < 0 {
				t.Fatalf("event %+v for rank %d, but the connection is rank %d", ev, ev.Rank, c.rank)
			}
		}
		if n > 1 {
			t.Fatalf("%d events from one connection", n)
		}
		for _, l := range logged {
			if strings.ContainsAny(l, "\n\r") {
				t.Fatalf("log line spans lines: %q", l)
			}
		}
	})
}
