// Package comm is cc's embedded collective-communication API, modelled on
// NCCL: a communicator of nranks ranks performs AllReduce, ReduceScatter,
// AllGather, Broadcast, Reduce, AllToAll and Send/Recv on plain byte slices.
//
//	c, err := comm.InitFromEnv(ctx)            // rank and root from ccrun, torchrun, mpirun or srun
//	defer c.Close()
//	err = c.AllReduce(send, recv, count, reduce.Float32, reduce.Sum)
//
// In one process, InitLocal makes n communicators whose ranks are goroutines
// talking over loopback TCP (what cc-perf's -t and the tests use).
//
// Split makes communicators of subsets of a communicator's ranks, as
// ncclCommSplit: ranks passing the same color form one, ordered by key.
//
// Every call blocks until this rank's part is done. Calls between GroupStart
// and GroupEnd are queued and run by GroupEnd: collectives batched in call
// order, point-to-point transfers concurrently. A failure anywhere in the job
// (a peer that dies, a reset connection, Abort on any rank) makes every
// pending and later call on every rank return an error naming its cause.
//
// Underneath: runtime/bootstrap joins the ranks and carries aborts,
// runtime/transport/tcp moves bytes, algos generates the schedules and
// runtime/engine runs them over FIFO connections, one goroutine per channel.
// Knobs are NCCL's environment variables, parsed once by runtime/param.
package comm

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/hw"
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/bootstrap"
	"github.com/seed-760dd1f1/cc/runtime/collnet"
	"github.com/seed-760dd1f1/cc/runtime/debuglog"
	"github.com/seed-760dd1f1/cc/runtime/engine"
	"github.com/seed-760dd1f1/cc/runtime/param"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
	"github.com/seed-760dd1f1/cc/runtime/transport/shm"
	"github.com/seed-760dd1f1/cc/runtime/transport/tcp"
	"github.com/seed-760dd1f1/cc/runtime/tune"
	"github.com/seed-760dd1f1/cc/runtime/wire"
)

// Options say how a rank joins its job.
type Options struct {
	Rank, NRanks int
	RootAddr     string        // the bootstrap root's address (host:port)
	HostRoot     bool          // this rank hosts the root, listening on RootAddr
	Job          wire.Job      // job id and secret shared by every rank
	Params       *param.Params // nil: read NCCL_* from the environment

	root *bootstrap.Root // a root created by InitLocal, owned by rank 0
	// baseJob is, for a communicator made by Split, its launcher's job:
	// the one the CollNet aggregation server accepts.
	baseJob wire.Job
	// hostRanks is, for a communicator made by Split, the ranks of its
	// parent on this host: they all run beside it on the host's cores.
	hostRanks int
}

// Comm is one rank's communicator. Its methods are not safe for concurrent
// use, like an NCCL communicator: one goroutine drives a Comm.
type Comm struct {
	rank, nranks int
	host         string
	job          wire.Job // the job's identity, from which Split derives its communicators'
	splits       int      // Split calls so far: each makes a distinct job
	hostRanks    int      // ranks on this machine sharing its cores: this communicator's, or its parent's (Split)
	p            *param.Params
	log          *debuglog.Logger
	boot         *bootstrap.Client
	root         *bootstrap.Root
	rootDone     chan struct{}
	tr           *tcp.Transport
	peers        []bootstrap.RankInfo
	seg          *shm.Segment // this host's shared memory; nil when no other rank is local
	cma          cmaState     // single-copy all-gathers (cma.go)
	localIndex   map[int]int  // rank -> index among the ranks of this host
	localRank    int

	nchannels int
	channels  []*channel
	p2p       *channel
	workers   []*worker // channels 1.. run on these

	topo     *algos.Topo           // which ranks share a host
	allSHM   bool                  // every connection is shared memory: the protocol thresholds differ
	algoErr  [algos.NumColls]error // why a collective cannot run (NCCL_ALGO, NCCL_PROTO, NCCL_PAT_ENABLE), or nil
	consts   *tune.Consts          // rank 0's tuner constants
	minCores int                   // the fewest cores of any rank's machine
	cores    int                   // the cores this rank counts on (coreShare)
	// buffSize is each protocol's FIFO size in bytes (setBuffSizes): the
	// user's NCCL_*BUFFSIZE, else the default for the transport in use.
	buffSize [protocols.NumProtos]int
	framed   bool         // LL128's chunks are cut for TCP frames (algos.FramedLinks)
	allRoomy bool         // every rank's machine has a core per rank (agree)
	tunerCfg *tune.Config // rank 0's NCCL_TUNER_CONFIG_FILE, or nil
	model    *tune.Model  // the tuner, over the entries that may run

	lastDecision decision          // the tuner's last answer
	ran          tune.Choice       // how the last collective call ran (Ran)
	forced       *tune.Choice      // Force's entry, or nil
	plans        map[planKey]*plan // schedules by collective shape
	last         struct {          // the last call's plan, found without hashing
		key  planKey
		plan *plan
	}
	// Buffer registration (mem.go): this communicator's registrations,
	// its NVLS calls so far (the host's descriptor sequence), the local
	// ranks' descriptors of the last one, and the peers' pools it mapped.
	regs      []*registration
	nvlsSeq   uint64
	descs     []shm.Desc
	peerPools map[[3]uint64][]byte
	peerIn    [][]byte // by rank: the peers' Input of a direct call outside a group

	tasks []engine.Task    // one per channel, reused by every call
	funcs [][]*reduce.Func // built-in reductions by data type and op, made on first use
	cur   coll             // the call being run outside a group
	curs  [1]*coll         // &cur, as runColls takes it

	ctx    context.Context // cancelled with the abort cause
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup // the bootstrap watcher

	mu         sync.Mutex
	err        error       // the abort cause, once set
	failed     atomic.Bool // err is set: Err's fast path reads this, not mu
	closing    bool
	settled    chan struct{} // closed when err is final (see fail)
	settleOnce sync.Once

	collnet collnetState // the CollNet aggregation server's connections
	flat    flatState    // the staging area of flat rows (flat.go)

	ready    bool // Init completed
	group    groupState
	customOp map[reduce.Op]preMulSum
	nextOp   reduce.Op
}

// Init joins the job described by o and connects this rank to its peers.
// ctx bounds all of it: the bootstrap (a rank that cannot reach the root
// names its address; a rank that joined names the ranks that never did, a
// *bootstrap.MissingError) and the set-up of the connections to its peers
// (naming the peer not connected); the error carries ctx's cause.
func Init(ctx context.Context, o Options) (*Comm, error) {
	if o.NRanks < 1 || o.Rank < 0 || o.Rank >= o.NRanks {
		return nil, fmt.Errorf("rank %d of %d: want 0 <= rank < nranks and nranks >= 1", o.Rank, o.NRanks)
	}
	p := o.Params
	if p == nil {
		var err error
		if p, err = param.Load(os.LookupEnv); err != nil {
			return nil, err
		}
	}
	host, _ := os.Hostname()
	lg, err := debuglog.New(p, host, os.Getpid(), o.Rank)
	if err != nil {
		return nil, err
	}
	c := &Comm{rank: o.Rank, nranks: o.NRanks, host: host, job: o.Job, p: p, log: lg, root: o.root,
		customOp: map[reduce.Op]preMulSum{}, nextOp: firstCustomOp, plans: map[planKey]*plan{}}
	c.ctx, c.cancel = context.WithCancelCause(context.Background())
	c.settled = make(chan struct{})
	c.collnet.job, c.collnet.links = o.Job, map[connKey]*lazy[*collnet.Link]{}
	if o.baseJob.ID != "" {
		c.collnet.job = o.baseJob
	}
	// Connections are opened under c.ctx, which outlives Init: while Init
	// runs, the end of ctx ends it too.
	stop := context.AfterFunc(ctx, func() { c.cancel(context.Cause(ctx)) })
	err = c.init(ctx, o)
	if !stop() && err == nil {
		err = context.Cause(ctx) // ctx ended as Init completed: c.ctx is cancelled
	}
	if err != nil {
		c.teardown()
		return nil, fmt.Errorf("rank %d: init: %w", o.Rank, err)
	}
	c.ready = true
	return c, nil
}

func (c *Comm) init(ctx context.Context, o Options) error {
	p := c.p
	rootAddr := o.RootAddr
	if o.HostRoot && c.root == nil {
		ln, err := net.Listen("tcp", o.RootAddr)
		if err != nil {
			return fmt.Errorf("host the bootstrap root on %s: %w", o.RootAddr, err)
		}
		c.root = bootstrap.NewRoot(ln, o.NRanks, o.Job, c.warnf)
	}
	if c.root != nil {
		rootAddr = c.root.Addr()
		c.rootDone = make(chan struct{})
		go func() {
			defer close(c.rootDone)
			c.root.Serve(context.Background()) // ends with root.Close in teardown
		}()
	}
	var match func(string) bool
	if p.SocketIfname.IsSet() {
		match = p.SocketIfname.Match
	}
	family := map[param.SocketFamily]tcp.Family{param.FamilyInet: tcp.IPv4, param.FamilyInet6: tcp.IPv6}[p.SocketFamily]
	ip, err := tcp.ListenIP(p.SocketIfname.String(), match, family, rootAddr)
	if err != nil {
		return err
	}
	c.tr, err = tcp.Listen(tcp.Options{
		Rank: c.rank, Job: o.Job, ListenAddr: net.JoinHostPort(ip, "0"),
		NSocks:   p.SocketNThreads * p.NSocksPerThread,
		RetryCnt: p.SocketRetryCnt, RetrySleep: p.SocketRetrySleep,
		Logf:    c.warnf,
		OnError: func(err error) { c.fail(fmt.Errorf("rank %d: %w", c.rank, err)) },
	})
	if err != nil {
		return err
	}
	// The kernel's identity groups the ranks that share this machine's
	// cores even when CC_HOST_ID sets the host identity; only then may it
	// be unreadable.
	id, err := hw.HostIdentity(hw.Root())
	hostID := p.HostID
	switch {
	case hostID == "" && err != nil:
		return err
	case hostID == "":
		hostID = id.String()
	}
	me := bootstrap.RankInfo{Rank: c.rank, Addr: c.tr.Addr(), HostID: hostID, Host: c.host, Pid: os.Getpid(), Machine: id.BootID}
	if cpus, err := hw.AllowedCPUs(hw.Root()); err == nil {
		me.CPUs = cpusInfo(cpus)
	}
	c.boot, err = bootstrap.Join(ctx, rootAddr, o.Job, me, o.NRanks, p.SocketRetryCnt, p.SocketRetrySleep)
	if err != nil {
		return err
	}
	c.peers = c.boot.Peers()
	c.wg.Add(1)
	go c.watch()

	online, err := hw.Cores(hw.Root())
	if err != nil {
		c.warnf("counting cores: %v; assuming 1", err)
		online = 1
	}
	machineCores := c.machineCores(online)
	cores := c.coreShare(machineCores, o.hostRanks)
	c.cores = cores
	roomy := c.hostRanks <= machineCores // a core for each rank of this machine
	if err := c.agree(ctx, channelCount(p, cores), cores, roomy); err != nil {
		return err
	}
	hostIDs := make([]string, c.nranks)
	for _, pi := range c.peers {
		hostIDs[pi.Rank] = pi.HostID
	}
	c.topo = algos.NewTopo(hostIDs)
	c.setBuffSizes()
	// Every rank fails here alike, before anything a failing peer's abort
	// could race with is built.
	if err := c.checkCollNetForced(); err != nil {
		return err
	}
	c.allSHM = c.topo.NHosts() == 1 && !p.SHMDisable
	if err := c.openSHM(ctx, o.Job, cores); err != nil {
		return err
	}
	c.openFlat()
	if err := c.probeCMA(); err != nil {
		return err
	}
	// A receive polls its socket only while a core is free for it.
	if roomy {
		c.tr.SetSpin(p.TCPSpin)
	}
	// Every rank must cut LL128's chunks alike: algos.FramedLinks taken over
	// the job, where every machine has a core per rank (agree), not over
	// this machine alone.
	c.framed = c.overTCP() && c.allRoomy
	// Under mu: the bootstrap watcher, started above, fails what exists
	// when another rank aborts the job during Init.
	c.mu.Lock()
	c.p2p = newChannel(c, p2pChannel)
	for i := 0; i < c.nchannels; i++ {
		c.channels = append(c.channels, newChannel(c, i))
	}
	c.mu.Unlock()
	c.tasks = make([]engine.Task, c.nchannels)
	links := c.pickAlgos()
	if err := c.connect(ctx, links); err != nil {
		return err
	}
	for i := 1; i < c.nchannels; i++ {
		c.workers = append(c.workers, c.newWorker(i))
	}
	c.logGraph()
	c.infof(param.SubsysInit, "comm rank %d nranks %d host %s: %d channels, buffsize %d, %d sockets per connection, listening on %s - Init COMPLETE",
		c.rank, c.nranks, c.host, c.nchannels, p.BuffSize, p.SocketNThreads*p.NSocksPerThread, c.tr.Addr())
	return nil
}

// coreShare is the cores this rank's communicator counts on, which decide
// whether waits spin, the channel count and the tuner's class. The ranks
// of its host get a share of the machine's cores proportional to their
// number among the machine's ranks (machineRanks): 2 cores, 2 testbed
// hosts of 2 ranks each -> 1 core per host, which its 2 ranks outnumber.
// A communicator made by Split shares the machine with its parent's other
// ranks (the other groups run at the same time) alike: 2 cores, a parent
// of 4 local ranks split in two groups of 2 -> 1 core each.
func (c *Comm) coreShare(cores, parentRanks int) int {
	local := 0
	for _, pi := range c.peers {
		if pi.HostID == c.peers[c.rank].HostID {
			local++
		}
	}
	c.hostRanks = max(c.machineRanks(), parentRanks)
	return max(1, cores*local/c.hostRanks)
}

// machineRanks counts the ranks on this rank's machine: those of its host
// identity, of its hostname and of its kernel (boot id), which share the
// machine's cores whatever CC_HOST_ID or a network namespace's host name
// says (fake hosts, containers and the testbed's hosts of one machine talk
// TCP, and each wait that polls holds a core).
func (c *Comm) machineRanks() int {
	n := 0
	for _, pi := range c.peers {
		if c.sameMachine(pi) {
			n++
		}
	}
	return n
}

// sameMachine reports whether rank pi runs on this rank's machine (see
// machineRanks).
func (c *Comm) sameMachine(pi bootstrap.RankInfo) bool {
	me := c.peers[c.rank]
	return pi.HostID == me.HostID || pi.Host == c.host || (me.Machine != "" && pi.Machine == me.Machine)
}

// machineCores is how many CPUs this rank's machine gives its ranks: the
// union of the CPUs they may run on (RankInfo.CPUs), at most the online
// count. Ranks under taskset or in a small cpuset share those CPUs, not
// the machine: two ranks bound to CPU 0 must yield to each other, as on a
// 1-core machine, where counting online CPUs had them poll (250-400 us
// per 8-byte all-reduce on 2 cores, against 0.2-0.5 us bound to CPUs 0
// and 1). A rank's own list is not enough: two ranks bound to one CPU
// each look, each to itself, like two bound to the same one. A rank of the
// machine that sent no list (unknown) leaves the online count.
func (c *Comm) machineCores(online int) int {
	union := map[int]bool{}
	for _, pi := range c.peers {
		if !c.sameMachine(pi) {
			continue
		}
		cpus, err := hw.ParseCPUList(pi.CPUs)
		if err != nil {
			return online
		}
		for _, cpu := range cpus {
			union[cpu] = true
		}
	}
	return max(1, min(len(union), online))
}

// cpusInfo is RankInfo.CPUs for the CPU list l: its kernel list form, or
// empty (unknown, which counts the online CPUs) when that is too long for
// the bootstrap to carry (hundreds of scattered CPUs), rather than a join
// the root refuses.
func cpusInfo(l hw.CPUList) string {
	if s := l.String(); len(s) <= bootstrap.MaxInfoString {
		return s
	}
	return ""
}

// shmDir is where shared-memory segments live (a variable only so that
// a test can point it at a small tmpfs).
var shmDir = "/dev/shm"

// openSHM groups the ranks of this host (same host identity) and opens the
// host's segment. Every rank calls shm.Open, which calls the bootstrap
// barrier exactly twice, so hosts with one rank and NCCL_SHM_DISABLE=1 stay
// in step with the others.
func (c *Comm) openSHM(ctx context.Context, job wire.Job, cores int) error {
	mine := c.peers[c.rank].HostID
	c.localIndex = map[int]int{}
	for _, pi := range c.peers {
		if pi.HostID == mine {
			c.localIndex[pi.Rank] = len(c.localIndex)
		}
	}
	c.localRank = c.localIndex[c.rank]
	n := len(c.localIndex)
	if c.p.SHMDisable {
		n = 1
	}
	// The segment is per job and host identity: with CC_HOST_ID, several
	// "hosts" of one machine get one each.
	o := shm.Options{Dir: shmDir, JobID: job.ID, Host: mine, LocalRank: c.localRank, LocalNRanks: n,
		Channels: c.shmSets(), Spin: c.p.SHMSpin, Cores: cores, Barrier: c.boot.Barrier, Logf: c.warnf}
	if n == 1 {
		o.LocalRank = 0
	}
	o.BuffSize = c.buffSize
	if nvlsWanted(c.p) {
		o.McastStep = c.p.NVLSChunkSize
	}
	if c.flatWanted() {
		o.OneShotBytes = c.p.OneShotBytes
	}
	seg, err := shm.Open(ctx, o)
	if err != nil {
		return err
	}
	if n == 1 {
		seg.Close()
		return nil
	}
	c.mu.Lock() // see init: the watcher may abort meanwhile
	c.seg = seg
	c.mu.Unlock()
	c.infof(param.SubsysSHM, "rank %d is local rank %d of %d on %s: shared memory %s", c.rank, c.localRank, n, c.host, seg.Name())
	return nil
}

// watch turns a job-wide abort (any rank failed, or the root is lost) into
// this communicator's abort. It exits when the bootstrap client is done.
func (c *Comm) watch() {
	defer c.wg.Done()
	<-c.boot.Done()
	c.mu.Lock()
	closing := c.closing
	c.mu.Unlock()
	if closing {
		return
	}
	if c.abortLocal(c.boot.Err()) {
		c.settle()
	}
}

// Rank is this rank's index in the communicator.
func (c *Comm) Rank() int { return c.rank }

// NRanks is the number of ranks in the communicator.
func (c *Comm) NRanks() int { return c.nranks }

// Host is this rank's hostname.
func (c *Comm) Host() string { return c.host }

// NChannels is the number of channels the communicator has connected.
func (c *Comm) NChannels() int { return c.nchannels }

// Peers describes every rank of the job, index = rank.
func (c *Comm) Peers() []bootstrap.RankInfo { return c.peers }

// Err returns the cause of the communicator's abort, or nil.
func (c *Comm) Err() error {
	if !c.failed.Load() {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// Abort makes every pending and later call of every rank of the job return
// an error carrying cause. It does not release resources: Close does.
func (c *Comm) Abort(cause error) {
	if cause == nil {
		cause = errors.New("aborted")
	}
	cause = fmt.Errorf("rank %d aborted: %w", c.rank, cause)
	if c.abortLocal(cause) {
		if c.boot != nil {
			c.boot.Abort(cause)
		}
		c.settle()
	}
}

// verdictGrace is how long a rank that saw a failure itself (a connection
// reset, a peer's EOF) waits for the root's verdict before reporting its own
// view. The root's verdict names the job's first failure: when rank 2 dies,
// rank 1 may first see rank 0 hang up (rank 0 exited because of rank 2), and
// should still report rank 2.
const verdictGrace = 5 * time.Second

// fail handles a fatal error this rank detected itself: connections fail at
// once, and the error calls return is the job's verdict (see verdictGrace).
func (c *Comm) fail(cause error) {
	if !c.abortLocal(cause) {
		return
	}
	if c.boot == nil {
		c.settle()
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		select {
		case <-c.boot.Done():
			c.adoptVerdict()
		case <-time.After(verdictGrace):
			c.boot.Abort(cause) // we are the first to know: tell everyone
		}
		c.settle()
	}()
}

// adoptVerdict replaces this rank's own view of a failure with the root's,
// which names the first failure of the job.
func (c *Comm) adoptVerdict() {
	var re *bootstrap.RankError
	var rl *bootstrap.RootLostError
	if err := c.boot.Err(); errors.As(err, &re) || errors.As(err, &rl) {
		c.mu.Lock()
		c.err = err
		c.mu.Unlock()
	}
}

// settle marks the abort cause as final.
func (c *Comm) settle() { c.settleOnce.Do(func() { close(c.settled) }) }

// failure returns the abort cause once it is final.
func (c *Comm) failure() error {
	<-c.settled
	return c.Err()
}

// abortLocal records cause and fails this rank's connections; it reports
// whether cause was the first.
func (c *Comm) abortLocal(cause error) bool {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return false
	}
	c.err = cause
	c.failed.Store(true)
	chs, seg := c.allChannels(), c.seg // Init may still be making them
	c.mu.Unlock()
	c.warnf("%v", cause)
	c.cancel(cause)
	for _, ch := range chs {
		ch.fail(cause)
	}
	if seg != nil {
		seg.Fail(cause)
	}
	return true
}

func (c *Comm) allChannels() []*channel {
	chs := append([]*channel(nil), c.channels...)
	if c.p2p != nil {
		chs = append(chs, c.p2p)
	}
	return chs
}

// Close waits for every rank to reach Close (so that no peer still needs
// this rank's connections), then releases everything. After an abort it
// does not wait.
func (c *Comm) Close() error {
	if c.group.depth > 0 {
		return fmt.Errorf("rank %d: close inside a group (GroupStart without GroupEnd)", c.rank)
	}
	c.flat.againOK = false // repeat must not reach the unmapped segment
	c.mu.Lock()
	c.closing = true
	aborted := c.err
	c.mu.Unlock()
	for _, ch := range c.allChannels() {
		ch.setClosing()
	}
	var err error
	if aborted == nil {
		ctx, cancel := context.WithTimeout(c.ctx, 60*time.Second)
		err = c.boot.Barrier(ctx)
		cancel()
		if err != nil {
			err = fmt.Errorf("rank %d: close: %w", c.rank, err)
		}
	}
	c.teardown()
	return err
}

// teardown releases everything Init acquired; every goroutine has exited
// when it returns.
func (c *Comm) teardown() {
	for _, w := range c.workers {
		w.stop()
	}
	for _, ch := range c.allChannels() {
		ch.runner.Close()
	}
	if c.tr != nil {
		c.tr.Close()
	}
	c.closeCollNet()
	c.closeRegistrations()
	if c.seg != nil {
		c.seg.Fail(errors.New("communicator closed"))
		c.seg.Close()
	}
	if c.boot != nil {
		c.boot.Close()
	}
	if c.root != nil {
		if c.rootDone != nil && c.ready && c.Err() == nil {
			c.awaitAllLeft()
		}
		c.root.Close()
		if c.rootDone != nil {
			<-c.rootDone
		}
	}
	c.cancel(errors.New("communicator closed"))
	c.wg.Wait()
	c.log.Close()
}

// awaitAllLeft keeps a hosted root up until every rank has left, so that
// no rank loses the root while it is still closing.
func (c *Comm) awaitAllLeft() {
	timeout := time.After(30 * time.Second)
	for {
		select {
		case ev, ok := <-c.root.Events():
			if !ok || ev.Kind == bootstrap.EventAllLeft || ev.Kind == bootstrap.EventAborted {
				return
			}
		case <-timeout:
			c.warnf("bootstrap root: not every rank left within 30s; closing it")
			return
		}
	}
}

func (c *Comm) infof(sub param.Subsys, format string, args ...any) {
	c.log.Info(sub, format, args...)
}

func (c *Comm) warnf(format string, args ...any) {
	c.log.Warn(format, args...)
}

// InitLocal creates nranks communicators in this process, ranks as
// goroutines with an in-process bootstrap root. They share a host, so they
// talk through shared memory (loopback TCP with NCCL_SHM_DISABLE=1). p nil
// means the environment's NCCL_* settings.
func InitLocal(ctx context.Context, nranks int, p *param.Params) ([]*Comm, error) {
	return InitLocalHosts(ctx, make([]string, nranks), p)
}

// InitLocalHosts is InitLocal with a host identity per rank (CC_HOST_ID):
// ranks with different identities behave as ranks of different hosts
// (loopback TCP between them, and the topology algorithms see), which lets
// one process test multi-host schedules. An empty identity means the
// setting of p (or the machine's own).
func InitLocalHosts(ctx context.Context, hosts []string, p *param.Params) ([]*Comm, error) {
	nranks := len(hosts)
	if nranks < 1 {
		return nil, fmt.Errorf("nranks %d: want at least 1", nranks)
	}
	if p == nil {
		var err error
		if p, err = param.Load(os.LookupEnv); err != nil {
			return nil, err
		}
	}
	job, err := NewJob()
	if err != nil {
		return nil, err
	}
	return initLocalJob(ctx, hosts, p, job)
}

// initLocalJob is InitLocalHosts for job.
func initLocalJob(ctx context.Context, hosts []string, p *param.Params, job wire.Job) ([]*Comm, error) {
	nranks := len(hosts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the bootstrap root: %w", err)
	}
	root := bootstrap.NewRoot(ln, nranks, job, func(string, ...any) {})
	comms := make([]*Comm, nranks)
	errs := make([]error, nranks)
	var wg sync.WaitGroup
	for r := 0; r < nranks; r++ {
		o := Options{Rank: r, NRanks: nranks, RootAddr: root.Addr(), Job: job, Params: p}
		if hosts[r] != "" {
			pr := *p
			pr.HostID = hosts[r]
			o.Params = &pr
		}
		if r == 0 {
			o.root = root
		}
		wg.Add(1)
		go func(r int) {
			defer wg.Done()
			comms[r], errs[r] = Init(ctx, o)
		}(r)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range comms {
			if c != nil {
				c.Abort(err)
				c.teardown()
			}
		}
		if comms[0] == nil {
			root.Close()
		}
		return nil, err
	}
	return comms, nil
}

// NewJob returns a fresh job identity with a random id and secret.
func NewJob() (wire.Job, error) {
	b := make([]byte, 40)
	if _, err := rand.Read(b); err != nil {
		return wire.Job{}, fmt.Errorf("job secret: %w", err)
	}
	// Hex keeps the secret printable: it travels in CC_JOB_SECRET.
	return wire.Job{ID: "local-" + hex.EncodeToString(b[:8]), Secret: []byte(hex.EncodeToString(b[8:]))}, nil
}

// InitFromEnv joins the job the launcher's environment describes (ccrun,
// torchrun, Open MPI, PMI, Slurm; or a single rank with no launcher).
func InitFromEnv(ctx context.Context) (*Comm, error) {
	id, err := bootstrap.Discover(os.LookupEnv)
	if err != nil {
		return nil, err
	}
	if id.NRanks == 1 && id.RootAddr == "" {
		cs, err := InitLocal(ctx, 1, nil)
		if err != nil {
			return nil, err
		}
		return cs[0], nil
	}
	return Init(ctx, Options{Rank: id.Rank, NRanks: id.NRanks, RootAddr: id.RootAddr, HostRoot: id.HostRoot, Job: id.Job})
}
