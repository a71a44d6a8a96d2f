package bench

import (
	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
	"github.com/seed-760dd1f1/cc/runtime/tune"
)

// Communicator is what bench needs from one rank's communicator; the
// runtime's *comm.Comm satisfies it. Methods are called from one goroutine
// per Communicator, except Abort, which may be called from any goroutine.
//
// The collectives measured run on the Communicator; its Rank and NRanks
// are the rank's place in it (the data, counts and bus factor depend on
// them). Control may span more ranks: the whole job when the job is split
// into groups that each measure on their own communicator (NCCL_TESTS_SPLIT),
// as nccl-tests times and counts over MPI_COMM_WORLD. Abort must then reach
// both.
type Communicator interface {
	Rank() int
	NRanks() int
	AllReduce(send, recv []byte, count int, dt reduce.DataType, op reduce.Op) error
	ReduceScatter(send, recv []byte, recvCount int, dt reduce.DataType, op reduce.Op) error
	AllGather(send, recv []byte, sendCount int, dt reduce.DataType) error
	Broadcast(send, recv []byte, count int, dt reduce.DataType, root int) error
	Reduce(send, recv []byte, count int, dt reduce.DataType, op reduce.Op, root int) error
	AllToAll(send, recv []byte, count int, dt reduce.DataType) error
	Send(buf []byte, count int, dt reduce.DataType, peer int) error
	Recv(buf []byte, count int, dt reduce.DataType, peer int) error
	GroupStart()
	GroupEnd() error
	CreatePreMulSum(scalar float64, dt reduce.DataType) (reduce.Op, error)
	Abort(cause error)
	// Control returns the collectives bench uses for its own bookkeeping
	// (barriers, timing reductions, the device list). They must work
	// whatever NCCL_ALGO and NCCL_PROTO allow for the measured collective,
	// as nccl-tests' MPI calls beside NCCL do.
	Control() Control
}

// Control is what bench needs for its bookkeeping, over every rank of the
// job: Rank and NRanks are the rank's place in the job (global rank 0
// reports).
type Control interface {
	Rank() int
	NRanks() int
	AllReduce(send, recv []byte, count int, dt reduce.DataType, op reduce.Op) error
	AllGather(send, recv []byte, sendCount int, dt reduce.DataType) error
	Broadcast(send, recv []byte, count int, dt reduce.DataType, root int) error
}

// Tuned is what a communicator whose collectives the runtime's tuner
// decides tells and lets a caller force (runtime/comm, plan.go); *comm.Comm
// implements it. The -A columns need Ran; [Tune] needs all of it. Every
// method is called from the rank's own goroutine.
type Tuned interface {
	// Ran says how the last collective call (not a Control call) ran and
	// the model's prediction for it in µs.
	Ran() (algo algos.Algo, proto protocols.Proto, channels int, predicted float64)
	// Force makes the following collective calls run with a, p and ch
	// channels (0: the communicator's choice); every rank forces the same.
	Force(a algos.Algo, p protocols.Proto, ch int) error
	// ForceNone gives the choice back to the tuner.
	ForceNone()
	// Entries lists the (algorithm, protocol) pairs kind may run with, in
	// NCCL's order.
	Entries(kind algos.Coll) []tune.Choice
}
