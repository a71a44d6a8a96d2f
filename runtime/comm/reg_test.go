package comm

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/seed-760dd1f1/cc/algos"
)

// Buffer registration: MemAlloc / Register and NVLS's direct path.

// regBuffers copies send and recv, aliased as the case made them, into
// MemAlloc memory registered with c; done deregisters and frees it.
func regBuffers(c *Comm, send, recv []byte) (s, r []byte, done func() error, err error) {
	var mems [][]byte
	var hs []Handle
	done = func() error {
		for _, h := range hs {
			if err := c.Deregister(h); err != nil {
				return err
			}
		}
		for _, m := range mems {
			if err := MemFree(m); err != nil {
				return err
			}
		}
		return nil
	}
	alloc := func(n int) ([]byte, error) {
		m, err := MemAlloc(max(n, 1))
		if err != nil {
			return nil, err
		}
		mems = append(mems, m)
		h, err := c.Register(m)
		hs = append(hs, h)
		return m, err
	}
	if overlaps(send, recv) {
		lo := min(addr(send), addr(recv))
		hi := max(addr(send)+uintptr(len(send)), addr(recv)+uintptr(len(recv)))
		m, err := alloc(int(hi - lo))
		if err != nil {
			return nil, nil, done, err
		}
		so, ro := addr(send)-lo, addr(recv)-lo
		copy(m[ro:], recv)
		copy(m[so:], send)
		return m[so : so+uintptr(len(send))], m[ro : ro+uintptr(len(recv))], done, nil
	}
	if s, err = alloc(len(send)); err != nil {
		return nil, nil, done, err
	}
	if r, err = alloc(len(recv)); err != nil {
		return nil, nil, done, err
	}
	copy(s, send)
	copy(r, recv)
	return s[:len(send)], r[:len(recv)], done, nil
}

// regCall runs one NVLS collective on every rank of cs, registering the
// buffers of the ranks reg says, checks every element and returns each
// rank's staged steps (scatter FIFOs, multicast stores) during the call.
func regCall(t *testing.T, cs []*Comm, cc collCase, count int, inPlace bool, reg func(r int) bool) (scatter, mcast []uint64) {
	t.Helper()
	n := len(cs)
	scatter, mcast = make([]uint64, n), make([]uint64, n)
	recvs := make([][]byte, n)
	mustEach(t, cs, cc.name, func(c *Comm) error {
		r := c.Rank()
		send, recv := caseBuffers(cc, r, n, count, inPlace)
		if reg(r) {
			s, rv, done, err := regBuffers(c, send, recv)
			defer func() {
				if err := done(); err != nil {
					t.Error(err)
				}
			}()
			if err != nil {
				return err
			}
			send, recv = s, rv
		}
		s0, m0 := c.stagedSteps()
		if err := cc.run(c, send, recv, count); err != nil {
			return err
		}
		s1, m1 := c.stagedSteps()
		scatter[r], mcast[r] = s1-s0, m1-m0
		recvs[r] = append([]byte(nil), recv...)
		return nil
	})
	for r := range n {
		if err := checkCase(cc, r, n, count, inPlace, recvs[r]); err != nil {
			t.Fatalf("%s count %d in place %v: %v", cc.name, count, inPlace, err)
		}
	}
	return scatter, mcast
}

// stagedCount is what the staging counter of a collective counts: the
// scatter FIFOs, or for all-gather (which scatters nothing) the
// multicast stores.
func stagedCount(cc collCase, scatter, mcast uint64) uint64 {
	if cc.name == "AllGather" {
		return mcast
	}
	return scatter
}

// TestNVLSRegistered: with every rank's buffers registered, NVLS
// reduce-scatter, all-reduce and all-gather pass nothing through the
// staging FIFOs (a direct all-gather not even through the multicast
// regions) and the data is exact; with none registered the same calls
// stage. n = 2, 3, 4, 8; one and two channels; in and out of place.
func TestNVLSRegistered(t *testing.T) {
	all := func(int) bool { return true }
	none := func(int) bool { return false }
	for _, n := range []int{2, 3, 4, 8} {
		for _, nc := range []string{"1", "2"} {
			t.Run(fmt.Sprintf("n%d/ch%s", n, nc), func(t *testing.T) {
				cs := withHosts(t, hostLayouts(n)["onehost"], testParams(t, nvlsEnv(false, "NCCL_NCHANNELS", nc)))
				for _, cc := range collCases()[:3] {
					for _, count := range []int{1, n - 1, 128*n + 3, 5000} {
						for _, inPlace := range []bool{false, true} {
							sc, mc := regCall(t, cs, cc, count, inPlace, all)
							for r := range n {
								if got := stagedCount(cc, sc[r], mc[r]); got != 0 {
									t.Errorf("%s count %d in place %v registered: rank %d staged %d steps, want 0", cc.name, count, inPlace, r, got)
								}
							}
							sc, mc = regCall(t, cs, cc, count, inPlace, none)
							for r := range n {
								if got := stagedCount(cc, sc[r], mc[r]); got == 0 && count >= n {
									t.Errorf("%s count %d in place %v unregistered: rank %d staged nothing", cc.name, count, inPlace, r)
								}
							}
						}
					}
				}
				if algo, _, _, _ := cs[0].Ran(); algo != algos.NVLS {
					t.Errorf("the last call ran %s, want NVLS", algo)
				}
			})
		}
	}
}

// TestNVLSRegisteredMixed: one rank's buffers unregistered makes every
// rank take the staged path, with exact data.
func TestNVLSRegisteredMixed(t *testing.T) {
	const n = 4
	cs := withHosts(t, hostLayouts(n)["onehost"], testParams(t, nvlsEnv(false)))
	for _, cc := range collCases()[:3] {
		for odd := range n {
			sc, mc := regCall(t, cs, cc, 5000, false, func(r int) bool { return r != odd })
			for r := range n {
				if stagedCount(cc, sc[r], mc[r]) == 0 {
					t.Errorf("%s with rank %d unregistered: rank %d staged nothing, want the staged path on every rank", cc.name, odd, r)
				}
			}
		}
	}
}

// TestNVLSRegisteredInputReuse: every rank overwrites its send buffer as
// soon as its call returns, many times over; every rank's result stays
// exact, because no rank returns before every head has read its Input
// (the arrive/depart counter).
func TestNVLSRegisteredInputReuse(t *testing.T) {
	const n, count, rounds = 4, 4096, 30
	cs := withHosts(t, hostLayouts(n)["onehost"], testParams(t, nvlsEnv(false)))
	for _, cc := range collCases()[:3] {
		recvs := make([][][]byte, n)
		mustEach(t, cs, cc.name, func(c *Comm) error {
			r := c.Rank()
			send, recv := caseBuffers(cc, r, n, count, false)
			s, rv, done, err := regBuffers(c, send, recv)
			defer done()
			if err != nil {
				return err
			}
			for range rounds {
				copy(s, send)
				if err := cc.run(c, s, rv, count); err != nil {
					return err
				}
				for i := range s {
					s[i] = 0xA5 // a head still reading this Input would sum garbage
				}
				recvs[r] = append(recvs[r], append([]byte(nil), rv...))
			}
			return nil
		})
		for r := range n {
			for i, out := range recvs[r] {
				if err := checkCase(cc, r, n, count, false, out); err != nil {
					t.Fatalf("%s round %d: %v", cc.name, i, err)
				}
			}
		}
	}
}

// TestNVLSTreeRegistered: NVLS_TREE all-reduce across 2 fake hosts of 3
// ranks, registered on one host only: each host decides for itself
// (nothing staged on the registered host, staging on the other), and the
// data is exact.
func TestNVLSTreeRegistered(t *testing.T) {
	const hosts, ppn = 2, 3
	ids := make([]string, hosts*ppn)
	for r := range ids {
		ids[r] = fmt.Sprintf("h%d", r/ppn)
	}
	cs := withHosts(t, ids, testParams(t, nvlsEnv(true)))
	cc := collCases()[0]
	sc, _ := regCall(t, cs, cc, 5000, false, func(r int) bool { return r < ppn })
	for r := range cs {
		if staged := sc[r] > 0; staged != (r >= ppn) {
			t.Errorf("rank %d (host %d) staged %d steps", r, r/ppn, sc[r])
		}
	}
	if algo, _, _, _ := cs[0].Ran(); algo != algos.NVLSTree {
		t.Errorf("ran %s, want NVLSTree", algo)
	}
}

// TestMemAllocErrors: what MemAlloc, MemFree, Register and Deregister
// refuse, each with an error naming why.
func TestMemAllocErrors(t *testing.T) {
	cs := withHosts(t, hostLayouts(2)["onehost"], testParams(t, nvlsEnv(false)))
	c := cs[0]
	mustErr := func(what string, err error, want string) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", what, err, want)
		}
	}
	_, err := MemAlloc(0)
	mustErr("MemAlloc(0)", err, "want a size of at least 1 byte")
	_, err = c.Register(make([]byte, 64))
	mustErr("Register(Go memory)", err, "was not allocated by MemAlloc")
	mustErr("MemFree(Go memory)", MemFree(make([]byte, 64)), "was not returned by MemAlloc")
	m, err := MemAlloc(1000)
	if err != nil {
		t.Fatal(err)
	}
	h, err := c.Register(m[100:200])
	if err != nil {
		t.Fatal(err)
	}
	mustErr("MemFree(registered)", MemFree(m), "Deregister it first")
	if err := c.Deregister(h); err != nil {
		t.Fatal(err)
	}
	mustErr("Deregister twice", c.Deregister(h), "deregistered already")
	if err := MemFree(m); err != nil {
		t.Fatal(err)
	}
	mustErr("MemFree twice", MemFree(m), "or is freed")
}

// childRegistered is the process test's rank: NVLS over registered
// buffers (the staging counter at 0, exact data), then unregistered (the
// counter above 0).
func childRegistered(c *Comm) error {
	n, r := c.NRanks(), c.Rank()
	for _, cc := range collCases()[:3] {
		for _, count := range []int{1000, 300000} {
			for _, reg := range []bool{true, false} {
				send, recv := caseBuffers(cc, r, n, count, false)
				if reg {
					s, rv, done, err := regBuffers(c, send, recv)
					if err != nil {
						return err
					}
					defer done()
					send, recv = s, rv
				}
				s0, m0 := c.stagedSteps()
				if err := cc.run(c, send, recv, count); err != nil {
					return fmt.Errorf("%s count %d registered %v: %w", cc.name, count, reg, err)
				}
				s1, m1 := c.stagedSteps()
				if err := checkCase(cc, r, n, count, false, recv); err != nil {
					return fmt.Errorf("registered %v: %w", reg, err)
				}
				// A small all-reduce lands on head 0, which scatters nothing.
				if got := stagedCount(cc, s1-s0, m1-m0); (reg && got != 0) || (!reg && got == 0 && count > 1000) {
					return fmt.Errorf("%s count %d registered %v: %d staged steps", cc.name, count, reg, got)
				}
			}
		}
	}
	return nil
}

// TestNVLSRegisteredAsProcesses: the registered path with every rank its
// own OS process (peers map each other's pools), n = 2, 3, 4, 8.
func TestNVLSRegisteredAsProcesses(t *testing.T) {
	for _, n := range []int{2, 3, 4, 8} {
		if n == 8 && testing.Short() {
			continue
		}
		t.Run(fmt.Sprintf("n%d", n), func(t *testing.T) {
			env := func(r int) []string {
				return append(transports[1].env(r), "NCCL_ALGO=nvls", "NCCL_NVLS_CHUNKSIZE=16384")
			}
			procs := startRanks(t, n, "registered", env)
			waitOK(t, procs)
			if left := shmFiles(t, "cc-mem-"); left != "" && !otherPools(left) {
				t.Errorf("the job left pool files in %s: %s", shmDir, left)
			}
		})
	}
}

// otherPools reports whether every pool file in names belongs to a
// process still running (another test's).
func otherPools(names string) bool {
	for _, name := range strings.Split(names, ",") {
		var pid int
		if _, err := fmt.Sscanf(name, "cc-mem-%d-", &pid); err != nil {
			return false
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			return false
		}
	}
	return true
}

// TestMemAllocDevShmFull: MemAlloc beyond what the shared-memory
// directory holds (a 1 MiB tmpfs) is an error naming the directory and
// what to do, not a SIGBUS on first touch; what fits works.
func TestMemAllocDevShmFull(t *testing.T) {
	dir := smallShmDir(t, "1m")
	_, err := MemAlloc(4 << 20)
	if err == nil || !strings.Contains(err.Error(), "free space in "+dir+", or allocate less") {
		t.Fatalf("MemAlloc(4 MiB) in a 1 MiB tmpfs: %v, want an error naming %s and what to do", err, dir)
	}
	m, err := MemAlloc(64 << 10)
	if err != nil {
		t.Fatal(err)
	}
	for i := range m {
		m[i] = 1 // every page is backed
	}
	if err := MemFree(m); err != nil {
		t.Fatal(err)
	}
	if left := shmFiles(t, "cc-mem-"); left != "" {
		t.Errorf("left in %s: %s", dir, left)
	}
}

// smallShmDir makes the shared-memory directory a tmpfs of size (mount's
// size= option) for the test, or skips it where mounting is not allowed.
func smallShmDir(t *testing.T, size string) string {
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root): %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, 0) })
	old := shmDir
	shmDir = dir
	t.Cleanup(func() { shmDir = old })
	return dir
}
