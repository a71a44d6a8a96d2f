package algos

// NVLS: NVLink SHARP made real on shared memory (NVIDIA/nccl
// src/device/reduce_scatter.h, all_reduce.h and all_gather.h, the NVLS
// runners; seed 000 "NVLS Algorithm"; the design study
// shared/reference/wave2-algorithms-design.md §2.3).
//
// On an NVSwitch the switch reduces: every rank of a node is the head of
// its share of the buffer, a head's multimem load-reduce reads the same
// offset of every rank's memory at once and gets the reduction, and a
// multimem store writes one value into every rank's memory. Here every rank
// of a host is the head of its share too, and the switch's two tricks are
// one Op each, whatever the number of ranks:
//
//   - scatter: a rank sends every head its share of its Input (connection
//     index 1; NCCL's prims.scatter into the heads' unicast slots);
//   - load-reduce: a head receives its share from every other rank at once
//     and reduces it with its own Input (a fan-in Op);
//   - multicast store: the head writes the result once into its multicast
//     region (McastPeer), which every other rank of the host reads;
//   - gather: a rank reads every other head's region at once into Output.
//
// Reduce-scatter is scatter + load-reduce; all-gather is multicast store +
// gather; all-reduce is all four over loops of one chunk per head. Each
// stage is a lane of its own, so that they pipeline, and every chunk takes
// the same number of steps at 2 ranks as at 64 (NCCL's O(1)). All-reduce
// on three ranks, one loop (chunk h is head h's):
//
//	lane      rank 0                         rank 1 (rank 2 alike)
//	scatter   in[c1] -> 1, in[c2] -> 2       in[c0] -> 0, in[c2] -> 2
//	reduce    {1,2} + in[c0] -> out[c0], mcast 0
//	                                         {0,2} + in[c1] -> out[c1], mcast 1
//	gather    mcast 1 -> out[c1], mcast 2 -> out[c2]
//
// NVLS_TREE (all-reduce across hosts): inside every host as above; head h
// of every host joins a binary tree of the heads of index h (Btree over the
// hosts): its load-reduce also takes its child heads' partial results and
// goes up to its parent, and the result comes down again, stored into the
// head's multicast region and sent on to its children.

import (
	"errors"
	"fmt"
	"math"

	"github.com/seed-760dd1f1/cc/protocols"
)

// nvlsConn is the connection index of every NVLS Op: the scatter to a
// local head and the links of the heads' tree use index 1, so that a pair
// of ranks that also runs a ring keeps the two apart.
const nvlsConn = 1

// nvlsLastAlign is the bytes a short last all-reduce loop's per-head chunk
// is rounded up to (NCCL: alignUp(divUp(rem, nHeads), 16384/sizeof(T))), so
// that small buffers land entirely on head 0.
const nvlsLastAlign = 16384

// NvlsReduceScatter returns rank's schedule for part p of an NVLS
// reduce-scatter of count elements per rank over the ranks of t, which
// must share one host: a scatter lane and a load-reduce lane, one Op per
// chunk each. It panics on invalid arguments.
func NvlsReduceScatter(rank int, t *Topo, count int64, p Part) Schedule {
	mustCheck("nvls reduce-scatter", checkNvls(rank, t, p, false))
	heads, me := nvlsHeads(t, rank)
	if len(heads) == 1 {
		return nvlsCopy(p.Offset, p.Offset, p.Count, true)
	}
	others := without(heads, me)
	offs := make([]int64, len(others))
	for k, h := range others {
		offs[k] = int64(h) * count
	}
	scatterFan, reduceFan := &Fan{Send: others[1:], SendOff: offs}, fanOf(others[1:], nil)
	var scatter, reduce []Op
	for o, n := range chunks(p.Offset, p.Count, p.Chunk) {
		scatter = append(scatter, Op{RecvFrom: NoPeer, SendTo: others[0], Fan: scatterFan, Conn: nvlsConn,
			Src: Input, SrcOff: o, Count: n})
		reduce = append(reduce, Op{RecvFrom: others[0], SendTo: NoPeer, Fan: reduceFan, Conn: nvlsConn,
			Src: Input, SrcOff: int64(rank)*count + o, Dst: Output, DstOff: o, Count: n, Reduce: true, PostOp: true})
	}
	return Schedule{Lanes: []Lane{{Ops: scatter}, {Ops: reduce}}, InOrder: true}
}

// NvlsAllGather returns rank's schedule for part p of an NVLS all-gather
// of count elements per rank over the ranks of t, which must share one
// host: a lane that stores rank's Input into Output and its multicast
// region, and a lane that gathers every other rank's region. It panics on
// invalid arguments.
func NvlsAllGather(rank int, t *Topo, count int64, p Part) Schedule {
	others, offs, alone := nvlsGatherPeers(rank, t, count, p)
	if others == nil {
		return alone
	}
	own := int64(rank) * count
	srcs := make([]int, len(others))
	for k, h := range others {
		srcs[k] = McastPeer(t.NRanks, h)
	}
	gatherFan := &Fan{Recv: srcs[1:], RecvOff: offs}
	var bcast, gather []Op
	for o, n := range chunks(p.Offset, p.Count, p.Chunk) {
		bcast = append(bcast, Op{RecvFrom: NoPeer, SendTo: McastPeer(t.NRanks, rank), Conn: nvlsConn,
			Src: Input, SrcOff: o, Dst: Output, DstOff: own + o, Count: n})
		gather = append(gather, Op{RecvFrom: srcs[0], SendTo: NoPeer, Fan: gatherFan, Conn: nvlsConn,
			Dst: Output, DstOff: o, Count: n})
	}
	return Schedule{Lanes: []Lane{{Ops: bcast}, {Ops: gather}}, InOrder: true}
}

// nvlsGatherPeers checks an all-gather's arguments and returns the other
// ranks of rank's host with the offsets of their blocks in Output, or, for
// a host of one rank, nil and its schedule.
func nvlsGatherPeers(rank int, t *Topo, count int64, p Part) (others []int, offs []int64, alone Schedule) {
	mustCheck("nvls all-gather", checkNvls(rank, t, p, false))
	heads, me := nvlsHeads(t, rank)
	if len(heads) == 1 {
		return nil, nil, nvlsCopy(p.Offset, int64(rank)*count+p.Offset, p.Count, false)
	}
	others = without(heads, me)
	offs = make([]int64, len(others))
	for k, h := range others {
		offs[k] = int64(h) * count
	}
	return others, offs, Schedule{}
}

// NvlsAllReduce returns rank's schedule for part p of an NVLS all-reduce
// over the ranks of t, which must share one host; elemSize (bytes) sets
// the alignment of the last loop's chunks. It panics on invalid arguments.
func NvlsAllReduce(rank int, t *Topo, p Part, elemSize int) Schedule {
	mustCheck("nvls all-reduce", checkNvls(rank, t, p, false))
	return nvlsAllReduce(rank, t, p, elemSize, false)
}

// NvlsTreeAllReduce returns rank's schedule for part p of an NVLS_TREE
// all-reduce over the ranks of t, whose hosts must have the same number of
// ranks: NVLS inside every host, a tree of the heads of one index between
// hosts. It panics on invalid arguments.
func NvlsTreeAllReduce(rank int, t *Topo, p Part, elemSize int) Schedule {
	mustCheck("nvls_tree all-reduce", checkNvls(rank, t, p, true))
	return nvlsAllReduce(rank, t, p, elemSize, false)
}

// nvlsAllReduce is both all-reduces: lanes scatter, reduce (or up and
// down, for a head with a parent) and gather, over loops of one chunk per
// local head. Direct (registered buffers) drops the scatter lane: the
// head's load-reduce reads the other local ranks' Input in place.
func nvlsAllReduce(rank int, t *Topo, p Part, elemSize int, direct bool) Schedule {
	heads, me := nvlsHeads(t, rank)
	node := nvlsTreeNode(t, rank)
	if len(heads) == 1 && t.NHosts() == 1 {
		return nvlsCopy(p.Offset, p.Offset, p.Count, true)
	}
	others := without(heads, me)
	// The head's load-reduce takes every other local rank's share, then its
	// children's; its result goes to its multicast region (if the host has
	// readers) and its children, or up to its parent.
	recvs := append(append([]int(nil), others...), node.Down...)
	var reads []int // the local ranks whose Input the head reads in place
	if direct {
		recvs, reads = node.Down, others
	}
	var down []int
	if len(others) > 0 {
		down = append(down, McastPeer(t.NRanks, rank))
	}
	down = append(down, node.Down...)

	var scatter, up, dn, gather []Op
	lastAlign := max(nvlsLastAlign/int64(max(elemSize, 1)), 1)
	n := int64(len(heads))
	for base := p.Offset; base < p.Offset+p.Count; base += n * p.Chunk {
		chunk := nvlsLoopChunk(p.Offset+p.Count-base, n, p.Chunk, lastAlign)
		share := func(j int) int64 { return min(max(p.Offset+p.Count-base-int64(j)*chunk, 0), chunk) }
		// Scatter and gather: one Op per distinct share (a short last loop
		// has full heads, one partial head and empty ones).
		for _, g := range shareGroups(heads, me, share) {
			if len(g.peers) == 0 {
				continue
			}
			offs := make([]int64, len(g.peers))
			srcs := make([]int, len(g.peers))
			for k, j := range g.local {
				offs[k] = int64(j) * chunk
				srcs[k] = McastPeer(t.NRanks, g.peers[k])
			}
			if !direct {
				scatter = append(scatter, Op{RecvFrom: NoPeer, SendTo: g.peers[0], Fan: &Fan{Send: g.peers[1:], SendOff: offs},
					Conn: nvlsConn, Src: Input, SrcOff: base, Count: g.count})
			}
			gather = append(gather, Op{RecvFrom: srcs[0], SendTo: NoPeer, Fan: &Fan{Recv: srcs[1:], RecvOff: offs},
				Conn: nvlsConn, Dst: Output, DstOff: base, Count: g.count})
		}
		m := share(me)
		if m == 0 {
			continue
		}
		off := base + int64(me)*chunk
		up = append(up, nvlsReduceOp(recvs, reads, node, down, off, m))
		if node.Up != NoPeer {
			dn = append(dn, nvlsDownOp(node.Up, down, off, m))
		}
	}
	if direct {
		// No scatter: a head reads share h of every Input before it
		// stores it, and a rank gathers share h only after that store,
		// so an in-place gather never overwrites Input a head still reads.
		s := Schedule{Lanes: []Lane{{Ops: up}}}
		if node.Up != NoPeer {
			s.Lanes = append(s.Lanes, Lane{Ops: dn, Waits: downAfterUp(len(dn), 0)})
		}
		s.Lanes = append(s.Lanes, Lane{Ops: gather})
		s.InOrder = t.NHosts() == 1 // load-reduce and multicast, then the gather
		return s
	}
	s := Schedule{Lanes: []Lane{{Ops: scatter}, {Ops: up}}}
	if node.Up != NoPeer {
		s.Lanes = append(s.Lanes, Lane{Ops: dn, Waits: downAfterUp(len(dn), 1)})
	}
	// A gather Op writes the Output that its loop's scatter Op reads as
	// Input in place: it waits for it (the scatter lane is lane 0). The
	// wait is always met by the time the heads' results arrive; it says so
	// in the schedule rather than through the other ranks.
	s.Lanes = append(s.Lanes, Lane{Ops: gather, Waits: downAfterUp(len(gather), 0)})
	// Inside one host data flows from each lane to higher ones only
	// (scatter, load-reduce, multicast, gather); a tree of heads also
	// passes results between the load-reduce lanes of ranks.
	s.InOrder = t.NHosts() == 1
	return s
}

// nvlsReduceOp is a head's load-reduce of its share [off, off+m): every
// peer of recvs, its own Input and the Input of every rank of reads (in
// place), to its parent, or, at the root, into Output and on to down (the
// multicast region and the child heads).
func nvlsReduceOp(recvs, reads []int, node TreeNode, down []int, off, m int64) Op {
	op := Op{RecvFrom: NoPeer, SendTo: NoPeer, Conn: nvlsConn, Src: Input, SrcOff: off, Count: m}
	if len(recvs) > 0 {
		op.RecvFrom, op.Reduce = recvs[0], true
	}
	sends := down
	if node.Up != NoPeer {
		sends = []int{node.Up}
	} else {
		op.Dst, op.DstOff, op.PostOp = Output, off, true
	}
	if len(sends) > 0 {
		op.SendTo = sends[0]
	}
	op.Fan = fanOf(tail(recvs), tail(sends))
	if len(reads) > 0 {
		if op.Fan == nil {
			op.Fan = &Fan{}
		}
		op.Fan.Direct, op.Reduce = reads, true
	}
	return op
}

// nvlsDownOp receives a head's reduced share from its parent into Output
// and passes it on to down.
func nvlsDownOp(parent int, down []int, off, m int64) Op {
	op := Op{RecvFrom: parent, SendTo: NoPeer, Conn: nvlsConn, Dst: Output, DstOff: off, Count: m}
	if len(down) > 0 {
		op.SendTo = down[0]
	}
	op.Fan = fanOf(nil, tail(down))
	return op
}

// nvlsLoopChunk is the per-head chunk of an all-reduce loop with rem
// elements left: the full chunk, or for the last, short loop
// alignUp(divUp(rem, heads), lastAlign), at most the full chunk. Example:
// 1000 int32 on 4 heads with a 32768-element chunk: divUp gives 250, the
// 4096-element alignment 4096, so head 0 takes all 1000.
func nvlsLoopChunk(rem, heads, chunk, lastAlign int64) int64 {
	if rem >= heads*chunk {
		return chunk
	}
	return min(alignUp(divUp(rem, heads), lastAlign), chunk)
}

// shareGroup is the other local heads whose share of a loop has count
// elements: their ranks and local indices.
type shareGroup struct {
	count int64
	peers []int
	local []int
}

// shareGroups splits the heads other than local index me by their share,
// leaving out empty shares.
func shareGroups(heads []int, me int, share func(j int) int64) []shareGroup {
	var gs []shareGroup
	for j, h := range heads {
		c := share(j)
		if j == me || c == 0 {
			continue
		}
		k := len(gs) - 1
		if k < 0 || gs[k].count != c {
			gs = append(gs, shareGroup{count: c})
			k++
		}
		gs[k].peers = append(gs[k].peers, h)
		gs[k].local = append(gs[k].local, j)
	}
	return gs
}

// nvlsCopy is the schedule of a host of one rank and no other host: Input
// to Output, with the post-operation when the collective reduces.
func nvlsCopy(src, dst, count int64, post bool) Schedule {
	if count == 0 {
		return Single(nil)
	}
	return Single([]Op{{RecvFrom: NoPeer, SendTo: NoPeer, Src: Input, SrcOff: src, Dst: Output, DstOff: dst,
		Count: count, PostOp: post}})
}

// nvlsHeads returns the ranks of rank's host, the heads of NVLS, and
// rank's index among them.
func nvlsHeads(t *Topo, rank int) (heads []int, me int) {
	h, i := t.Host(rank)
	return t.Hosts[h], i
}

// nvlsTreeNode is rank's place in the tree of the heads of its local index
// across hosts: Btree over the hosts, each host represented by its rank of
// that index.
func nvlsTreeNode(t *Topo, rank int) TreeNode {
	h, i := t.Host(rank)
	b := Btree(t.NHosts(), h)
	node := TreeNode{Up: NoPeer}
	if b.Up != NoPeer {
		node.Up = t.Hosts[b.Up][i]
	}
	for _, c := range b.Down {
		if c != NoPeer {
			node.Down = append(node.Down, t.Hosts[c][i])
		}
	}
	return node
}

// without returns heads without index me.
func without(heads []int, me int) []int {
	out := make([]int, 0, len(heads)-1)
	out = append(out, heads[:me]...)
	return append(out, heads[me+1:]...)
}

// tail is ps without its first element (nil when it has none).
func tail(ps []int) []int {
	if len(ps) < 2 {
		return nil
	}
	return ps[1:]
}

// NvlsUnavailable says why NVLS (tree: NVLS_TREE) cannot run on t, or ""
// if it can: NVLS needs one host of 2 to MaxPeers ranks; NVLS_TREE needs
// several hosts of the same number of ranks, at least 2, and few enough
// that a head's load-reduce (the other local ranks and two child heads)
// stays within MaxPeers.
func NvlsUnavailable(t *Topo, tree bool) string {
	ppn := t.MaxPerHost()
	switch {
	case !tree && t.NHosts() > 1:
		return fmt.Sprintf("NVLS runs inside one host and the job spans %d hosts (NVLS_TREE runs all-reduce across hosts)", t.NHosts())
	case tree && t.NHosts() == 1:
		return "NVLS_TREE runs across hosts and the job has one host (NVLS runs inside it)"
	case ppn < 2:
		return "NVLS needs at least 2 ranks on a host and every host has 1"
	case !tree && ppn > MaxPeers:
		return fmt.Sprintf("NVLS runs on at most %d ranks of a host and the host has %d", MaxPeers, ppn)
	case tree && ppn+1 > MaxPeers:
		return fmt.Sprintf("NVLS_TREE runs on at most %d ranks per host and a host has %d", MaxPeers-1, ppn)
	}
	for h, rs := range t.Hosts {
		if len(rs) != ppn {
			return fmt.Sprintf("NVLS_TREE needs the same number of ranks on every host: host %d has %d, another %d", h, len(rs), ppn)
		}
	}
	return ""
}

// checkNvls validates the arguments of the NVLS generators.
func checkNvls(rank int, t *Topo, p Part, tree bool) error {
	if err := checkTree(rank, t, p); err != nil {
		return err
	}
	if p.Offset > math.MaxInt64/2-p.Count {
		return fmt.Errorf("part [%d, +%d): too large", p.Offset, p.Count)
	}
	switch {
	case !tree && t.NHosts() > 1:
		return fmt.Errorf("%d hosts: NVLS runs inside one host", t.NHosts())
	case t.MaxPerHost() > MaxPeers:
		return fmt.Errorf("%d ranks on a host: at most %d", t.MaxPerHost(), MaxPeers)
	case tree && t.NHosts() > 1 && t.MaxPerHost()+1 > MaxPeers:
		return fmt.Errorf("%d ranks on a host: at most %d with NVLS_TREE", t.MaxPerHost(), MaxPeers-1)
	}
	for _, rs := range t.Hosts {
		if len(rs) != len(t.Hosts[0]) {
			return errors.New("hosts of different rank counts: NVLS_TREE needs the same on every host")
		}
	}
	return nil
}

// nvlsRow is the table's row of NVLS for coll (tree: NVLS_TREE
// all-reduce): Simple only, one FIFO slot per chunk and per slice (NCCL's
// NVLS runs Simple only, with chunkSteps = sliceSteps = 1).
func nvlsRow(coll Coll, tree bool) Algorithm {
	r := Algorithm{Algo: NVLS, Coll: coll, Chunk: nvlsChunk,
		Peers: func(a *Args) []Link { return nvlsPeers(a, coll) }}
	switch {
	case tree:
		r.Algo = NVLSTree
	case coll != AllReduce && coll != ReduceScatter && coll != AllGather:
		panic(fmt.Sprintf("algos: no NVLS %s", coll))
	}
	r.Gen = func(a *Args) Schedule { return nvlsGen(a, coll, tree) }
	r.Geometry[protocols.Simple] = Geometry{ChunkSteps: 1, SliceSteps: 1}
	return r
}

// DefaultNVLSChunk is NCCL_NVLS_CHUNKSIZE's default, in bytes (NCCL's
// nvlsChunkSize).
const DefaultNVLSChunk = 128 << 10

// nvlsChunk is NCCL's NVLS chunk (calcCollChunking in src/enqueue.cc): the
// NVLS chunk size, at most one FIFO slot, halved towards 16 KiB while the
// message would give each of the channels x heads concurrent chunks fewer
// than 64 (down to 64 KiB), 8 (32 KiB) and 2 (16 KiB) chunks. Example: a 1
// MiB all-reduce on 8 heads and one channel: 1 MiB < 64 x 8 x 128 KiB, so
// 64 KiB; 1 MiB < 8 x 8 x 64 KiB, so 32 KiB; 1 MiB >= 2 x 8 x 32 KiB: 32 KiB.
func nvlsChunk(c *ChunkArgs) int64 {
	chunk := int64(c.NVLSChunk)
	if chunk <= 0 {
		chunk = DefaultNVLSChunk
	}
	chunk = min(chunk, int64(c.StepPayload))
	concurrent := int64(max(c.NChannels, 1) * c.Topo.MaxPerHost())
	for _, r := range []struct{ times, to int64 }{{64, 64 << 10}, {8, 32 << 10}, {2, 16 << 10}} {
		if c.Bytes < r.times*concurrent*chunk && chunk > r.to {
			chunk = r.to
		}
	}
	align := max(c.Align, 1)
	return max(chunk/int64(c.ElemSize)/align*align, align)
}

// nvlsPeers are the links of an NVLS row: to and from every other rank of
// the host on connection index 1 (scatter, load-reduce), the rank's own
// multicast region and every other head's (all-reduce, all-gather), and
// for NVLS_TREE the parent and child heads both ways.
func nvlsPeers(a *Args, coll Coll) []Link {
	if a.NRanks() == 1 {
		return nil
	}
	heads, me := nvlsHeads(a.Topo, a.Rank)
	others := without(heads, me)
	var links []Link
	both := func(p int) {
		links = append(links, Link{Peer: p, Conn: nvlsConn, Send: true}, Link{Peer: p, Conn: nvlsConn})
	}
	if coll != AllGather {
		for _, p := range others {
			both(p)
		}
	}
	if coll != ReduceScatter && len(others) > 0 {
		links = append(links, Link{Peer: McastPeer(a.NRanks(), a.Rank), Conn: nvlsConn, Send: true})
		for _, p := range others {
			links = append(links, Link{Peer: McastPeer(a.NRanks(), p), Conn: nvlsConn})
		}
	}
	if coll == AllReduce && a.Topo.NHosts() > 1 {
		node := nvlsTreeNode(a.Topo, a.Rank)
		if node.Up != NoPeer {
			both(node.Up)
		}
		for _, p := range node.Down {
			both(p)
		}
	}
	return links
}
