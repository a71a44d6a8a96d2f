package timed

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/algos/sim"
	"github.com/seed-760dd1f1/cc/protocols"
)

// build makes the actors, the connections their Ops use and the resources.
func (s *Sim) build(channels [][]algos.Schedule) error {
	p, topo := s.p, s.p.Topo
	n := topo.NRanks
	if n == 0 {
		return errNoRanks
	}
	s.pool = make([]int, topo.NHosts())
	shared := -1
	if p.SharedCores > 0 {
		shared = s.addResource(fmt.Sprintf("the %d shared cores", p.SharedCores), float64(p.SharedCores))
	}
	for h := range s.pool {
		switch {
		case shared >= 0:
			s.pool[h] = shared
		case p.Cores > 0:
			s.pool[h] = s.addResource(fmt.Sprintf("cores of host %d", h), float64(p.Cores))
		default:
			s.pool[h] = -1
		}
	}
	s.poolRes = make([][]int, len(s.pool))
	for h, r := range s.pool {
		if r >= 0 {
			s.poolRes[h] = []int{r}
		}
	}
	// Every connection gets an id at its first sight, and every actor's
	// Ops the ids of their connections, once, here, not at every Op the
	// clock starts.
	ids := map[sim.Link]int32{}
	var links []sim.Link
	var producer, consumer []int
	id := func(l sim.Link) int32 {
		i, ok := ids[l]
		if !ok {
			i = int32(len(links))
			ids[l] = i
			links = append(links, l)
			producer, consumer = append(producer, -1), append(consumer, -1)
		}
		return i
	}
	lanes := 0
	for _, scheds := range channels {
		for _, sched := range scheds {
			lanes += len(sched.Lanes)
		}
	}
	s.actors = make([]actor, 0, lanes)
	s.lanes = make([]laneState, lanes)
	idsOf := make([]laneIDs, 0, lanes) // of each actor, as its segments will hold them
	for c, scheds := range channels {
		if len(scheds) != n {
			return fmt.Errorf("channel %d: %d schedules for %d ranks: need one per rank", c, len(scheds), n)
		}
		for r, sched := range scheds {
			if len(sched.Slots) > 0 {
				return fmt.Errorf("channel %d rank %d: slot schedules (PAT) are not modelled", c, r)
			}
			if err := sched.CheckLanes(); err != nil {
				return fmt.Errorf("channel %d rank %d: %w", c, r, err)
			}
			host, _ := topo.Host(r)
			first := len(s.actors)
			sib := make([]int, len(sched.Lanes))
			for l := range sched.Lanes {
				sib[l] = first + l
			}
			for l, lane := range sched.Lanes {
				me := len(s.actors)
				var ids laneIDs
				var segs []segment
				for i := range lane.Ops {
					o := &lane.Ops[i]
					direct := 0
					if o.Fan != nil {
						direct = len(o.Fan.Direct)
					}
					if i > 0 && o.Count == lane.Ops[i-1].Count && direct == segs[len(segs)-1].direct && (o.Count == 0 || samePeers(o, &lane.Ops[i-1])) {
						segs[len(segs)-1].end = i + 1 // the segment's connections, checked
						continue
					}
					lo := int32(len(ids.ids))
					mid := lo
					if o.Count > 0 {
						if err := checkPeers(o, n); err != nil {
							return fmt.Errorf("channel %d rank %d lane %d op %d (%v): %w", c, r, l, i, *o, err)
						}
						for _, q := range o.Recvs() {
							k := id(sim.Link{Channel: c, Src: q, Dst: r, Conn: o.Conn})
							consumer[k] = me
							ids.ids = append(ids.ids, k)
						}
						mid = int32(len(ids.ids))
						for _, q := range o.Sends() {
							k := id(sim.Link{Channel: c, Src: r, Dst: q, Conn: o.Conn})
							producer[k] = me
							ids.ids = append(ids.ids, k)
						}
					}
					segs = append(segs, segment{end: i + 1, count: o.Count, direct: direct})
					ids.spans = append(ids.spans, [3]int32{lo, mid, int32(len(ids.ids))})
				}
				a := actor{opened: -1, loaded: -1, ch: c, rank: r, lane: l, host: host, ops: lane.Ops, nops: len(lane.Ops),
					runs: waitRuns(lane.Waits, first), segs: segs, siblings: sib}
				if len(segs) > 0 {
					a.segEnd, a.segCount = segs[0].end, segs[0].count
				}
				s.actors = append(s.actors, a)
				idsOf = append(idsOf, ids)
			}
		}
	}
	// The connections in one block, sorted (for a deterministic order and
	// for the cache).
	order := make([]int32, len(links))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, func(i, j int32) int { return compareLinks(links[i], links[j]) })
	block := make([]conn, len(links))
	where := make([]*conn, len(links))
	s.conns = make([]*conn, len(links))
	for i, k := range order {
		l := links[k]
		switch {
		case consumer[k] < 0:
			return fmt.Errorf("channel %d: rank %d sends to rank %d on connection %d, which never receives from it", l.Channel, l.Src, l.Dst, l.Conn)
		case producer[k] < 0:
			return fmt.Errorf("channel %d: rank %d receives from rank %d on connection %d, which never sends to it", l.Channel, l.Dst, l.Src, l.Conn)
		}
		block[i] = conn{link: l, producer: producer[k], consumer: consumer[k], credits: protocols.NSteps}
		where[k], s.conns[i] = &block[i], &block[i]
	}
	for i, ids := range idsOf {
		a := &s.actors[i]
		conns := make([]*conn, len(ids.ids))
		for j, k := range ids.ids {
			conns[j] = where[k]
		}
		for j, sp := range ids.spans {
			a.segs[j].recv, a.segs[j].send = conns[sp[0]:sp[1]:sp[1]], conns[sp[1]:sp[2]:sp[2]]
		}
	}
	s.wire()
	return nil
}

// wire marks the connections between hosts and gives them their flows and resources.
func (s *Sim) wire() {
	p, topo := s.p, s.p.Topo
	nh := topo.NHosts()
	up, down := make([]int, nh), make([]int, nh)
	for h := range nh {
		up[h], down[h] = -1, -1
		if p.Uplink > 0 {
			up[h] = s.addResource(fmt.Sprintf("uplink of host %d", h), p.Uplink)
		}
		if p.Downlink > 0 {
			down[h] = s.addResource(fmt.Sprintf("downlink of host %d", h), p.Downlink)
		}
	}
	var leafUp, leafDown []int
	if f := p.Fabric; f != nil {
		for l := 0; l*f.HostsPerLeaf < nh; l++ {
			rate := float64(f.HostsPerLeaf) * p.Uplink / f.Oversub
			leafUp = append(leafUp, s.addResource(fmt.Sprintf("uplink of leaf %d", l), rate))
			leafDown = append(leafDown, s.addResource(fmt.Sprintf("downlink of leaf %d", l), rate))
		}
	}
	for _, c := range s.conns {
		c.srcHost, _ = topo.Host(c.link.Src)
		c.dstH, _ = topo.Host(c.link.Dst)
		if c.srcHost == c.dstH && !(p.Wrap && c.link.Dst <= c.link.Src) {
			continue
		}
		c.inter = true
		f := &flow{c: c, cap: math.Inf(1)}
		if p.FlowCap > 0 {
			f.cap = p.FlowCap
		}
		for _, r := range []int{up[c.srcHost], down[c.dstH]} {
			if r >= 0 {
				f.res = append(f.res, r)
			}
		}
		if p.Fabric != nil && c.srcHost != c.dstH {
			if ls, ld := c.srcHost/p.Fabric.HostsPerLeaf, c.dstH/p.Fabric.HostsPerLeaf; ls != ld {
				f.res = append(f.res, leafUp[ls], leafDown[ld])
			}
		}
		for _, sl := range p.SlowLinks {
			if (sl.A == c.srcHost && sl.B == c.dstH) || (sl.A == c.dstH && sl.B == c.srcHost) {
				f.cap = min(f.cap, s.linkRate()/sl.Factor)
			}
		}
		c.flow = f
	}
	if b := p.Bucket; b != nil {
		// An empty bucket on every host link, an entry for every resource.
		s.buckets = make([]*tokenBucket, len(s.res))
		for _, links := range [][]int{up, down} {
			for _, r := range links {
				if r >= 0 {
					s.buckets[r] = &tokenBucket{rate: s.res[r].capacity, peak: b.Peak, size: b.Size}
				}
			}
		}
	}
}

// linkRate is the rate a slow link is slowed from: the host links' rate,
// else the flow cap.
func (s *Sim) linkRate() float64 {
	switch {
	case s.p.Uplink > 0 && s.p.Downlink > 0:
		return min(s.p.Uplink, s.p.Downlink)
	case s.p.Uplink > 0:
		return s.p.Uplink
	case s.p.Downlink > 0:
		return s.p.Downlink
	case s.p.FlowCap > 0:
		return s.p.FlowCap
	}
	return math.Inf(1)
}

// laneIDs are the connection ids of a lane's segments: segment j
// receives on ids[spans[j][0]:spans[j][1]] and sends on
// ids[spans[j][1]:spans[j][2]].
type laneIDs struct {
	ids   []int32
	spans [][3]int32
}

// samePeers reports whether two Ops use the same connections.
func samePeers(o, p *algos.Op) bool {
	return o.RecvFrom == p.RecvFrom && o.SendTo == p.SendTo && o.Conn == p.Conn && o.Fan == p.Fan
}

// waitRuns makes a lane's Waits, sorted by Op, into runs (waitRun); the
// lane's first sibling is actor first. Only Waits on Ops apart make runs,
// so that runs never overlap; with two Waits on one Op every Wait is a run
// of its own.
func waitRuns(ws []algos.Wait, first int) []waitRun {
	apart := true
	for i := 1; i < len(ws); i++ {
		apart = apart && ws[i].At > ws[i-1].At
	}
	var runs []waitRun
	for _, w := range ws {
		if n := len(runs); apart && n > 0 {
			if r := &runs[n-1]; w.At == r.end && first+w.Lane == r.sib && w.Done == r.done+r.end-r.at {
				r.end++
				continue
			}
		}
		runs = append(runs, waitRun{at: w.At, end: w.At + 1, sib: first + w.Lane, done: w.Done})
	}
	return runs
}

// checkPeers rejects what the model does not replay: multicast regions
// (NVLS) and the CollNet server.
func checkPeers(o *algos.Op, n int) error {
	for _, peers := range [2][]int{o.Sends(), o.Recvs()} {
		for _, q := range peers {
			if q < 0 || q >= n {
				return fmt.Errorf("peer %d: only ranks 0..%d are modelled (no multicast region or CollNet server)", q, n-1)
			}
		}
	}
	return nil
}

func compareLinks(a, b sim.Link) int {
	return cmp.Or(cmp.Compare(a.Channel, b.Channel), cmp.Compare(a.Src, b.Src), cmp.Compare(a.Dst, b.Dst), cmp.Compare(a.Conn, b.Conn))
}
