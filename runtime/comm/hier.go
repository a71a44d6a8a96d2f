package comm

// HierRecDbl staged (algos.HierRecDblUp, HierRecDblAcross, HierRecDblDown):
// where the ranks of this host share the segment's one-shot staging area,
// a HierRecDbl all-reduce gathers to the host's leader and hands the
// result back with one synchronization each way instead of ppn-1 FIFO
// messages through the leader; only the leaders' recursive doubling
// between hosts runs on the engine. A host of one rank, or one without
// the area (NCCL_SHM_DISABLE=1, CC_ONESHOT_BYTES=0), runs the FIFO form;
// the two meet only in the leaders' exchanges, which are the same.

import (
	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/runtime/engine"
)

// hierPlan is a staged HierRecDbl call's plan besides its across schedule
// (plan.scheds[0]): the up and down phases' pieces, and their programs.
type hierPlan struct {
	up, down             []algos.FlatPlan
	upInline, downInline bool
	// ups are up's programs, compiled on first use as plan.progs
	// (flatProgram); down's runs in place without a reduction.
	ups      [3]*engine.FlatProgram
	downProg *engine.FlatProgram
	// across: this rank has exchanges with other hosts' leaders.
	across bool
}

// hierWanted reports whether HierRecDbl may run staged on this host: its
// ranks share memory, the one-shot area is on, and HierRecDbl may run.
// It needs only what every rank of the host shares.
func (c *Comm) hierWanted() bool {
	return c.hierOneChannel() && len(c.localIndex) > 1 &&
		c.p.Algo.For(algos.AllReduce).Has(algos.HierRecDbl) && c.logStepDisabled(algos.HierRecDbl) == ""
}

// hierStaged reports whether this host runs HierRecDbl staged.
func (c *Comm) hierStaged() bool { return c.flat.area != nil && len(c.localIndex) > 1 }

// hierOneChannel reports whether HierRecDbl runs on one channel: whenever
// hosts of several ranks stage it (the settings say so on every rank, so
// that the leaders' exchanges, cut per channel, match across hosts, a
// leader alone on its host included).
func (c *Comm) hierOneChannel() bool { return !c.p.SHMDisable && c.p.OneShotBytes > 0 }

// hierPhases is a staged HierRecDbl call's plan besides its across
// schedule (the plan's only one, made by makePlan): this local rank's up
// and down pieces, and whether across has exchanges for it.
func (c *Comm) hierPhases(k *coll, across algos.Schedule) *hierPlan {
	nl, es := len(c.localIndex), int64(k.dt.Size())
	slotElems := int64(c.flat.slot) / es
	h := &hierPlan{
		up:     algos.HierRecDblUp(c.localRank, nl, c.topo.NHosts() > 1, k.count, slotElems),
		down:   algos.HierRecDblDown(c.localRank, nl, k.count, slotElems),
		across: len(across.Lanes[0].Ops) > 0,
	}
	h.upInline = engine.FlatFits(h.up, es, c.flat.area.InlineBytes())
	h.downInline = engine.FlatFits(h.down, es, c.flat.area.InlineBytes())
	return h
}

// runHier runs a staged HierRecDbl call on the caller's goroutine: up
// through the staging area, across on channel 0's engine (leaders only),
// down through the staging area.
func (c *Comm) runHier(k *coll, chn *channel) error {
	h := k.plan.hier
	up, err := flatProgram(&h.ups, h.up, k, c.localRank, h.upInline)
	if err != nil {
		return c.flatFailed(k, err)
	}
	if h.downProg == nil {
		call := engine.FlatCall{Rank: c.localRank, Elem: int64(k.dt.Size()), Inline: h.downInline, Overlap: true}
		prog, err := engine.CompileFlat(h.down, call, false)
		if err != nil {
			return c.flatFailed(k, err)
		}
		h.downProg = prog
	}
	if err := up.Run(c.flat.area, &c.flat.seq, k.send, k.recv, k.fn); err != nil {
		return c.flatFailed(k, err)
	}
	if h.across {
		if err := chn.runner.Run(c.task(k, 0), chn.with(k.proto)); err != nil {
			return err // the runner told c.fail
		}
	}
	if err := h.downProg.Run(c.flat.area, &c.flat.seq, k.recv, k.recv, nil); err != nil {
		return c.flatFailed(k, err)
	}
	return nil
}
