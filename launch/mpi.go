package launch

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/seed-760dd1f1/cc/launch/pmi"
)

// The PMI variables ccrun sets for each rank of a PMI job, besides PMI_RANK and PMI_SIZE:
// the inherited descriptor of its private connection to the job's PMI-1 server, or
// (where no descriptor can reach the rank) the server's address and the rank's id in its
// handshake (see launch/pmi).
const (
	EnvPMIFD   = "PMI_FD"
	EnvPMIPort = "PMI_PORT"
	EnvPMIID   = "PMI_ID"
)

// PMIRelay is a Remote that can give the ranks of some of its hosts a private PMI
// connection: it honours Spec.PMI there (an agent makes the socketpair on the host and
// relays its bytes over the job's SSH session).
type PMIRelay interface {
	// PMIFD reports whether ranks started on host honour Spec.PMI.
	PMIFD(host string) bool
}

// PMIForwarder is a Remote that can open a port on a host's loopback whose connections
// reach ccrun through the host's SSH connection (a remote port forward), so that ranks
// there reach the PMI server with nothing listening on a routable address.
type PMIForwarder interface {
	// ListenPMI opens the port on host; the listener's Addr is the rank's PMI_PORT there.
	ListenPMI(host string) (net.Listener, error)
}

// pmiService is a job's PMI-1 server: the connections handed to it (PMI_FD) and the
// listeners of hosts whose ranks need PMI_PORT.
type pmiService struct {
	srv *pmi.Server
	// port maps a host whose ranks get PMI_PORT to its value; the ranks of other hosts
	// get PMI_FD.
	port map[string]string
	wg   sync.WaitGroup
	logf func(format string, args ...any)
}

// servePMI starts the job's PMI-1 server with the job's node map and decides how each
// host's ranks reach it: local ranks, and remote ranks started by an agent, through
// PMI_FD; other remote ranks through a port forwarded to their host's loopback; what is
// left (no agent and no forwarding there, srun) through one open port on the bootstrap
// root's address that accepts only the job's hosts.
func (j *job) servePMI() (*pmiService, error) {
	nodes := make([]int, len(j.slots))
	var hosts []string
	for i, s := range j.slots {
		nodes[i] = s.NodeRank
		if !slices.Contains(hosts, s.Host) {
			hosts = append(hosts, s.Host)
		}
	}
	p := &pmiService{
		srv: pmi.NewServer(pmi.Config{
			NRanks: len(j.slots), KVSName: "kvs_" + j.id + "_0", Mapping: pmi.ProcessMapping(nodes), Logf: j.o.Logf,
		}),
		port: map[string]string{}, logf: j.o.Logf,
	}
	relay, _ := j.o.Remote.(PMIRelay)
	fwd, _ := j.o.Remote.(PMIForwarder)
	var open, why []string
	for _, h := range hosts {
		switch {
		case j.local[h] || relay != nil && relay.PMIFD(h):
			for _, s := range j.slots {
				if s.Host == h {
					p.srv.Reserve(s.Rank)
				}
			}
			continue
		case fwd != nil:
			ln, err := fwd.ListenPMI(h)
			if err == nil {
				p.port[h] = ln.Addr().String()
				p.serve(ln)
				continue
			}
			why = append(why, err.Error())
		default:
			why = append(why, "host "+h+": no agent and no SSH connection to forward a port over")
		}
		open = append(open, h)
	}
	if len(open) > 0 {
		if err := j.openPMIPort(p, open, why); err != nil {
			p.close()
			return nil, err
		}
	}
	return p, nil
}

// openPMIPort is the fallback: one TCP port on the bootstrap root's address, for the
// ranks of hosts (each named in why) that no private connection reaches. It accepts
// connections only from those hosts' addresses and says so in one -v line.
func (j *job) openPMIPort(p *pmiService, hosts, why []string) error {
	host, _, err := net.SplitHostPort(j.ln.Addr().String())
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return fmt.Errorf("PMI server: listen on %s: %w", host, err)
	}
	allow := map[netip.Addr]bool{}
	var names []string
	for _, h := range hosts {
		_, remote := j.o.Remote.Addrs(h)
		for _, ip := range hostIPs(remote) {
			allow[ip] = true
			names = append(names, ip.String())
		}
		p.port[h] = pmiPort(j.rootAddr(h), ln.Addr().(*net.TCPAddr).Port)
	}
	j.o.Logf("PMI server: ranks on %s reach it on an open TCP port, %s, accepting %s only (%s)",
		strings.Join(hosts, ", "), ln.Addr(), strings.Join(names, ", "), strings.Join(why, "; "))
	p.serve(&allowListener{Listener: ln, allow: allow, logf: j.o.Logf})
	return nil
}

// hostIPs is a host's address as the allowlist needs it: the address itself, or a name's
// addresses (srun's NodeAddr may be a name); none if it does not resolve.
func hostIPs(addr string) []netip.Addr {
	if a, err := netip.ParseAddr(addr); err == nil {
		return []netip.Addr{a.Unmap()}
	}
	names, _ := net.LookupHost(addr)
	var ips []netip.Addr
	for _, n := range names {
		if a, err := netip.ParseAddr(n); err == nil {
			ips = append(ips, a.Unmap())
		}
	}
	return ips
}

// serve serves ln's connections until close.
func (p *pmiService) serve(ln net.Listener) {
	p.wg.Go(func() {
		if err := p.srv.Serve(ln); err != nil {
			p.logf("PMI server: %v", err)
		}
	})
}

// close ends every PMI connection and listener and waits for the server.
func (p *pmiService) close() {
	p.srv.Close()
	p.wg.Wait()
}

// closePMI closes the job's PMI server, if any.
func (j *job) closePMI() {
	if j.pmi != nil {
		j.pmi.close()
	}
}

// allowListener accepts connections from the addresses in allow only; each other one is
// closed with one log line, as the bootstrap root drops strangers.
type allowListener struct {
	net.Listener
	allow map[netip.Addr]bool
	logf  func(format string, args ...any)
}

// Accept returns the next connection from an allowed address.
func (l *allowListener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if ap, err := netip.ParseAddrPort(nc.RemoteAddr().String()); err == nil && l.allow[ap.Addr().Unmap()] {
			return nc, nil
		}
		l.logf("PMI server: dropped a connection from %s: not one of the job's hosts", nc.RemoteAddr())
		nc.Close()
	}
}

// pmiEnv gives the spec of slot s its way to the PMI server: PMI_PORT and PMI_ID, or a
// private connection (Spec.PMI, the spawner sets PMI_FD).
func (j *job) pmiEnv(spec *Spec, s Slot) {
	if j.pmi == nil {
		return
	}
	if addr, ok := j.pmi.port[s.Host]; ok {
		spec.Env = append(spec.Env, EnvPMIPort+"="+addr, EnvPMIID+"="+strconv.Itoa(s.Rank))
		return
	}
	srv, r := j.pmi.srv, s.Rank
	spec.PMI = func(nc net.Conn) { srv.ServeConn(nc, r) }
}

// pmiEvents is the PMI server's rank failures; nil (never ready) without a server.
func (j *job) pmiEvents() <-chan pmi.Event {
	if j.pmi == nil {
		return nil
	}
	return j.pmi.srv.Events()
}

// pmiExited tells the PMI server that rank r has ended (see pmi.Server.Exited).
func (j *job) pmiExited(r int) {
	if j.pmi != nil {
		j.pmi.srv.Exited(r)
	}
}

// pmiPort is PMI_PORT for the ranks whose bootstrap root address is rootAddr: the same
// host, the PMI server's port.
func pmiPort(rootAddr string, port int) string {
	host, _, _ := net.SplitHostPort(rootAddr)
	return net.JoinHostPort(host, fmt.Sprint(port))
}

// handlePMI ends the job on a rank's PMI failure: MPI_Abort (the job's exit status is the
// abort's code), a connection closed before MPI_Finalize, or a request ccrun does not
// serve. A lost connection of a rank whose non-zero exit already ended the job adds
// nothing.
func (s *supervisor) handlePMI(ev pmi.Event) {
	if ev.Rank < 0 || ev.Rank >= len(s.rep.Ranks) {
		return
	}
	st := &s.rep.Ranks[ev.Rank]
	if ev.Kind == pmi.EventLost && st.Exited && st.Exit.Failed() {
		return
	}
	s.fail(&Cause{Kind: CauseAbort, Rank: ev.Rank, Host: st.Slot.Host, Err: ev.Err})
}

// pmiLost reports whether err is the PMI server's "closed before finalize", which the
// rank's exit status, when it comes, explains better.
func pmiLost(err error) bool {
	var le *pmi.LostError
	return errors.As(err, &le)
}

// abortCode returns the exit code a rank passed to MPI_Abort, if err is its abort.
func abortCode(err error) (int, bool) {
	var ae *pmi.AbortError
	if errors.As(err, &ae) {
		return ae.Code & 0xff, true
	}
	return 0, false
}
