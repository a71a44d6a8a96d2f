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
	if nh > 1 {
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
	for _, r := range locals[1:] {
		x.exchange(r, NoPeer, Output, all, nil, false, false)
	}
	return x.ops
}

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
