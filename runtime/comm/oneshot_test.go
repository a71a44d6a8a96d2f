package comm

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
	"github.com/seed-760dd1f1/cc/runtime/tune"
)

// oneShotEnv forces the one-shot rows with slots of 4 KiB, so that calls
// of more than 1 Ki int32 (256 per block for reduce-scatter at n=4) run in
// several pieces, and each call reuses the slots of the one before.
func oneShotEnv(extra ...string) map[string]string {
	env := map[string]string{"NCCL_ALGO": "oneshot", "CC_ONESHOT_BYTES": "4096", "NCCL_BUFFSIZE": "8192"}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	return env
}

// oneShotCounts are below, at and above one piece of 4 KiB of int32, and
// at and above the 56 bytes that ride with the sequence numbers.
var oneShotCounts = []int{0, 1, 3, 14, 15, 1023, 1024, 1025, 5000}

// TestOneShot runs every one-shot collective over shared memory on one
// host of 2, 3, 4, 5 and 8 ranks (and one rank, forced, whose slots are
// its own memory), in and out of place, checking every element and that the
// one-shot row ran.
func TestOneShot(t *testing.T) {
	for _, n := range []int{1, 2, 3, 4, 5, 8} {
		t.Run(fmt.Sprintf("n%d", n), func(t *testing.T) {
			cs := withHosts(t, hostLayouts(n)["onehost"], testParams(t, oneShotEnv()))
			if n == 1 { // the tuner runs the ring for one rank, as NCCL's: force it
				if err := cs[0].Force(algos.OneShot, protocols.Simple, 0); err != nil {
					t.Fatal(err)
				}
			}
			for _, cc := range collCases()[:5] { // AllReduce, ReduceScatter, AllGather, Broadcast, Reduce
				for _, count := range oneShotCounts {
					for _, inPlace := range []bool{false, true} {
						if inPlace && cc.inPlace == nil && cc.name != "ReduceScatter" {
							continue
						}
						runCase(t, cs, cc, count, inPlace)
						for _, c := range cs {
							if algo, _, _, _ := c.Ran(); algo != algos.OneShot {
								t.Fatalf("%s count %d: rank %d ran %s, want OneShot", cc.name, count, c.Rank(), algo)
							}
						}
					}
				}
			}
		})
	}
}

// TestOneShotEveryDataTypeAndOp runs all-reduce, reduce-scatter and reduce
// by the one-shot rows for every data type x op, comparing bytes exactly,
// and checks that every rank got the same bits.
// Counts: several pieces of 4 KiB for every type, and an odd count that
// fits the inline bytes (up to 56 B); each out of place and in place.
func TestOneShotEveryDataTypeAndOp(t *testing.T) {
	const scalar = 2.0
	for _, n := range []int{2, 3, 5} {
		t.Run(fmt.Sprintf("n%d", n), func(t *testing.T) {
			cs := withHosts(t, hostLayouts(n)["onehost"], testParams(t, oneShotEnv()))
			for _, dt := range reduce.DataTypes() {
				for _, op := range reduce.Ops() {
					for _, count := range []int{1301, 3} {
						checkOneShotTypes(t, cs, dt, op, count, scalar)
						checkOneShotInPlace(t, cs, dt, op, count, scalar)
					}
				}
			}
		})
	}
}

// checkOneShotInPlace is checkOneShotTypes's all-reduce and
// reduce-scatter in place.
func checkOneShotInPlace(t *testing.T, cs []*Comm, dt reduce.DataType, op reduce.Op, count int, scalar float64) {
	t.Helper()
	n, es := len(cs), dt.Size()
	ar, rs := make([][]byte, n), make([][]byte, n)
	mustEach(t, cs, "one-shot types in place", func(c *Comm) error {
		r := c.Rank()
		o, done, err := testOp(c, op, dt, scalar)
		if err != nil {
			return err
		}
		defer done()
		ar[r], rs[r] = exactValues(dt, op, r, count), exactValues(dt, op, r, n*count)
		if err := c.AllReduce(ar[r], ar[r], count, dt, o); err != nil {
			return err
		}
		return c.ReduceScatter(rs[r], rs[r][r*count*es:(r+1)*count*es], count, dt, o)
	})
	want := exactResults(dt, op, n, 0, count, scalar)
	for r := range n {
		if !bytes.Equal(ar[r], want) {
			t.Errorf("%s/%s count %d in-place all-reduce rank %d: %s", dt, op, count, r, firstDiff(dt, ar[r], want))
		}
		if got, w := rs[r][r*count*es:(r+1)*count*es], exactResults(dt, op, n, r*count, count, scalar); !bytes.Equal(got, w) {
			t.Errorf("%s/%s count %d in-place reduce-scatter rank %d: %s", dt, op, count, r, firstDiff(dt, got, w))
		}
	}
}

func checkOneShotTypes(t *testing.T, cs []*Comm, dt reduce.DataType, op reduce.Op, count int, scalar float64) {
	t.Helper()
	n, es := len(cs), dt.Size()
	ar, rs, rd := make([][]byte, n), make([][]byte, n), make([][]byte, n)
	mustEach(t, cs, "one-shot types", func(c *Comm) error {
		r := c.Rank()
		o, done, err := testOp(c, op, dt, scalar)
		if err != nil {
			return err
		}
		defer done()
		ar[r], rs[r], rd[r] = make([]byte, count*es), make([]byte, count*es), make([]byte, count*es)
		if err := c.AllReduce(exactValues(dt, op, r, count), ar[r], count, dt, o); err != nil {
			return err
		}
		if err := c.ReduceScatter(exactValues(dt, op, r, n*count), rs[r], count, dt, o); err != nil {
			return err
		}
		return c.Reduce(exactValues(dt, op, r, count), rd[r], count, dt, o, n-1)
	})
	want := exactResults(dt, op, n, 0, count, scalar)
	for r := range n {
		if !bytes.Equal(ar[r], want) {
			t.Errorf("%s/%s all-reduce rank %d: %s", dt, op, r, firstDiff(dt, ar[r], want))
		}
		if w := exactResults(dt, op, n, r*count, count, scalar); !bytes.Equal(rs[r], w) {
			t.Errorf("%s/%s reduce-scatter rank %d: %s", dt, op, r, firstDiff(dt, rs[r], w))
		}
	}
	if !bytes.Equal(rd[n-1], want) {
		t.Errorf("%s/%s reduce at root %d: %s", dt, op, n-1, firstDiff(dt, rd[n-1], want))
	}
}

// TestOneShotFloatSameBits: a float sum whose value depends on the order
// of the additions is bitwise the same on every rank.
func TestOneShotFloatSameBits(t *testing.T) {
	const n, count = 5, 777
	cs := withHosts(t, hostLayouts(n)["onehost"], testParams(t, oneShotEnv()))
	outs := make([][]byte, n)
	mustEach(t, cs, "AllReduce", func(c *Comm) error {
		r := c.Rank()
		send := make([]byte, 4*count)
		for i := range count {
			reduce.Encode(reduce.Float32, send[4*i:], 1/float64(3+r*7+i%11)) // sums that round differently in another order
		}
		outs[r] = make([]byte, 4*count)
		return c.AllReduce(send, outs[r], count, reduce.Float32, reduce.Sum)
	})
	for r := 1; r < n; r++ {
		if !bytes.Equal(outs[r], outs[0]) {
			t.Errorf("rank %d: %s (rank 0's bits)", r, firstDiff(reduce.Float32, outs[r], outs[0]))
		}
	}
}

// TestOneShotUnavailable: the one-shot rows forced where they cannot run
// fail the call with NCCL's "no algorithm/protocol available", naming why;
// Init and the other collectives are not affected.
func TestOneShotUnavailable(t *testing.T) {
	for _, c := range []struct {
		name  string
		hosts []string
		env   map[string]string
		why   string
	}{
		{"two hosts", hostLayouts(4)["pairs"], oneShotEnv(), "OneShot runs only when every rank is on one host, and the ranks are on 2 hosts"},
		{"too many ranks", hostLayouts(algos.OneShotMaxRanks + 1)["onehost"], oneShotEnv(), fmt.Sprintf("OneShot runs with at most %d ranks, and there are %d", algos.OneShotMaxRanks, algos.OneShotMaxRanks+1)},
		{"no shm", hostLayouts(2)["onehost"], oneShotEnv("NCCL_SHM_DISABLE", "1"), "OneShot needs shared memory and NCCL_SHM_DISABLE=1"},
		{"off", hostLayouts(2)["onehost"], oneShotEnv("CC_ONESHOT_BYTES", "0"), "OneShot is off (CC_ONESHOT_BYTES=0)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cs := withHosts(t, c.hosts, testParams(t, c.env))
			errs := each(cs, func(c *Comm) error {
				b := make([]byte, 64)
				return c.AllReduce(b, b, 16, reduce.Int32, reduce.Sum)
			})
			for r, err := range errs {
				if err == nil || !strings.Contains(err.Error(), "no algorithm/protocol available for function AllReduce") || !strings.Contains(err.Error(), c.why) {
					t.Errorf("rank %d: %v, want no algorithm available because %q", r, err, c.why)
				}
			}
		})
	}
}

// TestOneShotDevShmTooSmall: a one-shot area that does not fit in the
// shared-memory directory (1 MiB tmpfs; 2 ranks x 2 slots of 1 MiB) fails
// Init on every rank with an error naming CC_ONESHOT_BYTES.
func TestOneShotDevShmTooSmall(t *testing.T) {
	initFailsInSmallShm(t, "1m", oneShotEnv("CC_ONESHOT_BYTES", "1048576"), "one-shot area", "CC_ONESHOT_BYTES")
}

// initFailsInSmallShm: Init of 2 ranks of one host with env, in a
// shared-memory directory of size (a tmpfs), fails with an error
// containing every one of wants.
func initFailsInSmallShm(t *testing.T, size string, env map[string]string, wants ...string) {
	t.Helper()
	smallShmDir(t, size)
	cs, err := InitLocalHosts(t.Context(), hostLayouts(2)["onehost"], testParams(t, env))
	if err == nil {
		closeAll(t, cs)
		t.Fatalf("Init succeeded in a %s directory, want it not to fit", size)
	}
	t.Logf("Init: %v", err)
	for _, want := range wants {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Init: %v, want an error containing %q", err, want)
		}
	}
}

// TestOneShotRepeatedCallAllocatesNothing: once a one-shot collective of a
// shape has run on 2 ranks of one host, running it again allocates nothing
// on either rank. The waits spin (CC_SHM_SPIN_US at its maximum, 2 ranks
// on 2 cores) rather than yield or sleep: a goroutine that blocks in a
// system call may make the Go runtime start a thread, which allocates,
// and AllocsPerRun counts the whole process's allocations.
func TestOneShotRepeatedCallAllocatesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation counts skipped in -short mode")
	}
	const n = 2
	cs := withHosts(t, hostLayouts(n)["onehost"], testParams(t, oneShotEnv("CC_SHM_SPIN_US", "100000")))
	for _, count := range []int{3000, 2} { // three pieces; inline bytes, repeated (Comm.repeat)
		for _, cc := range collCases()[:5] {
			t.Run(fmt.Sprintf("%s/count%d", cc.name, count), func(t *testing.T) {
				if allocs := allocsPerCall(t, cs, cc, count, 50); allocs != 0 {
					t.Errorf("%v allocations per call, want 0", allocs)
				}
			})
		}
	}
}

// TestOneShotAsProcesses runs every one-shot collective, and all-reduce
// for every data type x op, with every rank its own OS process over
// shared memory, n = 2, 3, 4, 5 and 8.
func TestOneShotAsProcesses(t *testing.T) {
	for _, n := range []int{2, 3, 4, 5, 8} {
		if n == 8 && testing.Short() {
			continue
		}
		t.Run(fmt.Sprintf("n%d", n), func(t *testing.T) {
			env := func(r int) []string {
				return []string{"NCCL_SHM_DISABLE=0", "NCCL_ALGO=oneshot", "CC_ONESHOT_BYTES=4096"}
			}
			procs := startRanks(t, n, "oneshot", env)
			waitOK(t, procs)
			if left := shmFiles(t, procs[0].job); left != "" {
				t.Errorf("the job left segments in %s: %s", shmDir, left)
			}
		})
	}
}

// childOneShot is TestOneShotAsProcesses' rank.
func childOneShot(c *Comm) error {
	for _, cc := range collCases()[:5] {
		for _, count := range oneShotCounts {
			for _, inPlace := range []bool{false, true} {
				if err := rankCase(c, cc, count, inPlace); err != nil {
					return err
				}
				if algo, _, _, _ := c.Ran(); algo != algos.OneShot {
					return fmt.Errorf("%s count %d ran %s, want OneShot", cc.name, count, algo)
				}
			}
		}
	}
	return everyTypeAndOp(c)
}

// everyTypeAndOp all-reduces 1301 elements of every data type with every
// op (the premultiplied sum by 2) on every rank, comparing bytes exactly.
func everyTypeAndOp(c *Comm) error {
	n, r := c.NRanks(), c.Rank()
	const count, scalar = 1301, 2.0
	for _, dt := range reduce.DataTypes() {
		for _, op := range reduce.Ops() {
			o, done, err := testOp(c, op, dt, scalar)
			if err != nil {
				return err
			}
			out := make([]byte, count*dt.Size())
			err = c.AllReduce(exactValues(dt, op, r, count), out, count, dt, o)
			done()
			if err != nil {
				return fmt.Errorf("%s/%s: %w", dt, op, err)
			}
			if want := exactResults(dt, op, n, 0, count, scalar); !bytes.Equal(out, want) {
				return fmt.Errorf("%s/%s rank %d: %s", dt, op, r, firstDiff(dt, out, want))
			}
		}
	}
	return nil
}

// allocsPerCall runs case cc of count elements on every rank of cs once,
// then returns the allocations of one more call over every rank,
// averaged over runs calls.
// Ranks 1.. run in goroutines started beforehand, driven through channels
// (which allocate nothing), so that testing.AllocsPerRun, which counts
// every goroutine's allocations, sees every rank's call and nothing else.
func allocsPerCall(t *testing.T, cs []*Comm, cc collCase, count, runs int) float64 {
	t.Helper()
	n := len(cs)
	sends, recvs := make([][]byte, n), make([][]byte, n)
	for r := range n {
		sends[r], recvs[r] = caseBuffers(cc, r, n, count, false)
	}
	starts := make([]chan struct{}, n)
	done := make(chan error, n)
	for r := 1; r < n; r++ {
		starts[r] = make(chan struct{})
		go func() {
			for range starts[r] {
				done <- cc.run(cs[r], sends[r], recvs[r], count)
			}
		}()
		defer close(starts[r])
	}
	run := func() {
		for r := 1; r < n; r++ {
			starts[r] <- struct{}{}
		}
		if err := cc.run(cs[0], sends[0], recvs[0], count); err != nil {
			t.Fatal(err)
		}
		for r := 1; r < n; r++ {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
	}
	run() // the first call builds the plan and may open connections
	// Collect Init's garbage now: finalizers of files and sockets it left
	// (they run on a goroutine of their own and may allocate) must not
	// run in the middle of the count.
	runtime.GC()
	runtime.GC()
	return allocsPerRun(runs, run)
}

// allocsPerRun is testing.AllocsPerRun without its GOMAXPROCS(1). The
// ranks of these tests are goroutines of one process whose waits poll (a
// polling wait never blocks in a system call, see
// TestOneShotRepeatedCallAllocatesNothing), and on one P a polling rank
// holds it until the scheduler preempts it, about 10 ms later: each call
// took about 50 ms, 22 s for the one-shot test, where with a P per rank
// it takes microseconds. Like AllocsPerRun it runs f once first, counts
// the whole process's mallocs and returns them per run, truncated.
func allocsPerRun(runs int, f func()) float64 {
	f()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	before := m.Mallocs
	for range runs {
		f()
	}
	runtime.ReadMemStats(&m)
	return float64((m.Mallocs - before) / uint64(runs))
}

// rankCase runs case cc of count elements on this rank (every other rank
// runs it too) and checks every element of its output.
func rankCase(c *Comm, cc collCase, count int, inPlace bool) error {
	n, r := c.NRanks(), c.Rank()
	send, recv := caseBuffers(cc, r, n, count, inPlace)
	if err := cc.run(c, send, recv, count); err != nil {
		return fmt.Errorf("%s count %d: %w", cc.name, count, err)
	}
	return checkCase(cc, r, n, count, inPlace, recv)
}

// BenchmarkOneShotAllReduce8B is an 8 B all-reduce by OneShot between 2
// ranks of one process (goroutines), rank 1 driven through channels as in
// allocsPerCall: per-call cost of the fast path, for profiles
// (go test -bench OneShot -cpuprofile).
func BenchmarkOneShotAllReduce8B(b *testing.B) {
	cs, err := InitLocalHosts(b.Context(), hostLayouts(2)["onehost"], testParams(b, oneShotEnv("CC_SHM_SPIN_US", "100000")))
	if err != nil {
		b.Fatal(err)
	}
	defer closeAll(b, cs)
	bufs := [2][]byte{make([]byte, 8), make([]byte, 8)}
	start, done := make(chan int), make(chan error)
	go func() {
		for n := range start {
			for range n {
				if err := cs[1].AllReduce(bufs[1], bufs[1], 2, reduce.Float32, reduce.Sum); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}
	}()
	defer close(start)
	b.ResetTimer()
	start <- b.N
	for range b.N {
		if err := cs[0].AllReduce(bufs[0], bufs[0], 2, reduce.Float32, reduce.Sum); err != nil {
			b.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// TestOneShotRootedBusyHost: with a host's ranks outnumbering its cores
// (4 ranks on this 2-core machine; on a bigger one the host is not busy
// and OneShot stays allowed), broadcast and reduce leave OneShot to
// NCCL_ALGO: the tuner runs the ring, whose root does not wait for every
// rank. Named, OneShot still runs.
func TestOneShotRootedBusyHost(t *testing.T) {
	for _, named := range []bool{false, true} {
		env := map[string]string{}
		if named {
			env["NCCL_ALGO"] = "oneshot,ring"
		}
		t.Run(fmt.Sprintf("named=%v", named), func(t *testing.T) {
			cs := withHosts(t, hostLayouts(4)["onehost"], testParams(t, env))
			got := ranSmall(t, cs, "Broadcast", func(c *Comm, b []byte) error { return c.Broadcast(b, b, 2, reduce.Int32, 0) })
			for r, c := range cs {
				busy := c.intraClass() == tune.SHMBusy
				allowed := named || !busy
				for _, kind := range []algos.Coll{algos.Broadcast, algos.Reduce} {
					if ok := c.model.Time(kind, algos.OneShot, protocols.Simple, 8, 1) >= 0; ok != allowed {
						t.Errorf("rank %d (busy host: %v, NCCL_ALGO named: %v): OneShot may run %s: %v, want %v", r, busy, named, kind, ok, allowed)
					}
				}
				if !allowed && got[r] == algos.OneShot {
					t.Errorf("rank %d ran a small broadcast by OneShot on a busy host without NCCL_ALGO naming it", r)
				}
				if ok := c.model.Time(algos.AllReduce, algos.OneShot, protocols.Simple, 8, 1) >= 0; !ok {
					t.Errorf("rank %d: OneShot all-reduce excluded; only the rooted collectives are", r)
				}
			}
		})
	}
}
