package comm

import (
	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
)

// Waits that yield. A lane waiting for a slice, or for a free slot, polls
// its shared-memory FIFO while it has a core to itself. The algorithms
// below run several lanes per rank; when the lanes that may poll, on all
// local ranks alike, outnumber the cores, a polling lane holds off the
// lane, the rank or the process that would answer it, and the waits of
// the collective yield their core instead (shm.Segment.SetYield), as they
// do when the ranks alone outnumber the cores. Measured on 2 cores and 2
// ranks, interleaved medians:
//
//	CollNet Direct all-reduce of 64 B    ~700 us polling, ~200 us yielding
//	  (every result comes back from the aggregation server, a third process)
//	NVLS all-reduce of 2 MiB             2044 us polling, 478 us yielding
//	NVLS reduce-scatter of 2 MiB         1170 us polling, 441 us yielding
//
// Other algorithms were not measured this way and keep polling.
var yieldAlgos = map[algos.Algo]bool{
	algos.CollNetDirect: true, // lanes wait for the server: a network round trip
	algos.NVLS:          true, // scatter, load-reduce and gather lanes run at once
	algos.NVLSTree:      true, // NVLS inside the host, TCP between the heads
}

// pollingLanes is the number of lanes of s that may poll shared memory
// (local says which peers, multicast regions included, are reached
// through it): a lane that receives over it, or that sends more slices
// over it than a FIFO holds (it then waits for the receiver to free
// slots); slices is the number of slices an Op moves. A slot schedule is
// one lane. Example, 2 ranks on one host and 2 heads: a CollNet all-reduce
// of 64 B gives each head a piece, and each rank polls in its reduce lane
// (the other rank's piece) and its gather lane (the other head's result),
// not in its scatter lane (one slice) or its bcast lane (the server): 2
// each. At 8 B only head 0 has a piece: 1 each, and 2 ranks on 2 cores
// keep polling.
func pollingLanes(s algos.Schedule, local func(peer int) bool, slices func(op *algos.Op) int) int {
	if len(s.Slots) > 0 {
		return 1
	}
	n := 0
	for _, l := range s.Lanes {
		recvs, sent := false, 0
		for i := range l.Ops {
			op := &l.Ops[i]
			for k := range op.NumRecvs() {
				recvs = recvs || local(op.RecvPeer(k))
			}
			for k := range op.NumSends() {
				if local(op.SendPeer(k)) {
					sent += slices(op)
					break
				}
			}
		}
		if recvs || sent > protocols.NSteps {
			n++
		}
	}
	return n
}

// slices returns the number of slices an Op of elements of esize bytes
// moves under pl.
func (pl *plan) slices(esize int64) func(op *algos.Op) int {
	per := int64(pl.step * pl.geo.SliceSteps)
	return func(op *algos.Op) int { return int((op.Count*esize + per - 1) / max(per, 1)) }
}

// isLocal reports whether peer, or the multicast region it names, is
// reached through this host's shared memory.
func (c *Comm) isLocal(peer int) bool {
	if h, ok := algos.McastHead(c.nranks, peer); ok {
		peer = h
	}
	_, ok := c.localIndex[peer]
	return ok && c.seg != nil
}

// yieldWaits reports whether the shared-memory waits of ks yield their
// core rather than poll: some collective of ks runs an algorithm of
// yieldAlgos and its polling lanes, on every local rank alike, outnumber
// the cores.
func (c *Comm) yieldWaits(ks []*coll) bool {
	for _, k := range ks {
		if yieldAlgos[k.algo.Algo] && k.plan.polls*len(c.localIndex) > c.cores {
			return true
		}
	}
	return false
}
