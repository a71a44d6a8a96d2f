package launch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// pmiClient is a fake MPICH rank's PMI-1 side: it finds the server through PMI_PORT and
// PMI_ID in the environment ccrun gives it, as MPICH's simple PMI does.
type pmiClient struct {
	nc net.Conn
	br *bufio.Reader
}

func dialPMI(p *fakeProc) (*pmiClient, error) {
	env := lookupIn(p.spec.Env)
	addr, ok := env(EnvPMIPort)
	id, ok2 := env(EnvPMIID)
	if !ok || !ok2 {
		return nil, fmt.Errorf("no %s/%s in %q", EnvPMIPort, EnvPMIID, p.spec.Env)
	}
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	nc.SetDeadline(time.Now().Add(30 * time.Second)) // hang guard
	c := &pmiClient{nc: nc, br: bufio.NewReader(nc)}
	for _, want := range []string{"cmd=initack", "cmd=set size=", "cmd=set rank=" + id, "cmd=set debug="} {
		if want == "cmd=initack" {
			fmt.Fprintf(nc, "cmd=initack pmiid=%s\n", id)
		}
		if line, err := c.br.ReadString('\n'); err != nil || !strings.HasPrefix(line, want) {
			nc.Close()
			return nil, fmt.Errorf("handshake: got %q (%v), want %q", line, err, want)
		}
	}
	return c, nil
}

// pmiRank is a fake rank's body that connects to the PMI server and then runs body.
func pmiRank(t *testing.T, body func(p *fakeProc, c *pmiClient) Exit) func(p *fakeProc) Exit {
	return func(p *fakeProc) Exit {
		c, err := dialPMI(p)
		if err != nil {
			t.Errorf("rank %d: %v", p.spec.Slot.Rank, err)
			return Exit{Code: 9}
		}
		defer c.nc.Close()
		return body(p, c)
	}
}

// pmiJob is fakeJob with a PMI server: the fake hosts have no agent, so their ranks get
// the open port.
func pmiJob(np int, f *fakeRemote) Options {
	o := fakeJob(np, f)
	o.PMI = true
	return o
}

func (c *pmiClient) call(line string) string {
	fmt.Fprintln(c.nc, line)
	reply, _ := c.br.ReadString('\n')
	return strings.TrimSpace(reply)
}

// TestPMIJob: four fake ranks on two hosts exchange keys through ccrun's PMI server; the
// node map says which ranks share a host. Strangers' garbage and a second claim of rank
// 0's PMI_ID are dropped without harm.
func TestPMIJob(t *testing.T) {
	f := &fakeRemote{body: pmiRank(t, func(p *fakeProc, c *pmiClient) Exit {
		r := p.spec.Slot.Rank
		if r == 0 { // a stranger's garbage on the PMI port is dropped; the job goes on
			addr, _ := lookupIn(p.spec.Env)(EnvPMIPort)
			for _, junk := range []string{"GET / HTTP/1.0\r\n\r\n", "41    cmd=fullinit;pmirank=0;", "cmd=initack pmiid=0\n"} {
				if nc, err := net.Dial("tcp", addr); err == nil {
					fmt.Fprint(nc, junk)
					nc.SetDeadline(time.Now().Add(30 * time.Second))
					if n, err := nc.Read(make([]byte, 64)); err == nil {
						t.Errorf("stranger %q got %d bytes, want the connection closed", junk, n)
					}
					nc.Close()
				}
			}
		}
		kvs := strings.TrimPrefix(c.call("cmd=get_my_kvsname"), "cmd=my_kvsname kvsname=")
		for _, rt := range [][2]string{
			{"cmd=get kvsname=" + kvs + " key=PMI_process_mapping", "cmd=get_result rc=0 msg=success value=(vector,(0,2,2))"},
			{fmt.Sprintf("cmd=put kvsname=%s key=card%d value=host-%s", kvs, r, p.spec.Slot.Host), "cmd=put_result rc=0 msg=success"},
			{"cmd=barrier_in", "cmd=barrier_out"},
			{fmt.Sprintf("cmd=get kvsname=%s key=card%d", kvs, (r+2)%4), fmt.Sprintf("cmd=get_result rc=0 msg=success value=host-h%d", 2-r/2)},
			{"cmd=finalize", "cmd=finalize_ack"},
		} {
			if got := c.call(rt[0]); got != rt[1] {
				t.Errorf("rank %d: %s\n got %q\nwant %q", r, rt[0], got, rt[1])
			}
		}
		return Exit{}
	})}
	runClean(t, pmiJob(4, f), f)
}

// TestPMIFailures: a rank's MPI_Abort ends the job with the abort's code; a rank that
// closes its PMI connection without finalize, or exits 0, ends it too, while the others
// wait in the PMI barrier, which would otherwise never end.
func TestPMIFailures(t *testing.T) {
	tests := []struct {
		name    string
		victim  func(c *pmiClient, p *fakeProc) Exit
		code    int
		summary string
	}{
		{"abort", func(c *pmiClient, p *fakeProc) Exit {
			fmt.Fprintln(c.nc, "cmd=abort exitcode=300")
			return untilSignal(p) // no reply: MPICH waits for the teardown
		}, 300 & 0xff, "rank 1 called MPI_Abort with exit code 300"},
		{"closed before finalize", func(c *pmiClient, p *fakeProc) Exit {
			c.nc.Close()
			time.Sleep(50 * time.Millisecond) // the PMI server sees the close before the exit
			return Exit{}
		}, 1, "rank 1 closed its PMI connection without MPI_Finalize"},
		{"exit code wins over the lost connection", func(c *pmiClient, p *fakeProc) Exit {
			c.nc.Close()
			time.Sleep(50 * time.Millisecond)
			return Exit{Code: 4}
		}, 4, "Exit code:  4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fakeRemote{body: pmiRank(t, func(p *fakeProc, c *pmiClient) Exit {
				if p.spec.Slot.Rank == 1 {
					return tt.victim(c, p)
				}
				fmt.Fprintln(c.nc, "cmd=barrier_in")
				read := make(chan error, 1)
				go func() {
					_, err := c.br.ReadString('\n')
					read <- err
				}()
				ex := untilSignal(p)
				c.nc.Close()
				if err := <-read; err == nil {
					t.Errorf("rank %d: the barrier ended without rank 1", p.spec.Slot.Rank)
				}
				return ex
			})}
			rep, err := Run(context.Background(), pmiJob(3, f))
			f.wg.Wait()
			if err != nil {
				t.Fatal(err)
			}
			var sum strings.Builder
			rep.WriteSummary(&sum)
			if rep.ExitCode() != tt.code || rep.Cause == nil || rep.Cause.Rank != 1 || !strings.Contains(sum.String(), tt.summary) {
				t.Errorf("exit %d, want %d; cause %+v; summary:\n%s\nwant it to contain %q", rep.ExitCode(), tt.code, rep.Cause, sum.String(), tt.summary)
			}
		})
	}
}

// TestAllowListener: the open PMI port accepts the job's hosts only; a stranger is
// dropped with one log line, and the next allowed connection is accepted.
func TestAllowListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	al := &allowListener{Listener: ln, allow: map[netip.Addr]bool{netip.MustParseAddr("127.0.0.2"): true},
		logf: func(format string, args ...any) { logs = append(logs, fmt.Sprintf(format, args...)) }}
	defer al.Close()
	from := func(ip string) net.Conn {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
		nc, err := d.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		return nc
	}
	stranger := from("127.0.0.3")
	rank := from("127.0.0.2")
	got, err := al.Accept() // the stranger came first: it is dropped on the way
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	if got.RemoteAddr().String() != rank.LocalAddr().String() {
		t.Errorf("accepted %s, want %s", got.RemoteAddr(), rank.LocalAddr())
	}
	want := fmt.Sprintf("PMI server: dropped a connection from %s: not one of the job's hosts", stranger.LocalAddr())
	if len(logs) != 1 || logs[0] != want {
		t.Errorf("log %q, want [%q]", logs, want)
	}
	stranger.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := stranger.Read(make([]byte, 1)); err == nil {
		t.Errorf("stranger read %d bytes, want its connection closed", n)
	}
}

// routeRemote is a fakeRemote that relays PMI for some hosts (an agent's PMI_FD) and
// forwards a port for others (ListenPMI returns a loopback listener, or fails).
type routeRemote struct {
	*fakeRemote
	relay      map[string]bool
	forwardErr error
	forwarded  []string // the addresses ListenPMI returned
}

func (r *routeRemote) PMIFD(host string) bool { return r.relay[host] }

func (r *routeRemote) ListenPMI(host string) (net.Listener, error) {
	if r.forwardErr != nil {
		return nil, r.forwardErr
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err == nil {
		r.forwarded = append(r.forwarded, ln.Addr().String())
	}
	return ln, err
}

// privateOrPort is a fake rank's PMI client: over the connection Spec.PMI serves (no
// handshake), else over PMI_PORT.
func privateOrPort(p *fakeProc) (*pmiClient, error) {
	if p.spec.PMI == nil {
		return dialPMI(p)
	}
	if _, ok := lookupIn(p.spec.Env)(EnvPMIPort); ok {
		return nil, fmt.Errorf("both Spec.PMI and %s", EnvPMIPort)
	}
	mine, theirs := net.Pipe()
	mine.SetDeadline(time.Now().Add(30 * time.Second)) // hang guard
	p.spec.PMI(theirs)
	return &pmiClient{nc: mine, br: bufio.NewReader(mine)}, nil
}

// TestPMIRoutes: each host's ranks reach the one PMI server by the most private way its
// Remote offers (a relayed connection, a forwarded port, else the open port, which -v
// names with the reason), and meet in its barrier.
func TestPMIRoutes(t *testing.T) {
	tests := []struct {
		name       string
		relay      map[string]bool
		forwardErr error
		open       string // the -v line's start, "" for none
	}{
		{"relayed and forwarded", map[string]bool{"h1": true}, nil, ""},
		{"forwarding refused", map[string]bool{"h1": true}, errors.New("host h2: tcpip-forward refused"),
			"PMI server: ranks on h2 reach it on an open TCP port, 127.0.0.1:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			envs := map[int][]string{}
			f := &fakeRemote{body: func(p *fakeProc) Exit {
				mu.Lock()
				envs[p.spec.Slot.Rank] = p.spec.Env
				mu.Unlock()
				c, err := privateOrPort(p)
				if err != nil {
					t.Errorf("rank %d: %v", p.spec.Slot.Rank, err)
					return Exit{Code: 9}
				}
				defer c.nc.Close()
				for _, rt := range [][2]string{{"cmd=barrier_in", "cmd=barrier_out"}, {"cmd=finalize", "cmd=finalize_ack"}} {
					if got := c.call(rt[0]); got != rt[1] {
						t.Errorf("rank %d: %s: got %q, want %q", p.spec.Slot.Rank, rt[0], got, rt[1])
					}
				}
				return Exit{}
			}}
			r := &routeRemote{fakeRemote: f, relay: tt.relay, forwardErr: tt.forwardErr}
			o := pmiJob(4, f)
			o.Remote = r
			var logs []string
			o.Logf = func(format string, args ...any) {
				mu.Lock()
				defer mu.Unlock()
				logs = append(logs, fmt.Sprintf(format, args...))
			}
			runClean(t, o, f)
			for rank := range 2 { // h1's: relayed
				if port, ok := lookupIn(envs[rank])(EnvPMIPort); ok {
					t.Errorf("rank %d: PMI_PORT=%s, want a relayed connection", rank, port)
				}
			}
			for rank := 2; rank < 4; rank++ { // h2's
				port, _ := lookupIn(envs[rank])(EnvPMIPort)
				if tt.forwardErr == nil && (len(r.forwarded) != 1 || port != r.forwarded[0]) {
					t.Errorf("rank %d: PMI_PORT=%s, want the forwarded %v", rank, port, r.forwarded)
				}
			}
			var open []string
			for _, l := range logs {
				if strings.Contains(l, "open TCP port") {
					open = append(open, l)
				}
			}
			switch {
			case tt.open == "" && len(open) > 0:
				t.Errorf("-v says %q, want no open port", open)
			case tt.open != "" && (len(open) != 1 || !strings.HasPrefix(open[0], tt.open) || !strings.HasSuffix(open[0], "accepting 127.0.0.1 only (host h2: tcpip-forward refused)")):
				t.Errorf("-v says %q, want one line starting %q and naming the reason", open, tt.open)
			}
		})
	}
}

// TestHostIPs: the open port's allowlist takes an address as it is and a name as what it
// resolves to (srun's NodeAddr may be a name).
func TestHostIPs(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"10.252.0.1", "[10.252.0.1]"},
		{"::ffff:10.0.0.1", "[10.0.0.1]"},
		{"localhost", "127.0.0.1"}, // and ::1 where /etc/hosts says so
		{"no-such-host.invalid", "[]"},
	} {
		if got := fmt.Sprint(hostIPs(tt.in)); !strings.Contains(got, tt.want) {
			t.Errorf("hostIPs(%s) = %s, want it to hold %s", tt.in, got, tt.want)
		}
	}
}
