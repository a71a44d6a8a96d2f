package engine

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/seed-760dd1f1/cc/algos"
)

// Runner runs tasks: lane 0 on the calling goroutine, every other lane on
// a goroutine the Runner keeps for the next task (NCCL's thread groups of a
// channel). A task with one lane and no waits costs no goroutine hand-off.
// A Runner runs one task at a time; Close stops its goroutines.
//
// When a lane fails, the Runner tells onError at once (the communicator
// then fails every connection, so lanes blocked in a transport return),
// releases lanes held by a Wait, and Run returns after every lane has
// stopped, with the first error.
type Runner struct {
	onError func(error)
	workers []*laneWorker

	// The task being run, for the workers.
	task  *Task
	conns Conns
	wg    sync.WaitGroup
	lanes []laneState

	// Waits: progress is published in lanes[i].done; a lane that must wait
	// sleeps on cond, and lanes broadcast after an Op only when someone
	// waits.
	mu      sync.Mutex
	cond    sync.Cond
	waiting atomic.Int32
	abort   atomic.Bool // a lane of the current task failed
	first   error       // its error, set once abort is
}

// laneState is one lane's progress and result in the current task.
type laneState struct {
	done atomic.Int64 // Ops completed
	err  error
	refs [algos.MaxFan * 2]RefSender // connections it sent on by reference
	nref int
	wide wideConns // the connections of its wide Ops (wide.go)
}

// laneWorker is a long-lived goroutine running one lane of each task:
// lane, set before each start.
type laneWorker struct {
	start chan struct{}
	exit  chan struct{}
	lane  int
}

// errLaneAborted ends a lane held by a Wait when another lane failed.
var errLaneAborted = errors.New("another lane of the channel failed")

// NewRunner returns a Runner that tells onError (which may be nil) the
// first error of each task's lanes as soon as it happens.
func NewRunner(onError func(error)) *Runner {
	r := &Runner{onError: onError}
	r.cond.L = &r.mu
	return r
}

// Close stops the lane goroutines. The Runner must not be running a task.
func (r *Runner) Close() {
	for _, w := range r.workers {
		close(w.start)
		<-w.exit
	}
	r.workers = nil
}

// Run executes t over conns. It returns the first error of any lane,
// wrapped with the lane and Op it happened in.
func (r *Runner) Run(t *Task, conns Conns) error {
	if err := checkGeometry(t); err != nil {
		return err
	}
	if len(t.Sched.Slots) > 0 {
		r.abort.Store(false)
		r.first = nil
		err := runSlots(t, conns)
		if err != nil {
			r.fail(err) // as a lane's error: the communicator fails
		}
		return err
	}
	nl := len(t.Sched.Lanes)
	if nl == 0 {
		return nil
	}
	if len(r.lanes) < nl {
		r.lanes = make([]laneState, nl)
	}
	for i := range nl {
		r.lanes[i].done.Store(0)
		r.lanes[i].err = nil
	}
	r.abort.Store(false)
	r.first = nil
	// Lanes without Ops have nothing to do (a Wait on one is satisfied at
	// once): only the others run, the first on this goroutine, so a task
	// with one busy lane costs no hand-off.
	first, busy := -1, 0
	for i := range nl {
		if len(t.Sched.Lanes[i].Ops) > 0 {
			busy++
			if first < 0 {
				first = i
			}
		}
	}
	if busy == 0 {
		return nil
	}
	if busy == 1 && len(t.Sched.Lanes[first].Waits) == 0 {
		return r.runLane(t, conns, first)
	}
	if inOrder(t) {
		return r.runInOrder(t, conns)
	}
	r.task, r.conns = t, conns
	r.wg.Add(busy - 1)
	w := 0
	for i := first + 1; i < nl; i++ {
		if len(t.Sched.Lanes[i].Ops) == 0 {
			continue
		}
		if w == len(r.workers) {
			r.workers = append(r.workers, r.newWorker())
		}
		r.workers[w].lane = i
		r.workers[w].start <- struct{}{}
		w++
	}
	err0 := r.runLane(t, conns, first)
	r.wg.Wait()
	r.task, r.conns = nil, nil
	if r.abort.Load() {
		// The error that failed the task first, not one it caused.
		return r.first
	}
	return err0
}

func (r *Runner) newWorker() *laneWorker {
	w := &laneWorker{start: make(chan struct{}), exit: make(chan struct{})}
	go func() {
		defer close(w.exit)
		for range w.start {
			r.lanes[w.lane].err = r.runLane(r.task, r.conns, w.lane)
			r.wg.Done()
		}
	}()
	return w
}

// runLane runs lane l of t: its Ops in order, each after its Waits.
func (r *Runner) runLane(t *Task, conns Conns, l int) (err error) {
	lane := &t.Sched.Lanes[l]
	st := &r.lanes[l]
	esize := t.Type.Size()
	multi := len(t.Sched.Lanes) > 1
	defer func() {
		// The memory of by-reference sends must be free before the caller
		// reuses it, whatever happened.
		for i := range st.nref {
			if ferr := st.refs[i].Flush(); ferr != nil && err == nil {
				err = ferr
			}
			st.refs[i] = nil
		}
		st.nref = 0
		if err != nil {
			r.fail(err)
		}
	}()
	wi := 0
	for i := range lane.Ops {
		for wi < len(lane.Waits) && lane.Waits[wi].At <= i {
			if err := r.wait(lane.Waits[wi]); err != nil {
				return err
			}
			wi++
		}
		op := &lane.Ops[i]
		if op.Count > 0 {
			if err := r.runOp(t, op, conns, esize, st); err != nil {
				if multi {
					return fmt.Errorf("lane %d: %s: %w", l, op, err)
				}
				return fmt.Errorf("%s: %w", op, err)
			}
		}
		if multi {
			st.done.Store(int64(i + 1))
			if r.waiting.Load() > 0 {
				r.mu.Lock()
				r.cond.Broadcast()
				r.mu.Unlock()
			}
		}
	}
	for ; wi < len(lane.Waits); wi++ {
		if err := r.wait(lane.Waits[wi]); err != nil {
			return err
		}
	}
	return nil
}

// runOp runs one Op and remembers the connections it sent on by reference.
func (r *Runner) runOp(t *Task, op *algos.Op, conns Conns, esize int, st *laneState) error {
	if op.Fan != nil {
		if isWide(op) {
			return runWideOp(t, op, conns, esize, &st.wide)
		}
		return runFanOp(t, op, conns, esize, st)
	}
	ref, err := runOp(t, op, conns, esize)
	if ref != nil {
		st.addRef(ref)
	}
	return err
}

func (st *laneState) addRef(ref RefSender) {
	for i := range st.nref {
		if st.refs[i] == ref {
			return
		}
	}
	if st.nref == len(st.refs) {
		// More connections than one lane can name: flush the oldest now.
		st.refs[0].Flush()
		copy(st.refs[:], st.refs[1:])
		st.nref--
	}
	st.refs[st.nref] = ref
	st.nref++
}

// wait holds the calling lane until w is satisfied or another lane failed.
func (r *Runner) wait(w algos.Wait) error {
	other := &r.lanes[w.Lane].done
	if other.Load() >= int64(w.Done) {
		return nil
	}
	r.waiting.Add(1)
	defer r.waiting.Add(-1)
	r.mu.Lock()
	defer r.mu.Unlock()
	for other.Load() < int64(w.Done) {
		if r.abort.Load() {
			return errLaneAborted
		}
		r.cond.Wait()
	}
	return nil
}

// fail records that a lane failed: lanes held by a Wait are released and
// onError hears of the first error at once.
func (r *Runner) fail(err error) {
	r.mu.Lock()
	if r.abort.Load() {
		r.mu.Unlock()
		return
	}
	r.first = err
	r.abort.Store(true)
	r.cond.Broadcast()
	r.mu.Unlock()
	if r.onError != nil && !errors.Is(err, errLaneAborted) {
		r.onError(err)
	}
}
