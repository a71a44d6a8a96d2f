package comm

import "github.com/seed-760dd1f1/cc/algos"

// Waits that yield. A lane waiting for a slice polls its FIFO while it
// has a core to itself. CollNet Direct's lanes wait, through shared
// memory as well as TCP, for what comes back from the aggregation server:
// polling through a network round trip, with the host's ranks running more
// lanes than it has cores, held off the head's lane or the server process
// that would bring the answer. For such a collective the shared-memory
// waits yield their core instead (shm.Segment.SetYield). Measured on 2
// cores, 2 ranks and the server: an all-reduce of 64 B took about 1 ms
// with polling lanes, 0.2 ms with yielding ones. NVLS's lanes wait for
// each other only, a few microseconds, and keep polling: yielding made its
// small reduce-scatters slower on the loaded machine. Only the lanes that
// receive over shared memory count: a lane that sends only, or receives
// from the server, does not poll.

// pollingLanes is the number of lanes of s that receive from a peer for
// which local says the wait is on shared memory (a slot schedule is one
// lane): the lanes that may poll.
func pollingLanes(s algos.Schedule, local func(peer int) bool) int {
	if len(s.Slots) > 0 {
		return 1
	}
	n := 0
	for _, l := range s.Lanes {
		polls := false
		for i := range l.Ops {
			for k := range l.Ops[i].NumRecvs() {
				polls = polls || local(l.Ops[i].RecvPeer(k))
			}
		}
		if polls {
			n++
		}
	}
	return n
}

// isLocal reports whether peer shares this rank's shared memory.
func (c *Comm) isLocal(peer int) bool {
	_, ok := c.localIndex[peer]
	return ok && c.seg != nil && peer != c.rank
}

// yieldWaits reports whether the shared-memory waits of ks yield their
// core rather than poll: some collective of ks is CollNet Direct and its
// lanes that may poll, on every local rank alike, outnumber the cores.
// Example, 2 ranks on 2 cores and 2 heads: an all-reduce of 64 B gives each
// head a piece, and each rank polls in its reduce lane (the other rank's
// piece) and its gather lane (the other head's result): 4 lanes, they
// yield. At 8 B only head 0 has a piece: rank 0 polls in its reduce lane,
// rank 1 in its gather lane, 2 lanes, they poll.
func (c *Comm) yieldWaits(ks []*coll) bool {
	for _, k := range ks {
		if k.algo.Algo == algos.CollNetDirect && k.plan.polls*len(c.localIndex) > c.cores {
			return true
		}
	}
	return false
}
