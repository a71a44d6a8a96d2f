package comm

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/engine"
	"github.com/seed-760dd1f1/cc/runtime/param"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// groupState queues the calls made between GroupStart and GroupEnd.
type groupState struct {
	depth int
	colls []*coll
	p2ps  []p2p
}

// p2p is one queued Send or Recv.
type p2p struct {
	send  bool
	peer  int
	buf   []byte
	count int64
	dt    reduce.DataType
}

// GroupStart begins a group: later calls are queued until the matching
// GroupEnd. Groups nest; only the outermost GroupEnd runs the calls.
func (c *Comm) GroupStart() { c.group.depth++ }

// GroupEnd ends a group and, at the outermost level, runs its calls:
// collectives batched in call order, then the point-to-point transfers, all
// peers concurrently. It returns the first error.
func (c *Comm) GroupEnd() error {
	if c.group.depth == 0 {
		return fmt.Errorf("rank %d: GroupEnd without GroupStart", c.rank)
	}
	c.group.depth--
	if c.group.depth > 0 {
		return nil
	}
	colls, p2ps := c.group.colls, c.group.p2ps
	c.group.colls, c.group.p2ps = nil, nil
	if err := c.runColls(colls); err != nil {
		return err
	}
	return c.runP2P(p2ps)
}

// Send sends count elements of buf to peer, which must post a matching
// Recv. Inside a group it is queued.
func (c *Comm) Send(buf []byte, count int, dt reduce.DataType, peer int) error {
	return c.queueP2P(p2p{send: true, peer: peer, buf: buf, count: int64(count), dt: dt})
}

// Recv receives count elements from peer into buf. Inside a group it is
// queued.
func (c *Comm) Recv(buf []byte, count int, dt reduce.DataType, peer int) error {
	return c.queueP2P(p2p{peer: peer, buf: buf, count: int64(count), dt: dt})
}

// AllToAll sends block p (count elements) of send to rank p and receives
// rank p's block into block p of recv, for every rank p.
func (c *Comm) AllToAll(send, recv []byte, count int, dt reduce.DataType) error {
	name := "AllToAll"
	if !dt.Valid() {
		return fmt.Errorf("rank %d: %s: datatype %d is not valid (allowed: %s)", c.rank, name, dt, dataTypeNames())
	}
	if count < 0 || int64(count) > math.MaxInt64/int64(dt.Size())/int64(c.nranks) {
		return fmt.Errorf("rank %d: %s: count %d is out of range", c.rank, name, count)
	}
	total := c.nranks * count
	if err := checkBuf("sendbuff", send, total, dt); err != nil {
		return fmt.Errorf("rank %d: %s: %w", c.rank, name, err)
	}
	if err := checkBuf("recvbuff", recv, total, dt); err != nil {
		return fmt.Errorf("rank %d: %s: %w", c.rank, name, err)
	}
	if count > 0 && overlaps(send[:total*dt.Size()], recv[:total*dt.Size()]) {
		return fmt.Errorf("rank %d: %s: sendbuff and recvbuff overlap (AllToAll has no in-place form)", c.rank, name)
	}
	block := count * dt.Size()
	c.GroupStart()
	for p := 0; p < c.nranks; p++ {
		c.group.p2ps = append(c.group.p2ps,
			p2p{send: true, peer: p, buf: send[p*block : (p+1)*block], count: int64(count), dt: dt},
			p2p{peer: p, buf: recv[p*block : (p+1)*block], count: int64(count), dt: dt})
	}
	return c.GroupEnd()
}

func (c *Comm) queueP2P(op p2p) error {
	name := "Recv"
	if op.send {
		name = "Send"
	}
	if err := c.Err(); err != nil {
		return fmt.Errorf("rank %d: %s: %w", c.rank, name, err)
	}
	if !op.dt.Valid() {
		return fmt.Errorf("rank %d: %s: datatype %d is not valid (allowed: %s)", c.rank, name, op.dt, dataTypeNames())
	}
	if op.peer < 0 || op.peer >= c.nranks {
		return fmt.Errorf("rank %d: %s: peer %d is out of range (allowed: 0..%d)", c.rank, name, op.peer, c.nranks-1)
	}
	if op.count < 0 || op.count > math.MaxInt64/int64(op.dt.Size()) {
		return fmt.Errorf("rank %d: %s: count %d is out of range", c.rank, name, op.count)
	}
	if err := checkBuf("buff", op.buf, int(op.count), op.dt); err != nil {
		return fmt.Errorf("rank %d: %s: %w", c.rank, name, err)
	}
	if c.group.depth > 0 {
		c.group.p2ps = append(c.group.p2ps, op)
		return nil
	}
	return c.runP2P([]p2p{op})
}

// runP2P runs point-to-point transfers: to and from self by copying (in
// posting order), every other (peer, direction) on its own goroutine, in
// posting order per peer and direction.
func (c *Comm) runP2P(ops []p2p) error {
	if len(ops) == 0 {
		return nil
	}
	var selfSend, selfRecv []p2p
	lanes := map[[2]int][]p2p{}
	var order [][2]int
	for _, op := range ops {
		if op.peer == c.rank {
			if op.send {
				selfSend = append(selfSend, op)
			} else {
				selfRecv = append(selfRecv, op)
			}
			continue
		}
		dir := 0
		if op.send {
			dir = 1
		}
		k := [2]int{op.peer, dir}
		if lanes[k] == nil {
			order = append(order, k)
		}
		lanes[k] = append(lanes[k], op)
		if c.log.Enabled(param.DebugInfo, param.SubsysP2P) {
			c.log.Info(param.SubsysP2P, "%s %d bytes %s peer %d", map[bool]string{true: "Send", false: "Recv"}[op.send], op.count*int64(op.dt.Size()), op.dt, op.peer)
		}
	}
	if len(selfSend) != len(selfRecv) {
		return fmt.Errorf("rank %d: %d sends to self but %d receives from self in the group", c.rank, len(selfSend), len(selfRecv))
	}
	for i := range selfSend {
		s, r := selfSend[i], selfRecv[i]
		if s.count*int64(s.dt.Size()) != r.count*int64(r.dt.Size()) {
			return fmt.Errorf("rank %d: send to self of %d bytes matched with a receive of %d bytes", c.rank, s.count*int64(s.dt.Size()), r.count*int64(r.dt.Size()))
		}
		copy(r.buf[:r.count*int64(r.dt.Size())], s.buf)
	}
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	for i, k := range order {
		wg.Add(1)
		go func(i int, lane []p2p) {
			defer wg.Done()
			for _, op := range lane {
				t, p := c.p2pTask(op)
				if err := engine.Run(t, c.p2p.with(p)); err != nil {
					errs[i] = err
					c.fail(fmt.Errorf("rank %d: p2p: %w", c.rank, err))
					return
				}
			}
		}(i, lanes[k])
	}
	wg.Wait()
	if errors.Join(errs...) != nil || c.Err() != nil {
		return fmt.Errorf("rank %d: p2p: %w", c.rank, c.failure())
	}
	return nil
}

// p2pTask is one Send or Recv as an engine task. Point-to-point always
// uses Simple: if each side chose by its own byte count (NCCL's
// NCCL_P2P_LL_THRESHOLD), a Send and Recv of different sizes would wait on
// different connections and hang instead of failing with a size error.
func (c *Comm) p2pTask(op p2p) (*engine.Task, protocols.Proto) {
	p := protocols.Simple
	o := algos.Op{RecvFrom: algos.NoPeer, SendTo: algos.NoPeer, Count: op.count}
	t := &engine.Task{Type: op.dt, StepPayload: c.payloadStep(p), ChunkSteps: 1, SliceSteps: 1, Stable: true}
	if op.send {
		o.SendTo, o.Src = op.peer, algos.Input
		t.In = op.buf
	} else {
		o.RecvFrom, o.Dst = op.peer, algos.Output
		t.Out = op.buf
	}
	t.Sched = algos.Single([]algos.Op{o})
	return t, p
}

// firstCustomOp is the first op id CreatePreMulSum hands out, like NCCL's
// ncclNumOps.
const firstCustomOp = reduce.Op(64)

type preMulSum struct {
	scalar float64
	dt     reduce.DataType
}

// CreatePreMulSum returns a reduction op that multiplies each rank's input
// by scalar before summing (NCCL's ncclRedOpCreatePreMulSum). The op is
// valid on this communicator with data type dt.
func (c *Comm) CreatePreMulSum(scalar float64, dt reduce.DataType) (reduce.Op, error) {
	if !dt.Valid() {
		return 0, fmt.Errorf("rank %d: CreatePreMulSum: datatype %d is not valid (allowed: %s)", c.rank, dt, dataTypeNames())
	}
	if c.nextOp == math.MaxUint8 {
		return 0, fmt.Errorf("rank %d: CreatePreMulSum: too many custom ops (destroy some with DestroyOp)", c.rank)
	}
	op := c.nextOp
	c.nextOp++
	c.customOp[op] = preMulSum{scalar: scalar, dt: dt}
	return op, nil
}

// DestroyOp releases an op made by CreatePreMulSum.
func (c *Comm) DestroyOp(op reduce.Op) error {
	if _, ok := c.customOp[op]; !ok {
		return fmt.Errorf("rank %d: DestroyOp: op %d was not created by CreatePreMulSum", c.rank, op)
	}
	delete(c.customOp, op)
	return nil
}

// reduceFunc binds op to dt for this communicator.
func (c *Comm) reduceFunc(dt reduce.DataType, op reduce.Op) (*reduce.Func, error) {
	if op >= firstCustomOp {
		pm, ok := c.customOp[op]
		if !ok {
			return nil, fmt.Errorf("op %d is neither built in (%s) nor made by CreatePreMulSum", op, opNames())
		}
		if pm.dt != dt {
			return nil, fmt.Errorf("op %d was created for %s, used with %s", op, pm.dt, dt)
		}
		return reduce.NewFunc(dt, reduce.PreMulSum, c.nranks, pm.scalar)
	}
	if op == reduce.PreMulSum {
		return nil, errors.New("premulsum needs a scalar: make the op with CreatePreMulSum")
	}
	if !op.Valid() {
		return nil, fmt.Errorf("op %d is not valid (allowed: %s, or an op from CreatePreMulSum)", op, opNames())
	}
	return reduce.NewFunc(dt, op, c.nranks, 0)
}

func opNames() string {
	s := ""
	for _, o := range reduce.Ops() {
		if o == reduce.PreMulSum {
			continue
		}
		if s != "" {
			s += ", "
		}
		s += o.String()
	}
	return s
}

// channelCount is the number of channels a communicator opens: one per
// two cores (a busy channel keeps a socket reader, a writer and the reducing
// goroutine running), between 1 and 4, unless NCCL_MIN_NCHANNELS,
// NCCL_MAX_NCHANNELS or NCCL_NCHANNELS say otherwise.
func channelCount(p *param.Params, cores int) int {
	n := max(1, min(4, cores/2))
	if p.MaxChannels > 0 {
		n = min(n, p.MaxChannels)
	}
	if p.MinChannels > 0 {
		n = max(n, p.MinChannels)
	}
	return n
}
