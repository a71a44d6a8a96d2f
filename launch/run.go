package launch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/seed-760dd1f1/cc/launch/hostfile"
	"github.com/seed-760dd1f1/cc/runtime/bootstrap"
	"github.com/seed-760dd1f1/cc/runtime/wire"
)

// Defaults of Options.
const (
	DefaultGrace       = 3 * time.Second
	DefaultMaxParallel = 64
)

// killWait bounds the wait for exit statuses after SIGKILL; a rank that has not reported
// by then is on a host that stopped answering. A variable for tests.
var killWait = 5 * time.Second

// RemoteHost is a host reached through a Remote.
type RemoteHost struct {
	Name string
	// User is the login name from the hostfile (user=), or "" for the default.
	User string
	// Port is the SSH port from the hostfile (port=), or 0 for the default.
	Port int
}

// Remote starts ranks on other hosts; launch/sshspawn provides it over SSH (see SSH).
type Remote interface {
	// Connect reaches every host, concurrently. The error names the first host that failed.
	Connect(ctx context.Context, hosts []RemoteHost) error
	// Addrs returns ccrun's own address on the connection to host (where ranks there reach
	// the bootstrap root) and the host's address.
	Addrs(host string) (local, remote string)
	// Preload copies the executable at path to host and returns its path there.
	Preload(ctx context.Context, host, path string) (string, error)
	// Start starts a rank on spec.Slot.Host.
	Spawner
	// Close ends every connection; pending Waits return.
	Close() error
}

// Options is one job.
type Options struct {
	// Hosts to run on (see LocalHost for a job on this machine only).
	Hosts     []hostfile.Host
	Placement Placement
	// Argv is the program and its arguments.
	Argv []string
	// Environ is ccrun's environment (forwarding source; what local ranks inherit).
	Environ []string
	Env     EnvRequest
	// Wdir is the ranks' working directory. Empty: local ranks inherit ccrun's, remote ranks
	// use ccrun's if it exists there, else their login directory.
	Wdir   string
	Output Output
	// Stdin is ccrun's standard input; StdinTo says which ranks read it (the zero value:
	// rank 0, as with mpirun). Nil: every rank reads /dev/null.
	Stdin   io.Reader
	StdinTo StdinTarget
	// Timeout ends the job with exit status 110 when it expires; 0 means none.
	Timeout time.Duration
	// Grace is the time between SIGTERM and SIGKILL at teardown.
	Grace time.Duration
	// Remote starts ranks on hosts for which IsLocal is false.
	Remote Remote
	// IsLocal reports whether a host name means this machine (default: IsLocalName).
	IsLocal func(host string) bool
	// RootAddr, when set, is the host or address all ranks use to reach ccrun's bootstrap
	// root; by default local ranks use 127.0.0.1 and each remote host the address of ccrun's
	// end of its SSH connection.
	RootAddr string
	// Preload copies the program to each remote host before starting (--preload-binary).
	Preload bool
	// Forward carries signals to pass on to every rank (SIGUSR1, SIGUSR2).
	Forward <-chan os.Signal
	// Kill carries signals that end the job at once: SIGKILL to every rank's process group,
	// without the grace period, then the usual wait for their exit statuses (ccrun sends the
	// second Ctrl-C, SIGTERM or SIGHUP here; the first one ends ctx).
	Kill <-chan os.Signal
	// MaxParallel bounds rank starts in flight.
	MaxParallel int
	// Logf receives ccrun's diagnostics; nil discards them.
	Logf func(format string, args ...any)
	// Placed, when set, receives the ranks' slots once they are final (the ranks of two
	// names of one machine numbered as one node, see Renumber), before any rank starts:
	// --display-map prints them.
	Placed func([]Slot)
	// CollNet, when set, starts the CollNet aggregation server before the
	// ranks and supervises it with them (see CollNetServer).
	CollNet *CollNetServer
	// PMI serves the PMI-1 wire protocol to the ranks (an MPICH-family program, see
	// launch/pmi): each rank gets a private connection to the job's PMI server (PMI_FD)
	// or, where none can reach it, PMI_PORT (see servePMI). Without it the job has no
	// PMI server and the ranks get neither.
	PMI bool
	// SkipUnreachable connects to every remote host before ranks are placed and drops
	// those that cannot be reached (see Unreachable); every rank gets their names in
	// CC_UNREACHABLE_HOSTS. Too few hosts left for the ranks is an error, as without it.
	SkipUnreachable bool
	// Skipped, when set, is told of each host SkipUnreachable dropped, and why.
	Skipped func(host string, why error)
}

// LocalHost is the host list of a job on this machine only: one slot per CPU ccrun may
// run on (runtime.NumCPU: the CPUs of its affinity mask), as mpirun without a hostfile.
// More ranks need Placement.Oversubscribe.
func LocalHost() []hostfile.Host {
	return []hostfile.Host{{Name: "localhost", Slots: runtime.NumCPU()}}
}

// LocalCores gives every host of this machine (isLocal) that no hostfile line gave a slot
// count one slot per CPU ccrun may run on (within its max_slots), as Open MPI gives a host
// without slots= its cores. Other such hosts keep one slot per line naming them: ccrun
// cannot count a remote host's cores before it has connected, and it places ranks before.
func LocalCores(hosts []hostfile.Host, isLocal func(string) bool) []hostfile.Host {
	out := slices.Clone(hosts)
	for i, h := range out {
		if h.NoCount && isLocal(h.Name) {
			out[i].Slots, out[i].NoCount = runtime.NumCPU(), false
			if h.MaxSlots > 0 {
				out[i].Slots = min(out[i].Slots, h.MaxSlots)
			}
		}
	}
	return out
}

// IsLocalName reports whether host names this machine: localhost, a loopback address, an
// address of one of its network interfaces, or its host name (also in short form:
// node1 for node1.example.com, and the other way round). Names are not resolved.
func IsLocalName(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if ip := net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")); ip != nil {
		return ip.IsLoopback() || ownAddr(ip)
	}
	name, err := os.Hostname()
	if err != nil || name == "" {
		return false
	}
	short := func(s string) string { return strings.ToLower(strings.SplitN(s, ".", 2)[0]) }
	return strings.EqualFold(host, name) ||
		(!strings.Contains(host, ".") || !strings.Contains(name, ".")) && short(host) == short(name)
}

// ownAddr reports whether ip is an address of one of this machine's interfaces.
func ownAddr(ip net.IP) bool {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return false
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
			return true
		}
	}
	return false
}

// OneNode makes the hosts that name this machine (isLocal) one host, under the first of
// their names, with their slots added up: -H localhost,$(hostname) is one node of two
// slots, whose ranks have local ranks 0 and 1, as with mpirun. Other hosts stay as given.
func OneNode(hosts []hostfile.Host, isLocal func(string) bool) []hostfile.Host {
	renamed := make([]hostfile.Host, len(hosts))
	first := ""
	for i, h := range hosts {
		if isLocal(h.Name) {
			if first == "" {
				first = h.Name
			}
			h.Name = first
		}
		renamed[i] = h
	}
	return hostfile.Merge(nil, renamed...)
}

// Run places, starts and supervises a job, and returns its report. An error means nothing
// was started (bad input, unreachable host, ...); a job that ran, however it ended, returns
// a Report and no error.
func Run(ctx context.Context, o Options) (*Report, error) {
	if len(o.Argv) == 0 {
		return nil, errors.New("no program given")
	}
	if o.Timeout < 0 {
		return nil, fmt.Errorf("bad timeout %v: want 0 (none) or more", o.Timeout)
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.MaxParallel <= 0 {
		o.MaxParallel = DefaultMaxParallel
	}
	if o.IsLocal == nil {
		o.IsLocal = IsLocalName
	}
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	o.Hosts = OneNode(o.Hosts, o.IsLocal)
	base, err := BaseEnv(o.Environ, o.Env)
	if err != nil {
		return nil, err
	}
	j := &job{o: o, base: base, progOn: map[string]string{}, rootHost: map[string]string{}, reached: map[string]bool{}}
	if o.SkipUnreachable {
		if j.o.Hosts, j.skipped, err = skipUnreachable(ctx, o, j.reached); err != nil {
			j.closeRemote()
			return nil, err
		}
	}
	j.slots, err = Place(j.o.Hosts, o.Placement)
	if err != nil && len(j.skipped) > 0 {
		err = fmt.Errorf("--skip-unreachable dropped %s: %w", strings.Join(j.skipped, ", "), err)
	}
	if err == nil {
		err = o.StdinTo.check(len(j.slots))
	}
	if err != nil {
		j.closeRemote()
		return nil, err
	}
	slots := j.slots
	if err := j.prepare(ctx); err != nil {
		j.closeRemote()
		return nil, err
	}
	defer j.closeRemote()
	if m := j.machines(ctx); m != nil {
		j.slots = Renumber(j.slots, m)
	}
	if o.Placed != nil {
		o.Placed(j.slots)
	}
	if err := j.listen(); err != nil {
		return nil, err
	}
	if o.PMI {
		if j.pmi, err = j.servePMI(); err != nil {
			j.ln.Close()
			return nil, err
		}
	}
	var srv *server
	if o.CollNet != nil {
		if srv, err = j.startServer(ctx); err != nil {
			j.ln.Close()
			j.closePMI()
			return nil, err
		}
	}
	root := bootstrap.NewRoot(j.ln, len(slots), wire.Job{ID: j.id, Secret: []byte(j.secret)}, o.Logf)
	rootCtx, stopRoot := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := root.Serve(rootCtx); err != nil {
			o.Logf("bootstrap root: %v", err)
		}
	}()
	s := newSupervisor(j, root.Events())
	s.pmi = j.pmiEvents()
	s.srv = srv
	rep := s.run(ctx)
	if srv != nil {
		srv.stop(o.Grace)
		rep.Server = srv.state
		if srv.state.Died && (rep.Cause == nil || rep.Cause.Kind != CauseServer) {
			rep.Cause = &Cause{Kind: CauseServer, Rank: -1, Host: srv.state.Host, Err: errors.New(srv.state.Exit.String())}
		}
	}
	stopRoot()
	root.Close()
	<-served
	j.closePMI()
	j.closeRemote() // unblocks Waits on hosts that stopped answering
	s.wg.Wait()
	return rep, nil
}

// job is what Run prepares before the supervisor takes over.
type job struct {
	o      Options
	slots  []Slot
	base   []string
	remote []RemoteHost
	local  map[string]bool
	// progOn maps a remote host to the preloaded program's path there.
	progOn map[string]string
	// rootHost maps a host to the address its ranks use for the root (without port).
	rootHost   map[string]string
	ln         net.Listener
	pmi        *pmiService // the PMI-1 server (Options.PMI), or nil
	id, secret string
	// masterPort is the MASTER_PORT offered when the user exported none (see pickMasterPort).
	masterPort int
	closeOnce  sync.Once
	// reached names the remote hosts SkipUnreachable connected; skipped those it dropped.
	reached map[string]bool
	skipped []string
}

// prepare sorts hosts into local and remote, checks the program, connects and preloads.
func (j *job) prepare(ctx context.Context) error {
	j.local = map[string]bool{}
	seen := map[string]bool{}
	hostInfo := map[string]hostfile.Host{}
	for _, h := range j.o.Hosts {
		hostInfo[h.Name] = h
	}
	for _, s := range j.slots {
		if seen[s.Host] {
			continue
		}
		seen[s.Host] = true
		if j.o.IsLocal(s.Host) {
			j.local[s.Host] = true
		} else {
			j.remote = append(j.remote, RemoteHost{Name: s.Host, User: hostInfo[s.Host].User, Port: hostInfo[s.Host].Port})
		}
	}
	if cn := j.o.CollNet; cn != nil && !seen[cn.Host] {
		// The aggregation server's host need not run a rank.
		if j.o.IsLocal(cn.Host) {
			j.local[cn.Host] = true
		} else {
			j.remote = append(j.remote, RemoteHost{Name: cn.Host, User: hostInfo[cn.Host].User})
		}
	}
	if len(j.local) > 0 && j.o.Wdir != "" {
		if err := CheckDir(j.o.Wdir); err != nil {
			return err
		}
	}
	var localPath string
	if len(j.local) > 0 || j.o.Preload {
		var p string
		var err error
		if len(j.local) > 0 {
			p, err = LookProgram(j.o.Argv[0], j.o.Wdir) // as local ranks will find it
		} else if p, err = exec.LookPath(j.o.Argv[0]); errors.Is(err, exec.ErrNotFound) {
			return fmt.Errorf("--preload-binary: program %q not found here: %w", j.o.Argv[0], err)
		} else if err != nil {
			err = fmt.Errorf("program %q: %w", j.o.Argv[0], err)
		}
		if err != nil {
			return err
		}
		if localPath, err = filepath.Abs(p); err != nil {
			return err
		}
	}
	if len(j.remote) == 0 {
		return nil
	}
	if j.o.Remote == nil {
		return errNoRemote(j.remote[0].Name)
	}
	var fresh []RemoteHost // not yet connected by SkipUnreachable
	for _, h := range j.remote {
		if !j.reached[h.Name] {
			fresh = append(fresh, h)
		}
	}
	if len(fresh) > 0 {
		if err := j.o.Remote.Connect(ctx, fresh); err != nil {
			return err
		}
	}
	if !j.o.Preload {
		return nil
	}
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	sem := make(chan struct{}, j.o.MaxParallel)
	for _, h := range j.remote {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			p, err := j.o.Remote.Preload(ctx, h.Name, localPath)
			mu.Lock()
			defer mu.Unlock()
			if err != nil && first == nil {
				first = fmt.Errorf("--preload-binary: host %s: %w", h.Name, err)
			}
			j.progOn[h.Name] = p
		})
	}
	wg.Wait()
	return first
}

// errNoRemote is the error of a job with a remote host but no Remote.
func errNoRemote(host string) error {
	return fmt.Errorf("host %s is not this machine and ccrun has no way to reach it", host)
}

func (j *job) closeRemote() {
	if j.o.Remote != nil && (len(j.remote) > 0 || len(j.reached) > 0) {
		j.closeOnce.Do(func() { j.o.Remote.Close() })
	}
}

// listen opens the bootstrap root's socket, creates the job id and secret, and decides
// which address each host's ranks use to reach the root.
func (j *job) listen() error {
	var id, secret [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return err
	}
	if _, err := rand.Read(secret[:]); err != nil {
		return err
	}
	j.id, j.secret = hex.EncodeToString(id[:8]), hex.EncodeToString(secret[:])
	distinct := map[string]bool{}
	for h := range j.local {
		j.rootHost[h] = "127.0.0.1"
	}
	for _, h := range j.remote {
		local, _ := j.o.Remote.Addrs(h.Name)
		j.rootHost[h.Name] = local
	}
	for h := range j.rootHost {
		if j.o.RootAddr != "" {
			j.rootHost[h] = j.o.RootAddr
		}
		distinct[j.rootHost[h]] = true
	}
	bind := ":0"
	if len(distinct) == 1 && j.o.RootAddr == "" {
		for a := range distinct {
			bind = net.JoinHostPort(a, "0")
		}
	}
	ln, err := net.Listen("tcp", bind)
	if err != nil {
		return fmt.Errorf("bootstrap root: listen on %s: %w", bind, err)
	}
	j.ln = ln
	j.masterPort = j.pickMasterPort()
	return nil
}

// pickMasterPort chooses the MASTER_PORT offered to ranks: when rank 0 runs here, a port
// the kernel reports free on every address of this machine right now (as torchrun
// --standalone chooses one); on another host, where ccrun cannot check, MasterPort's
// job-derived port.
func (j *job) pickMasterPort() int {
	if !j.local[j.slots[0].Host] {
		return MasterPort(j.id)
	}
	ln, err := net.Listen("tcp", ":0")
	if err != nil {
		return MasterPort(j.id)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// rootAddr is the root's address as ranks on host reach it.
func (j *job) rootAddr(host string) string {
	port := j.ln.Addr().(*net.TCPAddr).Port
	return net.JoinHostPort(j.rootHost[host], strconv.Itoa(port))
}

// masterAddr is rank 0's host as the other ranks reach it.
func (j *job) masterAddr() string {
	h := j.slots[0].Host
	if !j.local[h] {
		_, remote := j.o.Remote.Addrs(h)
		return remote
	}
	if len(j.remote) == 0 {
		return "127.0.0.1"
	}
	return j.rootHost[j.remote[0].Name]
}

// spec builds the start request of one rank.
func (j *job) spec(s Slot, stdout, stderr io.Writer) Spec {
	argv := append([]string(nil), j.o.Argv...)
	if p := j.progOn[s.Host]; p != "" {
		argv[0] = p
	}
	job := JobEnv{NRanks: len(j.slots), JobID: j.id, MasterAddr: j.masterAddr(), MasterPort: j.masterPort,
		NNodes: nodeCount(j.slots), Unreachable: j.skipped, StatusLine: j.o.Output.UsesStatus()}
	env := RankEnv(j.base, job, s, j.rootAddr(s.Host))
	dir, optional := j.o.Wdir, false
	if dir == "" && !j.local[s.Host] {
		if wd, err := os.Getwd(); err == nil {
			dir, optional = wd, true
		}
	}
	spec := Spec{Slot: s, Argv: argv, Env: env, Dir: dir, DirOptional: optional, Secret: j.secret, Stdout: stdout, Stderr: stderr}
	j.pmiEnv(&spec, s)
	return spec
}

// nodeCount is the number of hosts that run ranks.
func nodeCount(slots []Slot) int {
	n := 0
	for _, s := range slots {
		n = max(n, s.NodeRank+1)
	}
	return n
}

// spawner returns what starts ranks on host.
func (j *job) spawner(host string) Spawner {
	if j.local[host] {
		return Local{Environ: Inherited(j.o.Environ, j.o.Env.Pass)}
	}
	return j.o.Remote
}

// SignalName is "SIGTERM" for syscall.SIGTERM.
func SignalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGUSR1:
		return "SIGUSR1"
	case syscall.SIGUSR2:
		return "SIGUSR2"
	}
	return s.String()
}
