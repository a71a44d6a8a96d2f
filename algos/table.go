package algos

import "github.com/seed-760dd1f1/cc/protocols"

// The algorithm table: one row per (algorithm, collective) this package
// can generate. The runtime looks a row up and wires what it says (the
// peers to connect, the FIFO geometry, the generator); it names no
// algorithm itself, so adding one is a generator file plus a row here.
// algos/sim runs every row for many shapes and checks what the row claims.

// Algorithm is one row of the table.
type Algorithm struct {
	Algo Algo
	Coll Coll

	// Geometry is NCCL's FIFO geometry per protocol (collectives.h and
	// calcCollChunking): the FIFO slots of a chunk and of a slice. A zero
	// entry means the algorithm does not run with that protocol.
	Geometry [protocols.NumProtos]Geometry

	// Chunk returns the elements of one chunk (NCCL's chunkCount) for a
	// collective; nil means DefaultChunk.
	Chunk func(c *ChunkArgs) int64

	// Gen returns one rank's schedule for one channel. It is pure and
	// panics on arguments a caller should never pass.
	Gen func(a *Args) Schedule

	// Peers returns the directed links rank uses on a channel, for every
	// part of every size: what the runtime may connect ahead of the first
	// call. Every link of every schedule Gen makes is among them.
	Peers func(a *Args) []Link

	// Explain, when not nil, describes the decisions Gen takes for a call
	// beyond the table's (CTRING's auto-tuning), for NCCL_DEBUG.
	Explain func(a *Args) string

	// WritesOutputOnce says that the schedules never write Input and write
	// every element of Output at most once, so that a value already final in
	// user memory may be sent from there (by reference) when the call is
	// not in place, or is an in-place all-gather or broadcast (whose one
	// write of Input's memory is Input's own value). The simulator checks
	// it for every row that claims it.
	WritesOutputOnce bool

	// Flat, when not nil, replaces Gen and Peers: the row runs in one
	// synchronization over a staging area every rank maps (oneshot.go).
	Flat *Flat
}

// Geometry is the FIFO geometry of one protocol: slots per chunk and per
// slice.
type Geometry struct {
	ChunkSteps, SliceSteps int
}

// Runs reports whether the algorithm runs with protocol p.
func (a *Algorithm) Runs(p protocols.Proto) bool { return a.Geometry[p].SliceSteps > 0 }

// Protos returns the protocols the algorithm runs with, in protocols.Proto
// order.
func (a *Algorithm) Protos() []protocols.Proto {
	var out []protocols.Proto
	for p := range protocols.Proto(protocols.NumProtos) {
		if a.Runs(p) {
			out = append(out, p)
		}
	}
	return out
}

// Args is what a generator is given for one rank and channel.
type Args struct {
	Rank int
	Topo *Topo
	Root int // the root of a rooted collective
	// Count is the collective's count: elements of the buffer (all-reduce,
	// broadcast, reduce) or of one rank's block (reduce-scatter,
	// all-gather), which is also the block size of Input or Output.
	Count int64
	// Part is this channel's share of the buffer (of every block for
	// reduce-scatter and all-gather) and its chunk.
	Part Part
	// ElemSize is the size of one element in bytes, for algorithms that
	// size their steps in bytes.
	ElemSize int
	// CTRing are the CTRING knobs (NCCL_CTRAN_ALLREDUCE_RING_* and
	// CC_CTRING_ARCH), from which its row tunes each call; nil means
	// DefaultCTRingKnobs().
	CTRing *CTRingKnobs
	// CollNetHeads is the heads per host CollNet Direct all-reduce asks
	// for (CC_COLLNET_NHEADS); 0 means as many as possible (CollNetHeads).
	CollNetHeads int
	// Direct says that every rank of this rank's host called with a
	// registered send buffer (comm.Register), so that NVLS reads the
	// other local ranks' Input in place instead of scattering it through
	// the FIFOs. Rows other than NVLS and NVLS_TREE ignore it.
	Direct bool
}

// NRanks is the number of ranks.
func (a *Args) NRanks() int { return a.Topo.NRanks }

// ChunkArgs is what a row's Chunk rule is given.
type ChunkArgs struct {
	Proto       protocols.Proto
	Geometry    Geometry // the row's geometry for Proto
	StepPayload int      // payload bytes of one FIFO slot of Proto
	ElemSize    int      // bytes per element
	Align       int64    // elements a chunk is a multiple of (NCCL: 16 bytes / element size)
	Bytes       int64    // the collective's size in bytes (NCCL's nBytes)
	NChannels   int      // channels the collective runs on
	Topo        *Topo
	NVLSChunk   int // NVLS's chunk in bytes (NCCL_NVLS_CHUNKSIZE); 0 means DefaultNVLSChunk
	// Framed says that the links carry each slice as one frame that the
	// receiver takes whole (TCP) rather than line by line (LL and LL128
	// over shared memory) and FramedLinks holds: FramedChunk applies.
	Framed bool
}

// DefaultChunk is NCCL's chunk: the payload of ChunkSteps FIFO slots, in
// elements, rounded down to Align; over frames, LL128's is FramedChunk.
func DefaultChunk(c *ChunkArgs) int64 {
	align := max(c.Align, 1)
	bytes := int64(c.StepPayload * c.Geometry.ChunkSteps)
	if c.Framed && c.Proto == protocols.LL128 {
		bytes = FramedChunk(bytes, c)
	}
	return max(bytes/int64(c.ElemSize)/align*align, align)
}

// FramedLinks reports whether a job's LL128 chunks are cut for TCP
// frames (ChunkArgs.Framed): where ranks talk TCP (tcp) and no machine
// has more ranks than cores, so that a receiver polls while the next
// frame of a hop comes. With more ranks than cores each frame costs a
// sleep and a wake-up, and more frames per hop cost more than they
// overlap: 4 testbed hosts of one rank on 2 cores took 1.33-1.43x the time
// for all-reduce, reduce-scatter and all-gather of 256 KiB with the chunks
// cut. The runtime and cc-perf predict both ask it.
func FramedLinks(tcp bool, machineRanks, machineCores int) bool {
	return tcp && machineRanks <= machineCores
}

// FramedMinChunk is the smallest chunk FramedChunk makes: LL's slot
// payload, 32 KiB, under which LL128 would be LL.
const FramedMinChunk = 32 * 1024

// FramedChunk is LL128's chunk of chunk bytes over frames. On shared
// memory an LL128 receiver takes a slot's 128-byte lines as they land, so
// a hop forwards the start of a step while its end is still coming; over
// TCP a slice is one frame, and the next hop starts only once the whole
// frame is in. With a 144000-byte step, a ring all-reduce of 128 KiB
// between two hosts is then store-and-forward, one frame per hop, where
// LL's 32 KiB slots pipeline. So, as NCCL shrinks Tree/LL128's chunk, the
// chunk halves while it is larger than a channel's share of one rank's
// block, Bytes / (NChannels x ranks), and its half is at least
// FramedMinChunk: a rank's block then crosses as two or more frames. Two
// ranks on two fake hosts, the tuner's Ring/LL128, interleaved with the
// full step (2026-11-28): all-reduce of 64-256 KiB 0.63-0.72x the time,
// reduce-scatter of 128-256 KiB 0.51-0.68x, all-gather of 256 KiB
// 0.53-0.60x. Halving further (four or more chunks per share) cost
// 1.08-1.13x at 512 KiB, so larger calls keep the full step.
func FramedChunk(chunk int64, c *ChunkArgs) int64 {
	n := 1
	if c.Topo != nil {
		n = max(c.Topo.NRanks, 1)
	}
	share := c.Bytes / int64(max(c.NChannels, 1)*n)
	for chunk/2 >= FramedMinChunk && share < chunk {
		chunk /= 2
	}
	return chunk
}

// ChunkFor returns the chunk of a collective run by row a with c.
func (a *Algorithm) ChunkFor(c *ChunkArgs) int64 {
	if a.Chunk != nil {
		return a.Chunk(c)
	}
	return DefaultChunk(c)
}

// Algorithms is the table.
var Algorithms = []Algorithm{
	treeRow(), // AllReduce only, as in NCCL 2.30: it has no tree broadcast or reduce kernels
	ringRow(AllReduce, func(a *Args) []Op { return RingAllReduce(a.Rank, a.NRanks(), a.Part) }),
	ringRow(ReduceScatter, func(a *Args) []Op { return RingReduceScatter(a.Rank, a.NRanks(), a.Count, a.Part) }),
	ringRow(AllGather, func(a *Args) []Op { return RingAllGather(a.Rank, a.NRanks(), a.Count, a.Part) }),
	ringRow(Broadcast, func(a *Args) []Op { return RingBroadcast(a.Rank, a.NRanks(), a.Root, a.Part) }),
	ringRow(Reduce, func(a *Args) []Op { return RingReduce(a.Rank, a.NRanks(), a.Root, a.Part) }),
	ctringRow(),
	patRow(ReduceScatter),
	patRow(AllGather),
	collnetRow(AllReduce),
	collnetRow(ReduceScatter),
	collnetRow(AllGather),
	nvlsRow(ReduceScatter, false),
	nvlsRow(AllGather, false),
	nvlsRow(AllReduce, false),
	nvlsRow(AllReduce, true), // NVLS_TREE
	logStepRow(RecDbl, AllReduce, func(a *Args) []Op { return RecDblAllReduce(a.Rank, a.NRanks(), a.Part) }, cubeLinks, false),
	logStepRow(RecDbl, AllGather, func(a *Args) []Op { return RecDblAllGather(a.Rank, a.NRanks(), a.Count, a.Part) }, recDblAllGatherPeers, true),
	logStepRow(Rabenseifner, AllReduce, func(a *Args) []Op { return RabenseifnerAllReduce(a.Rank, a.NRanks(), a.Part) }, cubeLinks, false),
	hierRecDblRow(),
	oneShotRow(AllReduce),
	oneShotRow(ReduceScatter),
	oneShotRow(AllGather),
	oneShotRow(Broadcast),
	oneShotRow(Reduce),
	cmaRow(AllGather),
}

// Preference is the order in which messages list algorithms: the ring
// first, the default NCCL users know, then the others in NCCL's order.
// Which one runs is the tuner's choice (runtime/tune).
var Preference = []Algo{Ring, Tree, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT, CTRing, OneShot, RecDbl, Rabenseifner, HierRecDbl, CMA}

// Fallback is the algorithm every collective has a row for, with every
// protocol: what a program's own coordination runs on whatever the user
// allows for its measured collectives (comm.Control).
const Fallback = Ring

// Lookup returns the row of algorithm a for collective c, or nil if a
// cannot do c.
func Lookup(a Algo, c Coll) *Algorithm {
	for i := range Algorithms {
		if r := &Algorithms[i]; r.Algo == a && r.Coll == c {
			return r
		}
	}
	return nil
}

// ringRow is the row of a ring collective. Ring all-reduce, reduce-scatter
// and all-gather move Simple chunks of 4 slots in slices of 2
// (ALLREDUCE_CHUNKSTEPS = NCCL_STEPS/2, SLICESTEPS = NCCL_STEPS/4);
// broadcast, reduce and every LL/LL128 transfer use one slot for both.
func ringRow(c Coll, gen func(a *Args) []Op) Algorithm {
	pipe := Geometry{ChunkSteps: 1, SliceSteps: 1}
	simple := Geometry{ChunkSteps: protocols.NSteps / 2, SliceSteps: protocols.NSteps / 4}
	if c == Broadcast || c == Reduce {
		simple = pipe
	}
	r := Algorithm{Algo: Ring, Coll: c, WritesOutputOnce: true,
		Gen:   func(a *Args) Schedule { return Single(gen(a)) },
		Peers: ringPeers}
	r.Geometry[protocols.Simple] = simple
	r.Geometry[protocols.LL] = pipe
	r.Geometry[protocols.LL128] = pipe
	return r
}

// ringPeers are next (sent to) and prev (received from).
func ringPeers(a *Args) []Link {
	n := a.NRanks()
	if n == 1 {
		return nil
	}
	return []Link{{Peer: RingNext(a.Rank, n), Send: true}, {Peer: RingPrev(a.Rank, n)}}
}
