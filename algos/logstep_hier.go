package algos

// HierRecDbl: a small-message all-reduce for ranks that share hosts
// (shared/reference/small-message-algorithms.md §5: "where ranks share
// hosts, compose"). The first rank of each host is its leader:
//
//	up     every other rank of the host sends its vector to the leader,
//	       which reduces them into Output one after the other, in local
//	       rank order (over shared memory when the host has it)
//	across the leaders run recursive doubling among themselves, one per
//	       host (logstep_allreduce.go; the fold for host counts that are
//	       not powers of two)
//	down   the leader sends the result to each other rank of its host
//
// Only the leaders' links cross hosts, and the steps between hosts are
// ceil-ish log2 of the hosts, not of the ranks; the price is 2(ppn-1)
// steps inside the host, one message at a time through the leader, which
// is why it is a small-message row. Every rank ends with its leader's
// bits, and the leaders' exchanges reduce the same two operands each way
// (the operations are commutative), so the result is bitwise identical on
// every rank.

// HierRecDblAllReduce returns rank's schedule for the part p of the
// hierarchical all-reduce on topo: Input[Offset, +Count) of every rank is
// reduced into Output[Offset, +Count) of every rank, moved in chunks of
// p.Chunk. It panics if rank, topo or p are invalid.
func HierRecDblAllReduce(rank int, topo *Topo, p Part) []Op {
	mustCheck("hierarchical recursive doubling all-reduce", checkRing(rank, topo.NRanks, 0, p))
	x := &exchanger{chunk: p.Chunk}
	all := []span{{p.Offset, p.Count}}
	if topo.NRanks == 1 {
		x.copyAll(all[0])
		return x.ops
	}
	h, local := topo.Host(rank)
	locals := topo.Hosts[h]
	if local != 0 {
		x.exchange(locals[0], NoPeer, Input, all, nil, false, false)
		x.exchange(NoPeer, locals[0], Output, nil, all, false, false)
		return x.ops
	}
	nh := topo.NHosts()
	src := Input
	for i, r := range locals[1:] {
		x.exchange(NoPeer, r, src, nil, all, true, nh == 1 && i == len(locals)-2)
		src = Output
	}
	x.hierAcross(topo, h, src, all)
	for _, r := range locals[1:] {
		x.exchange(r, NoPeer, Output, all, nil, false, false)
	}
	return x.ops
}

// hierAcross appends a leader's recursive doubling with the leaders of the
// other hosts (none on one host): host h's leader reduces src, the host's
// sum, with theirs into Output.
func (x *exchanger) hierAcross(topo *Topo, h int, src Buf, all []span) {
	nh := topo.NHosts()
	if nh == 1 {
		return
	}
	start := len(x.ops)
	x.recDbl(h, nh, src, all)
	for i := start; i < len(x.ops); i++ { // host indices to their leaders
		o := &x.ops[i]
		if o.SendTo != NoPeer {
			o.SendTo = topo.Hosts[o.SendTo][0]
		}
		if o.RecvFrom != NoPeer {
			o.RecvFrom = topo.Hosts[o.RecvFrom][0]
		}
	}
}

// HierRecDbl staged: where a host's ranks share a one-shot staging area
// (the OneShot rows' slots, oneshot.go), its up and down phases need no
// FIFO steps, one synchronization each instead of ppn-1 messages through
// the leader:
//
//	up     a one-shot reduce to the leader (local rank 0): every rank
//	       copies its input into its slot, the leader reduces the slots
//	       into Output in local rank order (HierRecDblUp)
//	across the leaders' recursive doubling, from Output (HierRecDblAcross)
//	down   a one-shot broadcast from the leader: it copies Output into
//	       its slot and the others copy that slot into their Output
//	       (HierRecDblDown, in place: Input is Output)
//
// Every rank of the host runs up and down, as many pieces each; only the
// leader has an across schedule. The results are those of the FIFO form
// (HierRecDblAllReduce): the same reduction order inside the host, the
// same exchanges between the leaders. A host of one rank has no staging
// area and runs HierRecDblAllReduce's schedule (its leader's across part
// reads Input); the two forms meet only between leaders, whose exchanges
// are the same.

// HierRecDblUp returns local rank local's plans (of nlocal ranks on its
// host) for the up phase of a staged HierRecDbl of count elements, one
// per piece of at most slotElems. The reduction's post-operation is the
// leader's last act only when the job is this one host (across false);
// otherwise the across phase applies it.
func HierRecDblUp(local, nlocal int, across bool, count, slotElems int64) []FlatPlan {
	plans := oneShotReduce.Plans(FlatArgs{Coll: Reduce, Rank: local, NRanks: nlocal, Root: 0, Count: count}, slotElems)
	if across {
		for i := range plans {
			for j := range plans[i].Gets {
				plans[i].Gets[j].Post = false
			}
		}
	}
	return plans
}

// HierRecDblDown returns local rank local's plans for the down phase of a
// staged HierRecDbl: a broadcast of the leader's Output, run in place.
func HierRecDblDown(local, nlocal int, count, slotElems int64) []FlatPlan {
	return oneShotBroadcast.Plans(FlatArgs{Coll: Broadcast, Rank: local, NRanks: nlocal, Root: 0, Count: count}, slotElems)
}

// HierRecDblAcross returns rank's schedule for the across phase of a
// staged HierRecDbl on part p: for a leader, recursive doubling with the
// other hosts' leaders, from Output when its host staged (its ranks'
// sum is there) or from Input when it is alone on its host; nothing for
// the other ranks, and nothing on one host.
func HierRecDblAcross(rank int, topo *Topo, p Part) []Op {
	mustCheck("hierarchical recursive doubling across hosts", checkRing(rank, topo.NRanks, 0, p))
	h, local := topo.Host(rank)
	if local != 0 {
		return nil
	}
	x := &exchanger{chunk: p.Chunk}
	src := Output
	if len(topo.Hosts[h]) == 1 {
		src = Input
	}
	x.hierAcross(topo, h, src, []span{{p.Offset, p.Count}})
	return x.ops
}

// The one-shot reduce and broadcast whose plans the staged phases reuse.
var (
	oneShotReduce    = oneShotRow(Reduce).Flat
	oneShotBroadcast = oneShotRow(Broadcast).Flat
)

// hierRecDblPeers are HierRecDblAllReduce's links: a rank other than its
// host's leader talks to the leader both ways; a leader to every other
// rank of its host, and to the leaders of its hosts' hypercube.
func hierRecDblPeers(a *Args) []Link {
	topo := a.Topo
	if topo.NRanks == 1 {
		return nil
	}
	h, local := topo.Host(a.Rank)
	locals := topo.Hosts[h]
	both := func(out []Link, p int) []Link { return append(out, Link{Peer: p, Send: true}, Link{Peer: p}) }
	if local != 0 {
		return both(nil, locals[0])
	}
	var out []Link
	for _, r := range locals[1:] {
		out = both(out, r)
	}
	for _, l := range cubeLinks(h, topo.NHosts()) {
		l.Peer = topo.Hosts[l.Peer][0]
		out = append(out, l)
	}
	return out
}

// hierRecDblRow is HierRecDbl's all-reduce row: the log-step rows'
// geometry, any topology.
func hierRecDblRow() Algorithm {
	r := logStepRow(HierRecDbl, AllReduce, func(a *Args) []Op { return HierRecDblAllReduce(a.Rank, a.Topo, a.Part) }, cubeLinks, false)
	r.Peers = hierRecDblPeers
	return r
}
