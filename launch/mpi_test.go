package launch

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
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
	rep, err := Run(context.Background(), pmiJob(4, f))
	f.wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if rep.Cause != nil {
		t.Fatalf("cause %+v, want none", rep.Cause)
	}
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
