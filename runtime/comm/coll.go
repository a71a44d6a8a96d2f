package comm

import (
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/engine"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
	"github.com/seed-760dd1f1/cc/runtime/tune"
)

// payloadStep is the payload one FIFO slot of protocol p carries.
func (c *Comm) payloadStep(p protocols.Proto) int {
	return p.Payload(c.buffSize[p] / protocols.NSteps)
}

// setBuffSizes fixes the communicator's FIFO sizes once the topology is
// known: the variables' values where set, else the protocol's default,
// which for LL128 depends on whether the ranks talk TCP and every machine
// has a core per rank (protocols.LL128NetBuffSize). Every rank computes
// the same: the settings agree, the topology is the job's and allRoomy
// is agreed.
func (c *Comm) setBuffSizes() {
	tcp := c.overTCP()
	for p := range protocols.Proto(protocols.NumProtos) {
		c.buffSize[p] = c.p.BuffSizeFor(p)
		if !c.p.IsSet(buffSizeVar[p]) {
			c.buffSize[p] = p.DefaultBuffSizeFor(tcp, c.allRoomy)
		}
	}
}

// overTCP reports whether some of the communicator's ranks talk TCP: it
// spans hosts, or NCCL_SHM_DISABLE=1.
func (c *Comm) overTCP() bool { return c.topo.NHosts() > 1 || c.p.SHMDisable }

// buffSizeVar names each protocol's FIFO size variable.
var buffSizeVar = [protocols.NumProtos]string{protocols.Simple: "NCCL_BUFFSIZE", protocols.LL: "NCCL_LL_BUFFSIZE", protocols.LL128: "NCCL_LL128_BUFFSIZE"}

// coll is one validated collective call.
type coll struct {
	kind     algos.Coll
	send     []byte
	recv     []byte
	count    int64 // elements: of the buffer, or of one rank's block (RS, AG)
	dt       reduce.DataType
	fn       *reduce.Func
	root     int
	inPlace  bool
	nbytes   int64 // bytes the collective is sized by (NCCL's nBytes)
	channels int
	algo     *algos.Algorithm // the table row that runs it
	proto    protocols.Proto
	best     tune.Choice // the tuner's prediction for algo/proto
	next     tune.Choice // and its runner-up (Time -1: none)
	plan     *plan
	prog     *engine.FlatProgram // the flat program it ran (Comm.runFlat), which a repeat runs again
	control  bool                // a Control call: ring, any protocol, not logged

	collnetSeq uint64 // the communicator's CollNet collectives up to this one

	nvlsSeq uint64   // the communicator's NVLS calls up to this one (on a host with local peers)
	direct  bool     // every local rank's send buffer is registered: NVLS reads them in place
	peerIn  [][]byte // by rank: the local peers' Input, mapped (direct only)
}

// AllReduce reduces count elements of every rank's send buffer with op and
// leaves the result in every rank's recv buffer. send and recv may be the
// same memory (in place).
func (c *Comm) AllReduce(send, recv []byte, count int, dt reduce.DataType, op reduce.Op) error {
	return c.call(false, algos.AllReduce, send, recv, count, dt, op, 0)
}

// ReduceScatter reduces the nranks blocks of recvCount elements in every
// rank's send buffer with op; rank r receives block r. In place means recv
// is send's block r.
func (c *Comm) ReduceScatter(send, recv []byte, recvCount int, dt reduce.DataType, op reduce.Op) error {
	return c.call(false, algos.ReduceScatter, send, recv, recvCount, dt, op, 0)
}

// AllGather gathers every rank's sendCount elements into every rank's recv
// buffer, rank r's at block r. In place means send is recv's block r.
func (c *Comm) AllGather(send, recv []byte, sendCount int, dt reduce.DataType) error {
	return c.call(false, algos.AllGather, send, recv, sendCount, dt, noOp, 0)
}

// Broadcast copies count elements of root's send buffer into every rank's
// recv buffer. Only root's send buffer is read.
func (c *Comm) Broadcast(send, recv []byte, count int, dt reduce.DataType, root int) error {
	return c.call(false, algos.Broadcast, send, recv, count, dt, noOp, root)
}

// Reduce reduces count elements of every rank's send buffer with op into
// root's recv buffer. Only root's recv buffer is written.
func (c *Comm) Reduce(send, recv []byte, count int, dt reduce.DataType, op reduce.Op, root int) error {
	return c.call(false, algos.Reduce, send, recv, count, dt, op, root)
}

// Control is a communicator's view for a program's own coordination
// (cc-perf's barriers, timing reductions and device list), as nccl-tests
// uses MPI beside the library it measures: its collectives always run
// algos.Fallback with the size's default protocol, whatever NCCL_ALGO and NCCL_PROTO
// allow for the measured ones, and NCCL_DEBUG=INFO does not list them
// under COLL. It shares the communicator's connections and failure.
type Control struct{ c *Comm }

// Control returns the communicator's control view.
func (c *Comm) Control() Control { return Control{c} }

// Rank is the communicator's rank.
func (x Control) Rank() int { return x.c.rank }

// NRanks is the communicator's rank count.
func (x Control) NRanks() int { return x.c.nranks }

// AllReduce is Comm.AllReduce on the control path.
func (x Control) AllReduce(send, recv []byte, count int, dt reduce.DataType, op reduce.Op) error {
	return x.c.call(true, algos.AllReduce, send, recv, count, dt, op, 0)
}

// AllGather is Comm.AllGather on the control path.
func (x Control) AllGather(send, recv []byte, sendCount int, dt reduce.DataType) error {
	return x.c.call(true, algos.AllGather, send, recv, sendCount, dt, noOp, 0)
}

// Broadcast is Comm.Broadcast on the control path.
func (x Control) Broadcast(send, recv []byte, count int, dt reduce.DataType, root int) error {
	return x.c.call(true, algos.Broadcast, send, recv, count, dt, noOp, root)
}

// noOp marks collectives that do not reduce.
const noOp = reduce.Op(255)

// counts returns how many elements a call of kind with NCCL's count
// argument reads from this rank's send buffer and writes to its recv
// buffer.
func (c *Comm) counts(kind algos.Coll, count, root int) (sendCount, recvCount int) {
	switch kind {
	case algos.ReduceScatter:
		return c.nranks * count, count
	case algos.AllGather:
		return count, c.nranks * count
	case algos.Broadcast:
		if c.rank != root {
			return 0, count // only root's send buffer is read
		}
	case algos.Reduce:
		if c.rank != root {
			return count, 0 // only root's recv buffer is written
		}
	}
	return count, count
}

// call validates a collective (control: on the Control path), then runs it
// now or queues it in the group.
func (c *Comm) call(control bool, kind algos.Coll, send, recv []byte, count int, dt reduce.DataType, op reduce.Op, root int) error {
	if !control && c.flat.againOK && c.group.depth == 0 && c.flat.again.is(kind, count, root, dt, op, c.forced) {
		if ok, err := c.repeat(send, recv); ok {
			return err
		}
	}
	return c.callFull(control, kind, send, recv, count, dt, op, root)
}

// callFull is call's way for a call that is not a repeat (Comm.repeat):
// apart, so that a repeated call's frame stays small (building callArgs
// in call's frame cost a repeated 8 B all-reduce a stalled store forward,
// half of call's samples in its profile).
func (c *Comm) callFull(control bool, kind algos.Coll, send, recv []byte, count int, dt reduce.DataType, op reduce.Op, root int) error {
	a := callArgs{kind: kind, count: count, root: root, dt: dt, op: op, forced: c.forced}
	c.flat.againOK = false
	k := &c.cur // a call outside a group allocates nothing
	if c.group.depth > 0 {
		k = new(coll)
	}
	sendCount, recvCount := c.counts(kind, count, root)
	if err := c.validate(k, control, kind, send, recv, count, dt, op, root, sendCount, recvCount); err != nil {
		return fmt.Errorf("rank %d: %s: %w", c.rank, kind, err)
	}
	if c.group.depth > 0 {
		c.group.colls = append(c.group.colls, k)
		return nil
	}
	c.curs[0] = k
	err := c.runColls(c.curs[:])
	if err == nil && !control {
		c.remember(&a, k)
	}
	return err
}

// validate checks a call and describes it in k.
func (c *Comm) validate(k *coll, control bool, kind algos.Coll, send, recv []byte, count int, dt reduce.DataType, op reduce.Op, root, sendCount, recvCount int) error {
	if err := c.Err(); err != nil {
		return err
	}
	if !dt.Valid() {
		return fmt.Errorf("datatype %d is not valid (allowed: %s)", dt, dataTypeNames())
	}
	if count < 0 {
		return fmt.Errorf("count %d is negative", count)
	}
	if root < 0 || root >= c.nranks {
		return fmt.Errorf("root %d is out of range (allowed: 0..%d)", root, c.nranks-1)
	}
	esize := int64(dt.Size())
	for _, n := range []int{sendCount, recvCount} {
		if int64(n) > math.MaxInt64/esize/int64(c.nranks) {
			return fmt.Errorf("count %d of %s overflows the addressable size", count, dt)
		}
	}
	if err := checkBuf("sendbuff", send, sendCount, dt); err != nil {
		return err
	}
	if err := checkBuf("recvbuff", recv, recvCount, dt); err != nil {
		return err
	}
	*k = coll{kind: kind, send: send, recv: recv, count: int64(count), dt: dt, root: root, control: control}
	if op != noOp {
		fn, err := c.reduceFunc(dt, op)
		if err != nil {
			return err
		}
		k.fn = fn
	}
	k.nbytes = int64(max(sendCount, recvCount)) * esize
	k.inPlace = c.inPlace(k, sendCount, recvCount)
	if !k.inPlace && overlaps(send[:int64(sendCount)*esize], recv[:int64(recvCount)*esize]) {
		return errors.New("sendbuff and recvbuff overlap but are not in place (for AllGather send must be recv's block rank, for ReduceScatter recv must be send's block rank)")
	}
	return c.choose(k)
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

// inPlace reports whether the call is in place in NCCL's sense: neither
// side empty, and send where inPlaceAt puts it.
func (c *Comm) inPlace(k *coll, sendCount, recvCount int) bool {
	return sendCount > 0 && recvCount > 0 && addr(k.send) == addr(k.recv)+c.inPlaceAt(k)
}

// inPlaceAt is where an in-place call's send buffer starts, relative to
// its recv buffer (mod 2^64): at recv's block of this rank for
// AllGather, this rank's block before recv for ReduceScatter (recv is
// send's block), the same address otherwise.
func (c *Comm) inPlaceAt(k *coll) uintptr {
	block := uintptr(int64(c.rank) * k.count * int64(k.dt.Size()))
	switch k.kind {
	case algos.AllGather:
		return block
	case algos.ReduceScatter:
		return -block
	}
	return 0
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
