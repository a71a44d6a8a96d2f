package predict

// Shortcuts for replays too large to run exactly (issue 22, reference
// simulation-at-scale.md §4.5), each with the bound of the error it adds.
//
// Folding: a ring's hosts are identical under rotation by one host when no
// what-if singles one out, so one host's ranks stand for all of them: the
// last rank's send wraps to the first rank over the host's uplink and the
// downlink that stands for the next host's (timed.Params.Wrap). The fold
// needs every chunk the same size, so the count is rounded up to a
// multiple of nranks x the alignment; the bound is what the added bytes
// cost at the slowest rate a byte meets.
//
// Extrapolation over loops: a tree's chunks follow each other at a
// constant period once the pipeline is full (what NCCL's lat + bytes/bw
// assumes), so the replay runs K/2, K and 2K loops and extends the last
// period to all L loops; the bound is how much the period moved between
// the two halves, times the loops extrapolated.

import (
	"fmt"
	"math"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/runtime/tune"
)

// foldable reports whether a candidate's ranks are identical under
// rotation by one host: a ring that every rank runs alike (not a rooted
// one), on identical hosts and links.
func (c *Config) foldable(k candidate) bool {
	fn, _ := c.Coll.Func()
	return k.row.Algo == algos.Ring && (fn == algos.AllReduce || fn == algos.ReduceScatter || fn == algos.AllGather) &&
		c.Hosts >= 3 && len(c.SlowHosts) == 0 && len(c.SlowLinks) == 0 && len(c.LateStarts) == 0 && c.Fabric == nil && c.SharedCores == 0
}

// fold replays one host's ranks for all of them.
func (c *Config) fold(k candidate, sh shape, count int64) (Entry, error) {
	if err := c.fits(k, sh, count); err != nil {
		return Entry{}, err
	}
	fn, _ := c.Coll.Func()
	full := c.topo()
	n := int64(full.NRanks)
	unit := sh.align
	if fn == algos.AllReduce {
		unit *= n // every chunk of the last loop the same size
	}
	rounded := (count + unit - 1) / unit * unit
	scheds := make([]algos.Schedule, c.PPN)
	for r := range c.PPN {
		mine, next := c.gen(k, sh, full, r, rounded), c.gen(k, sh, full, r+c.PPN, rounded)
		if !sameCounts(mine, next) {
			return Entry{}, fmt.Errorf("ranks %d and %d run Ops of other sizes: not symmetric under rotation, cannot fold", r, r+c.PPN)
		}
		scheds[r] = wrapPeers(mine, c.PPN)
	}
	p := c.params(k, algos.BlockTopo(1, c.PPN), sh.g, sh.step)
	p.Wrap = true
	if c.PPN > 1 {
		// Inside the host the ranks keep their class; between hosts
		// (the wrap) the net class, as params set it.
		p.Intra = c.params(k, full, sh.g, sh.step).Intra
	}
	e, err := c.run(k, p, scheds)
	if err != nil {
		return Entry{}, err
	}
	// The added elements cost at most twice their bytes (an all-reduce
	// sends 2(n-1)/n of its buffer) at the slowest rate a byte meets.
	rate := c.Consts.Class[tune.Net].Beta[k.proto]
	if c.LinkRate > 0 {
		rate = min(rate, c.payloadRate())
	}
	extra := float64(rounded-count) * float64(c.ElemSize) * 2
	e.BoundUS = extra / rate / 1000
	e.Transfers *= int64(c.Hosts)
	e.Shortcut = fmt.Sprintf("folded %d hosts into 1, count +%d", c.Hosts, rounded-count)
	return e, nil
}

// sameCounts reports whether two single-lane schedules run Ops of the
// same sizes in the same order.
func sameCounts(a, b algos.Schedule) bool {
	if len(a.Lanes) != 1 || len(b.Lanes) != 1 || len(a.Lanes[0].Ops) != len(b.Lanes[0].Ops) {
		return false
	}
	for i, o := range a.Lanes[0].Ops {
		if o.Count != b.Lanes[0].Ops[i].Count {
			return false
		}
	}
	return true
}

// wrapPeers maps every peer of a ring schedule onto the folded host's
// ranks: peer q is q mod ppn (the next host's first rank is this host's
// first, the previous host's last this host's last).
func wrapPeers(s algos.Schedule, ppn int) algos.Schedule {
	ops := make([]algos.Op, len(s.Lanes[0].Ops))
	for i, o := range s.Lanes[0].Ops {
		if o.RecvFrom != algos.NoPeer {
			o.RecvFrom %= ppn
		}
		if o.SendTo != algos.NoPeer {
			o.SendTo %= ppn
		}
		ops[i] = o
	}
	return algos.Single(ops)
}

// Settled is when extrapolate stops doubling its loops: once the bound
// of its error is within this share of the time it predicts.
const Settled = 0.005

// loopPlan bounds K for extrapolate: the largest power of two whose 2K
// loops fit the bound, fewer than the call's loops.
func (c *Config) loopPlan(sh shape, count int64) (kmax, loops int64, err error) {
	half := (count + 1) / 2
	loops = (half + sh.chunk - 1) / sh.chunk
	perLoop := max(sh.transfers/max(loops, 1), 1)
	kmax = 2
	for 4*kmax*perLoop <= c.MaxTransfers && 4*kmax < loops {
		kmax *= 2
	}
	if 2*kmax*perLoop > c.MaxTransfers || 2*kmax >= loops {
		return 0, 0, fmt.Errorf("%d ranks need about %d slice transfers a loop: %d loops do not fit the bound of %d (--max-transfers)", c.Hosts*c.PPN, perLoop, 2*kmax, c.MaxTransfers)
	}
	return kmax, loops, nil
}

// extrapolate replays a tree over K/2, K and 2K loops and extends the
// last period to every loop. K starts at the power of two at or above the
// hops of the tree's critical path (up to what the bound allows): the
// period settles only once the pipeline is that deep in loops (at 512 x 8
// ranks, 48 hops, the period rose from 1132 us at 2-4 loops to 1251 at
// 8-16 and fell back to 1134 at 32-64, so extending from 4 loops missed
// the 64-loop replay by 2.6% with an estimated error of 0). It doubles
// (one more replay, of twice the loops) until the bound, the change of the
// period times the loops extended, is within Settled of the time, or 2K
// loops reach the replay's bound. The replays are memoized: every size of
// a sweep whose chunk is the same replays the same loop counts.
func (c *Config) extrapolate(k candidate, sh shape, count int64) (Entry, error) {
	kmax, loops, err := c.loopPlan(sh, count)
	if err != nil {
		return Entry{}, err
	}
	fn, _ := c.Coll.Func()
	k0 := int64(2)
	for hops := int64(tune.StepsOf(fn, algos.Tree, c.topo()).Total()); k0 < hops && k0 < kmax; {
		k0 *= 2
	}
	var t [3]Entry
	for i, l := range []int64{k0 / 2, k0, 2 * k0} {
		if t[i], err = c.exact(k, sh, 2*l*sh.chunk); err != nil {
			return Entry{}, err
		}
	}
	for kk := k0; ; kk *= 2 {
		p1 := (t[1].TimeUS - t[0].TimeUS) / float64(kk/2)
		p2 := (t[2].TimeUS - t[1].TimeUS) / float64(kk)
		rest := float64(loops - 2*kk)
		e := t[2]
		e.TimeUS += rest * p2
		e.BoundUS = math.Abs(p2-p1) * rest
		if e.BoundUS <= Settled*e.TimeUS || kk >= kmax {
			e.Transfers = e.Transfers / (2 * kk) * loops
			e.Shortcut = fmt.Sprintf("extrapolated from %d, %d, %d of %d loops, %.1f us a loop", kk/2, kk, 2*kk, loops, p2)
			return e, nil
		}
		t[0], t[1] = t[1], t[2]
		if t[2], err = c.exact(k, sh, 2*4*kk*sh.chunk); err != nil {
			return Entry{}, err
		}
	}
}
