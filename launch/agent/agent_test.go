package agent

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/launch"
	"github.com/seed-760dd1f1/cc/launch/proctest"
)

// The agent's side and ccrun's side over in-process pipes, with real rank processes.
// (cmd/ccrun's agent tests run the real ccrun binary as the agent.)

// pair is a Conn to an in-process Serve.
type pair struct {
	c      *Conn
	served chan error
	cancel context.CancelFunc
}

// closers closes several things.
type closers []io.Closer

func (cs closers) Close() error {
	for _, c := range cs {
		c.Close()
	}
	return nil
}

func startPair(t *testing.T) *pair {
	t.Helper()
	return startPairWith(t, ServeOptions{Environ: os.Environ(), Host: "testhost", Grace: 500 * time.Millisecond})
}

// startPairWith is startPair with the agent's options.
func startPairWith(t *testing.T, o ServeOptions) *pair {
	t.Helper()
	toCCRun, agentOut := io.Pipe()
	agentIn, toAgent := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	p := &pair{served: make(chan error, 1), cancel: cancel}
	go func() {
		err := Serve(ctx, agentIn, agentOut, o)
		agentOut.Close()
		agentIn.Close()
		p.served <- err
	}()
	c, err := Dial(context.Background(), "testhost", toCCRun, toAgent, closers{toAgent, toCCRun}, 0,
		func(err error) error { return &LostError{Host: "testhost", Err: err} })
	if err != nil {
		t.Fatal(err)
	}
	p.c = c
	t.Cleanup(func() {
		cancel()
		c.Close()
		if err := <-p.served; err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("Serve: %v", err)
		}
	})
	return p
}

type syncBuf = proctest.Buffer

func spec(rank int, argv ...string) (launch.Spec, *syncBuf, *syncBuf) {
	out, errb := &syncBuf{}, &syncBuf{}
	return launch.Spec{Slot: launch.Slot{Rank: rank}, Argv: argv, Env: []string{"R=" + fmt.Sprint(rank)}, Stdout: out, Stderr: errb}, out, errb
}

func TestAgentStartsRanks(t *testing.T) {
	p := startPair(t)
	tests := []struct {
		argv             []string
		dir              string
		optional         bool
		want             launch.Exit
		stdout, stderr   string
		pidZero          bool
		stderrIsPrefixed bool
	}{
		{[]string{"/bin/sh", "-c", `echo "out $R"; echo "err $R" >&2; exit 3`}, "", false, launch.Exit{Code: 3}, "out 0\n", "err 0\n", false, false},
		{[]string{"/bin/sh", "-c", `kill -USR1 $$`}, "", false, launch.Exit{Signal: syscall.SIGUSR1}, "", "", false, false},
		{[]string{"/bin/sh", "-c", `pwd`}, "/", false, launch.Exit{}, "/\n", "", false, false},
		{[]string{"/bin/sh", "-c", `pwd`}, "/no/such/dir", true, launch.Exit{}, "", "", false, false},
		{[]string{"no-such-program-ccrun"}, "", false, launch.Exit{Code: 127}, "",
			"ccrun: program no-such-program-ccrun not found on host testhost (PATH=", true, true},
		{[]string{"/bin/true"}, "/no/such/dir", false, launch.Exit{Code: 126}, "",
			"ccrun: cannot enter directory /no/such/dir on host testhost\n", true, false},
	}
	for i, tt := range tests {
		s, out, errb := spec(i, tt.argv...)
		if i > 0 {
			s.Env = []string{"R=" + fmt.Sprint(i)}
		}
		s.Dir, s.DirOptional = tt.dir, tt.optional
		proc, err := p.c.Start(context.Background(), s)
		if err != nil {
			t.Fatalf("%v: %v", tt.argv, err)
		}
		got := proc.Wait()
		if got != tt.want || (proc.Pid() == 0) != tt.pidZero {
			t.Errorf("%v: exit %+v pid %d, want %+v (pid 0: %v)", tt.argv, got, proc.Pid(), tt.want, tt.pidZero)
		}
		if tt.stdout != "" && out.String() != strings.ReplaceAll(tt.stdout, "0", fmt.Sprint(i)) {
			t.Errorf("%v: stdout %q, want %q", tt.argv, out, tt.stdout)
		}
		if tt.stdout == "" && tt.dir == "/no/such/dir" && tt.optional && out.String() == "/no/such/dir\n" {
			t.Errorf("optional missing dir was entered")
		}
		if e := errb.String(); tt.stderrIsPrefixed && !strings.HasPrefix(e, tt.stderr) || !tt.stderrIsPrefixed && tt.stderr != "" && e != strings.ReplaceAll(tt.stderr, "0", fmt.Sprint(i)) {
			t.Errorf("%v: stderr %q, want %q", tt.argv, e, tt.stderr)
		}
	}
}

func TestAgentSignalAndStdin(t *testing.T) {
	p := startPair(t)
	// Signal: a rank that exits 7 on SIGUSR2.
	s, out, _ := spec(0, "/bin/sh", "-c", `trap "exit 7" USR2; echo ready; while :; do sleep 0.05; done`)
	proc, err := p.c.Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); out.String() != "ready\n"; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no ready line: %q", out)
		}
	}
	proc.Signal(syscall.SIGUSR2)
	if got := proc.Wait(); got != (launch.Exit{Code: 7}) {
		t.Errorf("after SIGUSR2: %+v, want exit code 7", got)
	}
	// Stdin: 1 MiB, four times the window, through cat and back, byte for byte; then EOF.
	data := make([]byte, 1<<20)
	rand.Read(data)
	in := hex.EncodeToString(data)
	s, out, _ = spec(1, "/bin/sh", "-c", `cat; echo EOF`)
	pr, pw := io.Pipe()
	s.Stdin = pr
	go func() {
		io.WriteString(pw, in)
		pw.Close()
	}()
	proc, err = p.c.Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	if got := proc.Wait(); got.Failed() {
		t.Fatalf("cat: %v", got)
	}
	if got := out.String(); got != in+"EOF\n" {
		t.Errorf("cat gave back %d bytes, want %d and EOF", len(got), len(in))
	}
	// A rank that never reads its stdin ends anyway, and its stdin is closed.
	s, _, _ = spec(2, "/bin/true")
	pr, pw = io.Pipe()
	s.Stdin = pr
	go func() {
		for {
			if _, err := pw.Write(data[:4096]); err != nil {
				return
			}
		}
	}()
	if proc, err = p.c.Start(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	if got := proc.Wait(); got.Failed() {
		t.Errorf("true with unread stdin: %v", got)
	}
}

// cancelledAfterCheck is a context whose Done is closed from the start but whose Err
// says nil the first time: it is cancelled just after Start has looked at it, while the
// start is on its way to the agent.
type cancelledAfterCheck struct {
	context.Context
	checked bool
}

func (c *cancelledAfterCheck) Err() error {
	if !c.checked {
		c.checked = true
		return nil
	}
	return context.Canceled
}

func (c *cancelledAfterCheck) Done() <-chan struct{} {
	d := make(chan struct{})
	close(d)
	return d
}

// TestAgentStartCancelledInFlight: a start already sent when ccrun cancels is answered
// and handed back, so the supervisor can signal the rank and count it in its report
// (ccrun's "a rank fails" teardown counted one rank short when the rank was killed out
// of its sight instead).
func TestAgentStartCancelledInFlight(t *testing.T) {
	p := startPair(t)
	s, _, _ := spec(0, "/bin/sh", "-c", `sleep 300`)
	proc, err := p.c.Start(&cancelledAfterCheck{Context: context.Background()}, s)
	if err != nil {
		t.Fatalf("start cancelled in flight: %v, want the started rank", err)
	}
	if proc.Pid() == 0 {
		t.Fatal("pid 0, want the started rank's")
	}
	proc.Signal(syscall.SIGTERM)
	if got := proc.Wait(); got != (launch.Exit{Signal: syscall.SIGTERM}) {
		t.Errorf("after SIGTERM: %+v", got)
	}
	// A start not yet sent is not sent.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.c.Start(ctx, s); !errors.Is(err, context.Canceled) {
		t.Errorf("start cancelled before it was sent: %v, want context.Canceled", err)
	}
}

// marked returns a fresh marker variable and the lister of the processes that hold it.
func marked() (string, func() []int) {
	var b [8]byte
	rand.Read(b[:])
	kv := "CC_AGENT_TEST_MARK=" + hex.EncodeToString(b[:])
	return kv, func() []int { return proctest.WithEnv(kv) }
}

// family is a rank with a child, a grandchild and a child deaf to SIGTERM.
const family = `sh -c 'sleep 300; :' & (trap "" TERM; sleep 300) & echo ready; wait`

// TestAgentSessionEnd: when ccrun's side of the stream goes away, the agent ends every
// rank and everything they started, and ccrun's side reports the ranks as lost.
func TestAgentSessionEnd(t *testing.T) {
	p := startPair(t)
	kv, list := marked()
	var procs []launch.Proc
	for r := range 2 {
		s, out, _ := spec(r, "/bin/sh", "-c", family)
		s.Env = append(s.Env, kv)
		proc, err := p.c.Start(context.Background(), s)
		if err != nil {
			t.Fatal(err)
		}
		procs = append(procs, proc)
		for deadline := time.Now().Add(10 * time.Second); out.String() != "ready\n"; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no ready line: %q", out)
			}
		}
	}
	for deadline := time.Now().Add(10 * time.Second); len(list()) < 2*5; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) { // per rank: itself, 2 children, a grandchild, its watcher
			t.Fatalf("%d processes of the ranks, want 10", len(list()))
		}
	}
	p.c.Close()
	for _, proc := range procs {
		// The agent may report the rank's end (its SIGTERM or SIGKILL) before its side
		// of the stream closes; otherwise the rank reports the stream's end.
		var le *LostError
		got := proc.Wait()
		if !errors.As(got.Err, &le) && !(got.Err == nil && (got.Signal == syscall.SIGTERM || got.Signal == syscall.SIGKILL)) {
			t.Errorf("rank after the stream's end: %+v, want a LostError, or death by the agent's SIGTERM or SIGKILL", got)
		}
	}
	if err := <-p.served; err != nil {
		t.Errorf("Serve after the stream's end: %v, want nil", err)
	}
	p.served <- nil // for the cleanup
	if left := proctest.WaitNone(list, 20*time.Second); len(left) > 0 {
		t.Errorf("left behind:\n%s", proctest.Describe(left))
		for _, pid := range left {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// rawAgent is a fake agent that writes what a test gives it.
func dialRaw(t *testing.T, agentSays []byte) error {
	t.Helper()
	r, w := io.Pipe()
	go func() {
		w.Write(agentSays)
		w.Close()
	}()
	_, err := Dial(context.Background(), "h", r, io.Discard, r, 0, func(err error) error { return err })
	return err
}

func frame(typ byte, payload string) []byte {
	var b bytes.Buffer
	(&frameWriter{w: &b}).write(typ, []byte(payload))
	return b.Bytes()
}

func TestDialDetectsNoAgent(t *testing.T) {
	tests := []struct {
		name      string
		says      []byte
		badFrame  bool
		eof       bool
		version   int
		errSubstr string
	}{
		{"missing agent: no output", nil, false, true, 0, "no agent: EOF"},
		{"a login banner", []byte("Welcome to tb3\n"), true, false, 0, "length"},
		{"truncated header", []byte{0, 0}, true, false, 0, "inside a frame header"},
		{"truncated frame", []byte{0, 0, 0, 9, tHello, '{'}, true, false, 0, "inside a frame of 9 bytes"},
		{"zero length", []byte{0, 0, 0, 0}, true, false, 0, "length 0"},
		{"not a hello", frame(tExit, `{}`), true, false, 0, "first frame has type 6"},
		{"bad json", frame(tHello, `{"magic":`), true, false, 0, "type 1"},
		{"wrong magic", frame(tHello, `{"magic":"other","version":1}`), true, false, 0, `hello of "other"`},
		{"other version", frame(tHello, `{"magic":"ccrun-agent","version":2}`), false, false, 2, "agent protocol version 2, want 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := dialRaw(t, tt.says)
			var ae *Error
			var ve *VersionError
			switch {
			case err == nil || !errors.As(err, &ae):
				t.Fatalf("Dial = %v, want an *agent.Error", err)
			case tt.badFrame != errors.Is(err, ErrBadFrame), tt.eof != errors.Is(err, io.EOF):
				t.Errorf("Dial = %v: bad frame %v, EOF %v; want %v, %v", err, errors.Is(err, ErrBadFrame), errors.Is(err, io.EOF), tt.badFrame, tt.eof)
			case tt.version != 0 && (!errors.As(err, &ve) || ve.Theirs != tt.version):
				t.Errorf("Dial = %v, want a VersionError for %d", err, tt.version)
			case !strings.Contains(err.Error(), tt.errSubstr):
				t.Errorf("Dial = %q, want it to contain %q", err, tt.errSubstr)
			}
		})
	}
}

// serveRaw runs Serve with ccrunSays as its input and returns its error and output.
func serveRaw(t *testing.T, ccrunSays []byte, keepOpen bool) (error, []byte) {
	t.Helper()
	in := io.Reader(bytes.NewReader(ccrunSays))
	if keepOpen { // the stream stays open after ccrunSays, as a live but silent ccrun's
		pr, pw := io.Pipe()
		go func() { pw.Write(ccrunSays) }()
		t.Cleanup(func() { pw.Close() })
		in = pr
	}
	var out syncBuf
	done := make(chan error, 1)
	go func() {
		done <- Serve(context.Background(), in, &out, ServeOptions{Host: "h", Grace: 100 * time.Millisecond})
	}()
	select {
	case err := <-done:
		return err, []byte(out.String())
	case <-time.After(time.Minute): // a hang guard
		t.Fatal("Serve did not return")
		return nil, nil
	}
}

func TestServeRejects(t *testing.T) {
	hello := func(v int, extra string) []byte {
		return frame(tHello, fmt.Sprintf(`{"magic":"ccrun-agent","version":%d%s}`, v, extra))
	}
	tests := []struct {
		name     string
		says     []byte
		keepOpen bool
		want     *regexp.Regexp
	}{
		{"other version", hello(99, ""), false, regexp.MustCompile(`^agent protocol version 99, want 1`)},
		{"no hello", []byte("garbage!"), false, regexp.MustCompile(`^read ccrun's hello: bad frame: length`)},
		{"unknown frame", append(hello(1, ""), frame(77, "")...), false, regexp.MustCompile(`^bad frame: type 77 from ccrun`)},
		{"bad start", append(hello(1, ""), frame(tStart, "{")...), false, regexp.MustCompile(`^bad frame: type 2`)},
		{"short stdin", append(hello(1, ""), frame(tStdin, "ab")...), false, regexp.MustCompile(`^bad frame: type 7: 2 bytes, want 4`)},
		{"silent ccrun", hello(1, `,"keepalive_ms":20`), true, regexp.MustCompile(`^no word from ccrun in 60ms`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err, out := serveRaw(t, tt.says, tt.keepOpen)
			if err == nil || !tt.want.MatchString(err.Error()) {
				t.Errorf("Serve = %v, want %v", err, tt.want)
			}
			// The agent always said its hello first, so ccrun can tell what it is.
			h, herr := readHello(newFrameReader(bytes.NewReader(out)))
			if herr != nil || h.Version != Version || h.Host != "h" {
				t.Errorf("agent's first frame: %+v, %v; want its hello", h, herr)
			}
		})
	}
}

// TestServeEndsRanksOnBadFrame: a broken stream ends the session like its end does.
func TestServeEndsRanksOnBadFrame(t *testing.T) {
	kv, list := marked()
	start, _ := startMsgFrame(startMsg{Rank: 0, Argv: []string{"/bin/sh", "-c", family}, Env: []string{kv}})
	says := append(frame(tHello, `{"magic":"ccrun-agent","version":1}`), start...)
	pr, pw := io.Pipe()
	go pw.Write(says)
	done := make(chan error, 1)
	go func() {
		done <- Serve(context.Background(), pr, io.Discard, ServeOptions{Environ: os.Environ(), Host: "h", Grace: 100 * time.Millisecond})
	}()
	for deadline := time.Now().Add(10 * time.Second); len(list()) < 4; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the rank's family did not start: %d processes", len(list()))
		}
	}
	pw.Write([]byte{0xff, 0xff, 0xff, 0xff})
	if err := <-done; !errors.Is(err, ErrBadFrame) {
		t.Errorf("Serve = %v, want a bad frame", err)
	}
	pw.Close()
	if left := proctest.WaitNone(list, 20*time.Second); len(left) > 0 {
		t.Errorf("left behind:\n%s", proctest.Describe(left))
		for _, pid := range left {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func startMsgFrame(m startMsg) ([]byte, error) {
	var b bytes.Buffer
	err := (&frameWriter{w: &b}).json(tStart, m)
	return b.Bytes(), err
}

func TestFrameRoundTrip(t *testing.T) {
	var b bytes.Buffer
	fw := &frameWriter{w: &b}
	fw.data(tOutput, 3, streamStderr, []byte("hi\n"))
	fw.json(tExit, exitMsg{Rank: 3, Code: 2})
	fw.write(tPing)
	if got, want := b.Bytes()[:13], []byte{0, 0, 0, 9, tOutput, 0, 0, 0, 3, streamStderr, 'h', 'i', '\n'}; !bytes.Equal(got, want) {
		t.Errorf("output frame % x, want % x (the example in frame.go)", got, want)
	}
	fr := newFrameReader(&b)
	typ, p, err := fr.next()
	rank, stream, data, derr := decodeData(typ, p, true)
	if err != nil || derr != nil || typ != tOutput || rank != 3 || stream != streamStderr || string(data) != "hi\n" {
		t.Errorf("output frame read as %d %d %d %q (%v, %v)", typ, rank, stream, data, err, derr)
	}
	typ, p, err = fr.next()
	var m exitMsg
	if err != nil || typ != tExit || decodeJSON(typ, p, &m) != nil || m != (exitMsg{Rank: 3, Code: 2}) {
		t.Errorf("exit frame read as %d %+v (%v)", typ, m, err)
	}
	if typ, p, err = fr.next(); err != nil || typ != tPing || len(p) != 0 {
		t.Errorf("ping read as %d %q (%v)", typ, p, err)
	}
	if _, _, err = fr.next(); err != io.EOF {
		t.Errorf("after the last frame: %v, want io.EOF", err)
	}
	// A process that is not a rank (the CollNet aggregation server) is rank -1.
	fw.data(tOutput, -1, streamStdout, []byte("listening on :1\n"))
	typ, p, err = fr.next()
	if rank, _, data, derr := decodeData(typ, p, true); err != nil || derr != nil || rank != -1 || string(data) != "listening on :1\n" {
		t.Errorf("output of rank -1 read as rank %d %q (%v, %v)", rank, data, err, derr)
	}
}

// FuzzFrameReader: any input gives frames within bounds or an error, never a panic.
func FuzzFrameReader(f *testing.F) {
	f.Add(frame(tHello, `{"magic":"ccrun-agent","version":1}`))
	f.Add(append(frame(tOutput, "\x00\x00\x00\x01\x01abc"), 0, 0))
	f.Add([]byte("Welcome\n"))
	f.Add(append(frame(tPMI, "\x00\x00\x00\x02cmd=init pmi_version=1\n"), frame(tPMIEOF, "\x00\x00\x00\x02")...))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr := newFrameReader(bytes.NewReader(b))
		for range 64 {
			typ, p, err := fr.next()
			if err != nil {
				if err != io.EOF && !errors.Is(err, ErrBadFrame) {
					t.Fatalf("error %v is neither EOF nor a bad frame", err)
				}
				return
			}
			if len(p)+1 > maxFrame {
				t.Fatalf("frame of %d bytes", len(p)+1)
			}
			decodeData(typ, p, typ == tOutput)
			var h helloMsg
			decodeJSON(typ, p, &h)
		}
	})
}

// TestHelloCarriesHostID: the agent's hello tells ccrun its host's identity (host name and
// boot id), so that two names of one machine are one node at no extra round trip; an
// agent without a boot id (an older one) says nothing of it.
func TestHelloCarriesHostID(t *testing.T) {
	const boot = "5a3c8f0e-1b2d-4c6e-9f70-8a1b2c3d4e5f"
	for _, tt := range []struct{ boot string }{{boot}, {""}} {
		p := startPairWith(t, ServeOptions{Environ: os.Environ(), Host: "testhost", BootID: tt.boot})
		if want := (Info{Host: "testhost", Pid: os.Getpid(), BootID: tt.boot, PMI: true}); p.c.Agent != want {
			t.Errorf("boot id %q: Agent = %+v, want %+v", tt.boot, p.c.Agent, want)
		}
	}
}

// TestAgentRelaysPMI: a rank started with Spec.PMI gets PMI_FD on the agent's host; what
// it writes there reaches the connection ccrun's side hands to Spec.PMI and back, and
// the rank's end reaches it as EOF.
func TestAgentRelaysPMI(t *testing.T) {
	p := startPair(t)
	if !p.c.Agent.PMI {
		t.Fatal("the agent's hello does not offer the PMI relay")
	}
	handed := make(chan net.Conn, 1)
	sp, out, errb := spec(0, "sh", "-c", `echo "ping on fd $PMI_FD" >&$PMI_FD; read l <&$PMI_FD; echo "got $l"`)
	sp.PMI = func(nc net.Conn) { handed <- nc }
	proc, err := p.c.Start(context.Background(), sp)
	if err != nil {
		t.Fatal(err)
	}
	nc := <-handed // Start hands it over before it returns
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(time.Minute)) // hang guard
	br := bufio.NewReader(nc)
	if line, err := br.ReadString('\n'); err != nil || line != "ping on fd 3\n" {
		t.Fatalf("read %q (%v), want %q", line, err, "ping on fd 3\n")
	}
	io.WriteString(nc, "pong\n")
	if ex := proc.Wait(); ex.Failed() {
		t.Fatalf("rank: %v; stderr %q", ex, errb)
	}
	if out.String() != "got pong\n" {
		t.Errorf("stdout %q, want %q", out, "got pong\n")
	}
	if b, err := br.ReadString('\n'); err != io.EOF {
		t.Errorf("after the rank's end read %q (%v), want EOF", b, err)
	}
}

// TestAgentRelaysPMIClose: when ccrun's PMI server closes a rank's connection (it refused
// something, or the job ends), the rank reads EOF on its PMI_FD.
func TestAgentRelaysPMIClose(t *testing.T) {
	p := startPair(t)
	handed := make(chan net.Conn, 1)
	sp, out, errb := spec(0, "sh", "-c", `read l <&$PMI_FD; echo "read rc=$? l=$l"`)
	sp.PMI = func(nc net.Conn) { handed <- nc }
	proc, err := p.c.Start(context.Background(), sp)
	if err != nil {
		t.Fatal(err)
	}
	nc := <-handed
	io.WriteString(nc, "partial") // no newline: then EOF
	nc.Close()
	if ex := proc.Wait(); ex.Failed() {
		t.Fatalf("rank: %v; stderr %q", ex, errb)
	}
	if want := "read rc=1 l=partial\n"; out.String() != want {
		t.Errorf("stdout %q, want %q", out, want)
	}
}
