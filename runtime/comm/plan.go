package comm

// From a validated call to running schedules: which table row and protocol
// run a collective (choose), its schedules per channel (plans, cached by
// shape), and running them on the channels (runColls).

import (
	"errors"
	"fmt"
	"strings"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/engine"
	"github.com/seed-760dd1f1/cc/runtime/param"
)

// Protocol thresholds until the tuner exists. Over TCP, seed 000's table
// (LL below 8 KiB, LL128 up to 1 MiB, Simple above) matches what we
// measured. On shared memory the literal LL and LL128 (a flag per 8 or
// 120 bytes, polled) lose to Simple from a few hundred bytes on, by 2-20x
// at medium sizes; only the smallest all-reduces gain from LL128.
// Measured with ccrun -np 2 and 4 cc-perf, every protocol forced, medians
// of 3 interleaved runs (README, "The runtime": the protocols paragraph).
const (
	llMaxBytes       = 8 << 10
	ll128MaxBytes    = 1 << 20
	shmLL128MaxBytes = 256 // shared memory: all-reduce below this runs LL128
)

// minChannelBytes is the least work per channel before the communicator
// spreads a collective over another channel (when the channel count is not
// forced with NCCL_MIN_NCHANNELS or NCCL_NCHANNELS).
const minChannelBytes = 512 << 10

// pickAlgo returns the row that runs kind: the first algorithm of algos.Preference
// that NCCL_ALGO allows, the table implements for kind, is enabled on this
// topology (PAT: NCCL_PAT_ENABLE) and runs with a protocol NCCL_PROTO
// allows. It is NCCL's "No algorithm/protocol available" error otherwise:
// a call fails, not the communicator.
func pickAlgo(p *param.Params, kind algos.Coll, topo *algos.Topo) (*algos.Algorithm, error) {
	allowed := p.Algo.For(kind)
	protos := p.Proto.For(kind)
	var implemented []string
	var disabled string
	for _, a := range algos.Preference {
		row := algos.Lookup(a, kind)
		if row == nil {
			continue
		}
		implemented = append(implemented, a.String())
		if !allowed.Has(a) {
			continue
		}
		if a == algos.PAT {
			if disabled = patDisabled(p, topo); disabled != "" {
				continue
			}
		}
		for pr := range protocols.Proto(protocols.NumProtos) {
			if row.Runs(pr) && protos.Has(pr) {
				return row, nil
			}
		}
	}
	e := &noAlgoError{kind: kind, implemented: strings.Join(implemented, ", ")}
	var why []string
	if p.Algo.Set {
		why = append(why, fmt.Sprintf("NCCL_ALGO was set to %q", p.Algo.Raw))
	}
	if p.Proto.Set {
		why = append(why, fmt.Sprintf("NCCL_PROTO was set to %q", p.Proto.Raw))
	}
	if disabled != "" {
		why = append(why, disabled)
	}
	e.why = strings.Join(why, ", ")
	return nil, e
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

// choose decides how a validated call runs: its row, protocol and channel
// count.
func (c *Comm) choose(k *coll) error {
	row, err := c.algoFor[k.kind], c.algoErr[k.kind]
	if k.control {
		row, err = algos.Lookup(algos.Fallback, k.kind), nil
	}
	if err != nil {
		e := *err.(*noAlgoError)
		e.dt = k.dt.String()
		return &e
	}
	k.algo = row
	k.channels = c.channelsFor(k.nbytes)
	k.proto, k.why = c.protoFor(row, k.kind, k.nbytes, k.control)
	return nil
}

// protoFor picks the protocol of a collective of nbytes run by row: the size
// class's preference, then the others, skipping what the row cannot run and
// what NCCL_PROTO forbids (pickAlgo made sure one is left; a control call
// ignores NCCL_PROTO). It returns the size class and whether a protocol
// other than its preference was taken, which protoWhy turns into words
// only when they are printed: a call allocates nothing.
func (c *Comm) protoFor(row *algos.Algorithm, kind algos.Coll, nbytes int64, control bool) (protocols.Proto, protoReason) {
	class := sizeAbove1M
	switch {
	case c.allSHM && (kind != algos.AllReduce || nbytes >= shmLL128MaxBytes):
		class = shmSimple
	case c.allSHM:
		class = shmSmall
	case nbytes < llMaxBytes:
		class = sizeBelow8K
	case nbytes <= ll128MaxBytes:
		class = size8KTo1M
	}
	allowed := c.p.Proto.For(kind)
	if control {
		allowed = param.AllProtos
	}
	for i, p := range protoOrder[class] {
		if row.Runs(p) && allowed.Has(p) {
			return p, protoReason{class: class, fallback: i > 0}
		}
	}
	return protocols.Simple, protoReason{class: class}
}

// Size classes of the protocol thresholds, and each one's preference order.
const (
	sizeBelow8K = iota
	size8KTo1M
	sizeAbove1M
	shmSmall
	shmSimple
)

var (
	protoOrder = [...][3]protocols.Proto{
		sizeBelow8K: {protocols.LL, protocols.LL128, protocols.Simple},
		size8KTo1M:  {protocols.LL128, protocols.Simple, protocols.LL},
		sizeAbove1M: {protocols.Simple, protocols.LL128, protocols.LL},
		shmSmall:    {protocols.LL128, protocols.Simple, protocols.LL},
		shmSimple:   {protocols.Simple, protocols.LL128, protocols.LL},
	}
	sizeClassNames = [...]string{"below 8 KiB", "8 KiB to 1 MiB", "above 1 MiB",
		"shared memory, all-reduce below 256 B", "shared memory"}
)

// protoReason is why a call runs its protocol.
type protoReason struct {
	class    int
	fallback bool // the class's first choice was not allowed or not run by the algorithm
}

// protoWhy says why k runs its protocol, for NCCL_DEBUG.
func (c *Comm) protoWhy(k *coll) string {
	why := sizeClassNames[k.why.class]
	if !k.why.fallback {
		return why
	}
	if c.p.Proto.Set && !k.control {
		why += fmt.Sprintf(", NCCL_PROTO=%q", c.p.Proto.Raw)
	}
	if !k.algo.Runs(protoOrder[k.why.class][0]) {
		why += fmt.Sprintf(", %s runs %s", k.algo.Algo, runsList(k.algo))
	}
	return why
}

// runsList names the protocols row runs, e.g. "LL, Simple".
func runsList(row *algos.Algorithm) string {
	var names []string
	for _, p := range row.Protos() {
		names = append(names, p.String())
	}
	return strings.Join(names, ", ")
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
	step   int   // payload bytes of one FIFO slot
	chunk  int64 // elements
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
}

// maxPlans bounds the plan cache; a sweep over many sizes starts over.
const maxPlans = 256

// planFor returns the cached plan of k's shape, making it on first use.
func (c *Comm) planFor(k *coll) *plan {
	key := planKey{kind: k.kind, algo: k.algo.Algo, proto: k.proto, esize: k.dt.Size(), count: k.count, root: k.root, channels: k.channels}
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
	esize := int64(k.dt.Size())
	align := max(1, 16/esize)
	pl := &plan{geo: k.algo.Geometry[k.proto], step: c.payloadStep(k.proto)}
	pl.chunk = k.algo.ChunkFor(&algos.ChunkArgs{Proto: k.proto, Geometry: pl.geo, StepPayload: pl.step,
		ElemSize: int(esize), Align: align, Bytes: k.nbytes, NChannels: k.channels, Topo: c.topo})
	pl.scheds = make([]algos.Schedule, k.channels)
	for ch := range pl.scheds {
		off, n := partition(k.count, k.channels, align, ch)
		a := algos.Args{Rank: c.rank, Topo: c.topo, Root: k.root, Count: k.count,
			Part: algos.Part{Offset: off, Count: n, Chunk: pl.chunk, Align: align}, ElemSize: int(esize), CTRing: &c.p.CTRing}
		if ch == 0 {
			pl.args0 = a
		}
		pl.scheds[ch] = k.algo.Gen(&a)
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
		Stable: k.algo.WritesOutputOnce && !k.inPlace}
	return t
}

// runColls runs collectives in order, each channel's share on its own
// goroutine (channel 0 on the caller's).
func (c *Comm) runColls(ks []*coll) error {
	if len(ks) == 0 {
		return nil
	}
	nc := 0
	for _, k := range ks {
		k.plan = c.planFor(k)
		if !k.control {
			c.logColl(k)
		}
		nc = max(nc, k.channels)
	}
	for ch := 1; ch < nc; ch++ {
		c.workers[ch-1].start <- ks
	}
	err := c.runChannel(0, ks)
	for ch := 1; ch < nc; ch++ {
		err = errors.Join(err, <-c.workers[ch-1].done)
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

// logColl prints, per call, what NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL
// users look for: algorithm, protocol, channels and why.
func (c *Comm) logColl(k *coll) {
	if !c.log.Enabled(param.DebugInfo, param.SubsysColl) {
		return
	}
	chWhy := "default"
	if c.p.MinChannels > 0 {
		chWhy = "NCCL_MIN_NCHANNELS/NCCL_NCHANNELS"
	}
	algoWhy := "the default"
	if c.p.Algo.Set {
		algoWhy = fmt.Sprintf("NCCL_ALGO=%q", c.p.Algo.Raw)
	}
	extra := ""
	if k.algo.Explain != nil {
		extra = "; " + k.algo.Explain(&k.plan.args0)
	}
	c.log.Info(param.SubsysColl, "%s: %d bytes %s -> algo %s (%s) proto %s (%s) channels %d (%s), chunk %d elements%s",
		k.kind, k.nbytes, k.dt, k.algo.Algo, algoWhy, k.proto, c.protoWhy(k), k.channels, chWhy, k.plan.chunk, extra)
}
