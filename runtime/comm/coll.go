package comm

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/engine"
	"github.com/seed-760dd1f1/cc/runtime/param"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// Steps per chunk and per slice of each collective, NCCL's collectives.h;
// LL and LL128 use one step per chunk and slice (NCCL's calcCollChunking).
const (
	ringChunkSteps = engine.NSteps / 2 // Simple all-reduce, reduce-scatter, all-gather
	ringSliceSteps = engine.NSteps / 4
	pipeChunkSteps = 1 // broadcast, reduce, point-to-point, and every LL/LL128 transfer
	pipeSliceSteps = 1
)

// wireStep is the bytes of one FIFO slot of protocol p (its buffer / 8).
func (c *Comm) wireStep(p protocols.Proto) int {
	switch p {
	case protocols.LL:
		return c.p.LLBuffSize / engine.NSteps
	case protocols.LL128:
		return c.p.LL128BuffSize / engine.NSteps
	}
	return c.p.BuffSize / engine.NSteps
}

// payloadStep is the payload one FIFO slot of protocol p carries.
func (c *Comm) payloadStep(p protocols.Proto) int { return p.Payload(c.wireStep(p)) }

// Protocol thresholds until the tuner exists (seed 000's table): LL below
// 8 KiB, LL128 up to 1 MiB, Simple above.
const (
	llMaxBytes    = 8 << 10
	ll128MaxBytes = 1 << 20
)

// protoFor picks the protocol of a collective of nbytes: the size class's
// preference, then the others, skipping what NCCL_PROTO forbids.
func (c *Comm) protoFor(kind collKind, nbytes int64) (protocols.Proto, string) {
	order := []protocols.Proto{protocols.Simple, protocols.LL128, protocols.LL}
	why := "above 1 MiB"
	switch {
	case nbytes < llMaxBytes:
		order, why = []protocols.Proto{protocols.LL, protocols.LL128, protocols.Simple}, "below 8 KiB"
	case nbytes <= ll128MaxBytes:
		order, why = []protocols.Proto{protocols.LL128, protocols.Simple, protocols.LL}, "8 KiB to 1 MiB"
	}
	allowed := c.p.Proto.For(kind.fn())
	for i, p := range order {
		if allowed.Has(paramProto(p)) {
			if i > 0 {
				why += fmt.Sprintf(", NCCL_PROTO=%q", c.p.Proto.Raw)
			}
			return p, why
		}
	}
	return protocols.Simple, "unreachable: checkImplemented guarantees a protocol"
}

func paramProto(p protocols.Proto) param.Proto {
	switch p {
	case protocols.LL:
		return param.ProtoLL
	case protocols.LL128:
		return param.ProtoLL128
	}
	return param.ProtoSimple
}

// minChannelBytes is the least work per channel before the communicator
// spreads a collective over another channel (when the channel count is not
// forced with NCCL_MIN_NCHANNELS or NCCL_NCHANNELS).
const minChannelBytes = 512 << 10

// collKind is a collective function.
type collKind int

const (
	collAllReduce collKind = iota
	collReduceScatter
	collAllGather
	collBroadcast
	collReduce
)

var collNames = [...]string{"AllReduce", "ReduceScatter", "AllGather", "Broadcast", "Reduce"}

func (k collKind) String() string { return collNames[k] }

func (k collKind) fn() param.Func {
	switch k {
	case collAllReduce:
		return param.FuncAllReduce
	case collReduceScatter:
		return param.FuncReduceScatter
	case collAllGather:
		return param.FuncAllGather
	case collBroadcast:
		return param.FuncBroadcast
	}
	return param.FuncReduce
}

// coll is one validated collective call.
type coll struct {
	kind     collKind
	send     []byte
	recv     []byte
	count    int64 // elements: of the buffer, or of one rank's block (RS, AG)
	dt       reduce.DataType
	fn       *reduce.Func
	root     int
	inPlace  bool
	nbytes   int64 // bytes the collective is sized by (NCCL's nBytes)
	channels int
	proto    protocols.Proto
	why      string // why proto
}

// AllReduce reduces count elements of every rank's send buffer with op and
// leaves the result in every rank's recv buffer. send and recv may be the
// same memory (in place).
func (c *Comm) AllReduce(send, recv []byte, count int, dt reduce.DataType, op reduce.Op) error {
	return c.collective(collAllReduce, send, recv, count, dt, op, 0, count, count)
}

// ReduceScatter reduces the nranks blocks of recvCount elements in every
// rank's send buffer with op; rank r receives block r. In place means recv
// is send's block r.
func (c *Comm) ReduceScatter(send, recv []byte, recvCount int, dt reduce.DataType, op reduce.Op) error {
	return c.collective(collReduceScatter, send, recv, recvCount, dt, op, 0, c.nranks*recvCount, recvCount)
}

// AllGather gathers every rank's sendCount elements into every rank's recv
// buffer, rank r's at block r. In place means send is recv's block r.
func (c *Comm) AllGather(send, recv []byte, sendCount int, dt reduce.DataType) error {
	return c.collective(collAllGather, send, recv, sendCount, dt, noOp, 0, sendCount, c.nranks*sendCount)
}

// Broadcast copies count elements of root's send buffer into every rank's
// recv buffer. Only root's send buffer is read.
func (c *Comm) Broadcast(send, recv []byte, count int, dt reduce.DataType, root int) error {
	sendCount := 0
	if c.rank == root {
		sendCount = count
	}
	return c.collective(collBroadcast, send, recv, count, dt, noOp, root, sendCount, count)
}

// Reduce reduces count elements of every rank's send buffer with op into
// root's recv buffer. Only root's recv buffer is written.
func (c *Comm) Reduce(send, recv []byte, count int, dt reduce.DataType, op reduce.Op, root int) error {
	recvCount := 0
	if c.rank == root {
		recvCount = count
	}
	return c.collective(collReduce, send, recv, count, dt, op, root, count, recvCount)
}

// noOp marks collectives that do not reduce.
const noOp = reduce.Op(255)

// collective validates a call, then runs it now or queues it in the group.
func (c *Comm) collective(kind collKind, send, recv []byte, count int, dt reduce.DataType, op reduce.Op, root, sendCount, recvCount int) error {
	k, err := c.validate(kind, send, recv, count, dt, op, root, sendCount, recvCount)
	if err != nil {
		return fmt.Errorf("rank %d: %s: %w", c.rank, kind, err)
	}
	if c.group.depth > 0 {
		c.group.colls = append(c.group.colls, k)
		return nil
	}
	return c.runColls([]*coll{k})
}

func (c *Comm) validate(kind collKind, send, recv []byte, count int, dt reduce.DataType, op reduce.Op, root, sendCount, recvCount int) (*coll, error) {
	if err := c.Err(); err != nil {
		return nil, err
	}
	if !dt.Valid() {
		return nil, fmt.Errorf("datatype %d is not valid (allowed: %s)", dt, dataTypeNames())
	}
	if count < 0 {
		return nil, fmt.Errorf("count %d is negative", count)
	}
	if root < 0 || root >= c.nranks {
		return nil, fmt.Errorf("root %d is out of range (allowed: 0..%d)", root, c.nranks-1)
	}
	esize := int64(dt.Size())
	for _, n := range []int{sendCount, recvCount} {
		if int64(n) > math.MaxInt64/esize/int64(c.nranks) {
			return nil, fmt.Errorf("count %d of %s overflows the addressable size", count, dt)
		}
	}
	if err := checkBuf("sendbuff", send, sendCount, dt); err != nil {
		return nil, err
	}
	if err := checkBuf("recvbuff", recv, recvCount, dt); err != nil {
		return nil, err
	}
	k := &coll{kind: kind, send: send, recv: recv, count: int64(count), dt: dt, root: root}
	if op != noOp {
		fn, err := c.reduceFunc(dt, op)
		if err != nil {
			return nil, err
		}
		k.fn = fn
	}
	k.nbytes = int64(max(sendCount, recvCount)) * esize
	k.inPlace = c.inPlace(k, sendCount, recvCount)
	if !k.inPlace && overlaps(send[:int64(sendCount)*esize], recv[:int64(recvCount)*esize]) {
		return nil, errors.New("sendbuff and recvbuff overlap but are not in place (for AllGather send must be recv's block rank, for ReduceScatter recv must be send's block rank)")
	}
	k.channels = c.channelsFor(k.nbytes)
	k.proto, k.why = c.protoFor(kind, k.nbytes)
	return k, nil
}

func checkBuf(name string, b []byte, count int, dt reduce.DataType) error {
	need := int64(count) * int64(dt.Size())
	if int64(len(b)) < need {
		if b == nil {
			return fmt.Errorf("%s is nil, need %d bytes (%d x %s)", name, need, count, dt)
		}
		return fmt.Errorf("%s has %d bytes, need %d (%d x %s)", name, len(b), need, count, dt)
	}
	return nil
}

// inPlace reports whether the call is in place in NCCL's sense.
func (c *Comm) inPlace(k *coll, sendCount, recvCount int) bool {
	if sendCount == 0 || recvCount == 0 {
		return false
	}
	esize := int64(k.dt.Size())
	s, r := addr(k.send), addr(k.recv)
	switch k.kind {
	case collAllGather:
		return s == r+uintptr(int64(c.rank)*k.count*esize)
	case collReduceScatter:
		return r == s+uintptr(int64(c.rank)*k.count*esize)
	}
	return s == r
}

func addr(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

func overlaps(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0, b0 := addr(a), addr(b)
	return a0 < b0+uintptr(len(b)) && b0 < a0+uintptr(len(a))
}

func dataTypeNames() string {
	s := ""
	for i, t := range reduce.DataTypes() {
		if i > 0 {
			s += ", "
		}
		s += t.String()
	}
	return s
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

// tasks builds the per-channel engine tasks of one collective.
func (c *Comm) tasks(k *coll) []*engine.Task {
	esize := int64(k.dt.Size())
	chunkSteps, sliceSteps := ringChunkSteps, ringSliceSteps
	if k.kind == collBroadcast || k.kind == collReduce || k.proto != protocols.Simple {
		chunkSteps, sliceSteps = pipeChunkSteps, pipeSliceSteps
	}
	step := c.payloadStep(k.proto)
	align := max(1, 16/esize)
	chunk := int64(step*chunkSteps) / esize / align * align
	ts := make([]*engine.Task, k.channels)
	for ch := range ts {
		off, n := partition(k.count, k.channels, align, ch)
		p := algos.Part{Offset: off, Count: n, Chunk: chunk, Align: align}
		var ops []algos.Op
		switch k.kind {
		case collAllReduce:
			ops = algos.RingAllReduce(c.rank, c.nranks, p)
		case collReduceScatter:
			ops = algos.RingReduceScatter(c.rank, c.nranks, k.count, p)
		case collAllGather:
			ops = algos.RingAllGather(c.rank, c.nranks, k.count, p)
		case collBroadcast:
			ops = algos.RingBroadcast(c.rank, c.nranks, k.root, p)
		case collReduce:
			ops = algos.RingReduce(c.rank, c.nranks, k.root, p)
		}
		ts[ch] = &engine.Task{Ops: ops, In: k.send, Out: k.recv, Type: k.dt, Fn: k.fn,
			StepBytes: step, ChunkSteps: chunkSteps, SliceSteps: sliceSteps,
			Stable: !k.inPlace} // ring schedules write each output element once
	}
	return ts
}

// partition is channel ch's contiguous share of count elements split over
// nc channels, each share a multiple of align elements (NCCL's grain).
func partition(count int64, nc int, align int64, ch int) (off, n int64) {
	per := (count + int64(nc) - 1) / int64(nc)
	per = (per + align - 1) / align * align
	off = min(per*int64(ch), count)
	return off, min(per, count-off)
}

// runColls runs collectives in order, each channel's share on its own
// goroutine (channel 0 on the caller's).
func (c *Comm) runColls(ks []*coll) error {
	if len(ks) == 0 {
		return nil
	}
	type job struct {
		t *engine.Task
		p protocols.Proto
	}
	nc := 0
	perChannel := make([][]job, c.nchannels)
	for _, k := range ks {
		c.logColl(k)
		for ch, t := range c.tasks(k) {
			perChannel[ch] = append(perChannel[ch], job{t, k.proto})
		}
		nc = max(nc, k.channels)
	}
	errs := make([]error, nc)
	done := make(chan struct{}, nc)
	run := func(ch int) {
		for _, j := range perChannel[ch] {
			if err := engine.Run(j.t, c.channels[ch].with(j.p)); err != nil {
				errs[ch] = err
				c.fail(fmt.Errorf("rank %d: %s: %w", c.rank, c.channels[ch].name(), err))
				break
			}
		}
		done <- struct{}{}
	}
	for ch := 1; ch < nc; ch++ {
		ch := ch
		c.workers[ch-1].jobs <- func() { run(ch) }
	}
	run(0)
	for i := 0; i < nc; i++ {
		<-done
	}
	if errors.Join(errs...) != nil || c.Err() != nil {
		return fmt.Errorf("rank %d: %s: %w", c.rank, ks[0].kind, c.failure())
	}
	return nil
}

// logColl prints, once per collective and size class, what NCCL_DEBUG=INFO
// users look for: algorithm, protocol, channels and why.
func (c *Comm) logColl(k *coll) {
	if !c.log.Enabled(param.DebugInfo, param.SubsysColl) {
		return
	}
	why := "default"
	if c.p.MinChannels > 0 {
		why = "NCCL_MIN_NCHANNELS/NCCL_NCHANNELS"
	}
	c.log.Info(param.SubsysColl, "%s: %d bytes %s -> algo Ring proto %s (%s) channels %d (%s; ring is the only algorithm implemented)",
		k.kind, k.nbytes, k.dt, k.proto, k.why, k.channels, why)
}
