package bench

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// MaxBytesFor is the largest -e (Options.MaxBytes) whose buffers
// (BufferBytes) fit in budget bytes, or -1 when not even -e 0 fits. For
// example all_reduce with -c 1 holds 3 bytes per byte of -e plus a 64 KiB
// scratch buffer: a 3 GiB + 64 KiB budget fits -e 1G.
func MaxBytesFor(o Options, budget int64) int64 {
	o.MaxBytes = 0
	fixed := BufferBytes(o)
	o.MaxBytes = 1
	perByte := BufferBytes(o) - fixed
	if budget < fixed {
		return -1
	}
	return (budget - fixed) / perByte
}

// AgreeMaxBytes returns the largest -e, at most o.MaxBytes, whose buffers
// every rank of the job can hold, so that every rank sweeps the same sizes:
// each rank of this process (comms) may use budget bytes, and the ranks of
// the other processes bring their own budgets. It is nccl-tests' reduction
// of maxBytes to what the smallest GPU of the job holds (common.cu, after
// the device report). Every rank of the job must call it: it is one
// all-reduce. The result is never below 0.
func AgreeMaxBytes(ctx context.Context, comms []Communicator, o Options, budget int64) (int64, error) {
	if len(comms) == 0 {
		return 0, fmt.Errorf("bench: no communicators")
	}
	fit := min(o.MaxBytes, max(MaxBytesFor(o, budget), 0))
	agreed := make([]int64, len(comms))
	err := onEveryRank(ctx, comms, func(_ context.Context, i int) error {
		b := binary.LittleEndian.AppendUint64(nil, uint64(fit))
		if err := comms[i].Control().AllReduce(b, b, 1, reduce.Int64, reduce.Min); err != nil {
			return fmt.Errorf("rank %d: agree on -e: %w", comms[i].Rank(), err)
		}
		agreed[i] = int64(binary.LittleEndian.Uint64(b))
		return nil
	})
	if err != nil {
		return 0, err
	}
	return agreed[0], nil
}
