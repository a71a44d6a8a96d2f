package pmi

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// start runs a server for nranks on a loopback port; cleanup closes it.
func start(t *testing.T, nranks int) (*Server, string, func() string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logf, logged := collectLogs()
	s := NewServer(Config{NRanks: nranks, KVSName: "kvs_test_0", Mapping: "(vector,(0,1,3))", Logf: logf})
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, ln.Addr().String(), logged
}

// client is a fake PMI-1 client: what MPICH's simple PMI writes, line by line.
type client struct {
	t  *testing.T
	nc net.Conn
	br *bufio.Reader
}

func dial(t *testing.T, addr string) *client {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(waitLimit))
	return &client{t: t, nc: nc, br: bufio.NewReader(nc)}
}

// join dials and does the PMI_PORT handshake and init as rank r.
func join(t *testing.T, addr string, r, nranks int) *client {
	t.Helper()
	c := dial(t, addr)
	c.send(fmt.Sprintf("cmd=initack pmiid=%d", r))
	c.expect("cmd=initack")
	c.expect(fmt.Sprintf("cmd=set size=%d", nranks))
	c.expect(fmt.Sprintf("cmd=set rank=%d", r))
	c.expect("cmd=set debug=0")
	c.send("cmd=init pmi_version=1 pmi_subversion=1")
	c.expect("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
	return c
}

func (c *client) send(line string) {
	c.t.Helper()
	if _, err := c.nc.Write([]byte(line + "\n")); err != nil {
		c.t.Fatalf("write %q: %v", line, err)
	}
}

func (c *client) read() (string, error) {
	s, err := c.br.ReadString('\n')
	return strings.TrimSuffix(s, "\n"), err
}

func (c *client) expect(want string) {
	c.t.Helper()
	got, err := c.read()
	if err != nil || got != want {
		c.t.Fatalf("got %q (%v), want %q", got, err, want)
	}
}

// roundTrip sends line and returns the reply.
func (c *client) roundTrip(line string) string {
	c.t.Helper()
	c.send(line)
	got, err := c.read()
	if err != nil {
		c.t.Fatalf("%s: %v", line, err)
	}
	return got
}

// expectClosed waits for the server to close the connection.
func (c *client) expectClosed() {
	c.t.Helper()
	if got, err := c.read(); err == nil {
		c.t.Fatalf("got %q, want the connection closed", got)
	}
}

func expectEvent(t *testing.T, s *Server, kind EventKind, rank int) Event {
	t.Helper()
	select {
	case ev := <-s.Events():
		if ev.Kind != kind || ev.Rank != rank {
			t.Fatalf("event %+v, want kind %d rank %d", ev, kind, rank)
		}
		return ev
	case <-time.After(waitLimit):
		t.Fatalf("no event, want kind %d rank %d", kind, rank)
	}
	return Event{}
}

func expectNoEvent(t *testing.T, s *Server) {
	t.Helper()
	select {
	case ev := <-s.Events():
		t.Fatalf("unexpected event %+v", ev)
	default:
	}
}

// TestJob runs what MPI_Init, MPI_Barrier and MPI_Finalize do on three ranks, as
// goroutines, and checks every reply and that a clean job produces no event.
func TestJob(t *testing.T) {
	const n = 3
	s, addr, _ := start(t, n)
	finished := make(chan int, n)
	for r := range n {
		go func() {
			defer func() { finished <- r }()
			c := join(t, addr, r, n)
			for _, rt := range [][2]string{
				{"cmd=get_maxes", "cmd=maxes kvsname_max=256 keylen_max=64 vallen_max=1024"},
				{"cmd=get_appnum", "cmd=appnum appnum=0"},
				{"cmd=get_my_kvsname", "cmd=my_kvsname kvsname=kvs_test_0"},
				{"cmd=get_universe_size", "cmd=universe_size size=3"},
				{"cmd=get kvsname=kvs_test_0 key=PMI_process_mapping", "cmd=get_result rc=0 msg=success value=(vector,(0,1,3))"},
				{fmt.Sprintf("cmd=put kvsname=kvs_test_0 key=bc-%d value=card=%d", r, r), "cmd=put_result rc=0 msg=success"},
				{"cmd=barrier_in", "cmd=barrier_out"},
				{"cmd=get kvsname=kvs_test_0 key=bc-2", "cmd=get_result rc=0 msg=success value=card=2"},
				{"cmd=get kvsname=kvs_test_0 key=nope", "cmd=get_result rc=-1 msg=key_nope_not_found"},
				{"cmd=get kvsname=other key=bc-0", "cmd=get_result rc=-1 msg=kvs_other_not_found"},
				{"cmd=put kvsname=kvs_test_0 key=bc-0 value=again", "cmd=put_result rc=-1 msg=duplicate_key_bc-0"},
				{"cmd=put kvsname=kvs_test_0 key=" + strings.Repeat("k", KeyLenMax+1) + " value=x", "cmd=put_result rc=-1 msg=bad_key_length"},
				{"cmd=barrier_in", "cmd=barrier_out"},
				{"cmd=getbyidx kvsname=kvs_test_0 idx=3", "cmd=getbyidx_results rc=-2 reason=no_more_keyvals"},
				{"cmd=finalize", "cmd=finalize_ack"},
			} {
				if got := c.roundTrip(rt[0]); got != rt[1] {
					t.Errorf("rank %d: %s\n got %q\nwant %q", r, rt[0], got, rt[1])
				}
			}
			c.nc.Close()
		}()
	}
	for range n {
		<-finished
	}
	// Every key is there once, in put order, whatever that order was.
	seen := map[string]bool{}
	for idx := 0; idx < n; idx++ {
		got := s.getByIdx(Msg{Cmd: "getbyidx", Args: []KV{{"kvsname", "kvs_test_0"}, {"idx", fmt.Sprint(idx)}}})
		m, err := Parse(got)
		if err != nil || firstOf(m, "rc") != "0" || firstOf(m, "nextidx") != fmt.Sprint(idx+1) {
			t.Fatalf("getbyidx %d: %q (%v)", idx, got, err)
		}
		seen[firstOf(m, "key")+"="+firstOf(m, "val")] = true
	}
	for r := range n {
		if kv := fmt.Sprintf("bc-%d=card=%d", r, r); !seen[kv] {
			t.Errorf("getbyidx did not list %s (saw %v)", kv, seen)
		}
	}
	expectNoEvent(t, s)
}

// TestBarrierWaitsForEveryRank: barrier_out comes only once the last rank is in.
func TestBarrierWaitsForEveryRank(t *testing.T) {
	s, addr, _ := start(t, 2)
	a := join(t, addr, 0, 2)
	a.send("cmd=barrier_in")
	b := join(t, addr, 1, 2)
	// a has no reply yet: the one it gets must come after b's barrier_in.
	got := make(chan string, 1)
	go func() {
		line, _ := a.read()
		got <- line
	}()
	select {
	case line := <-got:
		t.Fatalf("rank 0 got %q before rank 1 entered the barrier", line)
	case <-time.After(50 * time.Millisecond):
	}
	if r := b.roundTrip("cmd=barrier_in"); r != "cmd=barrier_out" {
		t.Fatalf("rank 1: %q", r)
	}
	if line := <-got; line != "cmd=barrier_out" {
		t.Fatalf("rank 0: %q", line)
	}
	expectNoEvent(t, s)
}

// TestAbort: cmd=abort is the rank's event with its exit code; the server sends nothing.
func TestAbort(t *testing.T) {
	s, addr, _ := start(t, 2)
	c := join(t, addr, 1, 2)
	c.send("cmd=abort exitcode=7")
	ev := expectEvent(t, s, EventAbort, 1)
	var ae *AbortError
	if !errors.As(ev.Err, &ae) || ae.Code != 7 {
		t.Fatalf("err %v, want an AbortError with code 7", ev.Err)
	}
	if want := "rank 1 called MPI_Abort with exit code 7"; ev.Err.Error() != want {
		t.Errorf("got %q, want %q", ev.Err, want)
	}
	c.nc.Close() // the teardown: no second event
	expectNoEventSoon(t, s)
}

// expectNoEventSoon gives a wrong event a moment to arrive.
func expectNoEventSoon(t *testing.T, s *Server) {
	t.Helper()
	select {
	case ev := <-s.Events():
		t.Fatalf("unexpected event %+v", ev)
	case <-time.After(50 * time.Millisecond):
	}
}

// TestLostBeforeFinalize: a rank that dies inside MPI (its connection ends without
// finalize) is an event at once, so that the job ends instead of the others waiting in a
// barrier forever; after finalize, a close is the normal end.
func TestLostBeforeFinalize(t *testing.T) {
	s, addr, _ := start(t, 3)
	waiting := join(t, addr, 0, 3)
	waiting.send("cmd=barrier_in")
	dying := join(t, addr, 1, 3)
	dying.nc.Close()
	ev := expectEvent(t, s, EventLost, 1)
	if want := "rank 1 closed its PMI connection without MPI_Finalize"; ev.Err.Error() != want {
		t.Errorf("got %q, want %q", ev.Err, want)
	}
	done := join(t, addr, 2, 3)
	if r := done.roundTrip("cmd=finalize"); r != "cmd=finalize_ack" {
		t.Fatalf("finalize: %q", r)
	}
	done.nc.Close()
	expectNoEventSoon(t, s)
	// Close ends the barrier the job will never finish: the rank waiting in it gets EOF.
	s.Close()
	waiting.expectClosed()
}

// TestExitedOutsideBarrier: a rank that ended without ever connecting (it exited 0 before
// MPI_Init) leaves the others' barrier unable to complete: its event comes as soon as both
// are known, in either order.
func TestExitedOutsideBarrier(t *testing.T) {
	s, addr, _ := start(t, 3)
	a := join(t, addr, 0, 3)
	s.Exited(2) // before anyone waits: nothing yet
	expectNoEvent(t, s)
	a.send("cmd=barrier_in")
	ev := expectEvent(t, s, EventLost, 2)
	if want := "rank 2 ended without entering the PMI barrier that rank 0 waits in"; ev.Err.Error() != want {
		t.Errorf("got %q, want %q", ev.Err, want)
	}

	s, addr, _ = start(t, 2)
	join(t, addr, 0, 2).send("cmd=barrier_in")
	b := join(t, addr, 1, 2)
	if r := b.roundTrip("cmd=barrier_in"); r != "cmd=barrier_out" {
		t.Fatalf("barrier: %q", r)
	}
	s.Exited(1) // after a completed barrier, with no one waiting: a normal end
	expectNoEventSoon(t, s)
}

// TestBadInput: garbage, unserved commands and strangers get one log line and a closed
// connection, never a hang or a crash; the server keeps serving the others. A known rank
// that misbehaves is an event.
func TestBadInput(t *testing.T) {
	tests := []struct {
		name  string
		lines []string // sent after the handshake when rank >= 0
		rank  int      // -1: a stranger that never did initack
		log   string
	}{
		{"garbage first", []string{"hello world"}, -1, `token "hello" is not KEY=VALUE`},
		{"no initack", []string{"cmd=init pmi_version=1 pmi_subversion=1"}, -1, "want cmd=initack pmiid=RANK"},
		{"pmiid out of range", []string{"cmd=initack pmiid=9"}, -1, `bad pmiid "9": want 0 to 1`},
		{"pmiid not a number", []string{"cmd=initack pmiid=x"}, -1, `bad pmiid "x"`},
		{"PMI-2", []string{"41    cmd=fullinit;pmijobid=1;pmirank=0;threaded=FALSE;"}, -1, "PMI-2 wire protocol"},
		{"garbage after init", []string{"=x"}, 0, "malformed PMI message"},
		{"first token not cmd", []string{"key=1 cmd=get"}, 0, "want cmd=NAME first"},
		{"spawn", []string{"mcmd=spawn"}, 0, `PMI command "spawn" (MPI_Comm_spawn) is not served by ccrun`},
		{"unknown command", []string{"cmd=publish_name service=a port=b"}, 0, `PMI command "publish_name" is not served`},
		{"PMI 2 over the PMI-1 wire", []string{"cmd=init pmi_version=2 pmi_subversion=0"}, 1, "PMI version 2.0 is not served"},
		{"PMI-2 client's first line", []string{"cmd=init pmi_version=2 pmi_subversion=0"}, -1, "the program speaks PMI 2.0 (cmd=init pmi_version=2); ccrun serves PMI-1 only"},
		{"double barrier", []string{"cmd=barrier_in", "cmd=barrier_in"}, 0, "barrier_in twice"},
		{"overlong line", []string{"cmd=put value=" + strings.Repeat("x", maxLine)}, 1, "longer than 65536 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, addr, l := start(t, 2)
			var c *client
			if tt.rank >= 0 {
				c = join(t, addr, tt.rank, 2)
			} else {
				c = dial(t, addr)
			}
			for _, line := range tt.lines {
				c.nc.Write([]byte(line + "\n")) // the server may close before the end of a long line
			}
			for {
				if _, err := c.read(); err != nil {
					break // replies before the close, then the close
				}
			}
			if tt.rank >= 0 {
				expectEvent(t, s, EventFailed, tt.rank)
			} else {
				expectNoEvent(t, s)
			}
			if !strings.Contains(l(), tt.log) {
				t.Errorf("log %q, want it to say %q", l(), tt.log)
			}
			// The server still serves a good rank.
			other := 1 - max(tt.rank, 0)
			if r := join(t, addr, other, 2).roundTrip("cmd=get_appnum"); r != "cmd=appnum appnum=0" {
				t.Errorf("after bad input: %q", r)
			}
		})
	}
}

// TestPMIIDOnce: a second connection claiming a connected PMI_ID is refused.
func TestPMIIDOnce(t *testing.T) {
	_, addr, l := start(t, 2)
	join(t, addr, 0, 2)
	c := dial(t, addr)
	c.send("cmd=initack pmiid=0")
	c.expectClosed()
	if !strings.Contains(l(), "pmiid 0 is already connected") {
		t.Errorf("log %q", l())
	}
}

// TestCloseIdle: Close returns with idle, half-written and barrier-blocked clients.
func TestCloseIdle(t *testing.T) {
	s, addr, _ := start(t, 3)
	idle := dial(t, addr)
	half := dial(t, addr)
	half.nc.Write([]byte("cmd=init"))
	blocked := join(t, addr, 0, 3)
	blocked.send("cmd=barrier_in")
	s.Close()
	for _, c := range []*client{idle, half, blocked} {
		c.expectClosed()
	}
	expectNoEvent(t, s)
}

func TestParse(t *testing.T) {
	tests := []struct {
		in   string
		want Msg
		err  string
	}{
		{"cmd=barrier_in\n", Msg{Cmd: "barrier_in"}, ""},
		{"cmd=put kvsname=k key=a value=b=c\n", Msg{Cmd: "put", Args: []KV{{"kvsname", "k"}, {"key", "a"}, {"value", "b=c"}}}, ""},
		{"  cmd=get   key=x  \r\n", Msg{Cmd: "get", Args: []KV{{"key", "x"}}}, ""},
		{"mcmd=spawn\n", Msg{Cmd: "spawn", Multi: true}, ""},
		{"cmd=put value=\n", Msg{Cmd: "put", Args: []KV{{"value", ""}}}, ""},
		{"\n", Msg{}, "empty PMI message"},
		{"cmd=\n", Msg{}, "want cmd=NAME first"},
		{"cmd=get =x\n", Msg{}, `token "=x" is not KEY=VALUE`},
		{"get key=x\n", Msg{}, `token "get" is not KEY=VALUE`},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("Parse(%q) error %v, want %q", tt.in, err, tt.err)
		case tt.err == "" && err != nil:
			t.Errorf("Parse(%q): %v", tt.in, err)
		case tt.err == "" && fmt.Sprint(got) != fmt.Sprint(tt.want):
			t.Errorf("Parse(%q)\n got %+v\nwant %+v", tt.in, got, tt.want)
		}
	}
}

// FuzzParse: any line parses or fails with a one-line error; what parses formats back to
// a line that parses the same.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"cmd=init pmi_version=1 pmi_subversion=1", "cmd=put kvsname=a key=b value=c=d", "mcmd=spawn", "x", "=", "cmd= a=b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		m, err := Parse(line)
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error of %q spans lines: %q", line, err)
			}
			return
		}
		if m.Multi {
			return
		}
		var kv []string
		for _, a := range m.Args {
			kv = append(kv, a.Key, a.Value)
		}
		again, err := Parse(Format(m.Cmd, kv...))
		if err != nil || fmt.Sprint(again) != fmt.Sprint(m) {
			t.Fatalf("Parse(%q) = %+v, reparsed %+v (%v)", line, m, again, err)
		}
	})
}

// private is rank r's end of a private connection (PMI_FD) served by s.
func private(t *testing.T, s *Server, r int) *client {
	t.Helper()
	mine, theirs := net.Pipe()
	t.Cleanup(func() { mine.Close() })
	mine.SetDeadline(time.Now().Add(waitLimit))
	s.ServeConn(theirs, r)
	return &client{t: t, nc: mine, br: bufio.NewReader(mine)}
}

// TestServeConn: a private connection is its rank's without a handshake and joins the
// others' barrier; its PMI_ID cannot be claimed on the port (Reserve), nor served twice.
func TestServeConn(t *testing.T) {
	s, addr, l := start(t, 2)
	s.Reserve(1)
	stranger := dial(t, addr)
	stranger.send("cmd=initack pmiid=1")
	stranger.expectClosed()
	if want := "pmiid 1 has a private connection (PMI_FD), not this port"; !strings.Contains(l(), want) {
		t.Errorf("log %q, want %q", l(), want)
	}
	c := private(t, s, 1)
	c.send("cmd=init pmi_version=1 pmi_subversion=1")
	c.expect("cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0")
	if got, want := c.roundTrip("cmd=put kvsname=kvs_test_0 key=k1 value=v1"), "cmd=put_result rc=0 msg=success"; got != want {
		t.Errorf("put: %q, want %q", got, want)
	}
	twice := private(t, s, 1)
	twice.expectClosed()
	other := join(t, addr, 0, 2)
	other.send("cmd=barrier_in")
	c.send("cmd=barrier_in")
	other.expect("cmd=barrier_out")
	c.expect("cmd=barrier_out")
	if got, want := other.roundTrip("cmd=get kvsname=kvs_test_0 key=k1"), "cmd=get_result rc=0 msg=success value=v1"; got != want {
		t.Errorf("get: %q, want %q", got, want)
	}
	c.nc.Close() // before finalize
	expectEvent(t, s, EventLost, 1)
}

// TestServeConnUnused: a private connection that ends before any message is a rank that
// never used PMI (it exited before MPI_Init, or is no MPI program): no event of its own;
// its exit, when others wait for it in a barrier, is the event (Exited). One that ends
// after a message and before finalize is lost.
func TestServeConnUnused(t *testing.T) {
	s := NewServer(Config{NRanks: 2, KVSName: "kvs_test_0"})
	defer s.Close()
	s.hangUp(&conn{rank: 1, private: true}, io.EOF)
	expectNoEvent(t, s)
	s.hangUp(&conn{rank: 0, private: true, spoke: true}, io.EOF)
	expectEvent(t, s, EventLost, 0)
	s.mu.Lock()
	s.barrier[0], s.waiting = &conn{rank: 0}, 1
	s.mu.Unlock()
	s.Exited(1)
	ev := expectEvent(t, s, EventLost, 1)
	if want := "rank 1 ended without entering the PMI barrier that rank 0 waits in"; ev.Err.Error() != want {
		t.Errorf("got %q, want %q", ev.Err, want)
	}
}
