//go:build linux

package shm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/engine"
)

// Options configures Open.
type Options struct {
	Dir   string // where segments live: "/dev/shm" normally
	JobID string // the job's id; with Host it names the segment
	// Host is the host identity (bootstrap HostID). Ranks that share a
	// machine but not a host identity (tests) get separate segments. Empty
	// means os.Hostname().
	Host        string
	LocalRank   int // position among the ranks of this host
	LocalNRanks int // the number of ranks on this host
	Channels    int // connection sets per directed pair
	// BuffSize is the FIFO size of one connection in bytes, indexed by
	// protocols.Proto (NCCL_BUFFSIZE, NCCL_LL_BUFFSIZE, NCCL_LL128_BUFFSIZE).
	BuffSize [protocols.NumProtos]int
	// McastStep is the bytes of one slot of a multicast region (NVLS:
	// NCCL_NVLS_CHUNKSIZE); every local rank has one region per channel,
	// of protocols.NSteps slots. 0 means no multicast regions.
	McastStep int
	// OneShotBytes is the bytes of one slot of the one-shot area
	// (CC_ONESHOT_BYTES): every local rank has two. 0 means no area.
	OneShotBytes int
	// Spin is how long a wait polls before it sleeps on a futex.
	Spin time.Duration
	// Cores is the number of cores ranks share; when LocalNRanks exceeds
	// it, a wait polls only a few times before sleeping. 0 means
	// runtime.NumCPU().
	Cores int
	// Barrier is the job-wide bootstrap barrier. Open calls it exactly
	// twice on every rank, whatever happens in between, unless it fails.
	Barrier func(ctx context.Context) error
	Logf    func(format string, args ...any) // nil discards
}

// Segment is one host's shared-memory segment as mapped by one local rank.
type Segment struct {
	o    Options
	geo  geometry
	name string
	path string
	me   self
	mem  []byte // nil with a single local rank, and after Close
	fd   int    // the segment file, kept open to allocate FIFOs (-1: none)

	minimalSpin bool
	yield       atomic.Bool // SetYield
	failed      atomic.Pointer[error]

	mu     sync.Mutex
	closed bool
	sends  map[connKey]*SendConn
	recvs  map[connKey]*RecvConn
	mcasts map[connKey]*McastSendConn
}

type connKey struct {
	ch, from, to int
	p            protocols.Proto
	mcast        bool // a multicast region: from is its head, to the reader (the head itself for the writer)
}

// Open creates (local rank 0) or attaches (the other local ranks) the
// host's segment: local rank 0 removes stale segments, checks free space
// and creates the file; Barrier; the others map it and record themselves
// in its header; Barrier; local rank 0 unlinks the file, which lives on
// while mapped. Every rank then checks that all local ranks attached, so
// they all fail together. With LocalNRanks == 1 it only calls Barrier
// twice and returns a Segment with no connections.
func Open(ctx context.Context, o Options) (*Segment, error) {
	if o.Barrier == nil {
		return nil, errors.New("shm: Options.Barrier is nil")
	}
	s, setupErr := newSegment(o)
	multi := setupErr == nil && s.geo.nranks > 1
	created := false
	if multi && o.LocalRank == 0 {
		setupErr = s.create()
		created = setupErr == nil
	}
	if err := o.Barrier(ctx); err != nil {
		s.abandon(created)
		return nil, fmt.Errorf("shm: barrier after creating %s: %w", s.path, err)
	}
	if multi && o.LocalRank != 0 && setupErr == nil {
		setupErr = s.attach()
	}
	if err := o.Barrier(ctx); err != nil {
		s.abandon(created)
		return nil, fmt.Errorf("shm: barrier after attaching %s: %w", s.path, err)
	}
	if created {
		if err := unix.Unlink(s.path); err != nil && setupErr == nil {
			setupErr = fmt.Errorf("shm: unlink %s: %w", s.path, err)
		}
	}
	if setupErr == nil && s.mem != nil {
		setupErr = s.checkAttached()
	}
	if setupErr != nil {
		s.unmap()
		return nil, setupErr
	}
	return s, nil
}

// newSegment validates o. It returns a Segment (with its path, for
// cleanup) even with an error.
func newSegment(o Options) (*Segment, error) {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if o.Host == "" {
		o.Host, _ = os.Hostname()
	}
	if o.Cores <= 0 {
		o.Cores = runtime.NumCPU()
	}
	s := &Segment{o: o, name: segmentName(o.JobID, o.Host), fd: -1, sends: map[connKey]*SendConn{}, recvs: map[connKey]*RecvConn{},
		mcasts: map[connKey]*McastSendConn{}}
	s.path = filepath.Join(o.Dir, s.name)
	s.minimalSpin = o.LocalNRanks > o.Cores
	var err error
	switch {
	case o.Dir == "":
		return s, errors.New("shm: Options.Dir is empty: want a directory such as /dev/shm")
	case o.JobID == "":
		return s, errors.New("shm: Options.JobID is empty")
	case o.Spin < 0:
		return s, fmt.Errorf("shm: spin time %v: want 0 or more", o.Spin)
	case o.LocalRank < 0 || o.LocalRank >= o.LocalNRanks:
		return s, fmt.Errorf("shm: local rank %d of %d: want 0..%d", o.LocalRank, o.LocalNRanks, o.LocalNRanks-1)
	}
	if s.geo, err = newGeometry(o.LocalNRanks, o.Channels, o.BuffSize, o.McastStep); err != nil {
		return s, fmt.Errorf("shm: %w", err)
	}
	if err = s.geo.addOneShot(o.OneShotBytes); err != nil {
		return s, fmt.Errorf("shm: %w", err)
	}
	if o.LocalNRanks > 1 {
		if s.me, err = readSelf(); err != nil {
			return s, fmt.Errorf("shm: %w", err)
		}
	}
	return s, nil
}

// create makes the segment file (local rank 0).
func (s *Segment) create() error {
	dir := s.o.Dir
	if fi, err := os.Stat(dir); err != nil {
		return fmt.Errorf("shm: shared-memory directory %s: %w (set NCCL_SHM_DISABLE=1 to use TCP instead)", dir, errors.Unwrap(err))
	} else if !fi.IsDir() {
		return fmt.Errorf("shm: shared-memory directory %s: not a directory", dir)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Errorf("shm: shared-memory directory %s: %w", dir, err)
	}
	if removed, err := CleanStale(dir, s.o.Logf); err != nil {
		s.o.Logf("%v", err)
	} else if len(removed) > 0 {
		if err := unix.Statfs(dir, &st); err != nil {
			return fmt.Errorf("shm: shared-memory directory %s: %w", dir, err)
		}
	}
	// The file is sparse: only the header and the control blocks are
	// touched at once, and each FIFO is allocated when its connection
	// opens (reserve), so a full directory is an error there rather than a
	// SIGBUS on first touch.
	free := st.Bavail * uint64(st.Bsize)
	if need := uint64(s.geo.fifoOff); need > free {
		g := &s.geo
		return fmt.Errorf("shm: %s has %s free, the segment's header and control blocks need %s (%d local ranks x %d peers x %d connection sets x %d protocols): enlarge %s, lower the channel count, or set NCCL_SHM_DISABLE=1",
			dir, human(free), human(need), g.nranks, g.nranks-1, g.channels, protocols.NumProtos, dir)
	}
	var fd int
	for attempt := 0; ; attempt++ {
		var err error
		fd, err = unix.Open(s.path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
		if err == nil {
			break
		}
		if err != unix.EEXIST || attempt > 0 {
			return fmt.Errorf("shm: create %s: %w", s.path, err)
		}
		stale, why, xerr := examine(s.path, pidNamespace())
		if xerr != nil {
			return fmt.Errorf("shm: segment %s already exists and cannot be examined: %w", s.path, xerr)
		}
		if !stale {
			return fmt.Errorf("shm: segment %s already exists and %s: another job with id %q runs on host %q (job ids must be unique)", s.path, why, s.o.JobID, s.o.Host)
		}
		if err := os.Remove(s.path); err != nil {
			return fmt.Errorf("shm: remove stale segment %s: %w", s.path, err)
		}
		s.o.Logf("shm: removed stale segment %s: %s", s.path, why)
	}
	s.fd = fd
	if err := unix.Ftruncate(fd, s.geo.size); err != nil {
		unix.Unlink(s.path)
		return fmt.Errorf("shm: size %s to %d bytes: %w", s.path, s.geo.size, err)
	}
	if err := unix.Fallocate(fd, 0, 0, int64(s.geo.fifoOff)); err != nil {
		unix.Unlink(s.path)
		return fmt.Errorf("shm: allocate the %s of control blocks of %s: %w (enlarge %s or set NCCL_SHM_DISABLE=1)", human(uint64(s.geo.fifoOff)), s.path, err, dir)
	}
	if g := &s.geo; g.oneShotSlot > 0 {
		// The one-shot area is touched on every call: allocate it now, so
		// that a full directory is an Init error naming its knob.
		if err := s.reserve(g.oneShotOff, g.size-g.oneShotOff, fmt.Sprintf("one-shot area (%d local ranks x 2 slots of CC_ONESHOT_BYTES=%d)", g.nranks, g.oneShotSlot)); err != nil {
			unix.Unlink(s.path)
			return fmt.Errorf("%w (or lower CC_ONESHOT_BYTES; 0 turns the one-shot rows off)", err)
		}
	}
	mem, err := unix.Mmap(fd, 0, int(s.geo.size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Unlink(s.path)
		return fmt.Errorf("shm: map %s (%d bytes): %w", s.path, s.geo.size, err)
	}
	s.mem = mem
	s.writeHeader()
	if err := s.claimOwner(0); err != nil {
		unix.Unlink(s.path)
		return err
	}
	atomic.StoreUint64(s.u64(hMagic), segMagic) // last: the header is complete
	return nil
}

func (s *Segment) writeHeader() {
	g := &s.geo
	atomic.StoreUint32(s.u32(hVersion), segVersion)
	atomic.StoreUint32(s.u32(hNRanks), uint32(g.nranks))
	atomic.StoreUint32(s.u32(hChannels), uint32(g.channels))
	for i, p := range layoutOrder {
		atomic.StoreUint64(s.u64(hBuff+8*i), uint64(g.buff[p]))
	}
	atomic.StoreUint64(s.u64(hSize), uint64(g.size))
	atomic.StoreUint64(s.u64(hCreated), uint64(time.Now().UnixNano()))
	atomic.StoreUint64(s.u64(hMcast), uint64(g.mcastStep))
	atomic.StoreUint64(s.u64(hOneShot), uint64(g.oneShotSlot))
}

// attach maps the segment local rank 0 created.
func (s *Segment) attach() error {
	fd, err := unix.Open(s.path, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err == unix.ENOENT {
		return fmt.Errorf("shm: segment %s not found: local rank 0 did not create it (see its error)", s.path)
	}
	if err != nil {
		return fmt.Errorf("shm: open %s: %w", s.path, err)
	}
	s.fd = fd
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("shm: stat %s: %w", s.path, err)
	}
	if st.Size != s.geo.size {
		return fmt.Errorf("shm: segment %s is %d bytes, local rank %d expects %d: do all local ranks use the same NCCL_BUFFSIZE, NCCL_LL_BUFFSIZE, NCCL_LL128_BUFFSIZE and channel count?", s.path, st.Size, s.o.LocalRank, s.geo.size)
	}
	mem, err := unix.Mmap(fd, 0, int(s.geo.size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return fmt.Errorf("shm: map %s (%d bytes): %w", s.path, s.geo.size, err)
	}
	s.mem = mem
	if err := s.checkHeader(); err != nil {
		return err
	}
	return s.claimOwner(s.o.LocalRank)
}

// checkHeader compares the creator's geometry with this rank's.
func (s *Segment) checkHeader() error {
	g := &s.geo
	if m := atomic.LoadUint64(s.u64(hMagic)); m != segMagic {
		return fmt.Errorf("shm: %s is not a complete cc segment (magic %#x, want %#x)", s.path, m, segMagic)
	}
	type field struct {
		name      string
		got, want uint64
	}
	fields := []field{
		{"version", uint64(atomic.LoadUint32(s.u32(hVersion))), uint64(segVersion)},
		{"local rank count", uint64(atomic.LoadUint32(s.u32(hNRanks))), uint64(g.nranks)},
		{"channel count", uint64(atomic.LoadUint32(s.u32(hChannels))), uint64(g.channels)},
	}
	for i, p := range layoutOrder {
		fields = append(fields, field{protoKnob[p], atomic.LoadUint64(s.u64(hBuff + 8*i)), uint64(g.buff[p])})
	}
	fields = append(fields, field{"multicast slot size (NCCL_NVLS_CHUNKSIZE, when NVLS is enabled)", atomic.LoadUint64(s.u64(hMcast)), uint64(g.mcastStep)},
		field{"one-shot slot size (CC_ONESHOT_BYTES)", atomic.LoadUint64(s.u64(hOneShot)), uint64(g.oneShotSlot)})
	for _, f := range fields {
		if f.got != f.want {
			return fmt.Errorf("shm: segment %s has %s %d, local rank %d has %d: all local ranks must use the same settings", s.path, f.name, f.got, s.o.LocalRank, f.want)
		}
	}
	return nil
}

// claimOwner records this process as local rank r in the header: claim
// the entry, fill it, and store the pid last (readers take a nonzero pid as
// a complete entry).
func (s *Segment) claimOwner(r int) error {
	e := hOwners + r*ownerBytes
	if !atomic.CompareAndSwapUint64(s.u64(e+oClaim), 0, 1) {
		return fmt.Errorf("shm: local rank %d of segment %s is already taken (pid %d): two processes claim the same local rank", r, s.path, atomic.LoadUint64(s.u64(e+oPid)))
	}
	atomic.StoreUint64(s.u64(e+oStart), s.me.start)
	atomic.StoreUint64(s.u64(e+oPidNS), s.me.pidNS)
	atomic.StoreUint64(s.u64(e+oPid), uint64(s.me.pid))
	return nil
}

// checkAttached verifies that every local rank recorded itself.
func (s *Segment) checkAttached() error {
	var missing []int
	for r := 0; r < s.geo.nranks; r++ {
		if atomic.LoadUint64(s.u64(hOwners+r*ownerBytes+oPid)) == 0 {
			missing = append(missing, r)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("shm: local ranks %v did not attach segment %s (see their errors)", missing, s.path)
	}
	return nil
}

// abandon undoes a half-done Open after a failed barrier.
func (s *Segment) abandon(created bool) {
	if created {
		unix.Unlink(s.path)
	}
	s.unmap()
}

func (s *Segment) unmap() {
	if s.mem != nil {
		unix.Munmap(s.mem)
		s.mem = nil
	}
	s.closeFile()
}

func (s *Segment) closeFile() {
	if s.fd >= 0 {
		unix.Close(s.fd)
		s.fd = -1
	}
}

// reserve allocates the pages of [off, off+n) of the segment file, so that
// touching them cannot fault with SIGBUS on a full tmpfs. Both ends of a
// connection call it; allocating twice is harmless.
func (s *Segment) reserve(off, n int64, what string) error {
	if err := unix.Fallocate(s.fd, 0, off, n); err != nil {
		free := "?"
		var st unix.Statfs_t
		if unix.Statfs(s.o.Dir, &st) == nil {
			free = human(st.Bavail * uint64(st.Bsize))
		}
		return fmt.Errorf("shm: %s (%s free) cannot hold the %s of %s: %w: enlarge %s, lower the buffer size or the channel count, or set NCCL_SHM_DISABLE=1",
			s.o.Dir, free, human(uint64(n)), what, err, s.o.Dir)
	}
	return nil
}

func (s *Segment) u64(off int) *uint64 { return (*uint64)(unsafe.Pointer(&s.mem[off])) }
func (s *Segment) u32(off int) *uint32 { return (*uint32)(unsafe.Pointer(&s.mem[off])) }

// Name returns the segment's file name (in Options.Dir; unlinked once Open
// returns).
func (s *Segment) Name() string { return s.name }

// SetYield makes the waits of the collectives that follow poll a few
// times and then yield the core (on) or poll for Options.Spin (off), as
// when the local ranks outnumber the cores. The communicator turns it on
// for a collective whose lanes wait for the network (CollNet Direct: every
// result comes back from the aggregation server) and outnumber the cores
// with the other local ranks' lanes: a lane polling its FIFO for the
// server's answer held off the head's lane, or the server process, that
// would bring it.
func (s *Segment) SetYield(on bool) { s.yield.Store(on) }

// spinsLong reports whether a wait may poll for Options.Spin: neither the
// local ranks outnumber the cores nor SetYield is on.
func (s *Segment) spinsLong() bool { return !s.minimalSpin && !s.yield.Load() }

// err returns the error Fail recorded, if any.
func (s *Segment) err() error {
	if p := s.failed.Load(); p != nil {
		return *p
	}
	return nil
}

// Fail makes every pending and later wait of every connection of this
// Segment return err (the first error wins) and wakes the ones asleep.
func (s *Segment) Fail(err error) {
	if err == nil {
		err = errors.New("shm: failed")
	}
	s.failed.CompareAndSwap(nil, &err)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	// Bump the futex word each end sleeps on, so that a waiter about to
	// sleep does not (see await), and wake the sleepers.
	for _, c := range s.sends {
		atomic.AddUint32(c.headSeq, 1)
		futexWake(c.headSeq)
	}
	for _, c := range s.mcasts {
		atomic.AddUint32(c.headSeq, 1)
		futexWake(c.headSeq)
	}
	for _, c := range s.recvs {
		atomic.AddUint32(c.tailSeq, 1)
		futexWake(c.tailSeq)
	}
	if s.mem != nil {
		e := s.entry(s.o.LocalRank) + eSeq // Arrive, Depart
		atomic.AddUint32(s.u32(e), 1)
		futexWake(s.u32(e))
	}
}

// Close fails every connection with engine.ErrClosed and unmaps the
// segment; it is idempotent. If a connection still holds a slice (an
// engine abandoned it after an error), the mapping is replaced by private
// zero pages instead, so a late access cannot fault, and that address
// range stays reserved.
func (s *Segment) Close() error {
	s.Fail(engine.ErrClosed)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	s.closeFile()
	if s.mem == nil {
		return nil
	}
	held := 0
	for _, c := range s.sends {
		if !c.state.CompareAndSwap(stateIdle, stateClosed) {
			held++
		}
	}
	for _, c := range s.recvs {
		if !c.state.CompareAndSwap(stateIdle, stateClosed) {
			held++
		}
	}
	for _, c := range s.mcasts {
		if !c.state.CompareAndSwap(stateIdle, stateClosed) {
			held++
		}
	}
	if held == 0 {
		if err := unix.Munmap(s.mem); err != nil {
			return fmt.Errorf("shm: unmap %s: %w", s.name, err)
		}
		s.mem = nil
		return nil
	}
	_, err := unix.MmapPtr(-1, 0, unsafe.Pointer(&s.mem[0]), uintptr(len(s.mem)), unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_FIXED|unix.MAP_NORESERVE)
	if err != nil {
		return fmt.Errorf("shm: release %s: %w", s.name, err)
	}
	s.o.Logf("shm: closed %s with %d connections still in use; %d bytes of address space stay reserved", s.name, held, len(s.mem))
	return nil
}

// Send returns the sending end of the FIFO from local rank `from` (this
// rank) to local rank `to` on channel ch for protocol p. Asking twice
// returns the same connection.
func (s *Segment) Send(ch, from, to int, p protocols.Proto) (*SendConn, error) {
	if from != s.o.LocalRank {
		return nil, fmt.Errorf("shm: send end %d -> %d asked of local rank %d: it belongs to local rank %d", from, to, s.o.LocalRank, from)
	}
	k := connKey{ch: ch, from: from, to: to, p: p}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.sends[k]; c != nil {
		return c, nil
	}
	c, err := s.newConn(k, to)
	if err != nil {
		return nil, err
	}
	sc := &SendConn{conn: c}
	s.sends[k] = sc
	return sc, nil
}

// Recv returns the receiving end of the FIFO from local rank `from` to
// local rank `to` (this rank) on channel ch for protocol p. Asking twice
// returns the same connection.
func (s *Segment) Recv(ch, from, to int, p protocols.Proto) (*RecvConn, error) {
	if to != s.o.LocalRank {
		return nil, fmt.Errorf("shm: receive end %d -> %d asked of local rank %d: it belongs to local rank %d", from, to, s.o.LocalRank, to)
	}
	k := connKey{ch: ch, from: from, to: to, p: p}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.recvs[k]; c != nil {
		return c, nil
	}
	c, err := s.newConn(k, from)
	if err != nil {
		return nil, err
	}
	rc := &RecvConn{conn: c}
	s.recvs[k] = rc
	return rc, nil
}

// human prints a byte count with a binary unit.
func human(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
