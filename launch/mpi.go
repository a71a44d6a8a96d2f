package launch

import (
	"errors"
	"fmt"
	"net"

	"github.com/seed-760dd1f1/cc/launch/pmi"
)

// The PMI variables ccrun sets for each rank, besides PMI_RANK and PMI_SIZE: where the
// job's PMI-1 server is, and the rank's id in its handshake (see launch/pmi).
const (
	EnvPMIPort = "PMI_PORT"
	EnvPMIID   = "PMI_ID"
)

// pmiService is a job's PMI-1 server and its goroutine.
type pmiService struct {
	srv    *pmi.Server
	port   int
	served chan struct{}
}

// servePMI starts the job's PMI-1 server on the bootstrap root's address (so every rank
// that reaches the root reaches it too) with the job's node map.
func (j *job) servePMI() (*pmiService, error) {
	host, _, err := net.SplitHostPort(j.ln.Addr().String())
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("PMI server: listen on %s: %w", host, err)
	}
	nodes := make([]int, len(j.slots))
	for i, s := range j.slots {
		nodes[i] = s.NodeRank
	}
	srv := pmi.NewServer(pmi.Config{
		NRanks: len(j.slots), KVSName: "kvs_" + j.id + "_0", Mapping: pmi.ProcessMapping(nodes), Logf: j.o.Logf,
	})
	p := &pmiService{srv: srv, port: ln.Addr().(*net.TCPAddr).Port, served: make(chan struct{})}
	go func() {
		defer close(p.served)
		if err := srv.Serve(ln); err != nil {
			j.o.Logf("PMI server: %v", err)
		}
	}()
	return p, nil
}

// close ends every PMI connection and waits for the server.
func (p *pmiService) close() {
	p.srv.Close()
	<-p.served
}

// pmiExited tells the PMI server that rank r has ended (see pmi.Server.Exited).
func (j *job) pmiExited(r int) { j.pmi.srv.Exited(r) }

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
