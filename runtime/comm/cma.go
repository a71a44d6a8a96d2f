package comm

// The CMA row (algos/cma.go): the single-copy all-gather of one host's
// processes. Every rank publishes its send buffer's address in its
// one-shot inline bytes, and every other rank reads the block straight
// into its output with process_vm_readv (shm.ReadPeer), one copy where the
// slots and the ring's FIFO make three. Whether the system call is allowed
// between the ranks (same user, no Yama or seccomp refusal, one pid
// namespace) is known only here: Init probes it on every pair of local
// ranks (probeCMA), and the row may run only where it succeeded on all.

import (
	"encoding/binary"
	"fmt"
	"os"
	"unsafe"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/runtime/param"
	"github.com/seed-760dd1f1/cc/runtime/transport/shm"
)

// cmaState is what the single-copy all-gather needs: the local ranks'
// pids by rank (every rank is local where it runs) and whether Init's
// probe succeeded on every rank, or why not.
type cmaState struct {
	ok    bool
	why   string // why the row is off: no probe, or the first rank's failure
	pids  []int
	word  *uint64 // the probe's word: on the heap, where a goroutine's growing stack cannot move it
	calls uint64  // single-copy all-gathers run (for tests)
}

// readPeer is shm.ReadPeer; tests make it fail.
var readPeer = shm.ReadPeer

// cmaWanted says why Init does not probe cross-memory attach, or "": the
// CMA row may run only with every rank on this host, a one-shot area and
// NCCL_ALGO allowing it for all-gather.
func (c *Comm) cmaWanted() string {
	switch {
	case !c.p.Algo.For(algos.AllGather).Has(algos.CMA):
		return "NCCL_ALGO excludes it"
	case c.seg == nil || c.nranks < 2 || len(c.localIndex) != c.nranks:
		return "it needs two or more ranks, all on one host over shared memory"
	case c.flat.area == nil:
		return "there is no one-shot area (CC_ONESHOT_BYTES=0 or NCCL_SHM_DISABLE=1)"
	}
	return ""
}

// probeCMA decides, alike on every rank, whether single-copy all-gathers
// may run: every rank publishes the address and value of a word of its
// own in its inline bytes (one-shot call 1), reads every other rank's
// word with process_vm_readv and compares, then publishes whether all
// matched (call 2); any failure turns it off everywhere, and rank 0 says
// why at INFO. Two one-shot calls, so every rank's call counter moves
// alike.
func (c *Comm) probeCMA() error {
	if c.cma.why = c.cmaWanted(); c.cma.why != "" {
		return nil
	}
	word := new(uint64)
	c.cma.word = word
	*word = uint64(os.Getpid())<<20 ^ uint64(c.rank)*0x9e3779b97f4a7c15 ^ 0x5c3a
	area := c.flat.area
	seq := c.flat.seq + 1
	mine := area.Stages(seq, true)[c.localIndex[c.rank]]
	binary.NativeEndian.PutUint64(mine[0:], uint64(uintptr(unsafe.Pointer(word))))
	binary.NativeEndian.PutUint64(mine[8:], *word)
	area.Post(seq)
	if err := area.Await(seq); err != nil {
		return err
	}
	pids := make([]int, c.nranks)
	why := ""
	stages := area.Stages(seq, true)
	for r := range c.nranks {
		pid, ok := c.seg.PeerPid(c.localIndex[r])
		pids[r] = pid
		if r == c.rank || why != "" {
			continue
		}
		if !ok {
			why = fmt.Sprintf("rank %d: no pid of rank %d in this pid namespace", c.rank, r)
			continue
		}
		st := stages[c.localIndex[r]]
		var got [8]byte
		if err := readPeer(pid, got[:], binary.NativeEndian.Uint64(st[0:])); err != nil {
			why = fmt.Sprintf("rank %d reading rank %d: %v", c.rank, r, err)
		} else if g, w := binary.NativeEndian.Uint64(got[:]), binary.NativeEndian.Uint64(st[8:]); g != w {
			why = fmt.Sprintf("rank %d reading rank %d: got %#x, rank %d published %#x", c.rank, r, g, r, w)
		}
	}
	seq++
	mine = area.Stages(seq, true)[c.localIndex[c.rank]]
	clear(mine)
	if why != "" {
		copy(mine[1:], why) // the first byte 0: failed, and (the start of) why
	} else {
		mine[0] = 1
	}
	area.Post(seq)
	if err := area.Await(seq); err != nil {
		return err
	}
	c.flat.seq = seq
	c.cma.ok, c.cma.pids = true, pids
	for r, st := range area.Stages(seq, true) {
		if st[0] == 0 {
			n := 1
			for n < len(st) && st[n] != 0 {
				n++
			}
			c.cma.ok, c.cma.why = false, fmt.Sprintf("process_vm_readv failed between local ranks (local rank %d: %s)", r, st[1:n])
			if c.rank == 0 {
				c.infof(param.SubsysInit, "CMA off: %s", c.cma.why)
			}
			break
		}
	}
	return nil
}

// cmaRun runs k, a CMA all-gather, by its plan (algos.cmaPlan): one-shot
// call s publishes where each rank's send buffer is; every rank copies its
// own block (Local, unless in place) and reads the others' (Peer); call
// s+1 keeps every rank in the call until every other has read its send
// buffer (Flat.Hold), which the caller may change once the call returns.
func (c *Comm) cmaRun(k *coll) error {
	es := int64(k.dt.Size())
	area := c.flat.area
	for _, pl := range k.plan.flat { // one piece; none for count 0
		c.cma.calls++
		seq := c.flat.seq + 1
		c.flat.seq = seq + 1
		mine := area.Stages(seq, true)[c.localIndex[c.rank]]
		binary.NativeEndian.PutUint64(mine, uint64(addr(k.send)))
		area.Post(seq)
		for _, g := range pl.Gets {
			if g.Local {
				dst, src := k.recv[g.OutOff*es:(g.OutOff+g.Count)*es], k.send[g.InOff*es:(g.InOff+g.Count)*es]
				if len(dst) > 0 && &dst[0] != &src[0] {
					copy(dst, src)
				}
			}
		}
		if err := area.Await(seq); err != nil {
			return c.flatFailed(k, err)
		}
		stages := area.Stages(seq, true)
		for _, g := range pl.Gets {
			if !g.Peer || g.Count == 0 {
				continue
			}
			at := binary.NativeEndian.Uint64(stages[c.localIndex[g.Rank]]) + uint64(g.InOff*es)
			if err := readPeer(c.cma.pids[g.Rank], k.recv[g.OutOff*es:(g.OutOff+g.Count)*es], at); err != nil {
				return c.flatFailed(k, fmt.Errorf("reading rank %d's send buffer: %w", g.Rank, err))
			}
		}
		area.Post(seq + 1)
		if err := area.Await(seq + 1); err != nil {
			return c.flatFailed(k, err)
		}
	}
	return nil
}
