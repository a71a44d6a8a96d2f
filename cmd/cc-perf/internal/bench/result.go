package bench

import (
	"fmt"
	"time"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
)

// Result is one row of the nccl-tests table: one message size of one
// (data type, op, root) combination, measured out of place and in place.
type Result struct {
	Bytes int64  // printed size: max(send, recv) bytes of one rank
	Count int64  // the count argument of the call (per peer for alltoall)
	Type  string // data type name (int8 ... f8e5m2)
	RedOp string // printed op column: sum ... mulsum, "none", or "" (hypercube)
	Root  int    // root rank, -1 for collectives without one

	OutOfPlace, InPlace Half

	Iters int       // timed iterations behind each half (-n)
	Cycle int       // the sweep (-N) the row belongs to, from 0 for each type, op and root
	Time  time.Time // when the row finished, for -S

	// Volumes is what every rank sent and received: alltoallv only, nil
	// otherwise.
	Volumes *Volumes
}

// Half is one measurement of a row: out of place or in place.
type Half struct {
	TimeUS  float64    // time per operation in microseconds, combined over ranks per -a
	AlgBW   float64    // algorithm bandwidth, GB/s (1e9 bytes per second)
	BusBW   float64    // bus bandwidth, GB/s: AlgBW x the collective's factor
	Checked bool       // the data was checked; false prints N/A
	Wrong   int64      // wrong elements summed over every rank (when Checked)
	Iter    *IterStats // per-iteration statistics (-I), else nil
	// Ran is how the runtime ran the timed calls (-A), as rank 0's
	// communicator reports it; nil without -A and for collectives made of
	// point-to-point calls, whose algorithm nothing chooses.
	Ran *Ran
}

// Ran is how the runtime ran a collective call: its algorithm, protocol
// and channel count (Tuned.Ran).
type Ran struct {
	Algo     algos.Algo
	Proto    protocols.Proto
	Channels int
}

// String is "algo/proto/channels", e.g. "Ring/LL128/1".
func (r Ran) String() string { return fmt.Sprintf("%s/%s/%d", r.Algo, r.Proto, r.Channels) }

// IterStats summarises the per-iteration times of one half (-I). Each
// iteration's time is the slowest rank's; statistics skip the first Skipped.
type IterStats struct {
	Skipped                             int
	Min, Max, Avg, P50, P95, P99, Stdev float64   // microseconds
	CVPct                               float64   // Stdev / Avg x 100
	TimesUS                             []float64 // every iteration, microseconds
}

// Device describes one rank for the "# Using devices" listing. On CPUs the
// "device" is the rank's index on its host (nccl-tests' cudaDev), the PCI
// bus id is replaced by the CPUs the rank may run on, and the device name by
// the CPU model.
type Device struct {
	Rank   int    `json:"rank"`
	Group  int    `json:"group"`
	Pid    int    `json:"pid"`
	Host   string `json:"host"`
	Device int    `json:"device"`
	CPUs   string `json:"cpus"` // e.g. "cpu 0-3"
	Model  string `json:"model"`
}

// Summary is what the footer reports after every row.
type Summary struct {
	// OutOfBounds counts, over every rank, the checked halves in which that
	// rank saw at least one wrong element (nccl-tests' "Out of bounds values").
	OutOfBounds int
	// AvgBusBW is the mean bus bandwidth over every printed half.
	AvgBusBW float64
}
