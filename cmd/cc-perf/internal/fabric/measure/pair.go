package measure

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/fabric"
	"github.com/seed-760dd1f1/cc/runtime/comm"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// One test, on each of its members: at the bandwidth size, then at the
// latency size, one warm-up call, then timed calls until PairTime has
// passed (at least ItersMin, at most ItersMax). After each call the
// members all-reduce (max) the call's time and whether the data was
// wrong, so they agree on every time, on when to stop and on the verdict:
//
//	pair      Send + Recv in one group on both ranks: the slower rank's time
//	directed  B sends A a 1-byte go, A sends, B receives: B's time (A
//	          offers 0). Without the go, A, which leaves the previous
//	          call's all-reduce first, would have data in flight before B's
//	          clock starts (measured: 12 GB/s over loopback TCP at 256 KiB).
//	          At the latency size the time is so a round trip.
//	group     AllReduce: the slowest rank's time; GB/s is busbw (and so
//	          for a pair with Op all_reduce)
//
// The statistic is the median of the agreed times.

// timeoutError is the cause of a test's abort by --pair-timeout.
type timeoutError struct{ after time.Duration }

func (e *timeoutError) Error() string {
	return fmt.Sprintf("not finished within --pair-timeout %s", e.after)
}

// errWrongElsewhere ends a test whose data another member found wrong;
// that member's part says what was wrong.
var errWrongElsewhere = errors.New("wrong data at another member of the test")

// exchange is one member's side of one test.
type exchange struct {
	pc         *comm.Comm
	t          fabric.Test
	host       int // this member's host
	sender     bool
	send, recv []byte
	token      []byte // directed: the receiver's go
	want       []byte // what recv must hold after a call (-c), nil: no check
	o          Options
	delay      time.Duration
	skew       time.Duration
	stop       <-chan struct{} // closed by the test's timeout
}

// measureTest runs test t on pc, this rank being host; the part says how
// it ended and, when it did, the numbers every member agreed on. The
// test's timeout, or the end of ctx, aborts pc.
func measureTest(ctx context.Context, pc *comm.Comm, t fabric.Test, host int, o Options) part {
	x := newExchange(pc, t, host, o)
	var timedOut atomic.Bool
	stop := make(chan struct{})
	x.stop = stop
	// once runs the first of: an abort (the timeout's or ctx's), or the
	// end of the test; the end waits for an abort under way, so pc is
	// not aborted while the caller closes it.
	var once sync.Once
	abort := func(cause error, timeout bool) {
		once.Do(func() {
			timedOut.Store(timeout)
			pc.Abort(cause)
			close(stop)
		})
	}
	defer once.Do(func() { close(stop) })
	if o.PairTimeout > 0 {
		timer := time.AfterFunc(o.PairTimeout, func() { abort(&timeoutError{o.PairTimeout}, true) })
		defer timer.Stop()
	}
	defer context.AfterFunc(ctx, func() { abort(context.Cause(ctx), false) })()
	p := part{Status: fabric.StatusOK, Bytes: o.Size}
	ended := func(err error) part {
		switch {
		case errors.Is(err, errWrongElsewhere):
			return part{Status: fabric.StatusError}
		case timedOut.Load():
			return part{Status: fabric.StatusTimeout, Err: (&timeoutError{o.PairTimeout}).Error()}
		}
		return part{Status: fabric.StatusError, Err: fmt.Sprintf("host %d: %v", host, err)}
	}
	iters, med, wrong, err := x.series(int(o.Size))
	if err != nil {
		return ended(err)
	}
	p.Iters, p.TMedUS = iters, med
	p.GBps = x.gbps(o.Size, med)
	if wrong == "" && o.LatSize > 0 {
		p.LatBytes = o.LatSize
		p.LatIters, p.LatUS, wrong, err = x.series(int(o.LatSize))
		if err != nil {
			return ended(err)
		}
	}
	if wrong != "" {
		p.Status, p.Err = fabric.StatusError, wrong
	}
	return p
}

func newExchange(pc *comm.Comm, t fabric.Test, host int, o Options) *exchange {
	n := int(max(o.Size, o.LatSize))
	x := &exchange{pc: pc, t: t, host: host, o: o, sender: t.Dir && host == t.A,
		send: make([]byte, n), recv: make([]byte, n), token: make([]byte, 1)}
	if o.delay != nil {
		x.delay = o.delay(host)
	}
	if o.skew != nil {
		x.skew = o.skew(host)
	}
	pattern(x.send, host)
	if !o.Check || x.sender {
		return x
	}
	x.want = make([]byte, n)
	switch {
	case x.reduces(): // a uint8 sum of every member's pattern
		b := make([]byte, n)
		for _, h := range members(t) {
			pattern(b, h)
			for i := range x.want {
				x.want[i] += b[i]
			}
		}
	case host == t.A:
		pattern(x.want, t.B)
	default:
		pattern(x.want, t.A)
	}
	return x
}

// reduces says whether the test is an all-reduce: a group, or a pair
// with Op all_reduce.
func (x *exchange) reduces() bool {
	return x.t.Group != nil || !x.t.Dir && x.o.Op == "all_reduce"
}

// pattern fills b with host h's data: byte i is i*7 + h*13 + 1 (mod 256),
// so a byte from another host or another offset differs.
func pattern(b []byte, h int) {
	for i := range b {
		b[i] = byte(i*7 + h*13 + 1)
	}
}

// call moves n bytes once.
func (x *exchange) call(n int) error {
	pc := x.pc
	switch {
	case x.reduces():
		return pc.AllReduce(x.send[:n], x.recv[:n], n, reduce.Uint8, reduce.Sum)
	case x.t.Dir && x.sender: // wait for the receiver's go, then send
		if err := pc.Recv(x.token, 1, reduce.Uint8, 1); err != nil {
			return err
		}
		return pc.Send(x.send[:n], n, reduce.Uint8, 1)
	case x.t.Dir:
		if err := pc.Send(x.token, 1, reduce.Uint8, 0); err != nil {
			return err
		}
		return pc.Recv(x.recv[:n], n, reduce.Uint8, 0)
	}
	peer := 1 - pc.Rank()
	pc.GroupStart()
	pc.Send(x.send[:n], n, reduce.Uint8, peer) // queued: errors come from GroupEnd
	pc.Recv(x.recv[:n], n, reduce.Uint8, peer)
	return pc.GroupEnd()
}

// series measures calls of n bytes: the agreed iteration count and median
// time (µs), or what was wrong with the data (any member's finding), or
// the error that ended it.
func (x *exchange) series(n int) (iters int, medUS float64, wrong string, err error) {
	if err := x.call(n); err != nil { // warm-up
		return 0, 0, "", err
	}
	var times []float64
	total := 0.0
	budget := float64(x.o.PairTime.Microseconds())
	for {
		if x.want != nil {
			clear(x.recv[:n])
		}
		t0 := time.Now()
		err := x.call(n)
		if err == nil && x.delay > 0 {
			err = x.wait()
		}
		us := float64(time.Since(t0).Nanoseconds()) / 1e3
		if err != nil {
			return 0, 0, "", err
		}
		us += float64(x.skew.Nanoseconds()) / 1e3
		if x.o.corrupt != nil && x.o.corrupt(x.host) {
			x.recv[n/2]++
		}
		mine := x.verify(n)
		if x.sender {
			us = 0 // the receiver's time is the test's
		}
		agreed, bad, err := x.agree(us, mine != "")
		if err != nil {
			return 0, 0, "", err
		}
		if bad {
			if mine == "" {
				return 0, 0, "", errWrongElsewhere
			}
			return 0, 0, mine, nil
		}
		times = append(times, agreed)
		total += agreed
		if len(times) >= x.o.ItersMax || len(times) >= x.o.ItersMin && total >= budget {
			return len(times), median(times), "", nil
		}
	}
}

// wait is the test hook's extra wait, cut short by the test's timeout.
func (x *exchange) wait() error {
	t := time.NewTimer(x.delay)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-x.stop:
		return &timeoutError{x.o.PairTimeout}
	}
}

// verify compares what the last call of n bytes received with what it
// should have; "" when it matches or nothing is checked.
func (x *exchange) verify(n int) string {
	if x.want == nil {
		return ""
	}
	for i := range n {
		if x.recv[i] != x.want[i] {
			return fmt.Sprintf("wrong data: host %d received byte %d of %d as %d, want %d", x.host, i, n, x.recv[i], x.want[i])
		}
	}
	return ""
}

// agree all-reduces (max) this member's time and whether its data was
// wrong over the test's communicator.
func (x *exchange) agree(us float64, wrong bool) (float64, bool, error) {
	b := make([]byte, 16)
	binary.LittleEndian.PutUint64(b, math.Float64bits(us))
	if wrong {
		binary.LittleEndian.PutUint64(b[8:], math.Float64bits(1))
	}
	if err := x.pc.Control().AllReduce(b, b, 2, reduce.Float64, reduce.Max); err != nil {
		return 0, false, err
	}
	return math.Float64frombits(binary.LittleEndian.Uint64(b)), math.Float64frombits(binary.LittleEndian.Uint64(b[8:])) > 0, nil
}

// gbps is the test's bandwidth at bytes in medUS: bytes per direction
// over the time for a pair, the bus bandwidth of the all-reduce for a
// group (nccl-tests' factor 2(n-1)/n).
func (x *exchange) gbps(bytes int64, medUS float64) float64 {
	if medUS <= 0 {
		return 0
	}
	bw := float64(bytes) / medUS / 1e3
	if x.reduces() {
		n := len(members(x.t))
		bw *= 2 * float64(n-1) / float64(n)
	}
	return bw
}

// median of xs (not empty), which it sorts.
func median(xs []float64) float64 {
	slices.Sort(xs)
	m := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[m]
	}
	return (xs[m-1] + xs[m]) / 2
}
