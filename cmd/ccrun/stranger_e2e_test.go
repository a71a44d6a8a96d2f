package main

// End-to-end tests of issue 24's first acceptance line: while a real cc-perf job runs, a
// stranger connects to every TCP socket any process of the job listens on (ccrun's
// bootstrap root, each rank's data listener, a CollNet server) and speaks garbage,
// truncated and oversized frames, and each protocol a cc port could speak, as a rank
// without the job secret. The job must not notice: it runs to #wrong 0 and exit 0, says
// at most one line per stranger, and no process of it grows by more than strangerRSS.
//
// The attack is not raced against the job's end: the sweep repeats until asked to stop
// (-N 0), and the attack runs while one rank is stopped (SIGSTOP) mid-sweep, so the others
// wait in a collective for it however long the strangers take; the stopped rank's own
// sockets are attacked in a second phase while another rank is stopped. After a whole sweep
// more, SIGUSR1 to ccrun (forwarded to every rank) ends the job after its current sweep,
// as if it had been the last: the job's own end, exit 0, not a teardown.

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/launch/proctest"
	"github.com/seed-760dd1f1/cc/runtime/wire"
)

// strangerRSS bounds how much any process of the job may grow while strangers call: far
// above the noise of a running rank (a few MiB), far below what a decoder that believed an
// attacker's length (a 2 GiB frame) would take.
const strangerRSS = 64 << 20

// listener is one listening socket of a job's process, with the network namespace it
// lives in (a testbed host's, or this machine's).
type listener struct {
	pid  int
	addr netip.AddrPort
}

// dialAddr is where a stranger in the listener's namespace connects: a wildcard address
// (0.0.0.0, or [::], which takes IPv4 too and the testbed hosts have no ::1) means the
// namespace's IPv4 loopback.
func (l listener) dialAddr() string {
	a := l.addr
	if a.Addr().IsUnspecified() {
		a = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), a.Port())
	}
	return a.String()
}

// dial connects to l from inside the network namespace of l's process, so a listener on a
// testbed host's loopback is reachable too.
func (l listener) dial() (c net.Conn, err error) {
	err = inNetnsAt(fmt.Sprintf("/proc/%d/ns/net", l.pid), func() (err error) {
		c, err = net.DialTimeout("tcp", l.dialAddr(), time.Minute)
		return err
	})
	return c, err
}

// jobListeners lists the TCP sockets the processes pids listen on.
func jobListeners(t *testing.T, pids []int) []listener {
	t.Helper()
	var ls []listener
	for _, p := range pids {
		for _, a := range listeningTCP(t, p) {
			ls = append(ls, listener{p, a})
		}
	}
	return ls
}

// stranger is one way of talking to a port without being part of the job: what it
// writes, given the job's id (which a stranger could learn; the secret it cannot).
type stranger struct {
	name   string
	bytes  func(jobID string) []byte
	silent bool // connects, writes its bytes and then holds the connection open
}

// hello is a well-formed hello of kind for job id with a secret that is not the job's
// (nil: the empty secret), claiming rank 0.
func hello(jobID string, kind wire.Kind, secret []byte) []byte {
	var nonce [wire.NonceSize]byte
	rand.Read(nonce[:])
	f, err := wire.EncodeHello(wire.Job{ID: jobID, Secret: secret}, wire.Hello{Kind: kind, Rank: 0}, nonce)
	if err != nil {
		panic(err)
	}
	return f[:]
}

// pmiAbort is the two lines: a PMI-1 client claiming rank 0 asks for MPI_Abort.
const pmiAbort = "cmd=init pmi_version=1 pmi_subversion=1\ncmd=initack pmiid=0\ncmd=get kvsname=x key=y\ncmd=abort exitcode=13\n"

// agentFrame is an agent protocol frame of type typ with payload p (launch/agent's
// framing: 4-byte big-endian length of what follows, 1-byte type).
func agentFrame(n uint32, typ byte, p []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, n)
	return append(append(b, typ), p...)
}

func strangers() []stranger {
	wrong := []byte("not the job's secret")
	var ss []stranger
	ss = append(ss,
		stranger{name: "http", bytes: func(string) []byte { return []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n") }},
		stranger{name: "garbage", bytes: func(string) []byte { b := make([]byte, 64<<10); rand.Read(b); return b }},
		stranger{name: "truncated hello", bytes: func(id string) []byte { return hello(id, wire.KindBootstrap, wrong)[:60] }},
		stranger{name: "oversized job id", bytes: func(id string) []byte {
			h := hello(id, wire.KindBootstrap, wrong)
			h[11] = 255 // the job id's length byte: at most 64
			return append(h, make([]byte, 1<<20)...)
		}},
		stranger{name: "oversized agent frame", bytes: func(string) []byte {
			return agentFrame(0x7fffffff, 1, []byte(`{"Magic":"ccrun-agent","Version":1}`))
		}},
		stranger{name: "agent frames", bytes: func(string) []byte {
			hi := []byte(`{"Magic":"ccrun-agent","Version":1}`)
			sig := []byte(`{"Rank":0,"Signal":9}`)
			return append(agentFrame(uint32(len(hi)+1), 1, hi), agentFrame(uint32(len(sig)+1), 4, sig)...)
		}},
		stranger{name: "pmi", bytes: func(string) []byte { return []byte(pmiAbort) }},
		stranger{name: "oversized pmi line", bytes: func(string) []byte {
			return append([]byte("cmd=put kvsname=x key=y value="), bytes.Repeat([]byte("v"), 4<<20)...)
		}},
		stranger{name: "silent", silent: true, bytes: func(string) []byte { return nil }},
		stranger{name: "half a magic, then silent", silent: true, bytes: func(string) []byte { return []byte("cc-he") }},
	)
	for _, k := range []wire.Kind{wire.KindBootstrap, wire.KindData, wire.KindCollNet} {
		for _, sec := range []struct {
			name string
			b    []byte
		}{{"no secret", nil}, {"a wrong secret", wrong}} {
			ss = append(ss, stranger{name: fmt.Sprintf("%v hello with %s", k, sec.name), bytes: func(id string) []byte {
				// After the hello, what a rank would say next in each protocol, should the
				// server let it through: an abort, a join, data.
				return append(hello(id, k, sec.b), append([]byte(pmiAbort), make([]byte, 4096)...)...)
			}})
		}
	}
	return ss
}

// call is one stranger's connection: its local address names it in the job's log.
type call struct {
	name  string
	to    listener
	local string
	conn  net.Conn
}

// attack runs every stranger against every listener in ls, one at a time. A talking
// stranger writes, closes its sending side and waits (a hang guard, not a speed limit)
// until the server has hung up; silent ones are returned open, for the caller to close
// once the job has ended.
func attack(t *testing.T, ls []listener, jobID string) (calls []call) {
	t.Helper()
	for _, l := range ls {
		for _, s := range strangers() {
			c, err := l.dial()
			if err != nil {
				t.Errorf("stranger %q: connect to pid %d's %v: %v", s.name, l.pid, l.addr, err)
				continue
			}
			cl := call{name: s.name, to: l, local: c.LocalAddr().String(), conn: c}
			calls = append(calls, cl)
			c.SetDeadline(time.Now().Add(time.Minute))
			// A server may hang up before reading everything: a failed write is that.
			c.Write(s.bytes(jobID))
			if s.silent {
				continue
			}
			c.(*net.TCPConn).CloseWrite()
			got, err := io.Copy(io.Discard, c)
			if err != nil && !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("stranger %q on pid %d's %v: %v after %d bytes, want the connection closed", s.name, l.pid, l.addr, err, got)
			} else if got != 0 {
				t.Errorf("stranger %q on pid %d's %v: the server answered %d bytes, want none", s.name, l.pid, l.addr, got)
			}
			c.Close()
		}
	}
	return calls
}

// vmRSS is process pid's resident set in bytes (0 once it is gone).
func vmRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	m := regexp.MustCompile(`(?m)^VmRSS:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

// jobIDOf reads CC_JOB_ID from process pid's environment.
func jobIDOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range strings.Split(string(b), "\x00") {
		if v, ok := strings.CutPrefix(kv, "CC_JOB_ID="); ok {
			return v
		}
	}
	t.Fatalf("pid %d has no CC_JOB_ID", pid)
	return ""
}

// strangersDuringJob runs ccrun with args (an endless cc-perf sweep of sweepRows rows with
// -c 1), attacks every listener of every process of the job (those whose command line holds
// the test binaries' directory), lets the job run a whole sweep more, ends it with SIGUSR1
// and checks that it ran to exit 0 with whole sweeps of rows all #wrong 0, at most one line
// of its output naming each stranger, and no process grown by more than strangerRSS.
// minListeners is the number of listening sockets the job must have (else the test proves
// nothing).
func strangersDuringJob(t *testing.T, sweepRows, minListeners int, args ...string) {
	t.Helper()
	bin, _ := binaries(t)
	marker := bin[:strings.LastIndex(bin, "/")]
	j := startCCRun(t, args...)
	// The first data row: every rank is in the sweep.
	j.waitOutput(t, wrongRe, 3*time.Minute)
	pids := rankPids(j.out.String())
	if len(pids) < 2 {
		t.Fatalf("want the pids of two ranks or more in the device lines; stdout:\n%s", j.out)
	}
	jobID := jobIDOf(t, pids[0])
	procs := proctest.WithCmdline(marker)
	all := jobListeners(t, procs)
	if len(all) < minListeners {
		t.Fatalf("the job's processes %v listen on %v, want %d sockets or more", procs, all, minListeners)
	}
	rss := map[int]int64{}
	for _, p := range procs {
		rss[p] = vmRSS(p)
	}
	errBefore := len(j.err.String())
	// Phase 1: rank 0 stopped, everyone else's sockets; phase 2: rank 1 stopped, rank 0's.
	var calls []call
	for _, phase := range []struct{ stop, target int }{{pids[0], -1}, {pids[1], pids[0]}} {
		var ls []listener
		for _, l := range all {
			if (phase.target < 0 && l.pid != phase.stop) || l.pid == phase.target {
				ls = append(ls, l)
			}
		}
		if err := syscall.Kill(phase.stop, syscall.SIGSTOP); err != nil {
			t.Fatalf("stop pid %d: %v", phase.stop, err)
		}
		// Should the test end early, a stopped rank must still see ccrun's SIGTERM.
		t.Cleanup(func() { syscall.Kill(phase.stop, syscall.SIGCONT) })
		calls = append(calls, attack(t, ls, jobID)...)
		for _, p := range procs {
			if grown := vmRSS(p) - rss[p]; rss[p] > 0 && grown > strangerRSS {
				t.Errorf("pid %d grew by %d MiB while strangers called, want at most %d MiB", p, grown>>20, strangerRSS>>20)
			}
		}
		if err := syscall.Kill(phase.stop, syscall.SIGCONT); err != nil {
			t.Fatalf("continue pid %d: %v", phase.stop, err)
		}
	}
	// A whole sweep after the strangers: every size ran again.
	rowsAfter := len(wrongRe.FindAllString(j.out.String(), -1)) + sweepRows
	j.waitFor(t, fmt.Sprintf("%d data rows", rowsAfter), 3*time.Minute, func() bool {
		return len(wrongRe.FindAllString(j.out.String(), -1)) >= rowsAfter
	})
	errAtEnd := len(j.err.String())
	if err := j.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	code := j.wait(t, 5*time.Minute)
	for _, c := range calls {
		c.conn.Close()
	}
	if code != 0 {
		t.Fatalf("exit %d after SIGUSR1, want 0 (the job's end after its sweep); stdout:\n%s\nstderr:\n%s", code, j.out, j.err)
	}
	rows := checkWrong(t, j.out.String())
	t.Logf("%d strangers on %d sockets of %d processes; the job ran %d rows in all, the last %d or more after the last stranger",
		len(calls), len(all), len(procs), rows, sweepRows)
	if rows < rowsAfter || rows%sweepRows != 0 {
		t.Errorf("%d data rows, want whole sweeps of %d, %d rows or more", rows, sweepRows, rowsAfter)
	}
	if !strings.Contains(j.out.String(), "# Out of bounds values : 0 OK") {
		t.Errorf("no footer after SIGUSR1; stdout:\n%s", j.out)
	}
	// At most one line per stranger, naming it by its address. The kernel reuses a
	// source port for a connection to another listener once the earlier one has closed,
	// so a line a rank writes (NCCL's "host:pid:tid [dev]" prefix) names this stranger
	// only if that rank is the process it called.
	logged := strings.Split(j.out.String()+j.err.String(), "\n")
	for _, c := range calls {
		var named []string
		for _, l := range logged {
			if m := ncclPrefix.FindStringSubmatch(l); strings.Contains(l, c.local) && (m == nil || m[1] == strconv.Itoa(c.to.pid)) {
				named = append(named, l)
			}
		}
		if len(named) > 1 {
			t.Errorf("stranger %q from %s on pid %d's %v: %d lines, want at most one:\n%s", c.name, c.local, c.to.pid, c.to.addr, len(named), strings.Join(named, "\n"))
		}
	}
	if extra := strangerLines(j.err.String()[errBefore:errAtEnd], calls); len(extra) > 0 {
		t.Errorf("lines of stderr naming no stranger:\n%s", strings.Join(extra, "\n"))
	}
}

// rankEnded is ccrun -v's line for a rank that ended well.
// ncclPrefix is the start of a line a rank logs (NCCL_DEBUG): host:pid:tid [dev]; group 1
// is the pid.
var ncclPrefix = regexp.MustCompile(`[\w.-]+:(\d+):\d+ \[\d+\] `)

var rankEnded = regexp.MustCompile(`^ccrun: rank \d+ on \S+ \(pid \d+\): exit code 0$`)

// strangerLines returns the lines of stderr (what the job wrote from the first stranger
// on) that name none of calls' addresses: what the strangers caused that cannot be told
// apart from a fault of the job.
func strangerLines(stderr string, calls []call) []string {
	var extra []string
	for _, l := range strings.Split(strings.TrimSpace(stderr), "\n") {
		if l == "" || slices.ContainsFunc(calls, func(c call) bool { return strings.Contains(l, c.local) }) {
			continue
		}
		if rankEnded.MatchString(l) { // -v's line for each rank at the end of any job
			continue
		}
		extra = append(extra, l)
	}
	return extra
}

// strangerLogs turns every log on, so that "at most one line per stranger" is checked
// where lines are written: ccrun's (and its root's) with -v, the ranks' warnings
// (the data listeners' drops) with NCCL_DEBUG=WARN.
var strangerLogs = []string{"-v", "-x", "NCCL_DEBUG=WARN"}

// strangerSweep is the cc-perf sweep of the stranger tests: 8 B .. 512 KiB by 4, 9 rows,
// data checked, until SIGUSR1 (-N 0).
var strangerSweep = []string{"all_reduce", "-b", "8", "-e", "1M", "-f", "4", "-c", "1", "-w", "1", "-n", "5", "-N", "0"}

// strangerSweepRows is the rows of one strangerSweep.
const strangerSweepRows = 9

// TestStrangersLocal: 4 ranks on this machine (shared memory and loopback TCP): ccrun's
// root and the 4 ranks' data listeners.
func TestStrangersLocal(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	_, perf := binaries(t)
	strangersDuringJob(t, strangerSweepRows, 5, append(append(append(strangerLogs, npFlags(4)...), perf), strangerSweep...)...)
}

// TestE2EStrangersAgents: 4 ranks on tb1 and tb2 through their agents: ccrun's root, the
// ranks' data listeners on the hosts' addresses; the agents listen on nothing.
func TestE2EStrangersAgents(t *testing.T) {
	tb := needTestbed(t)
	_, perf := binaries(t)
	strangersDuringJob(t, strangerSweepRows, 5, append(append(strangerLogs, "--ssh-config", tb.sshConfig, "-H", tb.addr(1)+":2,"+tb.addr(2)+":2", "-np", "4", perf), strangerSweep...)...)
}

// TestE2EStrangersCollNet: a CollNet job (8 ranks on tb1..tb4, the aggregation server on
// its own host): the server's socket too, with CollNet hellos from a head that does not
// know the secret.
func TestE2EStrangersCollNet(t *testing.T) {
	tb := needTestbed(t)
	_, perf := binaries(t)
	strangersDuringJob(t, strangerSweepRows, 10, append(strangerLogs, tb.collnetArgs(perf, strangerSweep...)...)...)
}
