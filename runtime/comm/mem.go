package comm

// Buffer registration: NCCL's ncclMemAlloc / ncclMemFree and
// ncclCommRegister / ncclCommDeregister, made real on shared memory.
//
// MemAlloc gives a buffer that lives in a file of its own in /dev/shm (the
// process's pool: one file per allocation, named from the pid, a random
// per-process token and a counter, fallocate'd so that a full /dev/shm is
// an error, never a SIGBUS; a header page records the creator, so that
// shm.CleanStale removes the file of a process killed before MemFree). Register makes such a buffer known to a
// communicator. When every local rank of an NVLS call (NVLS, or NVLS_TREE
// inside each host) calls with a registered send buffer, the ranks of the
// host map each other's pools (once; the mappings are cached) and the heads
// read the other ranks' Input in place: no scatter through the staging
// FIFOs (algos/nvls_direct.go). The choice is made per call from a
// descriptor every local rank publishes in the host's segment, so it is
// the same on every local rank; a host where any rank's buffer is not
// registered runs the staged schedule, and the schedule between hosts is
// the same either way.

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/runtime/transport/shm"
)

// memPool is the process's registrable memory: every live MemAlloc.
var memPool struct {
	mu     sync.Mutex
	token  uint64 // random, so that two processes of one pid (namespaces) differ
	n      uint64 // allocations so far
	allocs map[uintptr]*allocation
}

// allocation is one MemAlloc: its pool file and mapping.
type allocation struct {
	id  [3]uint64 // pid, token, counter: the file's name (poolName)
	mem []byte    // the whole mapping, whole pages
	reg int       // registrations by communicators (MemFree refuses while > 0)
}

// poolName is the file name, in shmDir, of the pool allocation id.
func poolName(id [3]uint64) string {
	return fmt.Sprintf("%s%d-%016x-%d", shm.PoolPrefix, id[0], id[1], id[2])
}

// MemAlloc returns size bytes of zeroed memory that local peers can map:
// the only memory Register accepts (ncclMemAlloc). Cost: a file in
// /dev/shm, its pages reserved at once (fallocate) and an mmap, per call:
// allocate buffers once and reuse them, as with ncclMemAlloc. A /dev/shm
// without room for size bytes is an error saying so. Free it with MemFree.
func MemAlloc(size int) ([]byte, error) {
	if size < 1 {
		return nil, fmt.Errorf("MemAlloc(%d): want a size of at least 1 byte", size)
	}
	p := &memPool
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.allocs == nil {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("MemAlloc: pool token: %w", err)
		}
		p.token, p.allocs = binary.LittleEndian.Uint64(b[:]), map[uintptr]*allocation{}
	}
	p.n++
	a := &allocation{id: [3]uint64{uint64(os.Getpid()), p.token, p.n}}
	mem, err := mapPool(filepath.Join(shmDir, poolName(a.id)), int64(size))
	if err != nil {
		return nil, fmt.Errorf("MemAlloc(%d): %w", size, err)
	}
	a.mem = mem
	p.allocs[addr(mem)] = a
	return mem[:size:size], nil
}

// mapPool creates the pool file path for size bytes, reserves its pages,
// records this process as its creator (shm.WritePoolHeader, so that a
// sweep removes it if the process dies without MemFree) and maps its data.
func mapPool(path string, size int64) ([]byte, error) {
	pages := (size + 4095) / 4096 * 4096
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", path, err)
	}
	defer unix.Close(fd)
	if err := unix.Fallocate(fd, 0, 0, shm.PoolHeader+pages); err != nil {
		unix.Unlink(path)
		return nil, fmt.Errorf("reserve %d bytes in %s: %w (free space in %s, or allocate less)", pages, path, err, filepath.Dir(path))
	}
	if err := shm.WritePoolHeader(fd); err != nil {
		unix.Unlink(path)
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	mem, err := unix.Mmap(fd, shm.PoolHeader, int(pages), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		unix.Unlink(path)
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	return mem, nil
}

// MemFree frees a buffer MemAlloc returned (ncclMemFree): it unmaps it and
// removes its pool file. A buffer still registered with a communicator,
// or not from MemAlloc, is an error. Peers that mapped it keep their
// mapping (and its pages) until their communicator closes.
func MemFree(b []byte) error {
	p := &memPool
	p.mu.Lock()
	defer p.mu.Unlock()
	a := p.allocs[addr(b)]
	switch {
	case a == nil:
		return fmt.Errorf("MemFree: buffer at %#x was not returned by MemAlloc, or is freed", addr(b))
	case a.reg > 0:
		return fmt.Errorf("MemFree: buffer at %#x is registered with %d communicator(s): Deregister it first", addr(b), a.reg)
	}
	delete(p.allocs, addr(b))
	unix.Unlink(filepath.Join(shmDir, poolName(a.id)))
	return unix.Munmap(a.mem)
}

// Handle is a registration made by Register.
type Handle struct{ r *registration }

// registration is one Register: the buffer and its pool allocation.
type registration struct {
	lo, hi uintptr
	a      *allocation
}

// Register registers buf with the communicator (ncclCommRegister). buf
// must lie inside one buffer MemAlloc returned: other memory is refused
// with an error, not accepted as "not registered", because a caller who
// registers expects the direct path and should learn at once that it
// cannot have it. Cost: a lookup; local peers map the pool on the first
// call that uses it. Collectives whose send buffer lies in a registered
// buffer may take the direct path (see the package's buffer registration).
func (c *Comm) Register(buf []byte) (Handle, error) {
	if len(buf) == 0 {
		return Handle{}, fmt.Errorf("rank %d: Register: empty buffer", c.rank)
	}
	lo := addr(buf)
	hi := lo + uintptr(len(buf))
	p := &memPool
	p.mu.Lock()
	defer p.mu.Unlock()
	for base, a := range p.allocs {
		if lo >= base && hi <= base+uintptr(len(a.mem)) {
			a.reg++
			r := &registration{lo: lo, hi: hi, a: a}
			c.regs = append(c.regs, r)
			return Handle{r}, nil
		}
	}
	return Handle{}, fmt.Errorf("rank %d: Register: buffer at %#x of %d bytes was not allocated by MemAlloc: only MemAlloc memory can be registered (local peers map it through %s)", c.rank, lo, len(buf), shmDir)
}

// Deregister ends a registration (ncclCommDeregister). Cost: a lookup.
func (c *Comm) Deregister(h Handle) error {
	for i, r := range c.regs {
		if r == h.r {
			c.regs = append(c.regs[:i], c.regs[i+1:]...)
			memPool.mu.Lock()
			r.a.reg--
			memPool.mu.Unlock()
			return nil
		}
	}
	return fmt.Errorf("rank %d: Deregister: not a registration of this communicator, or deregistered already", c.rank)
}

// registered returns where b lies in a registered buffer, if it does.
func (c *Comm) registered(b []byte) (*registration, bool) {
	lo := addr(b)
	hi := lo + uintptr(len(b))
	for _, r := range c.regs {
		if lo >= r.lo && hi <= r.hi {
			return r, true
		}
	}
	return nil, false
}

// nvlsDirect publishes k's descriptor to the host's other ranks and says
// whether the call takes the direct path: every local rank's send buffer
// is registered, and the reduction has no pre-operation (premulsum's
// scalar is each rank's own, and a head would apply its own to every
// rank's data). It maps the peers' pools into k.peerIn.
func (c *Comm) nvlsDirect(k *coll, peerIn [][]byte) (bool, error) {
	c.nvlsSeq++
	k.nvlsSeq = c.nvlsSeq
	sendBytes, _ := c.counts(k.kind, int(k.count), k.root)
	nb := int64(sendBytes) * int64(k.dt.Size())
	var d shm.Desc
	if r, ok := c.registered(k.send[:nb]); ok && nb > 0 && (k.fn == nil || !k.fn.HasPre()) {
		d = shm.Desc{Registered: true, Pool: r.a.id, Off: uint64(addr(k.send) - addr(r.a.mem)), Size: uint64(len(r.a.mem))}
	}
	descs, err := c.seg.Arrive(k.nvlsSeq, d, c.descs)
	if err != nil {
		return false, err
	}
	c.descs = descs
	for _, d := range descs {
		if !d.Registered {
			return false, nil
		}
	}
	for rank, lr := range c.localIndex {
		d := descs[lr]
		if rank == c.rank {
			continue
		}
		mem, err := c.peerPool(d)
		if err != nil {
			return false, fmt.Errorf("rank %d: registered buffer of rank %d: %w", c.rank, rank, err)
		}
		if d.Off+uint64(nb) > uint64(len(mem)) {
			return false, fmt.Errorf("rank %d: registered buffer of rank %d: %d bytes at %d beyond its pool of %d", c.rank, rank, nb, d.Off, len(mem))
		}
		peerIn[rank] = mem[d.Off : d.Off+uint64(nb)]
	}
	k.direct, k.peerIn = true, peerIn
	return true, nil
}

// maxPeerPools bounds the cached mappings of peers' pools; past it the
// cache starts over (a peer's freed pool stays mapped until then).
const maxPeerPools = 256

// peerPool maps a local peer's pool, once.
func (c *Comm) peerPool(d shm.Desc) ([]byte, error) {
	if m, ok := c.peerPools[d.Pool]; ok {
		return m, nil
	}
	if len(c.peerPools) >= maxPeerPools {
		c.unmapPeerPools()
	}
	path := filepath.Join(shmDir, poolName(d.Pool))
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	mem, err := unix.Mmap(fd, shm.PoolHeader, int(d.Size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map %s: %w", path, err)
	}
	if c.peerPools == nil {
		c.peerPools = map[[3]uint64][]byte{}
	}
	c.peerPools[d.Pool] = mem
	return mem, nil
}

// unmapPeerPools drops every cached mapping of a peer's pool (between
// calls, when none is in use).
func (c *Comm) unmapPeerPools() {
	var errs []error
	for id, m := range c.peerPools {
		errs = append(errs, unix.Munmap(m))
		delete(c.peerPools, id)
	}
	if err := errors.Join(errs...); err != nil {
		c.warnf("rank %d: unmap peers' registered buffers: %v", c.rank, err)
	}
}

// departDirect ends the direct calls of ks: no rank returns before every
// head has read its Input.
func (c *Comm) departDirect(ks []*coll) error {
	for _, k := range ks {
		if k.direct {
			if err := c.seg.Depart(k.nvlsSeq); err != nil {
				return err
			}
		}
	}
	return nil
}

// stagedSteps counts the FIFO steps this rank has posted on connection 1
// to the other ranks of its host (scatter: the NVLS scatter's staging
// FIFOs) and into its multicast regions (mcast), for tests: scatter is 0
// on the direct path, and so is mcast for a direct all-gather.
func (c *Comm) stagedSteps() (scatter, mcast uint64) {
	for _, ch := range c.channels {
		ch.mu.Lock()
		for k, l := range ch.send {
			s, ok := l.opened()
			if !ok || k.conn != 1 {
				continue
			}
			switch sc := s.(type) {
			case *shm.SendConn:
				scatter += sc.Posted()
			case *shm.McastSendConn:
				mcast += sc.Posted()
			}
		}
		ch.mu.Unlock()
	}
	return scatter, mcast
}

// chooseDirect decides whether k, an NVLS or NVLS_TREE call on a host with
// local peers, runs over registered buffers (see nvlsDirect); alone says
// that no other call of a group shares the communicator's peerIn.
func (c *Comm) chooseDirect(k *coll, alone bool) error {
	if k.control || c.seg == nil || (k.algo.Algo != algos.NVLS && k.algo.Algo != algos.NVLSTree) {
		return nil
	}
	if c.peerIn == nil {
		c.peerIn = make([][]byte, c.nranks)
	}
	peerIn := c.peerIn // a call outside a group allocates nothing
	if !alone {
		peerIn = make([][]byte, c.nranks)
	}
	_, err := c.nvlsDirect(k, peerIn)
	return err
}

// closeRegistrations ends the communicator's registrations and unmaps the
// peers' pools (Close).
func (c *Comm) closeRegistrations() {
	memPool.mu.Lock()
	for _, r := range c.regs {
		r.a.reg--
	}
	memPool.mu.Unlock()
	c.regs = nil
	c.unmapPeerPools()
}
