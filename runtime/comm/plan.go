package comm

// From a validated call to running schedules: which table row and protocol
// run a collective (choose), its schedules per channel (plans, cached by
// shape), and running them on the channels (runColls).

import (
	"errors"
	"fmt"
	goruntime "runtime"
	"strings"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/engine"
	"github.com/seed-760dd1f1/cc/runtime/param"
	"github.com/seed-760dd1f1/cc/runtime/tune"
)

// minChannelBytes is the least work per channel before the communicator
// spreads a collective over another channel (when the channel count is not
// forced with NCCL_MIN_NCHANNELS or NCCL_NCHANNELS).
const minChannelBytes = 512 << 10

// noAlgo is NCCL's "No algorithm/protocol available" error for a
// collective that has no entry left: it names the settings that excluded
// every row (and why PAT or NVLS is disabled, when it was allowed) and the
// algorithms the table implements for it, in algos.Preference's order. A
// call fails with it, not the communicator.
func noAlgo(p *param.Params, kind algos.Coll, disabledWhy string) error {
	var implemented, why []string
	for _, a := range algos.Preference {
		if algos.Lookup(a, kind) != nil {
			implemented = append(implemented, a.String())
		}
	}
	if p.Algo.Set {
		why = append(why, fmt.Sprintf("NCCL_ALGO was set to %q", p.Algo.Raw))
	}
	if p.Proto.Set {
		why = append(why, fmt.Sprintf("NCCL_PROTO was set to %q", p.Proto.Raw))
	}
	if disabledWhy != "" {
		why = append(why, disabledWhy)
	}
	return &noAlgoError{kind: kind, implemented: strings.Join(implemented, ", "), why: strings.Join(why, ", ")}
}

// patDisabled says why PAT may not run on topo, or "" if it may. NCCL's
// ncclPatEnable: NCCL_PAT_ENABLE=0 disables it; 2 (auto, the default)
// enables it only when every rank is alone on its host (NCCL also wants
// a host network, which every cc network is).
func patDisabled(p *param.Params, topo *algos.Topo) string {
	switch {
	case p.PatEnable == 0:
		return "PAT is disabled (NCCL_PAT_ENABLE=0)"
	case p.PatEnable == 2 && topo.MaxPerHost() > 1:
		return fmt.Sprintf("PAT runs only with one rank per host when NCCL_PAT_ENABLE=2 (auto), and a host has %d ranks: set NCCL_PAT_ENABLE=1 to force it", topo.MaxPerHost())
	}
	return ""
}

// nvlsDisabled says why algorithm a, when it is NVLS or NVLS_TREE, may
// not run here, or "". NCCL_NVLS_ENABLE=0 disables both;
// 2 (auto, the default) lets them run only where NCCL_ALGO names them for
// the collective (each costs a FIFO to and from every other local rank,
// opened at Init, and the tuner's constants for them are not measured);
// they need shared memory and the topology algos.NvlsUnavailable accepts.
func (c *Comm) nvlsDisabled(a algos.Algo) string {
	if a != algos.NVLS && a != algos.NVLSTree {
		return ""
	}
	switch {
	case c.p.NVLSEnable == 0:
		return fmt.Sprintf("%s is disabled (NCCL_NVLS_ENABLE=0)", a)
	case c.p.NVLSEnable == 2 && !c.p.Algo.Set:
		return fmt.Sprintf("%s runs only where NCCL_ALGO names it when NCCL_NVLS_ENABLE=2 (auto): set NCCL_NVLS_ENABLE=1 to let the tuner pick it", a)
	case c.p.SHMDisable:
		return fmt.Sprintf("%s needs shared memory and NCCL_SHM_DISABLE=1", a)
	}
	return algos.NvlsUnavailable(c.topo, a == algos.NVLSTree)
}

// logStepDisabled says why algorithm a, when it is a log-step row (RecDbl,
// Rabenseifner, HierRecDbl), may not run here, or "". They are the algorithms between
// hosts (and between ranks that talk over TCP: NCCL_SHM_DISABLE=1): on one
// host over shared memory they run only where NCCL_ALGO names them, as
// NVLS does, because the interleaved runs measured there had them slower
// than the ring above a few KiB with ranks outnumbering cores (README,
// Algorithms), and the one-host rows are the ring's and the one-shot's.
func (c *Comm) logStepDisabled(a algos.Algo) string {
	if a != algos.RecDbl && a != algos.Rabenseifner && a != algos.HierRecDbl {
		return ""
	}
	if a == algos.HierRecDbl && !c.p.Algo.Set && !(c.hierOneChannel() && c.topo.NHosts() > 1 && c.topo.MaxPerHost() > 1) {
		// On its own only staged, between hosts of which some have
		// several ranks (hier.go). The FIFO form, measured 2026-11-27 on
		// 2 fake hosts x 2 ranks under load 9-29 on 2 cores, won no size
		// clearly; staged, 2026-11-28 on the same layout with the
		// machine quiet, it took 0.61-0.85x the time of the tuner's pick
		// at 8 B-32 KiB, and 0.68-0.85x up to 4 KiB, 1.03x at 32 KiB in
		// a second sweep (runtime README). With one rank per host it is
		// recursive doubling.
		return fmt.Sprintf("%s runs on its own only between hosts with several ranks sharing memory (CC_ONESHOT_BYTES > 0, NCCL_SHM_DISABLE unset), elsewhere where NCCL_ALGO names it", a)
	}
	if c.topo.NHosts() == 1 && !c.p.SHMDisable && !c.p.Algo.Set {
		return fmt.Sprintf("%s runs between hosts, or on one host over TCP (NCCL_SHM_DISABLE=1), unless NCCL_ALGO names it", a)
	}
	return ""
}

// nvlsWanted reports whether NVLS or NVLS_TREE may run some collective,
// so that the host's segment needs multicast regions. It needs only the
// settings, which every rank of the host shares.
func nvlsWanted(p *param.Params) bool {
	if p.NVLSEnable == 0 || p.SHMDisable {
		return false
	}
	for kind := range algos.Coll(algos.NumColls) {
		set := p.Algo.For(kind)
		if (set.Has(algos.NVLS) || set.Has(algos.NVLSTree)) && (p.NVLSEnable == 1 || p.Algo.Set) {
			return true
		}
	}
	return false
}

// noAlgoError is NCCL's "No algorithm/protocol available for function %s
// with datatype %s. NCCL_ALGO was set to %s." for one collective; the
// datatype is that of the call.
type noAlgoError struct {
	kind        algos.Coll
	why         string // the settings that excluded every row
	implemented string
	dt          string
}

func (e *noAlgoError) Error() string {
	msg := fmt.Sprintf("no algorithm/protocol available for function %s", e.kind)
	if e.dt != "" {
		msg += " with datatype " + e.dt
	}
	if e.why != "" {
		msg += ": " + e.why
	}
	return fmt.Sprintf("%s (implemented for %s: %s)", msg, e.kind, e.implemented)
}

// choose decides how a validated call runs: its channel count, then its
// row and protocol, the tuner's fastest entry among those that may run (a
// Control call: the ring's fastest protocol, whatever NCCL_ALGO and
// NCCL_PROTO say).
//
// Its errors name neither the rank nor the collective: the caller's
// (validate's) wrapping does.
func (c *Comm) choose(k *coll) error {
	if err := c.algoErr[k.kind]; err != nil && !k.control {
		e := *err.(*noAlgoError)
		e.dt = k.dt.String()
		return &e
	}
	k.channels = c.channelsFor(k.nbytes)
	only := algos.Algo(-1)
	if k.control {
		only = algos.Fallback
	}
	if d := &c.lastDecision; d.kind != k.kind || d.nbytes != k.nbytes || d.channels != k.channels || d.only != only || d.forced != c.forced {
		best, next := c.model.Decide(k.kind, k.nbytes, k.channels, only)
		if f := c.forced; f != nil && !k.control {
			next = best
			best = tune.Choice{Algo: f.Algo, Proto: f.Proto, Channels: f.Channels,
				Time: c.model.Time(k.kind, f.Algo, f.Proto, k.nbytes, f.Channels)}
			if best.Time < 0 {
				return fmt.Errorf("forced %s/%s may not run: NCCL_ALGO, NCCL_PROTO or NCCL_PAT_ENABLE exclude it, or the table has no such row", f.Algo, f.Proto)
			}
			if best.Channels == 0 {
				best.Channels = k.channels
			}
		}
		if best.Time < 0 {
			return fmt.Errorf("the tuner cannot time any entry NCCL_ALGO and NCCL_PROTO allow: its constants (%s) give them no efficiency", c.consts.Source)
		}
		*d = decision{kind: k.kind, nbytes: k.nbytes, channels: k.channels, only: only, forced: c.forced,
			row: algos.Lookup(best.Algo, k.kind), best: best, next: next}
	}
	k.algo, k.proto = c.lastDecision.row, c.lastDecision.best.Proto
	k.best, k.next = c.lastDecision.best, c.lastDecision.next
	k.channels = max(1, min(k.best.Channels, c.nchannels)) // a config row may ask for more than there are
	if k.algo.Flat != nil || (k.algo.Algo == algos.HierRecDbl && c.hierOneChannel()) {
		k.channels = 1 // one staging area, no channels
	}
	if !k.control {
		c.ran = k.best
		c.ran.Channels = k.channels
	}
	return nil
}

// Ran says how the last collective call (not a Control call) ran: its
// algorithm, protocol and channels, and the tuner's predicted time (µs;
// -1 for an entry the model does not time).
func (c *Comm) Ran() (algo algos.Algo, proto protocols.Proto, channels int, predicted float64) {
	return c.ran.Algo, c.ran.Proto, c.ran.Channels, c.ran.Time
}

// Force makes the collectives called after it run with algorithm a,
// protocol p and ch channels (0: the communicator's choice), whatever the
// tuner would pick, for tools that compare configurations (cc-perf tune):
// every rank must force the same. ForceNone ends it. A call whose entry
// NCCL_ALGO, NCCL_PROTO or NCCL_PAT_ENABLE exclude, or that the table does
// not have, fails. Control calls are not affected.
func (c *Comm) Force(a algos.Algo, p protocols.Proto, ch int) error {
	if a < 0 || int(a) >= algos.NumAlgos || int(p) >= protocols.NumProtos || ch < 0 {
		return fmt.Errorf("rank %d: Force(%v, %v, %d): want an algorithm, a protocol and channels >= 0", c.rank, a, p, ch)
	}
	c.forced = &tune.Choice{Algo: a, Proto: p, Channels: min(ch, c.nchannels)}
	return nil
}

// Entries lists the (algorithm, protocol) pairs collective kind may run
// with on this communicator, in NCCL's order.
func (c *Comm) Entries(kind algos.Coll) []tune.Choice {
	var out []tune.Choice
	for a := range algos.Algo(algos.NumAlgos) {
		for p := range protocols.Proto(protocols.NumProtos) {
			if c.model.Time(kind, a, p, 0, 1) >= 0 {
				out = append(out, tune.Choice{Algo: a, Proto: p})
			}
		}
	}
	return out
}

// Model is the communicator's tuner: its constants (rank 0's), topology,
// and the entries that may run.
func (c *Comm) Model() *tune.Model { return c.model }

// ForceNone gives the choice back to the tuner.
func (c *Comm) ForceNone() { c.forced = nil }

// decision is the tuner's last answer, kept because calls repeat.
type decision struct {
	forced     *tune.Choice
	kind       algos.Coll
	nbytes     int64
	channels   int
	only       algos.Algo
	row        *algos.Algorithm
	best, next tune.Choice
}

// channelsFor is the number of channels a collective of nbytes uses: the
// forced count, or enough channels that each has minChannelBytes of work.
func (c *Comm) channelsFor(nbytes int64) int {
	if c.p.MinChannels > 0 {
		return c.nchannels
	}
	n := int(nbytes / minChannelBytes)
	return max(1, min(n, c.nchannels))
}

// plan is the schedules of one collective shape on every channel it uses.
// It is immutable once made, and cached: a repeated call of the same shape
// builds nothing.
type plan struct {
	scheds []algos.Schedule // index = channel
	args0  algos.Args       // channel 0's generator arguments, for NCCL_DEBUG
	geo    algos.Geometry
	step   int    // payload bytes of one FIFO slot
	chunk  int64  // elements
	server []bool // index = channel: this rank talks to the CollNet server there
	polls  int    // lanes that receive over shared memory, over every channel (yieldWaits)
	// flat is, for a flat row (algos.Flat), the plan of every piece, in
	// order; the row has no schedules.
	flat []algos.FlatPlan
	// inline: every piece fits the staging area's inline bytes.
	inline bool
	// progs are flat's programs, compiled on first use (Comm.runFlat):
	// for a reduction with a pre-op, for Output overlapping Input, and
	// for the rest.
	progs [3]*engine.FlatProgram
	// hier is a staged HierRecDbl call's flat phases (hier.go); its
	// scheds[0] is then the across schedule.
	hier *hierPlan
}

// planKey is everything a plan depends on besides the communicator.
type planKey struct {
	kind     algos.Coll
	algo     algos.Algo
	proto    protocols.Proto
	esize    int
	count    int64
	root     int
	channels int
	direct   bool // NVLS over registered buffers
}

// maxPlans bounds the plan cache; a sweep over many sizes starts over.
const maxPlans = 256

// planFor returns the cached plan of k's shape, making it on first use.
func (c *Comm) planFor(k *coll) *plan {
	key := planKey{kind: k.kind, algo: k.algo.Algo, proto: k.proto, esize: k.dt.Size(), count: k.count, root: k.root, channels: k.channels, direct: k.direct}
	if c.last.plan != nil && c.last.key == key {
		return c.last.plan
	}
	if pl := c.plans[key]; pl != nil {
		c.last.key, c.last.plan = key, pl
		return pl
	}
	if len(c.plans) >= maxPlans {
		clear(c.plans)
	}
	pl := c.makePlan(k)
	c.plans[key] = pl
	c.last.key, c.last.plan = key, pl
	return pl
}

func (c *Comm) makePlan(k *coll) *plan {
	if k.algo.Flat != nil {
		return c.makeFlatPlan(k)
	}
	esize := int64(k.dt.Size())
	align := max(1, 16/esize)
	pl := &plan{geo: k.algo.Geometry[k.proto], step: c.payloadStep(k.proto)}
	pl.chunk = k.algo.ChunkFor(&algos.ChunkArgs{Proto: k.proto, Geometry: pl.geo, StepPayload: pl.step,
		ElemSize: int(esize), Align: align, Bytes: k.nbytes, NChannels: k.channels, Topo: c.topo, NVLSChunk: c.p.NVLSChunkSize, Framed: c.framed})
	pl.scheds = make([]algos.Schedule, k.channels)
	staged := k.algo.Algo == algos.HierRecDbl && c.hierStaged() // one channel (choose)
	for ch := range pl.scheds {
		off, n := partition(k.count, k.channels, align, ch)
		a := algos.Args{Rank: c.rank, Topo: c.topo, Root: k.root, Count: k.count,
			Part: algos.Part{Offset: off, Count: n, Chunk: pl.chunk, Align: align}, ElemSize: int(esize), CTRing: &c.p.CTRing,
			CollNetHeads: c.p.CollNetNHeads, Direct: k.direct}
		if ch == 0 {
			pl.args0 = a
		}
		if staged {
			pl.scheds[ch] = algos.Single(algos.HierRecDblAcross(c.rank, c.topo, a.Part)) // the engine's part (hier.go)
		} else {
			pl.scheds[ch] = k.algo.Gen(&a)
		}
		pl.server = append(pl.server, k.algo.Algo == algos.CollNetDirect && talksToServer(pl.scheds[ch], algos.CollNetPeer(c.nranks)))
		pl.polls += pollingLanes(pl.scheds[ch], c.isLocal, pl.slices(esize))
	}
	if staged {
		pl.hier = c.hierPhases(k, pl.scheds[0])
	}
	return pl
}

// partition is channel ch's contiguous share of count elements split over
// nc channels, each share a multiple of align elements (NCCL's grain).
func partition(count int64, nc int, align int64, ch int) (off, n int64) {
	per := (count + int64(nc) - 1) / int64(nc)
	per = (per + align - 1) / align * align
	off = min(per*int64(ch), count)
	return off, min(per, count-off)
}

// task fills channel ch's engine task for k.
func (c *Comm) task(k *coll, ch int) *engine.Task {
	t := &c.tasks[ch]
	*t = engine.Task{Sched: k.plan.scheds[ch], In: k.send, Out: k.recv, Type: k.dt, Fn: k.fn,
		StepPayload: k.plan.step, ChunkSteps: k.plan.geo.ChunkSteps, SliceSteps: k.plan.geo.SliceSteps,
		OutOnce: k.algo.WritesOutputOnce, Stable: stable(k), PeerIn: k.peerIn}
	return t
}

// stable reports whether k's engine tasks may send slices straight from
// its Input (engine.Task.Stable): its row writes every element of Output
// at most once and never Input, and Input is not Output. In place, Input is
// Output's block of this rank. That is still stable for all-gather and
// broadcast, whose Output there can only ever receive the value Input
// already holds (written once, with its final value); for the reductions
// it receives a different value while slices sent from Input may still be
// on their way. Slices sent from Output need only the row's one write
// (engine.Task.OutOnce), in place or not.
func stable(k *coll) bool {
	return k.algo.WritesOutputOnce && (!k.inPlace || k.kind == algos.AllGather || k.kind == algos.Broadcast)
}

// runColls runs collectives in order, each channel's share on its own
// goroutine (channel 0 on the caller's).
func (c *Comm) runColls(ks []*coll) error {
	if len(ks) == 0 {
		return nil
	}
	if !c.allSHM {
		// A call that waits on sockets keeps its goroutine on one thread:
		// unlocked, a receive that parks in a wait resumes
		// on whichever thread runs its P next, and the kernel, seeing the
		// polling move among threads, keeps placing it on the core the
		// peer polls on (wake-affine). Locked, each rank is one steady
		// polling thread. Measured, 2 ranks over TCP loopback on 2 cores,
		// 6 interleaved runs of cc-perf all_reduce -n 10000: 8 B median
		// 22.3 us unlocked, 14.6 us locked (the 12 out-of-place and
		// in-place times of each), and rank 0's context switches 0.55
		// per call unlocked, 0.09 locked. Communicators on one host over
		// shared memory skip the lock (CollNet's link to its server
		// aside, their waits are shared-memory polls and futexes).
		goruntime.LockOSThread()
		defer goruntime.UnlockOSThread()
	}
	nc := 0
	for _, k := range ks {
		if err := c.chooseDirect(k, len(ks) == 1); err != nil {
			c.fail(err)
			return fmt.Errorf("rank %d: %s: %w", c.rank, k.kind, c.failure())
		}
		k.plan = c.planFor(k)
		if k.algo.Algo == algos.CollNetDirect {
			c.collnet.seq++
			k.collnetSeq = c.collnet.seq
		}
		if !k.control {
			c.logColl(k)
		}
		nc = max(nc, k.channels)
	}
	if c.seg != nil {
		c.seg.SetYield(c.yieldWaits(ks))
	}
	for ch := 1; ch < nc; ch++ {
		c.workers[ch-1].start <- ks
	}
	err := c.runChannel(0, ks)
	for ch := 1; ch < nc; ch++ {
		err = errors.Join(err, <-c.workers[ch-1].done)
	}
	if err == nil {
		if err = c.departDirect(ks); err != nil {
			c.fail(err)
		}
	}
	if err != nil || c.Err() != nil {
		return fmt.Errorf("rank %d: %s: %w", c.rank, ks[0].kind, c.failure())
	}
	return nil
}

// runChannel runs channel ch's share of every collective of ks that uses it.
func (c *Comm) runChannel(ch int, ks []*coll) error {
	chn := c.channels[ch]
	for _, k := range ks {
		if ch >= k.channels {
			continue
		}
		if k.algo.Flat != nil {
			if err := c.runFlat(k); err != nil {
				return err // runFlat told c.fail
			}
			continue
		}
		if k.plan.hier != nil {
			if err := c.runHier(k, chn); err != nil {
				return err // runHier or the runner told c.fail
			}
			continue
		}
		if err := c.beginCollNet(k, ch); err != nil {
			c.fail(err)
			return err
		}
		if err := chn.runner.Run(c.task(k, ch), chn.with(k.proto)); err != nil {
			return err // the runner told c.fail
		}
	}
	return nil
}

// worker runs the share of one extra channel on its own goroutine; the
// calling goroutine runs channel 0 itself. It exits when start is closed.
type worker struct {
	start chan []*coll
	done  chan error
	exit  chan struct{}
}

func (c *Comm) newWorker(ch int) *worker {
	w := &worker{start: make(chan []*coll), done: make(chan error, 1), exit: make(chan struct{})}
	go func() {
		defer close(w.exit)
		for ks := range w.start {
			w.done <- c.runChannel(ch, ks)
		}
	}()
	return w
}

func (w *worker) stop() {
	close(w.start)
	<-w.exit
}

// logColl prints, per call, what NCCL_DEBUG=INFO users look for: with
// NCCL_DEBUG_SUBSYS=TUNING, rank 0 prints NCCL's line and the model's
// prediction with its runner-up; with COLL, every rank prints algorithm,
// protocol, channels, chunk and why.
func (c *Comm) logColl(k *coll) {
	if c.rank == 0 && c.log.Enabled(param.DebugInfo, param.SubsysTuning) {
		c.log.Info(param.SubsysTuning, "%s: %d Bytes -> Algo %s proto %s channel{Lo..Hi}={0..%d} (model %.1f us; next %s; %s)",
			k.kind, k.nbytes, k.algo.Algo, k.proto, k.channels-1, k.best.Time, k.next, c.allowedWhy(k))
	}
	if !c.log.Enabled(param.DebugInfo, param.SubsysColl) {
		return
	}
	chWhy := "default"
	if c.p.MinChannels > 0 {
		chWhy = "NCCL_MIN_NCHANNELS/NCCL_NCHANNELS"
	}
	extra := ""
	if k.algo.Explain != nil {
		extra = "; " + k.algo.Explain(&k.plan.args0)
	}
	if k.direct {
		extra += "; registered buffers: heads read every local rank's send buffer in place"
	}
	c.log.Info(param.SubsysColl, "%s: %d bytes %s -> algo %s proto %s (tuner: %.1f us predicted, next %s; %s) channels %d (%s), chunk %d elements%s",
		k.kind, k.nbytes, k.dt, k.algo.Algo, k.proto, k.best.Time, k.next, c.allowedWhy(k), k.channels, chWhy, k.plan.chunk, extra)
}

// allowedWhy names what decided or limited the tuner's choice.
func (c *Comm) allowedWhy(k *coll) string {
	var why []string
	if k.best.Line > 0 {
		why = append(why, fmt.Sprintf("%s:%d", c.tunerCfg.Path, k.best.Line))
	}
	if c.p.Algo.Set {
		why = append(why, fmt.Sprintf("NCCL_ALGO=%q", c.p.Algo.Raw))
	}
	if c.p.Proto.Set {
		why = append(why, fmt.Sprintf("NCCL_PROTO=%q", c.p.Proto.Raw))
	}
	if len(why) == 0 {
		return "NCCL_ALGO and NCCL_PROTO allow all"
	}
	return strings.Join(why, ", ")
}
