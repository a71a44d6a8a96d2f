package algos

import "fmt"

// Coll is a collective function, in NCCL's ncclFunc order: the row index of
// NCCL_ALGO and NCCL_PROTO and of the algorithm table.
type Coll int

// The collective functions.
const (
	Broadcast Coll = iota
	Reduce
	AllGather
	ReduceScatter
	AllReduce

	// NumColls is the number of collective functions.
	NumColls = int(AllReduce) + 1
)

var collNames = [NumColls]string{"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"}

// String returns NCCL's name of the function, e.g. "AllReduce".
func (c Coll) String() string {
	if c < 0 || int(c) >= NumColls {
		return fmt.Sprintf("Coll(%d)", int(c))
	}
	return collNames[c]
}

// Algo is a collective algorithm: NCCL's seven in NCCL's order
// (NCCL_ALGO_TREE .. NCCL_ALGO_PAT), then our extensions: CTRing, the CTRAN
// ring all-reduce of seed 002; OneShot, the flat shared-memory collectives
// of one host (every rank reads every rank's slot); RecDbl, the log-step
// family between hosts (recursive doubling all-reduce and all-gather,
// recursive halving reduce-scatter, Bruck for other rank counts); and
// Rabenseifner, recursive-halving reduce-scatter then recursive-doubling
// all-gather (shared/reference/small-message-algorithms.md); HierRecDbl,
// an all-reduce composed of a reduce to one leader per host, recursive
// doubling between the leaders and a broadcast back (logstep_hier.go);
// CMA, the single-copy all-gather of one host, which reads the other
// ranks' send buffers with cross-memory attach (cma.go).
type Algo int

// The algorithms.
const (
	Tree Algo = iota
	Ring
	CollNetDirect
	CollNetChain
	NVLS
	NVLSTree
	PAT
	CTRing
	OneShot
	RecDbl
	Rabenseifner
	HierRecDbl
	CMA

	// NumAlgos is the number of algorithms.
	NumAlgos = int(CMA) + 1
)

var algoNames = [NumAlgos]string{"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT", "CTRing", "OneShot", "RecDbl", "Rabenseifner", "HierRecDbl", "CMA"}

// String returns NCCL's name of the algorithm, e.g. "CollNetDirect".
func (a Algo) String() string {
	if a < 0 || int(a) >= NumAlgos {
		return fmt.Sprintf("Algo(%d)", int(a))
	}
	return algoNames[a]
}
