package comm

import "github.com/seed-760dd1f1/cc/algos"

// Lanes that wait at once: how a collective's waits on shared memory
// weigh against the cores (shm.Segment.SetLanes). A lane waiting for a
// slice polls its FIFO while it has a core to itself; when the host's
// ranks run more lanes than it has cores, a polling lane holds off the
// lane that would answer it (of this rank, of a local peer, or the
// CollNet aggregation server's), and the waits yield their core instead.
// Measured on 2 cores, 2 ranks and the server: a CollNet Direct
// all-reduce (4 lanes) of 64 B took about 1 ms with polling lanes, 0.2 ms
// with yielding ones; the ring (1 lane) keeps polling.

// busyLanes is the number of lanes of s with Ops (a slot schedule is one).
func busyLanes(s algos.Schedule) int {
	if len(s.Slots) > 0 {
		return 1
	}
	n := 0
	for _, l := range s.Lanes {
		if len(l.Ops) > 0 {
			n++
		}
	}
	return n
}

// waitingLanes is the most lanes one collective of ks runs at once on
// this rank, over all its channels (ks run one after the other).
func waitingLanes(ks []*coll) int {
	most := 1
	for _, k := range ks {
		most = max(most, k.plan.lanes)
	}
	return most
}
