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
	producer := map[sim.Link]int{}
	consumer := map[sim.Link]int{}
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
				s.actors = append(s.actors, actor{opened: -1, ch: c, rank: r, lane: l, host: host, ops: lane.Ops, waits: lane.Waits, siblings: sib})
				for i := range lane.Ops {
					o := &lane.Ops[i]
					if o.Count == 0 {
						continue
					}
					if err := checkPeers(o, n); err != nil {
						return fmt.Errorf("channel %d rank %d lane %d op %d (%v): %w", c, r, l, i, *o, err)
					}
					for _, q := range o.Sends() {
						producer[sim.Link{Channel: c, Src: r, Dst: q, Conn: o.Conn}] = me
					}
					for _, q := range o.Recvs() {
						consumer[sim.Link{Channel: c, Src: q, Dst: r, Conn: o.Conn}] = me
					}
				}
			}
		}
	}
	byLink := map[sim.Link]*conn{}
	for l, pr := range producer {
		co, ok := consumer[l]
		if !ok {
			return fmt.Errorf("channel %d: rank %d sends to rank %d on connection %d, which never receives from it", l.Channel, l.Src, l.Dst, l.Conn)
		}
		byLink[l] = &conn{link: l, producer: pr, consumer: co, credits: protocols.NSteps}
	}
	for l := range consumer {
		if _, ok := producer[l]; !ok {
			return fmt.Errorf("channel %d: rank %d receives from rank %d on connection %d, which never sends to it", l.Channel, l.Dst, l.Src, l.Conn)
		}
	}
	s.wire(byLink)
	// Every actor's Ops name their connections once, here, not at every
	// Op the clock starts.
	for i := range s.actors {
		a := &s.actors[i]
		a.at = make([]int32, 2*len(a.ops)+1)
		for j := range a.ops {
			o := &a.ops[j]
			if o.Count > 0 {
				for _, q := range o.Recvs() {
					a.conns = append(a.conns, byLink[sim.Link{Channel: a.ch, Src: q, Dst: a.rank, Conn: o.Conn}])
				}
			}
			a.at[2*j+1] = int32(len(a.conns))
			if o.Count > 0 {
				for _, q := range o.Sends() {
					a.conns = append(a.conns, byLink[sim.Link{Channel: a.ch, Src: a.rank, Dst: q, Conn: o.Conn}])
				}
			}
			a.at[2*j+2] = int32(len(a.conns))
		}
	}
	return nil
}

// wire sorts the connections (for a deterministic order), marks those
// between hosts and gives them their flows and resources.
func (s *Sim) wire(byLink map[sim.Link]*conn) {
	p, topo := s.p, s.p.Topo
	for _, c := range byLink {
		s.conns = append(s.conns, c)
	}
	sortConns(s.conns)
	// One block of connections in their order, for the cache.
	block := make([]conn, len(s.conns))
	for i, c := range s.conns {
		block[i] = *c
		s.conns[i] = &block[i]
		byLink[c.link] = &block[i]
	}
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

// checkPeers rejects what the model does not replay: multicast regions
// (NVLS) and the CollNet server.
func checkPeers(o *algos.Op, n int) error {
	for _, q := range append(o.Sends(), o.Recvs()...) {
		if q < 0 || q >= n {
			return fmt.Errorf("peer %d: only ranks 0..%d are modelled (no multicast region or CollNet server)", q, n-1)
		}
	}
	return nil
}

func sortConns(cs []*conn) {
	slices.SortFunc(cs, func(a, b *conn) int {
		return cmp.Or(cmp.Compare(a.link.Channel, b.link.Channel), cmp.Compare(a.link.Src, b.link.Src),
			cmp.Compare(a.link.Dst, b.link.Dst), cmp.Compare(a.link.Conn, b.link.Conn))
	})
}
