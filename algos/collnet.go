package algos

// CollNet Direct (NVIDIA/nccl src/device/all_reduce.h runCollNetDirect,
// reduce_scatter.h and all_gather.h's CollNet Direct kernels; seed 000
// "CollNet Direct Algorithm"; shared/reference/wave2-algorithms-design.md
// §2.4).
//
// A switch that reduces (InfiniBand SHARP) turns an all-reduce across hosts
// into one hop up and one hop down, whatever the number of hosts. The
// first H ranks of every host are its heads (H <= 8, NCCL's
// NCCL_MAX_DIRECT_ARITY+1); the buffer is cut in loops of H pieces, and
// head h owns piece h of every loop. Per loop, on every host:
//
//	scatter  every rank sends its Input piece h to head h       (conn 1)
//	reduce   head h: the other ranks' pieces ⊕ its own → switch (conn 1)
//	switch   piece h of every host, reduced in host order       (the server)
//	bcast    head h: switch → Output piece h, and to the others (conn 0)
//	gather   every rank receives piece h from head h → Output   (conn 0)
//
//	   host 0 (H = 2)                     host 1
//	 r0 ─┐ scatter ┌─ r1             r2 ─┐        ┌─ r3
//	     ▼         ▼                     ▼        ▼
//	  head 0     head 1               head 0    head 1
//	     │          └──────┐   ┌────────┘          │
//	     └───────────────┐ │   │ ┌─────────────────┘
//	                  server rail 0 | rail 1
//
// The switch here is an aggregation server, CollNetPeer(nranks) in a
// schedule (NCCL's collnetDirect.out = nRanks); its own schedule is
// CollNetServer, which the simulator runs beside the ranks and the server
// process runs with the engine. The network reduces with sum for
// avg and premulsum, as NCCL's plugin does: the pre-operation applies where
// Input is read, the post-operation once, at the head, on the way down.
//
// Reduce-scatter and all-gather use the rail layout: every rank is a head
// (H = ranks per host), and rail j joins the j-th rank of every host. In a
// reduce-scatter, rank j of a host reduces what its host holds of the
// blocks of rail j (one block per host), the server reduces them across
// hosts and returns each host its own block; in an all-gather every rank
// sends its block to its rail, the server returns every host's block of the
// rail to every host, and the head forwards them to its host's other ranks.

import (
	"errors"
	"fmt"

	"github.com/seed-760dd1f1/cc/protocols"
)

// MaxCollNetHeads is the most heads per host (NCCL_MAX_DIRECT_ARITY+1):
// a head receives from the host's other ranks in one Op, at most MaxFan.
const MaxCollNetHeads = MaxFan

// CollNetPeer is the peer id of the aggregation server in a schedule of
// nranks ranks.
func CollNetPeer(nranks int) int { return nranks }

// CollNetHeads is the number of heads per host CollNet Direct all-reduce
// uses on t when want are asked for (0: as many as possible): at most
// MaxCollNetHeads and the fewest ranks of any host.
func CollNetHeads(t *Topo, want int) int {
	h := MaxCollNetHeads
	if want > 0 {
		h = min(h, want)
	}
	for _, rs := range t.Hosts {
		h = min(h, len(rs))
	}
	return h
}

// collnetPiece is one head's piece of one loop of an all-reduce part.
type collnetPiece struct{ off, n int64 }

// collnetLoops cuts part p into loops of nHeads pieces of at most p.Chunk
// elements: piece h of a loop starts at h pieces after the loop's start. A
// short last loop gives each piece divUp(rest, nHeads) elements rounded up
// to p.Align, so the last heads may get less or nothing (NCCL's last-chunk
// rule). Example: 10 elements, 4 heads, chunk 8, align 4: one loop of
// pieces 4, 4, 2, 0.
func collnetLoops(p Part, nHeads int) [][]collnetPiece {
	var out [][]collnetPiece
	end := p.Offset + p.Count
	for base := p.Offset; base < end; base += int64(nHeads) * p.Chunk {
		size := min(p.Chunk, alignUp(divUp(end-base, int64(nHeads)), p.Align))
		loop := make([]collnetPiece, nHeads)
		for h := range loop {
			off := min(base+int64(h)*size, end)
			loop[h] = collnetPiece{off: off, n: min(size, end-off)}
		}
		out = append(out, loop)
	}
	return out
}

// collnetLanes names a rank's lanes by role; Schedule drops the empty ones
// and renumbers the waits.
type collnetLanes [4]Lane

// schedule keeps the non-empty lanes, with waits pointing at their new
// index (a wait on an empty lane, or for no Ops, is dropped). The lanes
// may run in order (Schedule.InOrder): data flows from each lane to higher
// ones only, scatter to reduce, through the server to bcast, to gather.
func (ls *collnetLanes) schedule() Schedule {
	index := [len(collnetLanes{})]int{}
	s := Schedule{InOrder: true}
	for i, l := range ls {
		index[i] = len(s.Lanes)
		if len(l.Ops) > 0 {
			s.Lanes = append(s.Lanes, Lane{Ops: l.Ops})
		}
	}
	for i, l := range ls {
		if len(l.Ops) == 0 {
			continue
		}
		me := &s.Lanes[index[i]]
		for _, w := range l.Waits {
			if w.Done > 0 && len(ls[w.Lane].Ops) > 0 {
				me.Waits = append(me.Waits, Wait{At: w.At, Lane: index[w.Lane], Done: w.Done})
			}
		}
	}
	return s
}

// waitFor makes the next Op of lane l wait for the first done Ops of lane
// other.
func (ls *collnetLanes) waitFor(l, other int, done int) {
	ls[l].Waits = append(ls[l].Waits, Wait{At: len(ls[l].Ops), Lane: other, Done: done})
}

func (ls *collnetLanes) add(l int, op Op) { ls[l].Ops = append(ls[l].Ops, op) }

// collnetPlace is where a rank sits for CollNet: the server's peer id,
// its host and index there, the host's ranks and the others among them.
type collnetPlace struct {
	server, host, i int
	intra, down     []int
}

func placeOf(rank int, t *Topo) collnetPlace {
	host, i := t.Host(rank)
	intra := t.Hosts[host]
	return collnetPlace{server: CollNetPeer(t.NRanks), host: host, i: i, intra: intra, down: others(intra, i)}
}

// others is the ranks of a host but its i-th.
func others(intra []int, i int) []int {
	out := make([]int, 0, len(intra)-1)
	out = append(out, intra[:i]...)
	return append(out, intra[i+1:]...)
}

// CollNetAllReduce returns rank's schedule for part p of a CollNet Direct
// all-reduce over t with nHeads heads per host (see the file's doc): up to
// four lanes, scatter, reduce and bcast (heads only), gather. It panics if
// rank, t, nHeads or p are invalid.
func CollNetAllReduce(rank int, t *Topo, nHeads int, p Part) Schedule {
	mustCheck("collnet all-reduce", checkCollNet(rank, t, nHeads, p))
	const scatter, reduce, bcast, gather = 0, 1, 2, 3
	pl := placeOf(rank, t)
	server, i, intra, down := pl.server, pl.i, pl.intra, pl.down
	var ls collnetLanes
	for _, loop := range collnetLoops(p, nHeads) {
		// Scatter: Input piece h to head h, from head i%H on (NCCL's shift).
		for k := range nHeads {
			if h := (i + k) % nHeads; h != i && loop[h].n > 0 {
				ls.add(scatter, Op{RecvFrom: NoPeer, SendTo: intra[h], Conn: 1,
					Src: Input, SrcOff: loop[h].off, Count: loop[h].n})
			}
		}
		if mine := loop[min(i, nHeads-1)]; i < nHeads && mine.n > 0 {
			// Reduce: the other ranks' piece ⊕ Input → the server.
			up := Op{RecvFrom: NoPeer, SendTo: server, Conn: 1, Src: Input, SrcOff: mine.off, Count: mine.n}
			if len(down) > 0 {
				up.RecvFrom, up.Fan, up.Reduce = down[0], fanOf(down[1:], nil), true
			}
			ls.add(reduce, up)
			// Bcast: the server's result, post-op'd → Output and the others.
			dn := Op{RecvFrom: server, SendTo: NoPeer, Dst: Output, DstOff: mine.off, Count: mine.n, PostOp: true}
			if len(down) > 0 {
				dn.SendTo, dn.Fan = down[0], fanOf(nil, down[1:])
			}
			ls.waitFor(bcast, reduce, len(ls[reduce].Ops)) // Input read before Output written (in place)
			ls.add(bcast, dn)
		}
		// Gather: piece h from head h → Output, once this loop's Input is sent.
		ls.waitFor(gather, scatter, len(ls[scatter].Ops))
		for k := range nHeads {
			if h := (i + k) % nHeads; h != i && loop[h].n > 0 {
				ls.add(gather, Op{RecvFrom: intra[h], SendTo: NoPeer, Dst: Output, DstOff: loop[h].off, Count: loop[h].n})
			}
		}
	}
	return ls.schedule()
}

// CollNetReduceScatter returns rank's schedule for part p (of every block
// of count elements) of a CollNet Direct reduce-scatter over t in the rail
// layout: every host has the same number of ranks, at most
// MaxCollNetHeads, all heads. Lanes: scatter to the host's other ranks,
// reduce to the server, receive the result. It panics on invalid
// arguments.
func CollNetReduceScatter(rank int, t *Topo, count int64, p Part) Schedule {
	mustCheck("collnet reduce-scatter", checkCollNetRails(rank, t, count, p))
	const scatter, reduce, recv = 0, 1, 2
	pl := placeOf(rank, t)
	server, host, i, intra, down := pl.server, pl.host, pl.i, pl.intra, pl.down
	var ls collnetLanes
	for y, rs := range t.Hosts {
		for o, n := range chunks(p.Offset, p.Count, p.Chunk) {
			// Scatter: rail j's block of host y to the host's rank j.
			for k := 1; k < len(intra); k++ {
				j := (i + k) % len(intra)
				ls.add(scatter, Op{RecvFrom: NoPeer, SendTo: intra[j], Conn: 1,
					Src: Input, SrcOff: int64(rs[j])*count + o, Count: n})
			}
			// Reduce: this host's share of host y's block of rail i.
			up := Op{RecvFrom: NoPeer, SendTo: server, Conn: 1, Src: Input, SrcOff: int64(rs[i])*count + o, Count: n}
			if len(down) > 0 {
				up.RecvFrom, up.Fan, up.Reduce = down[0], fanOf(down[1:], nil), true
			}
			ls.add(reduce, up)
			if y == host {
				// Receive: the block reduced over every host, once Input's
				// own block has been read (in place).
				ls.waitFor(recv, reduce, len(ls[reduce].Ops))
				ls.add(recv, Op{RecvFrom: server, SendTo: NoPeer, Conn: 1, Dst: Output, DstOff: o, Count: n, PostOp: true})
			}
		}
	}
	return ls.schedule()
}

// CollNetAllGather returns rank's schedule for part p (of the block of
// count elements) of a CollNet Direct all-gather over t in the rail layout
// (as CollNetReduceScatter). Lanes: send the block to the server, receive
// every host's block of the rail and forward it to the host's other ranks,
// gather the other rails' blocks from them. It panics on invalid
// arguments.
func CollNetAllGather(rank int, t *Topo, count int64, p Part) Schedule {
	mustCheck("collnet all-gather", checkCollNetRails(rank, t, count, p))
	const send, bcast, gather = 0, 1, 2
	pl := placeOf(rank, t)
	server, host, i, intra, down := pl.server, pl.host, pl.i, pl.intra, pl.down
	var ls collnetLanes
	for o, n := range chunks(p.Offset, p.Count, p.Chunk) {
		ls.add(send, Op{RecvFrom: NoPeer, SendTo: server, Src: Input, SrcOff: o, Count: n})
	}
	for y, rs := range t.Hosts {
		c := 0
		for o, n := range chunks(p.Offset, p.Count, p.Chunk) {
			dn := Op{RecvFrom: server, SendTo: NoPeer, Dst: Output, DstOff: int64(rs[i])*count + o, Count: n}
			if len(down) > 0 {
				dn.SendTo, dn.Fan = down[0], fanOf(nil, down[1:])
			}
			if y == host {
				ls.waitFor(bcast, send, c+1) // Input read before its block of Output is written (in place)
			}
			ls.add(bcast, dn)
			for k := 1; k < len(intra); k++ {
				j := (i + k) % len(intra)
				ls.add(gather, Op{RecvFrom: intra[j], SendTo: NoPeer, Dst: Output, DstOff: int64(rs[j])*count + o, Count: n})
			}
			c++
		}
	}
	return ls.schedule()
}

// CollNetServer returns the aggregation server's schedule for rail (head
// index) rail of one channel: heads[x] is the rank of host x's head of the
// rail, nHeads the heads per host, count and p the ranks' collective count
// and part. All-reduce receives each loop's piece of the rail from every
// host (conn 1) and reduces it, in host order, into its scratch Output at
// the piece's offset minus base, then sends it to every host (conn 0): two
// lanes, as one Op cannot receive on one connection index and send on the
// other. Reduce-scatter reduces each chunk of host y's block and sends it
// to host y; all-gather sends each chunk of host y's block to every host:
// one lane each, without scratch.
func CollNetServer(coll Coll, heads []int, rail, nHeads int, count int64, p Part, base int64) Schedule {
	if len(heads) == 0 || len(heads) > MaxFan {
		panic(fmt.Sprintf("algos: collnet server: %d hosts: must be in [1, %d]", len(heads), MaxFan))
	}
	first, rest := heads[0], heads[1:]
	var ls collnetLanes
	switch coll {
	case AllReduce:
		for _, loop := range collnetLoops(p, nHeads) {
			pc := loop[rail]
			if pc.n == 0 {
				continue
			}
			ls.add(0, Op{RecvFrom: first, SendTo: NoPeer, Fan: fanOf(rest, nil), Conn: 1, Reduce: len(rest) > 0,
				Dst: Output, DstOff: pc.off - base, Count: pc.n})
			ls.waitFor(1, 0, len(ls[0].Ops))
			ls.add(1, Op{RecvFrom: NoPeer, SendTo: first, Fan: fanOf(nil, rest), Src: Output, SrcOff: pc.off - base, Count: pc.n})
		}
	case ReduceScatter:
		for y := range heads {
			for _, n := range chunks(p.Offset, p.Count, p.Chunk) {
				ls.add(0, Op{RecvFrom: first, SendTo: heads[y], Fan: fanOf(rest, nil), Conn: 1, Reduce: len(rest) > 0, Count: n})
			}
		}
	case AllGather:
		for y := range heads {
			for _, n := range chunks(p.Offset, p.Count, p.Chunk) {
				ls.add(0, Op{RecvFrom: heads[y], SendTo: first, Fan: fanOf(nil, rest), Count: n})
			}
		}
	default:
		panic(fmt.Sprintf("algos: collnet server: %v: want AllReduce, ReduceScatter or AllGather", coll))
	}
	return ls.schedule()
}

// CollNetServerAll is the server's schedule for every rail of one channel
// of a collective over t (nHeads: CollNetHeads' want; all-reduce only),
// the lanes of rail 0 first: what the simulator runs as the server agent.
func CollNetServerAll(coll Coll, t *Topo, nHeads int, count int64, p Part) Schedule {
	rails := t.MaxPerHost()
	if coll == AllReduce {
		rails = CollNetHeads(t, nHeads)
	}
	var s Schedule
	for rail := range rails {
		heads := make([]int, t.NHosts())
		for x, rs := range t.Hosts {
			heads[x] = rs[rail]
		}
		base := len(s.Lanes)
		for _, l := range CollNetServer(coll, heads, rail, rails, count, p, 0).Lanes {
			for i := range l.Waits {
				l.Waits[i].Lane += base
			}
			s.Lanes = append(s.Lanes, l)
		}
	}
	return s
}

// CollNetRuns says why CollNet Direct cannot run coll on t, or nil if it
// can: a head receives from every other rank of its host and the server
// from every host in one Op (at most MaxFan each), and reduce-scatter and
// all-gather need the same number of ranks on every host.
func CollNetRuns(coll Coll, t *Topo) error {
	switch {
	case coll != AllReduce && coll != ReduceScatter && coll != AllGather:
		return fmt.Errorf("CollNet Direct has no %v", coll)
	case t.MaxPerHost() > MaxCollNetHeads:
		return fmt.Errorf("a host has %d ranks, CollNet Direct takes at most %d per host", t.MaxPerHost(), MaxCollNetHeads)
	case t.NHosts() > MaxFan:
		return fmt.Errorf("%d hosts, the aggregation server takes at most %d", t.NHosts(), MaxFan)
	case coll != AllReduce && CollNetHeads(t, 0) != t.MaxPerHost():
		return fmt.Errorf("%v needs the same number of ranks on every host (the rail layout), hosts have %d to %d", coll, CollNetHeads(t, 0), t.MaxPerHost())
	}
	return nil
}

// checkCollNet validates CollNetAllReduce's arguments.
func checkCollNet(rank int, t *Topo, nHeads int, p Part) error {
	if err := checkTree(rank, t, p); err != nil {
		return err
	}
	if most := CollNetHeads(t, 0); nHeads < 1 || nHeads > most {
		return fmt.Errorf("%d heads per host: must be in [1, %d] (the fewest ranks of a host, at most %d)", nHeads, most, MaxCollNetHeads)
	}
	if t.MaxPerHost() > MaxFan {
		return fmt.Errorf("a host has %d ranks: a head receives from at most %d", t.MaxPerHost(), MaxFan)
	}
	if t.NHosts() > MaxFan {
		return fmt.Errorf("%d hosts: the server receives from at most %d", t.NHosts(), MaxFan)
	}
	return nil
}

// checkCollNetRails validates the rail layout's arguments.
func checkCollNetRails(rank int, t *Topo, count int64, p Part) error {
	if t == nil || t.NRanks < 1 || len(t.host) != t.NRanks {
		return errors.New("no topology: build it with NewTopo")
	}
	if err := checkBlocks(rank, t.NRanks, count, p); err != nil {
		return err
	}
	ppn := len(t.Hosts[0])
	if ppn != t.MaxPerHost() || ppn != CollNetHeads(t, 0) {
		return fmt.Errorf("hosts of %d to %d ranks: the rail layout needs the same number on every host, at most %d", CollNetHeads(t, 0), t.MaxPerHost(), MaxCollNetHeads)
	}
	if t.NHosts() > MaxFan {
		return fmt.Errorf("%d hosts: the server receives from at most %d", t.NHosts(), MaxFan)
	}
	return nil
}

// collnetRow is the table's row for CollNet Direct collective c: Simple
// only, one FIFO slot per chunk and slice (NCCL runs CollNet with Simple).
func collnetRow(c Coll) Algorithm {
	gen := map[Coll]func(a *Args) Schedule{
		AllReduce: func(a *Args) Schedule {
			return CollNetAllReduce(a.Rank, a.Topo, CollNetHeads(a.Topo, a.CollNetHeads), a.Part)
		},
		ReduceScatter: func(a *Args) Schedule { return CollNetReduceScatter(a.Rank, a.Topo, a.Count, a.Part) },
		AllGather:     func(a *Args) Schedule { return CollNetAllGather(a.Rank, a.Topo, a.Count, a.Part) },
	}[c]
	r := Algorithm{Algo: CollNetDirect, Coll: c, WritesOutputOnce: true, Gen: gen,
		Peers: func(a *Args) []Link {
			// One element per head and chunk uses every link.
			b := *a
			b.Count = int64(MaxCollNetHeads)
			b.Part = Part{Count: b.Count, Chunk: 1, Align: 1}
			return gen(&b).Links()
		}}
	r.Geometry[protocols.Simple] = Geometry{ChunkSteps: 1, SliceSteps: 1}
	return r
}
