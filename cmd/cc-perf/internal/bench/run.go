package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// Options is one benchmark run, validated by the caller (cc-perf's flags).
type Options struct {
	Coll  *Coll
	Types []reduce.DataType // -d: every type in turn
	Ops   []reduce.Op       // -o: every op in turn (collectives that loop over ops)
	Root  int               // -r: a root, or -1 for every root in turn

	MinBytes, MaxBytes int64 // -b, -e
	StepBytes          int64 // -i, used when StepFactor <= 1
	StepFactor         int64 // -f

	Iters   int // -n, >= 1
	Warmup  int // -w
	Agg     int // -m, >= 1: calls per iteration, inside GroupStart/GroupEnd
	Cycles  int // -N: sweeps, 0 = until interrupted
	Check   int // -c: data checks per half, 0 = none (N/A)
	Unalign int // -u: buffers start this many elements past their allocation

	// Blocking is -z: 1 barrier after each call (after each group with
	// -m > 1), 2 no barrier (calls already complete before they return),
	// 3 a barrier after each iteration, not timed.
	Blocking int
	// Average is -a, how one time is made of every rank's: 0 rank 0's,
	// 1 the mean, 2 the minimum, 3 the maximum.
	Average int

	PerIter     bool // -I: per-iteration statistics
	PerIterSkip int  // -K: leading iterations left out of them

	// Traffic is alltoallv's traffic matrix; nil is nccl-tests' default
	// (DefaultTraffic). Other collectives ignore it.
	Traffic *Traffic

	// ShowAlgo is -A: record in each half how the runtime ran its timed
	// calls (Half.Ran), from communicators that implement Tuned.
	ShowAlgo bool

	// Register is -R 1 (nccl-tests' --local_register 1): the send and
	// receive buffers come from the communicator's registered memory
	// (Registrar), as nccl-tests takes them from ncclMemAlloc and
	// registers them with ncclCommRegister.
	Register bool

	// Timeout is -T: a warmup or a half-row that runs longer aborts every
	// rank of the job and Run returns a *TimeoutError. 0: no limit.
	Timeout time.Duration

	// StopRequested, when set, is asked at the end of every sweep after
	// which another would run (-N 0, or -N above 1): once it has said true
	// on any rank, every rank ends the run there, as if that sweep were
	// the last (cc-perf sets it from SIGUSR1). The ranks agree on it with
	// one small all-reduce on the control communicator per sweep, so they
	// stop at the same sweep whenever the request reached each of them.
	StopRequested func() bool

	// Now is the clock for row timestamps; nil means time.Now.
	Now func() time.Time

	// Swept, if not nil, is called by every rank after each sweep (cycle 0, 1, ... of
	// -N), from the rank's goroutine; cc-perf's --runtime_stats reports there.
	Swept func(rank, cycle int)
}

// Recorder receives what rank 0 learns, as it learns it. Run calls it from
// the goroutine of global rank 0 only, and never when rank 0 is in another
// process.
type Recorder interface {
	// Begin is called once, with every rank's device, in rank order.
	Begin(devices []Device)
	// RowStart is called before a row is measured, with its identity
	// (Bytes, Count, Type, RedOp, Root) filled in.
	RowStart(r Result)
	// RowDone is called with the complete row.
	RowDone(r Result)
}

// TimeoutError is the error of a run stopped by Options.Timeout.
type TimeoutError struct {
	Rank    int
	Timeout time.Duration
	Phase   string // what was running, e.g. "all_reduce float sum 1048576 bytes in-place"
}

// Error says which rank gave up, after how long, during what.
func (e *TimeoutError) Error() string {
	return fmt.Sprintf("test timeout (%ds) on rank %d during %s", int(e.Timeout/time.Second), e.Rank, e.Phase)
}

// OpName is nccl-tests' name for op in the redop column: "mulsum" for
// premulsum, the op's own name otherwise.
func OpName(op reduce.Op) string {
	if op == reduce.PreMulSum {
		return "mulsum"
	}
	return op.String()
}

// Run benchmarks o on every rank of this process: comms[i] is one rank of the
// job, devices[i] describes it. It returns when every local rank is done, with
// the summary every rank agrees on. The first failure of any local rank, the
// end of ctx or the timeout aborts every local communicator (and, the runtime
// propagating aborts, the whole job). The error is then a *TimeoutError if a
// timeout fired in this process, else ctx's cause if ctx ended, else the
// first error a local rank returned.
func Run(ctx context.Context, comms []Communicator, devices []Device, o Options, rec Recorder) (Summary, error) {
	if len(comms) == 0 || len(devices) != len(comms) {
		return Summary{}, fmt.Errorf("bench: %d communicators and %d devices, want the same non-zero number", len(comms), len(devices))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	sums := make([]Summary, len(comms))
	err := onEveryRank(ctx, comms, func(ctx context.Context, i int) error {
		k, err := newRank(comms[i], &o, rec)
		if err == nil {
			sums[i], err = k.run(ctx, devices[i])
		}
		if k != nil {
			err = errors.Join(err, k.release())
		}
		return err
	})
	if err != nil {
		return Summary{}, err
	}
	return sums[0], nil
}

// onEveryRank calls f for every local rank, each on its own goroutine, and
// returns when every call has. The first failure, the end of ctx or a
// timeout aborts every local communicator (and, the runtime propagating
// aborts, the whole job); the error is then a *TimeoutError if a timeout
// fired in this process, else ctx's cause if ctx ended, else the first error
// a call returned.
func onEveryRank(ctx context.Context, comms []Communicator, f func(ctx context.Context, i int) error) error {
	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() {
		cause := context.Cause(ctx)
		for _, c := range comms {
			c.Abort(cause)
		}
	})
	defer stop()

	var (
		mu    sync.Mutex
		first error
		te    *TimeoutError
	)
	var wg sync.WaitGroup
	for i := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := f(ctx, i)
			if err == nil {
				return
			}
			mu.Lock()
			if first == nil {
				first = err
			}
			if te == nil {
				errors.As(err, &te)
			}
			mu.Unlock()
			cancel(err)
		}()
	}
	wg.Wait()
	switch {
	case te != nil:
		return te
	case parent.Err() != nil:
		return context.Cause(parent)
	}
	return first
}

// Rows is the number of table rows Run prints for o on nranks ranks: sizes
// x types x ops x roots x cycles; -1 when -N 0 runs until interrupted.
func (o Options) Rows(nranks int) int {
	if o.Cycles == 0 {
		return -1
	}
	sizes := 0
	Sizes(o.MinBytes, o.MaxBytes, o.StepBytes, o.StepFactor, func(int64) bool { sizes++; return true })
	ops := 1
	if o.Coll.LoopsOps() {
		ops = len(o.Ops)
	}
	roots := 1
	if o.Coll.Rooted && o.Root < 0 {
		roots = nranks
	}
	return sizes * len(o.Types) * ops * roots * o.Cycles
}
