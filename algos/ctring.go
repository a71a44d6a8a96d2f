package algos

// CTRING all-reduce: the CTRAN ring of Meta's torchcomms (seed 002, "CTRING:
// AllReduce Ring Algorithm"; the design study's §2.5 gives the arithmetic with
// file:line citations).
//
// CTRING is a ring all-reduce, a reduce-scatter and then an all-gather, cut
// into three levels. The buffer is processed in partitions, strictly one
// after another; a partition is split into nranks shards, one per rank and
// step; a shard moves in rounds of at most ChunkElems elements (CTRAN's tmp
// buffers have NumChunks slots of one round: one shard of a full
// partition). CTRAN's kernel progresses sends and receives independently,
// so a rank works on several rounds of a step at once; a lane here is one
// sequence, and it takes the rounds in the order that needs no more than
// one FIFO slot: round-major, round j of every step, then round j+1 (the
// ring's own pipeline, with a round for a chunk). Step-major order (every
// round of step k, then step k+1) would make every rank send a whole shard
// before it receives one, and stall once a shard has more rounds than a
// FIFO holds.
//
// With the bidirectional all-gather the finished shards also travel to the
// left, on a second lane: the forward ring takes ceil((n-1)/2) all-gather
// steps and the reverse ring floor((n-1)/2), so the critical path falls from
// 2(n-1) steps to (n-1) + ceil((n-1)/2). The reverse lane starts a partition
// only when the forward lane has finished its reduce-scatter (the rank's own
// shard is then final in Output), and the next partition starts only when
// the reverse lane is done with this one: two Waits per partition.
//
// Step k of a lane receives what the neighbour sent in its step k-1 and
// sends on (NCCL's ring numbering; CTRAN counts the messages, numSteps = the
// last step here). Per partition and round of a shard, for n ranks:
//
//	lane 0, right = rank+1, left = rank-1, shard (rank - k) mod n in step k:
//	send                   k = 0             my shard, from Input
//	recvReduceSend     x (n-2): k = 1..n-2   add mine, pass on
//	recvReduceCopySend     k = n-1           shard rank+1 is complete: postOp, keep, pass on
//	recvCopySend       x (f-1): k = n..n+f-2 keep a finished shard, pass on
//	recv                   k = n+f-1         it stops here
//	lane 1 (bidir), to the left, shard rank+1+j in step j, after lane 0's step n-1:
//	send                   j = 0             my finished shard, from Output
//	recvCopySend       x (b-1): j = 1..b-1   keep, pass on
//	recv                   j = b             it stops here
//
// with f = ceil((n-1)/2) and b = floor((n-1)/2) forward and reverse
// all-gather steps when bidirectional, f = n-1 and no lane 1 when not. So
// every rank sends n-1+f messages per round to the right and b to the left.
//
// Worked example: n = 4, bidirectional, 8 elements, ChunkElems 2: one
// partition, shards of 2 elements at 0, 2, 4, 6, one round each. The shard
// each rank's step works on (seed 002's data flow diagram, whose "Step 0"
// line, 0 3 2 1, is rank 0's column: in step 0 each rank sends its own):
//
//	                    rank 0   rank 1   rank 2   rank 3
//	lane 0
//	0 send                0        1        2        3     reduce-scatter
//	1 recvReduceSend      3        0        1        2
//	2 recvReduceSend      2        3        0        1
//	3 recvReduceCopySend  1        2        3        0     final: rank+1
//	4 recvCopySend        0        1        2        3     all-gather, f = 2
//	5 recv                3        0        1        2
//	lane 1, Wait{At: 0, Lane: 0, Done: 4}
//	0 send (from Output)  1        2        3        0     all-gather, b = 1
//	1 recv                2        3        0        1
//
// Rank 0's Ops: send in[0:2] to 1; recvReduceSend from 3 of in[6:8], then
// in[4:6]; recvReduceCopySend in[2:4] into out[2:4] with postOp;
// recvCopySend out[0:2]; recv out[6:8]; and on lane 1, once lane 0 has
// completed 4 Ops: send out[2:4] to 3; recv out[4:6] from 1. Every rank
// sends 5 messages to the right and 1 to the left, against 6 and 0 without
// the reverse lane: (n-1) + ceil((n-1)/2) = 5.
//
// cc has no tmp buffers: a round is one Op over the ordinary connection,
// which the engine cuts into FIFO slices (the FIFO depth, NCCL_STEPS slots,
// is the pipeline depth), and CTRAN's copies into and out of its tmp buffers
// have no Op. The rounds' sizes, the partitions and the shards are CTRAN's,
// as its auto-tuner decides them (ctringConfig).

import (
	"fmt"
	"iter"
	"math"

	"github.com/seed-760dd1f1/cc/protocols"
)

// CTRingConfig is what CTRAN's auto-tuner decides for one CTRING call, in
// elements.
type CTRingConfig struct {
	// ChunkElems is the most elements one round moves: CTRAN's chunkSize
	// over the type size.
	ChunkElems int64
	// NumChunks is CTRAN's numChunks, the round slots of its tmp buffers:
	// a partition is ChunkElems*NumChunks*nranks elements.
	NumChunks int64
	// MinShardElems is the tail rule's unit: NCCL_CTRAN_ALLREDUCE_RING_
	// MIN_SHARD_SIZE over the type size (CTRAN divides MinShardSize*nranks
	// by the type size; the two agree when the type size divides it, as it
	// does the default 16 for every type up to 16 bytes). At most
	// ChunkElems*NumChunks, so that a partition holds the minimum one.
	MinShardElems int64
	// Bidir turns on the bidirectional all-gather (the second lane).
	Bidir bool
}

// CTRingAllReduce returns rank's schedule for the part p of a CTRING
// all-reduce: Input[Offset, Offset+Count) of every rank is reduced into
// Output[Offset, Offset+Count) of every rank, in place or not. Lane 0 is
// the forward ring; with cfg.Bidir and at least 3 ranks, lane 1 is the
// reverse all-gather, and both use connection index 0 (the two rings use
// different directed links). p.Chunk and p.Align are not used: cfg decides
// every size. The schedule needs FIFOs of CTRingDepth messages (the engine
// one more). One rank is a single local copy. It panics if rank, nranks, p
// or cfg are invalid.
func CTRingAllReduce(rank, nranks int, p Part, cfg CTRingConfig) Schedule {
	mustCheck("ctring all-reduce", checkCTRing(rank, nranks, p, cfg))
	g := &ctring{
		rank: rank, n: nranks,
		fwd:      prims{prev: RingPrev(rank, nranks), next: RingNext(rank, nranks)},
		rev:      prims{prev: RingNext(rank, nranks), next: RingPrev(rank, nranks)},
		fwdSteps: 2 * (nranks - 1),
	}
	if cfg.Bidir {
		g.fwdSteps, g.revSteps = nranks-1+nranks/2, (nranks-1)/2
	}
	if nranks == 1 {
		g.fwd.copy(p.Offset, p.Offset, p.Count, true)
		return g.schedule()
	}
	for off, numel := range cfg.partitions(nranks, p.Count) {
		g.partition(ctringPart{base: p.Offset + off, numel: numel, shardNumel: numel / int64(nranks), n: nranks, chunk: cfg.ChunkElems})
	}
	return g.schedule()
}

// ctring builds one rank's CTRING schedule: lane 0 in fwd, lane 1 in rev.
type ctring struct {
	rank, n            int
	fwd, rev           prims
	fwdWaits, revWaits []Wait
	fwdSteps, revSteps int // messages per round of a shard to the right and to the left
}

// partition appends the Ops of one partition and the Waits that run the
// partitions one after another.
func (g *ctring) partition(pt ctringPart) {
	start, revDone := len(g.fwd.ops), len(g.rev.ops)
	rsDone := g.forward(pt)
	// Partition p+1 starts when the reverse lane has finished partition p.
	addWait(&g.fwdWaits, start, len(g.fwd.ops), 1, revDone)
	if g.revSteps == 0 {
		return
	}
	start = len(g.rev.ops)
	g.reverse(pt)
	// The reverse lane starts when the reduce-scatter is done (CTRAN's
	// release of kRevSendCopy).
	addWait(&g.revWaits, start, len(g.rev.ops), 0, rsDone)
}

// forward appends lane 0's Ops for pt and returns how many Ops lane 0 has
// once the reduce-scatter of pt is done: its last Op that reads Input (the
// last shard, which takes the remainder, may have more rounds than the
// rank's own). Round-major: for every round j, the stages of the ring for
// round j of each step's shard.
func (g *ctring) forward(pt ctringPart) (rsDone int) {
	f, n := &g.fwd, g.n
	for j := range pt.maxRounds() {
		// Step 0: send round j of my shard, read from Input, to the right.
		if off, c, ok := pt.round(g.fwdShard(0), j); ok {
			f.send(off, c)
			rsDone = len(f.ops)
		}
		// Steps 1..n-2: receive a partial round, add mine, pass it on.
		for k := 1; k < n-1; k++ {
			if off, c, ok := pt.round(g.fwdShard(k), j); ok {
				f.recvReduceSend(off, c)
				rsDone = len(f.ops)
			}
		}
		// Step n-1: round j of shard rank+1 gets its last contribution.
		// Apply the postOp, keep it, and start its all-gather.
		if off, c, ok := pt.round(g.fwdShard(n-1), j); ok {
			f.recvReduceCopySend(off, off, c, true)
			rsDone = len(f.ops)
		}
		// Steps n..fwdSteps-1: receive a finished round, keep it, pass it on.
		for k := n; k < g.fwdSteps; k++ {
			if off, c, ok := pt.round(g.fwdShard(k), j); ok {
				f.recvCopySend(off, c)
			}
		}
		// Step fwdSteps: the last round of the forward all-gather stops here.
		if off, c, ok := pt.round(g.fwdShard(g.fwdSteps), j); ok {
			f.recv(off, c)
		}
	}
	return rsDone
}

// reverse appends lane 1's Ops for pt: the bidirectional all-gather, round
// by round like forward.
func (g *ctring) reverse(pt ctringPart) {
	r := &g.rev
	for j := range pt.maxRounds() {
		// Step 0: send round j of my finished shard rank+1, read from
		// Output, to the left.
		if off, c, ok := pt.round(g.revShard(0), j); ok {
			r.sendOutput(off, c)
		}
		// Steps 1..revSteps-1: receive a finished round from the right,
		// keep it, pass it on.
		for s := 1; s < g.revSteps; s++ {
			if off, c, ok := pt.round(g.revShard(s), j); ok {
				r.recvCopySend(off, c)
			}
		}
		// Step revSteps: the last round of the reverse all-gather stops here.
		if off, c, ok := pt.round(g.revShard(g.revSteps), j); ok {
			r.recv(off, c)
		}
	}
}

// fwdShard is the shard of forward step k: (rank - k) mod n, CTRAN's
// getStepShardIdx. Step n-1 is shard rank+1, the one the rank owns.
func (g *ctring) fwdShard(k int) int { return (g.rank - k%g.n + g.n) % g.n }

// revShard is the shard of reverse step j: (rank + 1 + j) mod n, CTRAN's
// getRevStepShardIdx.
func (g *ctring) revShard(j int) int { return (g.rank + 1 + j) % g.n }

func (g *ctring) schedule() Schedule {
	s := Schedule{Lanes: []Lane{{Ops: g.fwd.ops, Waits: g.fwdWaits}}}
	if g.revSteps > 0 {
		s.Lanes = append(s.Lanes, Lane{Ops: g.rev.ops, Waits: g.revWaits})
	}
	return s
}

// addWait holds a lane's Ops [at, end), one partition's, until lane has
// completed done Ops. It adds nothing when the partition gave the lane no
// Op (a Wait holds every Op from At on: it would hold the next
// partition's), or when the lane's last Wait already asks for as much.
func addWait(waits *[]Wait, at, end, lane, done int) {
	if at == end || done == 0 || (len(*waits) > 0 && (*waits)[len(*waits)-1].Done >= done) {
		return
	}
	*waits = append(*waits, Wait{At: at, Lane: lane, Done: done})
}

// sendOutput reads Output at src and sends it to next: the first step of
// the reverse all-gather, which sends a final value (no pre-operation).
func (p *prims) sendOutput(src, n int64) {
	p.add(Op{RecvFrom: NoPeer, SendTo: p.next, Src: Output, SrcOff: src, Count: n})
}

// ctringPart is one partition: numel elements from base, in n shards of
// shardNumel elements, the last taking the remainder (CTRAN's
// getShardNumel: 33 elements on 4 ranks are shards of 8, 8, 8 and 9).
type ctringPart struct {
	base, numel, shardNumel, chunk int64
	n                              int
}

// shard returns the offset and size of shard s.
func (pt ctringPart) shard(s int) (off, numel int64) {
	off, numel = pt.base+int64(s)*pt.shardNumel, pt.shardNumel
	if s == pt.n-1 {
		numel = pt.numel - int64(pt.n-1)*pt.shardNumel
	}
	return off, numel
}

// round returns the offset and size of round j of shard s: chunk elements,
// the last round what is left; ok is false past the shard's end.
func (pt ctringPart) round(s int, j int64) (off, numel int64, ok bool) {
	off, numel = pt.shard(s)
	r := j * pt.chunk
	if r >= numel {
		return 0, 0, false
	}
	return off + r, min(pt.chunk, numel-r), true
}

// maxRounds is the rounds of the largest shard: the last one, which takes
// the remainder.
func (pt ctringPart) maxRounds() int64 {
	_, numel := pt.shard(pt.n - 1)
	return divUp(numel, pt.chunk)
}

// partitions yields the offset and size of every partition of count
// elements on nranks ranks: CTRAN's updatePartitionCtx.
func (c CTRingConfig) partitions(nranks int, count int64) iter.Seq2[int64, int64] {
	total := c.ChunkElems * c.NumChunks * int64(nranks) // totalTmpNumel
	minPart := c.MinShardElems * int64(nranks)          // minPartitionNumel
	return func(yield func(int64, int64) bool) {
		for off := int64(0); off < count; {
			numel := partitionNumel(count-off, total, minPart)
			if !yield(off, numel) {
				return
			}
			off += numel
		}
	}
}

// partitionNumel is the size of the next partition when remain elements are
// left: all of them if they fit in total, else total, except that a tail
// that would leave fewer than minPart for the last partition is cut so that
// the last one has exactly minPart, at least MinShardElems a shard. Example:
// 2 ranks, total 16, minPart 8, 20 left: 12 now and 8 last, not 16 and 4.
func partitionNumel(remain, total, minPart int64) int64 {
	switch {
	case remain <= total:
		return remain
	case remain-total < minPart:
		return remain - minPart
	}
	return total
}

// checkCTRing validates the arguments of CTRingAllReduce.
func checkCTRing(rank, nranks int, p Part, cfg CTRingConfig) error {
	if err := checkRankPart(rank, nranks, p); err != nil {
		return err
	}
	switch {
	case cfg.ChunkElems < 1:
		return fmt.Errorf("chunk %d elements: must be at least 1", cfg.ChunkElems)
	case cfg.NumChunks < 1:
		return fmt.Errorf("%d chunks: must be at least 1", cfg.NumChunks)
	case cfg.ChunkElems > math.MaxInt64/cfg.NumChunks/int64(nranks):
		return fmt.Errorf("partition of %d chunks of %d elements on %d ranks: overflows int64", cfg.NumChunks, cfg.ChunkElems, nranks)
	case cfg.MinShardElems < 0 || cfg.MinShardElems > cfg.ChunkElems*cfg.NumChunks:
		return fmt.Errorf("minimum shard %d elements: must be in [0, %d], the shard of a full partition", cfg.MinShardElems, cfg.ChunkElems*cfg.NumChunks)
	}
	return nil
}

// ctringRow is the row of CTRING all-reduce. It runs on Simple only (CTRAN
// has no LL protocols), with the ring's Simple geometry.
func ctringRow() Algorithm {
	r := Algorithm{Algo: CTRing, Coll: AllReduce, WritesOutputOnce: true,
		Explain: ctringExplain,
		Gen: func(a *Args) Schedule {
			return CTRingAllReduce(a.Rank, a.NRanks(), a.Part, ctringConfig(a))
		},
		Peers: ctringPeers}
	r.Geometry[protocols.Simple] = Geometry{ChunkSteps: protocols.NSteps / 2, SliceSteps: protocols.NSteps / 4}
	return r
}

// ctringPeers are the ring's next and prev, and with 3 ranks or more the
// reverse ring's: sent to prev, received from next. They do not depend on
// the size, so that the runtime can connect them before the tuner decides
// on the bidirectional all-gather.
func ctringPeers(a *Args) []Link {
	links := ringPeers(a)
	if n := a.NRanks(); n >= 3 {
		links = append(links, Link{Peer: RingPrev(a.Rank, n), Send: true}, Link{Peer: RingNext(a.Rank, n)})
	}
	return links
}

// ctringExplain is CTRAN's AutoTune log line for the call, with what the
// schedule then uses: "AutoTune ranks 4, msg 1048576B: blocks 4, chunks
// 8 x 32768B (depth 2, bidir true); rounds of 32768B, partitions of 1048576B".
// The blocks are CTRAN's tier-table decision (and the block knobs), with
// no GPU occupancy to cap them; they are reported only: a channel's lanes
// run on one goroutine each here.
func ctringExplain(a *Args) string {
	k := a.ctringKnobs()
	t := CTRingTune(k, a.Count*int64(a.ElemSize), a.NRanks(), a.ElemSize, math.MaxInt32, CTRingBlockSize)
	c := ctringConfig(a)
	return fmt.Sprintf("AutoTune ranks %d, msg %dB: blocks %d, chunks %d x %dB (depth %d, bidir %t, %s tables); rounds of %dB, partitions of %dB",
		a.NRanks(), a.Count*int64(a.ElemSize), t.NumBlocks, t.NumChunks, t.ChunkBytes, t.Depth, t.Bidir, k.Arch,
		c.ChunkElems*int64(a.ElemSize), c.ChunkElems*c.NumChunks*int64(a.NRanks())*int64(a.ElemSize))
}

// ctringConfig is the config of one call: what CTRAN's auto-tuner decides
// from the knobs (nil: CTRAN's defaults) and the size of the whole
// collective, which every rank and channel agree on, with one fit to cc's
// connections: a round is at most the channel's chunk (half the FIFO, as
// for the ring). A lane runs its Ops one after another, so the first Op of
// a round, a plain send, must fit in the FIFO while the neighbour, doing
// the same, has not yet received anything; CTRAN's kernel sends and
// receives at once and needs no such bound. NumChunks stays as tuned: taken
// round-major, the rounds need one FIFO slot whatever their number. So a
// partition is ChunkElems x NumChunks x nranks with the fitted chunk.
// Example, Hopper tables: 64 MiB of float on 8 ranks is tuned to 8 rounds of
// 4 MiB per shard; with NCCL_BUFFSIZE 4 MiB the ring's chunk is 2 MiB, so a
// channel runs partitions of 8 x 8 rounds of 2 MiB.
func ctringConfig(a *Args) CTRingConfig {
	k := a.ctringKnobs()
	esize := int64(a.ElemSize)
	// Occupancy shapes only the blocks, which a schedule does not use.
	t := CTRingTune(k, a.Count*esize, a.NRanks(), a.ElemSize, 1, CTRingBlockSize)
	c := CTRingConfig{
		ChunkElems: max(min(t.ChunkBytes/esize, a.Part.Chunk), 1),
		NumChunks:  t.NumChunks,
		Bidir:      t.Bidir,
	}
	// CTRAN's minimum partition is MinShardSize*nranks/typeSize elements,
	// capped at a full partition as CTRingAllReduce requires (CTRAN would
	// shorten a partition below zero).
	c.MinShardElems = min(k.MinShardSize/esize, c.ChunkElems*c.NumChunks)
	return c
}

// ctringKnobs are the call's CTRING knobs: a.CTRing, or CTRAN's defaults.
func (a *Args) ctringKnobs() CTRingKnobs {
	if a.CTRing != nil {
		return *a.CTRing
	}
	return DefaultCTRingKnobs()
}
