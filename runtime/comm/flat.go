package comm

// Flat rows (algos.Flat: every rank copies into its slot of a staging area,
// all synchronize once, every rank reads the slots) run on a fast path of
// their own: no schedule, no slicing, no lanes or workers. Their plans are
// made once per call shape and cached with the others; a repeated call
// copies, posts, waits and reduces, and allocates nothing.

import (
	"fmt"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/runtime/engine"
	"github.com/seed-760dd1f1/cc/runtime/param"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
	"github.com/seed-760dd1f1/cc/runtime/transport/shm"
	"github.com/seed-760dd1f1/cc/runtime/tune"
)

// flatState is the communicator's staging area for flat rows and its
// call counter (the same on every rank: every rank runs the same flat
// pieces in the same order).
type flatState struct {
	area engine.FlatArea // nil when flat rows cannot run here
	slot int             // bytes of one slot
	seq  uint64          // the last call number
	// again is the arguments of the last call when it ran a flat row
	// outside a group and printed nothing: a call with the same arguments
	// and buffers of the same shape (large enough, in place or apart as
	// before: cc-perf moves its buffers every call) skips validation, the
	// tuner and the plan lookup (c.cur holds their outcome), as NCCL
	// reuses a cached plan. againOK says it is valid.
	again   callArgs
	againOK bool
	shape   callShape // the buffers a repeat of again needs
}

// callArgs is what a collective call is given besides its buffers, and
// the Force in effect.
type callArgs struct {
	kind        algos.Coll
	count, root int
	dt          reduce.DataType
	op          reduce.Op
	forced      *tune.Choice
}

// is reports whether a holds these arguments.
func (a *callArgs) is(kind algos.Coll, count, root int, dt reduce.DataType, op reduce.Op, forced *tune.Choice) bool {
	return a.kind == kind && a.count == count && a.root == root && a.dt == dt && a.op == op && a.forced == forced
}

// repeat runs a call whose arguments are those of the last one
// (flatState.again, which the caller checked), when that ran a flat row and
// send and recv have the last call's shape (flatState.shape); ok is false
// when the call must take the full path. Lean on purpose: for an 8 B
// all-reduce of 2 ranks over shared memory this and call were 20 ns of a
// 150 ns call (a hand-written exchange in place of the program, measured
// here and at the top of call, 11 interleaved runs each: 0.13 against
// 0.11 us).
func (c *Comm) repeat(send, recv []byte) (ok bool, err error) {
	k := &c.cur
	if k.prog == nil || c.failed.Load() || !c.flat.shape.fits(send, recv, k.inPlace) {
		return false, nil
	}
	// The program of the last call fits this one: the same reduction, and
	// Output overlaps Input as before (in place) or not at all.
	k.send, k.recv = send, recv
	if err = k.prog.Run(c.flat.area, &c.flat.seq, send, recv, k.fn); err != nil || c.failed.Load() {
		return true, c.repeatFailed(k, err)
	}
	return true, nil
}

// repeatFailed is repeat's error: the communicator's failure, which err
// (the program's, or nil when another rank's failure reached this one)
// starts if it is the first.
func (c *Comm) repeatFailed(k *coll, err error) error {
	if err != nil {
		c.flatFailed(k, err)
	}
	return fmt.Errorf("rank %d: %s: %w", c.rank, k.kind, c.failure())
}

// callShape is what a repeated call's buffers must satisfy to run the last
// call's program: the bytes it reads and writes, and where send must be
// for the call to be in place (NCCL's sense: Comm.inPlace).
type callShape struct {
	sendBytes, recvBytes int
	inPlaceOK            bool    // neither side is empty, so the call can be in place
	inPlaceAt            uintptr // in place when send's address is recv's plus this (mod 2^64)
}

// shapeOf is k's callShape.
func (c *Comm) shapeOf(k *coll) callShape {
	sendCount, recvCount := c.counts(k.kind, int(k.count), k.root)
	es := k.dt.Size()
	return callShape{sendBytes: sendCount * es, recvBytes: recvCount * es,
		inPlaceOK: sendCount > 0 && recvCount > 0, inPlaceAt: c.inPlaceAt(k)}
}

// fits reports whether send and recv have the shape: large enough, and in
// place as inPlace says, or else apart.
func (sh *callShape) fits(send, recv []byte, inPlace bool) bool {
	if len(send) < sh.sendBytes || len(recv) < sh.recvBytes {
		return false
	}
	if in := sh.inPlaceOK && addr(send) == addr(recv)+sh.inPlaceAt; in != inPlace {
		return false
	}
	return inPlace || !overlaps(send[:sh.sendBytes], recv[:sh.recvBytes])
}

// remember records a's call, which just ran k, for repeat: only a flat
// row outside a group that logs nothing.
func (c *Comm) remember(a *callArgs, k *coll) {
	c.flat.again, c.flat.againOK = *a, k == &c.cur && k.algo.Flat != nil && !c.logsColls()
	if c.flat.againOK {
		c.flat.shape = c.shapeOf(k)
	}
}

// logsColls reports whether logColl prints anything.
func (c *Comm) logsColls() bool {
	return c.log.Enabled(param.DebugInfo, param.SubsysColl) || (c.rank == 0 && c.log.Enabled(param.DebugInfo, param.SubsysTuning))
}

// flatWanted reports whether this host's segment needs the one-shot
// staging area: a flat row may run some collective (every rank is on
// this host over shared memory, a row accepts the topology and NCCL_ALGO
// allows it), or HierRecDbl may run staged (hierWanted). It needs only
// what every rank of the host shares.
func (c *Comm) flatWanted() bool {
	if c.hierWanted() {
		return true
	}
	if c.p.SHMDisable || c.p.OneShotBytes == 0 || len(c.localIndex) != c.nranks {
		return false
	}
	for _, row := range algos.Algorithms {
		if row.Flat != nil && row.Flat.Unavailable(c.topo) == "" && c.p.Algo.For(row.Coll).Has(row.Algo) {
			return true
		}
	}
	return false
}

// flatDisabled says why flat row `row` may not run here, or "".
func (c *Comm) flatDisabled(row *algos.Algorithm) string {
	if row.Flat == nil {
		return ""
	}
	switch {
	case c.p.OneShotBytes == 0:
		return fmt.Sprintf("%s is off (CC_ONESHOT_BYTES=0)", row.Algo)
	case c.p.SHMDisable:
		return fmt.Sprintf("%s needs shared memory and NCCL_SHM_DISABLE=1", row.Algo)
	}
	if why := row.Flat.Unavailable(c.topo); why != "" {
		return why
	}
	if rooted := row.Coll == algos.Broadcast || row.Coll == algos.Reduce; rooted && !c.p.Algo.Set && c.intraClass() == tune.SHMBusy {
		// A one-shot call waits for every rank; the ring's broadcast and
		// reduce do not (the root returns once its data is in the FIFO),
		// and with ranks outnumbering cores that wait is a trip through
		// the scheduler. cc-perf tune, 4 ranks on 2 cores, 2026-11-27:
		// OneShot took 7-121x the ring's time for broadcast up to 512 KiB
		// and reduce up to 2 KiB, where the tuner picked it.
		return fmt.Sprintf("%s runs %s only where NCCL_ALGO names it when a host's ranks outnumber its cores", row.Algo, row.Coll)
	}
	if c.flat.area == nil {
		return fmt.Sprintf("%s has no staging area on this host", row.Algo)
	}
	if row.Algo == algos.CMA {
		if !c.cma.ok {
			return fmt.Sprintf("CMA is off: %s", c.cma.why)
		}
		if !c.p.Algo.Set && c.intraClass() == tune.SHMBusy {
			// cc-perf against compare-ompi.sh, 4 ranks on 2 cores,
			// 2026-11-28: the ring as fast or faster at 128 KiB-2 MiB
			// (0.44-0.81x for CMA), a gain only at 32-64 KiB.
			return "CMA runs only where NCCL_ALGO names it when a host's ranks outnumber its cores"
		}
	}
	return ""
}

// openFlat makes the staging area: the host segment's one-shot area, or,
// with a single rank, slots in this process.
func (c *Comm) openFlat() {
	switch {
	case c.seg != nil:
		if a := c.seg.OneShot(); a != nil {
			c.flat.area, c.flat.slot = a, a.SlotBytes()
		}
	case c.nranks == 1 && c.p.OneShotBytes > 0:
		c.flat.area, c.flat.slot = newPrivateArea(c.p.OneShotBytes), c.p.OneShotBytes
	}
}

// makeFlatPlan is the plan of a flat row's call: one algos.FlatPlan per
// piece that fits a slot.
func (c *Comm) makeFlatPlan(k *coll) *plan {
	slotElems := int64(c.flat.slot / k.dt.Size())
	pl := &plan{geo: k.algo.Geometry[k.proto], step: c.payloadStep(k.proto)}
	pl.flat = k.algo.Flat.Plans(algos.FlatArgs{Coll: k.kind, Rank: c.rank, NRanks: c.nranks, Root: k.root, Count: k.count}, slotElems)
	pl.chunk = k.algo.Flat.Piece(slotElems, c.nranks)
	pl.inline = engine.FlatFits(pl.flat, int64(k.dt.Size()), c.flat.area.InlineBytes())
	pl.args0 = algos.Args{Rank: c.rank, Topo: c.topo, Root: k.root, Count: k.count, ElemSize: k.dt.Size()}
	return pl
}

// runFlat runs a flat row's call on the caller's goroutine, by the plan's
// program for calls like k (compiled on first use).
func (c *Comm) runFlat(k *coll) error {
	if k.algo.Algo == algos.CMA {
		k.prog = nil // no repeat: the full path leads here again
		return c.cmaRun(k)
	}
	prog, err := flatProgram(&k.plan.progs, k.plan.flat, k, c.rank, k.plan.inline)
	if err != nil {
		return c.flatFailed(k, err)
	}
	k.prog = prog
	if err := prog.Run(c.flat.area, &c.flat.seq, k.send, k.recv, k.fn); err != nil {
		return c.flatFailed(k, err)
	}
	return nil
}

// flatProgram returns the program of plans (this rank's, as rank in the
// staging area) for calls like k, compiled into progs on first use: one
// per kind of call, by pre-op, then Output overlapping Input, then the
// rest. inline: every piece fits the area's inline bytes.
func flatProgram(progs *[3]*engine.FlatProgram, plans []algos.FlatPlan, k *coll, rank int, inline bool) (*engine.FlatProgram, error) {
	pre := k.fn != nil && k.fn.HasPre()
	overlap := overlaps(k.send, k.recv)
	v := 2
	switch {
	case pre:
		v = 0
	case overlap:
		v = 1
	}
	if progs[v] == nil {
		call := engine.FlatCall{Rank: rank, Elem: int64(k.dt.Size()), Inline: inline, Pre: pre, Overlap: overlap}
		prog, err := engine.CompileFlat(plans, call, k.fn != nil)
		if err != nil {
			return nil, err
		}
		progs[v] = prog
	}
	return progs[v], nil
}

// flatFailed fails the communicator with err, a flat call's, and returns
// err.
func (c *Comm) flatFailed(k *coll, err error) error {
	c.fail(fmt.Errorf("rank %d: %s by %s: %w", c.rank, k.kind, k.algo.Algo, err))
	return err
}

// privateArea is the staging area of a communicator of one rank: two
// slots and two inline areas (as large as shared memory's) in its own
// memory.
type privateArea struct{ slots, inline [2][1][]byte }

func newPrivateArea(slot int) *privateArea {
	return &privateArea{slots: [2][1][]byte{{make([]byte, slot)}, {make([]byte, slot)}},
		inline: [2][1][]byte{{make([]byte, shm.OneShotInline)}, {make([]byte, shm.OneShotInline)}}}
}

func (a *privateArea) Stages(k uint64, inline bool) [][]byte {
	if inline {
		return a.inline[k%2][:]
	}
	return a.slots[k%2][:]
}
func (a *privateArea) InlineBytes() int   { return shm.OneShotInline }
func (a *privateArea) Post(uint64)        {}
func (a *privateArea) Await(uint64) error { return nil }
