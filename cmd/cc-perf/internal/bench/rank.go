package bench

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync/atomic"
	"time"

	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// rank runs the benchmark on one communicator.
type rank struct {
	c    Communicator
	o    *Options
	coll *Coll
	me   int  // rank in the measured communicator (c)
	n    int  // its rank count: counts, data and bus factor use it
	job  int  // rank in the job (c.Control()): n and job differ with NCCL_TESTS_SPLIT
	jobN int  // the job's rank count
	lead bool // global rank 0: hands rows to rec
	rec  Recorder

	send, recv, expected, stage []byte // stage: in-place alltoall and sendrecv (stageInPlace)
	scratch                     []byte // cross-rank bookkeeping
	preMul                      map[reduce.DataType]reduce.Op

	// The test case and size being measured.
	dt      reduce.DataType
	op      reduce.Op
	root    int
	elt     int64
	counts  Counts
	vplan   vplan  // alltoallv: this rank's part of the call
	regions        // where the calls of this size move their buffers
	config  string // Tune: the configuration being measured, for timeouts

	frees []func() error // -R 1: deregister and free the send and receive buffers

	rep     uint64 // check seeds, advanced in step on every rank
	oob     int64  // halves with a wrong element on this rank
	bwSum   float64
	bwCount int
	wd      watchdog
}

func newRank(c Communicator, o *Options, rec Recorder) (*rank, error) {
	ctl := c.Control()
	k := &rank{
		c: c, o: o, coll: o.Coll, me: c.Rank(), n: c.NRanks(), job: ctl.Rank(), jobN: ctl.NRanks(), rec: rec,
		preMul: map[reduce.DataType]reduce.Op{},
		wd:     watchdog{c: c, rank: ctl.Rank(), d: o.Timeout},
	}
	k.lead = k.job == 0 && rec != nil
	if err := o.Coll.CheckRanks(k.n); err != nil {
		return nil, err
	}
	if o.Coll.kind == kindAllToAllV {
		if err := o.traffic().Check(k.n, o.MaxBytes); err != nil {
			return nil, fmt.Errorf("rank %d: %w", k.me, err)
		}
	}
	pad := int64(o.Unalign) * 8
	if err := k.allocBuffers(o.MaxBytes + pad); err != nil {
		return k, err
	}
	if o.Check > 0 {
		k.expected = make([]byte, o.MaxBytes)
	}
	if o.Coll.stages() {
		k.stage = make([]byte, o.MaxBytes+pad)
	}
	k.scratch = make([]byte, 8*max(o.Iters, 1))
	return k, nil
}

// Registrar is a Communicator that registers memory (-R 1): runtime/comm's
// MemAlloc and Register, as nccl-tests' ncclMemAlloc and ncclCommRegister.
type Registrar interface {
	// AllocRegistered returns size bytes registered with the
	// communicator, and how to deregister and free them.
	AllocRegistered(size int64) (buf []byte, free func() error, err error)
}

// allocBuffers allocates the send and receive buffers of size bytes: Go memory,
// or with -R 1 the communicator's registered memory.
func (k *rank) allocBuffers(size int64) error {
	if !k.o.Register {
		k.send, k.recv = make([]byte, size), make([]byte, size)
		return nil
	}
	r, ok := k.c.(Registrar)
	if !ok {
		return fmt.Errorf("rank %d: -R 1: this communicator cannot register buffers", k.me)
	}
	for _, b := range []*[]byte{&k.send, &k.recv} {
		buf, free, err := r.AllocRegistered(max(size, 1))
		if err != nil {
			return fmt.Errorf("rank %d: -R 1: %w", k.me, err)
		}
		*b = buf[:size]
		k.frees = append(k.frees, free)
	}
	return nil
}

// release frees what allocBuffers registered.
func (k *rank) release() error {
	var errs []error
	for _, f := range k.frees {
		errs = append(errs, f())
	}
	k.frees = nil
	return errors.Join(errs...)
}

// BufferBytes is what Run allocates per rank for o: send and receive buffers,
// expected values with -c, and a staging copy for in-place alltoall,
// alltoallv and sendrecv. cc-perf checks it against the memory it may use.
func BufferBytes(o Options) int64 {
	b := 2 * (o.MaxBytes + int64(o.Unalign)*8)
	if o.Check > 0 {
		b += o.MaxBytes
	}
	if o.Coll.stages() {
		b += o.MaxBytes + int64(o.Unalign)*8
	}
	return b + int64(expectChunk)
}

// deviceRecord is the fixed size of one rank's device description in the
// all-gather that collects them.
const deviceRecord = 1024

func (k *rank) run(ctx context.Context, dev Device) (Summary, error) {
	if err := k.gatherDevices(dev); err != nil {
		return Summary{}, err
	}
	ops := k.o.Ops
	if !k.coll.LoopsOps() {
		ops = []reduce.Op{reduce.Sum} // unused by the collective
	}
sweeps:
	for _, dt := range k.o.Types {
		for _, op := range ops {
			for _, root := range k.roots() {
				err := k.timeTest(ctx, dt, op, root)
				if errors.Is(err, errStopRequested) {
					break sweeps
				}
				if err != nil {
					return Summary{}, err
				}
			}
		}
	}
	oob, err := k.sumInt64(k.oob)
	if err != nil {
		return Summary{}, err
	}
	return Summary{OutOfBounds: int(oob), AvgBusBW: k.bwSum / float64(k.bwCount)}, nil
}

func (k *rank) roots() []int {
	if !k.coll.Rooted {
		return []int{-1}
	}
	if k.o.Root >= 0 {
		return []int{k.o.Root}
	}
	rs := make([]int, k.n)
	for i := range rs {
		rs[i] = i
	}
	return rs
}

// gatherDevices all-gathers every rank's Device over the job; global rank 0
// hands them to rec.
func (k *rank) gatherDevices(dev Device) error {
	rec, err := json.Marshal(dev)
	if err != nil {
		return err
	}
	if len(rec) > deviceRecord {
		return fmt.Errorf("rank %d: device description of %d bytes exceeds %d", k.job, len(rec), deviceRecord)
	}
	send := make([]byte, deviceRecord)
	copy(send, rec)
	all := make([]byte, deviceRecord*k.jobN)
	if err := k.c.Control().AllGather(send, all, deviceRecord, reduce.Uint8); err != nil {
		return err
	}
	if !k.lead {
		return nil
	}
	devs := make([]Device, k.jobN)
	for i := range devs {
		b := all[i*deviceRecord : (i+1)*deviceRecord]
		end := 0
		for end < len(b) && b[end] != 0 {
			end++
		}
		if err := json.Unmarshal(b[:end], &devs[i]); err != nil {
			return fmt.Errorf("rank %d: device description of rank %d: %w", k.job, i, err)
		}
	}
	k.rec.Begin(devs)
	return nil
}

// timeTest is nccl-tests' TimeTest: warm up every size class, then measure
// every size of the sweep, -N times.
func (k *rank) timeTest(ctx context.Context, dt reduce.DataType, op reduce.Op, root int) error {
	k.dt, k.op, k.root, k.elt = dt, op, root, int64(dt.Size())
	if err := k.barrier(); err != nil {
		return err
	}
	var err error
	WarmupSizes(k.o.MinBytes, k.o.MaxBytes, func(size int64) {
		if err != nil || k.o.Warmup == 0 {
			return
		}
		k.setup(size)
		k.wd.arm(k.phase("warmup"))
		for it := 0; it < k.o.Warmup && err == nil; it++ {
			err = k.startColl(false, it)
		}
		err = k.wd.disarm(err)
	})
	if err != nil {
		return err
	}
	for cycle := 0; k.o.Cycles == 0 || cycle < k.o.Cycles; cycle++ {
		Sizes(k.o.MinBytes, k.o.MaxBytes, k.o.StepBytes, k.o.StepFactor, func(size int64) bool {
			err = k.measureRow(size, cycle)
			return err == nil && ctx.Err() == nil
		})
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if k.o.Swept != nil {
			k.o.Swept(k.job, cycle)
		}
		if k.o.StopRequested != nil && (k.o.Cycles == 0 || cycle+1 < k.o.Cycles) {
			if stop, err := k.stopRequested(); err != nil || stop {
				return cmp.Or(err, errStopRequested)
			}
		}
	}
	return nil
}

// errStopRequested is timeTest's return when Options.StopRequested ended
// the run after a sweep: no failure.
var errStopRequested = errors.New("stop requested after a sweep")

// stopRequested says whether Options.StopRequested said true on any rank of
// the job: every rank asks it once and they add up the answers.
func (k *rank) stopRequested() (bool, error) {
	var mine int64
	if k.o.StopRequested() {
		mine = 1
	}
	n, err := k.sumInt64(mine)
	return n > 0, err
}

func (k *rank) setup(size int64) {
	if k.coll.kind != kindAllToAllV {
		k.counts = k.coll.Counts(size/k.elt, k.elt, k.n)
	} else {
		t := k.o.traffic()
		k.counts = t.Counts(size/k.elt, k.elt, k.n)
		k.vplan = t.plan(k.counts.Param, k.elt, k.n, k.me)
	}
	k.regions.reset(k.counts.Bytes(k.elt), k.o.MaxBytes)
}

func (k *rank) phase(what string) string {
	s := fmt.Sprintf("%s %s", k.coll.Name, k.dt)
	if k.coll.LoopsOps() {
		s += " " + OpName(k.op)
	}
	if k.root >= 0 {
		s += fmt.Sprintf(" root %d", k.root)
	}
	if k.config != "" {
		what += " " + k.config
	}
	return fmt.Sprintf("%s, %d bytes, %s", s, k.counts.Bytes(k.elt), what)
}

func (k *rank) measureRow(size int64, cycle int) error {
	k.setup(size)
	row := Result{
		Bytes: k.counts.Bytes(k.elt),
		Count: k.counts.Param,
		Type:  k.dt.String(),
		RedOp: k.coll.OpColumn(OpName(k.op)),
		Root:  k.root,
		Iters: k.o.Iters,
		Cycle: cycle,
	}
	if k.lead && k.coll.kind == kindAllToAllV {
		row.Volumes = k.o.traffic().volumes(k.counts.Param, k.elt, k.n)
	}
	if k.lead {
		k.rec.RowStart(row)
	}
	var err error
	if row.OutOfPlace, err = k.benchTime(false); err != nil {
		return err
	}
	if row.InPlace, err = k.benchTime(true); err != nil {
		return err
	}
	row.Time = k.o.Now()
	if k.lead {
		k.rec.RowDone(row)
	}
	return nil
}

// benchTime is nccl-tests' BenchTime: one half of a row.
func (k *rank) benchTime(inPlace bool) (h Half, err error) {
	what := "out-of-place"
	if inPlace {
		what = "in-place"
	}
	k.wd.arm(k.phase(what))
	defer func() { err = k.wd.disarm(err) }()

	o := k.o
	if o.Check > 0 {
		if err := k.initData(99, inPlace, false); err != nil {
			return h, err
		}
	}
	if inPlace {
		k.stageInPlace(o.Iters * o.Agg) // not timed
	}
	// One call to synchronise, as nccl-tests does, then a barrier.
	if err := k.startColl(inPlace, 0); err != nil {
		return h, err
	}
	if err := k.barrier(); err != nil {
		return h, err
	}

	// Each iteration is timed on its own only when something needs it (-I,
	// or -z 3, which leaves the barrier out of the time); otherwise the
	// loop is timed as a whole, as nccl-tests does, so that two clock reads
	// per call (about 80 ns here) stay out of small messages' times.
	perIter := o.PerIter || o.Blocking == 3
	var iterSec []float64
	if perIter {
		iterSec = make([]float64, o.Iters)
	}
	var total time.Duration
	loop0 := time.Now()
	for it := 0; it < o.Iters; it++ {
		var t0 time.Time
		if perIter {
			t0 = time.Now()
		}
		if o.Agg > 1 {
			k.c.GroupStart()
		}
		for a := 0; a < o.Agg; a++ {
			if err := k.startColl(inPlace, it*o.Agg+a); err != nil {
				if o.Agg > 1 {
					_ = k.c.GroupEnd()
				}
				return h, err
			}
			if o.Blocking == 1 && o.Agg == 1 {
				if err := k.barrier(); err != nil {
					return h, err
				}
			}
		}
		if o.Agg > 1 {
			if err := k.c.GroupEnd(); err != nil {
				return h, err
			}
			if o.Blocking == 1 {
				if err := k.barrier(); err != nil {
					return h, err
				}
			}
		}
		if perIter {
			d := time.Since(t0)
			total += d
			iterSec[it] = d.Seconds() / float64(o.Agg)
		}
		if o.Blocking == 3 {
			if err := k.barrier(); err != nil { // not timed
				return h, err
			}
		}
	}
	if !perIter {
		total = time.Since(loop0)
	}
	if o.ShowAlgo {
		h.Ran = k.ran()
	}
	sec, err := k.combineTime(total.Seconds() / float64(o.Iters*o.Agg))
	if err != nil {
		return h, err
	}
	h.TimeUS = sec * 1e6
	h.AlgBW, h.BusBW = k.coll.Bandwidth(k.counts, k.elt, k.n, sec)
	if o.PerIter {
		if err := k.maxOverRanks(iterSec); err != nil {
			return h, err
		}
		h.Iter = iterStats(iterSec, o.PerIterSkip)
	}
	if err := k.barrier(); err != nil {
		return h, err
	}

	h.Checked = o.Check > 0 && (!inPlace || k.coll.InPlaceChecked)
	if h.Checked {
		k.rep++
		for c := 0; c < o.Check; c++ {
			if err := k.initData(k.rep<<8|uint64(c&0xff), inPlace, true); err != nil {
				return h, err
			}
			if inPlace {
				k.stageInPlace(1)
			}
			if err := k.startColl(inPlace, 0); err != nil {
				return h, err
			}
			local := k.checkData(inPlace)
			if local > 0 {
				k.oob++
			}
			if h.Wrong, err = k.sumInt64(local); err != nil {
				return h, err
			}
			if h.Wrong > 0 {
				break
			}
		}
	}
	k.bwSum += h.BusBW
	k.bwCount++
	return h, nil
}

// ran asks the communicator how the last measured call ran; nil when it
// cannot tell or the collective is made of point-to-point calls.
func (k *rank) ran() *Ran {
	t, ok := k.c.(Tuned)
	if _, tuned := k.coll.Func(); !ok || !tuned {
		return nil
	}
	a, p, ch, _ := t.Ran()
	return &Ran{Algo: a, Proto: p, Channels: ch}
}

// iterStats summarises per-iteration times (seconds), skipping the first skip.
func iterStats(sec []float64, skip int) *IterStats {
	s := &IterStats{Skipped: skip, TimesUS: make([]float64, len(sec))}
	for i, v := range sec {
		s.TimesUS[i] = v * 1e6
	}
	xs := append([]float64(nil), s.TimesUS[min(skip, len(sec)):]...)
	if len(xs) == 0 {
		return s
	}
	sort.Float64s(xs)
	n := len(xs)
	pct := func(p int) float64 { return xs[min(n-1, (n*p+99)/100-1)] }
	s.Min, s.Max, s.P50, s.P95, s.P99 = xs[0], xs[n-1], xs[n/2], pct(95), pct(99)
	var sum float64
	for _, v := range xs {
		sum += v
	}
	s.Avg = sum / float64(n)
	var ss float64
	for _, v := range xs {
		ss += (v - s.Avg) * (v - s.Avg)
	}
	s.Stdev = math.Sqrt(ss / float64(n))
	if s.Avg > 0 {
		s.CVPct = s.Stdev / s.Avg * 100
	}
	return s
}

// barrier waits until every rank gets here: a one-element all-reduce.
func (k *rank) barrier() error {
	b := k.scratch[:4]
	return k.c.Control().AllReduce(b, b, 1, reduce.Int32, reduce.Sum)
}

// combineTime makes one time of every rank's as -a says: every rank of the
// job, whichever group it measures in, as nccl-tests' Allreduce over
// MPI_COMM_WORLD.
func (k *rank) combineTime(sec float64) (float64, error) {
	b := k.scratch[:8]
	binary.LittleEndian.PutUint64(b, math.Float64bits(sec))
	var err error
	ctl := k.c.Control()
	switch k.o.Average {
	case 0:
		err = ctl.Broadcast(b, b, 1, reduce.Float64, 0)
	case 2:
		err = ctl.AllReduce(b, b, 1, reduce.Float64, reduce.Min)
	case 3:
		err = ctl.AllReduce(b, b, 1, reduce.Float64, reduce.Max)
	default:
		err = ctl.AllReduce(b, b, 1, reduce.Float64, reduce.Sum)
	}
	if err != nil {
		return 0, err
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(b))
	if k.o.Average == 1 {
		v /= float64(k.jobN)
	}
	return v, nil
}

// maxOverRanks replaces every value by its maximum over the ranks.
func (k *rank) maxOverRanks(v []float64) error {
	b := k.scratch[:8*len(v)]
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(x))
	}
	if err := k.c.Control().AllReduce(b, b, len(v), reduce.Float64, reduce.Max); err != nil {
		return err
	}
	for i := range v {
		v[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return nil
}

func (k *rank) sumInt64(v int64) (int64, error) {
	b := k.scratch[:8]
	binary.LittleEndian.PutUint64(b, uint64(v))
	if err := k.c.Control().AllReduce(b, b, 1, reduce.Int64, reduce.Sum); err != nil {
		return 0, err
	}
	return int64(binary.LittleEndian.Uint64(b)), nil
}

// watchdog aborts the communicator when a phase outlives the timeout.
type watchdog struct {
	c     Communicator
	rank  int
	d     time.Duration
	t     *time.Timer
	fired atomic.Pointer[TimeoutError]
}

func (w *watchdog) arm(phase string) {
	if w.d <= 0 {
		return
	}
	w.t = time.AfterFunc(w.d, func() {
		e := &TimeoutError{Rank: w.rank, Timeout: w.d, Phase: phase}
		w.fired.Store(e)
		w.c.Abort(e)
	})
}

// disarm stops the timer and, if it fired, returns the timeout in place of
// err (the abort is what made the call fail).
func (w *watchdog) disarm(err error) error {
	if w.t != nil {
		w.t.Stop()
		w.t = nil
	}
	if e := w.fired.Load(); e != nil {
		return e
	}
	return err
}
