package comm

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seed-760dd1f1/cc/runtime/param"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	goleak.VerifyTestMain(m)
}

// testParams loads params from a map, failing the test on error.
func testParams(t testing.TB, env map[string]string) *param.Params {
	t.Helper()
	p, err := param.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatalf("param.Load(%v): %v", env, err)
	}
	return p
}

// hangGuard fails the test if f does not return in a generous time: a
// guard against hangs, not a performance bound.
func hangGuard(t testing.TB, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(d):
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		t.Fatalf("%s did not finish within %v (hang guard)\n%s", what, d, buf[:n])
	}
}

// withComms runs InitLocal(n) and closes every comm at the end.
func withComms(t testing.TB, n int, p *param.Params) []*Comm {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := InitLocal(ctx, n, p)
	if err != nil {
		t.Fatalf("InitLocal(%d): %v", n, err)
	}
	t.Cleanup(func() { closeAll(t, cs) })
	return cs
}

func closeAll(t testing.TB, cs []*Comm) {
	t.Helper()
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = c.Close() }()
	}
	hangGuard(t, 60*time.Second, "Close", wg.Wait)
	for i, err := range errs {
		if err != nil {
			t.Errorf("rank %d Close: %v", i, err)
		}
	}
}

// each runs f on every rank concurrently and returns the errors.
func each(cs []*Comm, f func(c *Comm) error) []error {
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f(c) }()
	}
	wg.Wait()
	return errs
}

func mustEach(t testing.TB, cs []*Comm, what string, f func(c *Comm) error) {
	t.Helper()
	var errs []error
	hangGuard(t, 60*time.Second, what, func() { errs = each(cs, f) })
	for i, err := range errs {
		if err != nil {
			t.Fatalf("%s: rank %d: %v", what, i, err)
		}
	}
}

// i32 makes int32 buffers; v(r, i) is element i of rank r.
func i32s(n int, v func(i int) int32) []byte {
	b := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v(i)))
	}
	return b
}

func getI32(b []byte, i int) int32 { return int32(binary.LittleEndian.Uint32(b[4*i:])) }

// input is rank r's element i of a test: distinct per rank and position, so
// a misplaced block shows.
func input(r, i int) int32 { return int32((r+1)*100000 + i*7%99991) }

const sentinel = int32(-123456789)

// collCase describes how to run and check one collective on int32 sum.
type collCase struct {
	name string
	// sizes of send and recv buffers in elements for a count and nranks
	sizes func(count, n int) (send, recv int)
	run   func(c *Comm, send, recv []byte, count int) error
	// want is recv element i of rank r, ok=false where recv must be untouched
	want func(r, n, count, i int) (int32, bool)
	// inPlace gives the offset of send inside recv (elements), or -1 if the
	// collective has no in-place form
	inPlace func(r, count int) (int, bool)
}

func sumOver(n, i int) int32 {
	var s int32
	for r := 0; r < n; r++ {
		s += input(r, i)
	}
	return s
}

const testRoot = 1

func collCases() []collCase {
	return []collCase{
		{name: "AllReduce",
			sizes: func(count, n int) (int, int) { return count, count },
			run: func(c *Comm, s, r []byte, count int) error {
				return c.AllReduce(s, r, count, reduce.Int32, reduce.Sum)
			},
			want:    func(r, n, count, i int) (int32, bool) { return sumOver(n, i), true },
			inPlace: func(r, count int) (int, bool) { return 0, true }},
		{name: "ReduceScatter",
			sizes: func(count, n int) (int, int) { return n * count, count },
			run: func(c *Comm, s, r []byte, count int) error {
				return c.ReduceScatter(s, r, count, reduce.Int32, reduce.Sum)
			},
			want: func(r, n, count, i int) (int32, bool) { return sumOver(n, r*count+i), true },
			// in place: recv is block r of send; the send buffer is the big one
			inPlace: nil},
		{name: "AllGather",
			sizes: func(count, n int) (int, int) { return count, n * count },
			run: func(c *Comm, s, r []byte, count int) error {
				return c.AllGather(s, r, count, reduce.Int32)
			},
			want: func(r, n, count, i int) (int32, bool) {
				src, j := i/count, i%count
				return input(src, j), true
			},
			inPlace: func(r, count int) (int, bool) { return r * count, true }},
		{name: "Broadcast",
			sizes: func(count, n int) (int, int) { return count, count },
			run: func(c *Comm, s, r []byte, count int) error {
				return c.Broadcast(s, r, count, reduce.Int32, testRoot%c.NRanks())
			},
			want:    func(r, n, count, i int) (int32, bool) { return input(testRoot%n, i), true },
			inPlace: func(r, count int) (int, bool) { return 0, true }},
		{name: "Reduce",
			sizes: func(count, n int) (int, int) { return count, count },
			run: func(c *Comm, s, r []byte, count int) error {
				return c.Reduce(s, r, count, reduce.Int32, reduce.Sum, testRoot%c.NRanks())
			},
			want: func(r, n, count, i int) (int32, bool) {
				if r != testRoot%n {
					return 0, false
				}
				return sumOver(n, i), true
			},
			inPlace: func(r, count int) (int, bool) { return 0, true }},
		{name: "AllToAll",
			sizes: func(count, n int) (int, int) { return n * count, n * count },
			run: func(c *Comm, s, r []byte, count int) error {
				return c.AllToAll(s, r, count, reduce.Int32)
			},
			want: func(r, n, count, i int) (int32, bool) {
				src, j := i/count, i%count
				return input(src, r*count+j), true
			}},
		{name: "SendRecvRing",
			sizes: func(count, n int) (int, int) { return count, count },
			run: func(c *Comm, s, r []byte, count int) error {
				n := c.NRanks()
				c.GroupStart()
				c.Send(s, count, reduce.Int32, (c.Rank()+1)%n)
				c.Recv(r, count, reduce.Int32, (c.Rank()-1+n)%n)
				return c.GroupEnd()
			},
			want: func(r, n, count, i int) (int32, bool) { return input((r-1+n)%n, i), true }},
	}
}

// caseBuffers makes rank r's send and recv buffers for a case; in place,
// send lies inside recv (or recv inside send for ReduceScatter).
func caseBuffers(cc collCase, r, n, count int, inPlace bool) (send, recv []byte) {
	ns, nr := cc.sizes(count, n)
	recv = i32s(nr, func(int) int32 { return sentinel })
	switch {
	case inPlace && cc.name == "ReduceScatter":
		send = i32s(ns, func(i int) int32 { return input(r, i) })
		recv = send[4*r*count : 4*(r+1)*count]
	case inPlace:
		off, _ := cc.inPlace(r, count)
		for i := 0; i < ns; i++ {
			binary.LittleEndian.PutUint32(recv[4*(off+i):], uint32(input(r, i)))
		}
		send = recv[4*off : 4*(off+ns)]
	default:
		send = i32s(ns, func(i int) int32 { return input(r, i) })
	}
	return send, recv
}

// checkCase checks every element of rank r's recv buffer.
func checkCase(cc collCase, r, n, count int, inPlace bool, recv []byte) error {
	_, nr := cc.sizes(count, n)
	bad, first := 0, ""
	for i := 0; i < nr; i++ {
		want, ok := cc.want(r, n, count, i)
		got := getI32(recv, i)
		if !ok {
			if inPlace {
				continue // in place, recv holds the input
			}
			want = sentinel
		}
		if got != want {
			if bad == 0 {
				first = fmt.Sprintf("elem %d = %d, want %d", i, got, want)
			}
			bad++
		}
	}
	if bad > 0 {
		return fmt.Errorf("%s count %d inPlace %v: rank %d has %d wrong elements, first: %s", cc.name, count, inPlace, r, bad, first)
	}
	return nil
}

// runCase runs one collective on every rank and checks every element.
func runCase(t *testing.T, cs []*Comm, cc collCase, count int, inPlace bool) {
	t.Helper()
	n := len(cs)
	sends := make([][]byte, n)
	recvs := make([][]byte, n)
	for r := 0; r < n; r++ {
		sends[r], recvs[r] = caseBuffers(cc, r, n, count, inPlace)
	}
	mustEach(t, cs, cc.name, func(c *Comm) error {
		return cc.run(c, sends[c.Rank()], recvs[c.Rank()], count)
	})
	for r := 0; r < n; r++ {
		if err := checkCase(cc, r, n, count, inPlace, recvs[r]); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCollectivesOverTCP is the matrix of the acceptance criteria: every
// collective, in and out of place, nranks {1,2,3,4,5,8}, nchannels {1,2,4},
// counts {0, 1, nranks-1, a prime, one above a chunk boundary}, over real
// loopback sockets. A small NCCL_BUFFSIZE makes chunks small so that
// pipelining, multiple loops and slices are exercised at small counts.
func TestCollectivesOverTCP(t *testing.T) { collectiveMatrix(t, "1") }

// TestCollectivesOverSHM is the same matrix with the ranks (goroutines of
// one process, so one host) talking through shared memory.
func TestCollectivesOverSHM(t *testing.T) { collectiveMatrix(t, "0") }

func collectiveMatrix(t *testing.T, shmDisable string) {
	const buffSize = 8 * 512 // step 512 B, chunk 2 KiB = 512 int32
	const chunkElems = 512
	for _, n := range []int{1, 2, 3, 4, 5, 8} {
		for _, nc := range []int{1, 2, 4} {
			t.Run(fmt.Sprintf("n%d/ch%d", n, nc), func(t *testing.T) {
				p := testParams(t, map[string]string{"NCCL_NCHANNELS": strconv.Itoa(nc), "NCCL_BUFFSIZE": strconv.Itoa(buffSize),
					"NCCL_LL_BUFFSIZE": strconv.Itoa(buffSize), "NCCL_LL128_BUFFSIZE": strconv.Itoa(2 * buffSize), "NCCL_SHM_DISABLE": shmDisable})
				cs := withComms(t, n, p)
				counts := []int{0, 1, n - 1, 1009, nc*n*chunkElems + 1}
				for _, cc := range collCases() {
					for _, count := range counts {
						runCase(t, cs, cc, count, false)
						if cc.inPlace != nil || cc.name == "ReduceScatter" {
							runCase(t, cs, cc, count, true)
						}
					}
				}
			})
		}
	}
}

// TestLargeAllReduce moves more than 64 MiB with the default buffer size.
func TestLargeAllReduce(t *testing.T) {
	if testing.Short() {
		t.Skip("large transfer skipped in -short mode")
	}
	cs := withComms(t, 2, testParams(t, map[string]string{"NCCL_SHM_DISABLE": "1"}))
	const count = 17<<20 + 3 // 68 MiB of int32
	cc := collCases()[0]
	runCase(t, cs, cc, count, false)
}

// TestGroupBatchesCollectives queues several collectives in one group.
func TestGroupBatchesCollectives(t *testing.T) {
	cs := withComms(t, 3, testParams(t, map[string]string{"NCCL_BUFFSIZE": "4096", "NCCL_NCHANNELS": "2"}))
	const count, m = 700, 4
	recvs := make([][][]byte, len(cs))
	mustEach(t, cs, "grouped AllReduce", func(c *Comm) error {
		r := c.Rank()
		recvs[r] = make([][]byte, m)
		c.GroupStart()
		for j := 0; j < m; j++ {
			recvs[r][j] = make([]byte, 4*count)
			send := i32s(count, func(i int) int32 { return input(r, i) + int32(j) })
			if err := c.AllReduce(send, recvs[r][j], count, reduce.Int32, reduce.Sum); err != nil {
				return err
			}
		}
		return c.GroupEnd()
	})
	for r := range cs {
		for j := 0; j < m; j++ {
			for i := 0; i < count; i++ {
				if got, want := getI32(recvs[r][j], i), sumOver(len(cs), i)+int32(3*j); got != want {
					t.Fatalf("rank %d op %d elem %d = %d, want %d", r, j, i, got, want)
				}
			}
		}
	}
}

// TestProtocolsOverTCP runs every collective with each protocol forced
// through NCCL_PROTO, in and out of place, with small buffers so that
// counts span many steps.
func TestProtocolsOverTCP(t *testing.T) { protocolMatrix(t, "1") }

// TestProtocolsOverSHM forces each protocol over shared memory.
func TestProtocolsOverSHM(t *testing.T) { protocolMatrix(t, "0") }

func protocolMatrix(t *testing.T, shmDisable string) {
	for _, proto := range []string{"LL", "LL128", "Simple"} {
		for _, n := range []int{2, 3, 5} {
			t.Run(fmt.Sprintf("%s/n%d", proto, n), func(t *testing.T) {
				p := testParams(t, map[string]string{"NCCL_PROTO": proto, "NCCL_NCHANNELS": "2", "NCCL_SHM_DISABLE": shmDisable,
					"NCCL_BUFFSIZE": "8192", "NCCL_LL_BUFFSIZE": "8192", "NCCL_LL128_BUFFSIZE": "8192"})
				cs := withComms(t, n, p)
				for _, cc := range collCases() {
					for _, count := range []int{1, n + 1, 1009, 5000} {
						runCase(t, cs, cc, count, false)
						if cc.inPlace != nil || cc.name == "ReduceScatter" {
							runCase(t, cs, cc, count, true)
						}
					}
				}
			})
		}
	}
}
