package algos_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/algos/sim"
)

// CollNet Direct is checked like the tree (tree_sim_test.go): every rank's
// schedule from the table and the aggregation server's (CollNetServer, one
// agent beside the ranks: sim rank n) run in the simulator with integer
// data, and every element is compared with the collective computed from the
// inputs. The server's traffic is counted per (rail, host, chunk).

// collnetCase is one simulated CollNet collective.
type collnetCase struct {
	coll                algos.Coll
	topo                *algos.Topo
	heads               int // CollNetHeads asked for (all-reduce)
	count, chunk, align int64
	red                 reduction
	channels            int
	inPlace             bool
	slots               int
	inOrder             bool // every rank runs its lanes one after the other (see serialized); the server does not
}

func (c collnetCase) String() string {
	return fmt.Sprintf("%v hosts=%dx%d heads=%d count=%d chunk=%d align=%d %s channels=%d inplace=%v slots=%d",
		c.coll, c.topo.NHosts(), c.topo.MaxPerHost(), c.heads, c.count, c.chunk, c.align, c.red.name, c.channels, c.inPlace, c.slots)
}

// rails is the number of server rails: the heads per host.
func (c collnetCase) rails() int {
	if c.coll == algos.AllReduce {
		return algos.CollNetHeads(c.topo, c.heads)
	}
	return c.topo.MaxPerHost()
}

// runCollNet simulates the case, checks every element of every buffer,
// the links against the row's peers, and returns the statistics.
func runCollNet(c collnetCase) (sim.Stats, error) {
	row := algos.Lookup(algos.CollNetDirect, c.coll)
	n := c.topo.NRanks
	tc := treeCase{count: c.count, channels: c.channels}
	parts, size := tc.parts()
	inSize, outSize := size, size
	switch c.coll {
	case algos.ReduceScatter:
		inSize = int64(n) * size
	case algos.AllGather:
		outSize = int64(n) * size
	}
	red := c.red.make(n)
	o := &oracle{n: n, red: red, block: size}
	ranks := make([]sim.Rank, n+1)
	for r := range n {
		in := make([]int64, inSize)
		out := make([]int64, outSize)
		for i := range in {
			in[i] = treeIn(r, int64(i))
		}
		for i := range out {
			out[i] = sentinel(r, int64(i))
		}
		if c.inPlace {
			switch c.coll {
			case algos.AllReduce:
				out = in
			case algos.ReduceScatter:
				out = in[int64(r)*size : int64(r+1)*size]
			case algos.AllGather:
				copy(out[int64(r)*size:], in)
				in = out[int64(r)*size : int64(r+1)*size]
			}
		}
		ranks[r] = sim.Rank{In: in, Out: out}
		o.in = append(o.in, slices.Clone(in))
		o.out = append(o.out, slices.Clone(out))
	}
	ranks[n] = sim.Rank{In: make([]int64, inSize), Out: make([]int64, outSize)}
	for e := int64(2); e < 2+c.count; e++ {
		for r := range n {
			switch c.coll {
			case algos.AllReduce:
				o.out[r][e] = o.reduced(e)
			case algos.ReduceScatter:
				o.out[r][e] = o.reduced(int64(r)*size + e)
			case algos.AllGather:
				for s := range n {
					o.out[r][int64(s)*size+e] = o.in[s][e]
				}
			}
		}
	}

	var errs []error
	channels := make([][]algos.Schedule, len(parts))
	for ch, p := range parts {
		p.Chunk, p.Align = c.chunk, c.align
		for r := range n {
			a := &algos.Args{Rank: r, Topo: c.topo, Count: size, Part: p, ElemSize: 8, CollNetHeads: c.heads}
			s := row.Gen(a)
			errs = append(errs, linksAmong(ch, r, s, row.Peers(a)))
			if c.inOrder {
				var err error
				if s, err = serialized(s, c.slots); err != nil {
					return sim.Stats{}, fmt.Errorf("channel %d rank %d: %w", ch, r, err)
				}
			}
			channels[ch] = append(channels[ch], s)
		}
		channels[ch] = append(channels[ch], algos.CollNetServerAll(c.coll, c.topo, c.heads, size, p))
	}
	stats, err := sim.RunSchedules(ranks, channels, red, c.slots)
	if err != nil {
		return stats, errors.Join(append(errs, err)...)
	}
	errs = append(errs, checkFinal(ranks[:n], o, c.inPlace, stats)...)
	return stats, errors.Join(errs...)
}

// collnetMessages is what the server must receive from, and send to, each
// host's head of every rail over all channels: one message per piece
// (all-reduce: per loop whose piece of the rail is not empty), per chunk
// of every host's block (reduce-scatter) or per chunk (all-gather),
// counted here from the parts, not from the generators.
func collnetMessages(c collnetCase, rail int) (in, out int64) {
	tc := treeCase{count: c.count, channels: c.channels}
	parts, _ := tc.parts()
	hosts := int64(c.topo.NHosts())
	for _, p := range parts {
		nchunks := (p.Count + c.chunk - 1) / c.chunk
		switch c.coll {
		case algos.AllReduce:
			h := int64(c.rails())
			for base := int64(0); base < p.Count; base += h * c.chunk {
				rest := p.Count - base
				size := min(c.chunk, ((rest+h-1)/h+max(c.align, 1)-1)/max(c.align, 1)*max(c.align, 1))
				if int64(rail)*size < rest {
					in++
				}
			}
		case algos.ReduceScatter:
			in += hosts * nchunks
		case algos.AllGather:
			in += nchunks
		}
	}
	out = in
	switch c.coll {
	case algos.ReduceScatter:
		out = in / hosts
	case algos.AllGather:
		out = in * hosts
	}
	return in, out
}

func checkServerTraffic(c collnetCase, stats sim.Stats) error {
	var errs []error
	server := algos.CollNetPeer(c.topo.NRanks)
	for rail := range c.rails() {
		in, out := collnetMessages(c, rail)
		for x, rs := range c.topo.Hosts {
			head := rs[rail]
			if got := stats.Between(head, server).Messages; got != in {
				errs = append(errs, fmt.Errorf("rail %d host %d (rank %d) -> server: %d messages, want %d", rail, x, head, got, in))
			}
			if got := stats.Between(server, head).Messages; got != out {
				errs = append(errs, fmt.Errorf("server -> rail %d host %d (rank %d): %d messages, want %d", rail, x, head, got, out))
			}
		}
	}
	for r := range c.topo.NRanks {
		if _, l := c.topo.Host(r); l >= c.rails() && stats.Between(r, server).Messages+stats.Between(server, r).Messages != 0 {
			errs = append(errs, fmt.Errorf("rank %d is no head but talks to the server", r))
		}
	}
	return errors.Join(errs...)
}

// collnetCases rotates reductions, chunks, Align, channels, in place and
// FIFO slots over counts that are empty, odd, smaller than the heads and
// several loops long.
func collnetCases(coll algos.Coll, topo *algos.Topo, heads, seed int) []collnetCase {
	var cases []collnetCase
	for i, count := range []int64{0, 1, 7, 97} {
		k := seed + i
		red := treeReductions[k%len(treeReductions)]
		if coll == algos.AllGather {
			red = copyOnly
		}
		cases = append(cases, collnetCase{coll: coll, topo: topo, heads: heads, count: count,
			chunk: []int64{1, 3, 16}[k%3], align: []int64{1, 4}[(k/3)%2], red: red,
			channels: 1 + k%2, inPlace: k%4 == 1, slots: []int{8, 1}[(k/2)%2]})
	}
	return cases
}

func runCollNetCases(t *testing.T, cases []collnetCase) {
	t.Helper()
	failed := 0
	for _, c := range cases {
		stats, err := runCollNet(c)
		if err == nil {
			err = checkServerTraffic(c, stats)
		}
		if err != nil {
			t.Errorf("%v:\n%v", c, err)
			if failed++; failed == 10 {
				t.Fatal("too many failures")
			}
		}
	}
}

// TestCollNetAllReduce: hosts x ranks up to 8x8 with 1, 2 and up to 8
// heads per host, every reduction.
func TestCollNetAllReduce(t *testing.T) {
	var cases []collnetCase
	seed := 0
	for _, hosts := range []int{1, 2, 3, 4, 8} {
		for _, ppn := range []int{1, 2, 3, 5, 8} {
			for _, heads := range []int{1, 2, 0} {
				seed++
				cases = append(cases, collnetCases(algos.AllReduce, algos.BlockTopo(hosts, ppn), heads, seed)...)
			}
		}
	}
	// Hosts of different sizes: the heads are at most the smallest host's.
	uneven := algos.NewTopo([]string{"a", "a", "a", "b", "b", "c", "c", "c", "c"})
	cases = append(cases, collnetCases(algos.AllReduce, uneven, 0, 1)...)
	runCollNetCases(t, cases)
}

// TestCollNetRails: reduce-scatter and all-gather with every rank a head,
// hosts x ranks up to 8x8.
func TestCollNetRails(t *testing.T) {
	for _, coll := range []algos.Coll{algos.ReduceScatter, algos.AllGather} {
		var cases []collnetCase
		seed := 0
		for _, hosts := range []int{1, 2, 3, 4, 8} {
			for _, ppn := range []int{1, 2, 3, 8} {
				seed++
				cases = append(cases, collnetCases(coll, algos.BlockTopo(hosts, ppn), 0, seed)...)
			}
		}
		runCollNetCases(t, cases)
	}
}

// TestCollNetAllReduceRoundsIndependentOfHosts: one loop of pieces takes
// the same number of rounds at 2 and 8 hosts (the switch is one hop up and
// one down), for 1, 2 and 4 heads of 4 ranks per host.
func TestCollNetAllReduceRoundsIndependentOfHosts(t *testing.T) {
	for _, heads := range []int{1, 2, 4} {
		rounds := map[int]int{}
		for _, hosts := range []int{1, 2, 4, 8} {
			c := collnetCase{coll: algos.AllReduce, topo: algos.BlockTopo(hosts, 4), heads: heads, count: 64, chunk: 64,
				align: 1, red: treeReductions[0], channels: 1, slots: 8}
			stats, err := runCollNet(c)
			if err != nil {
				t.Fatalf("%v: %v", c, err)
			}
			rounds[hosts] = stats.Rounds
		}
		for hosts, r := range rounds {
			if r != rounds[1] {
				t.Errorf("heads %d: %d rounds on %d hosts, %d on 1: want the same (got %v)", heads, r, hosts, rounds[1], rounds)
			}
		}
	}
}

// TestCollNetChecksCatch: the traffic check fails on a count that is off,
// and a head has its four lanes.
func TestCollNetChecksCatch(t *testing.T) {
	c := collnetCase{coll: algos.AllReduce, topo: algos.BlockTopo(3, 2), heads: 2, count: 40, chunk: 8,
		align: 1, red: treeReductions[0], channels: 1, slots: 8}
	stats, err := runCollNet(c)
	if err != nil {
		t.Fatal(err)
	}
	stats.Links[sim.Link{Src: 0, Dst: 6, Conn: 1}] = sim.Traffic{Messages: 99}
	if err := checkServerTraffic(c, stats); err == nil {
		t.Error("a head that sent 99 messages to the server passed the traffic check")
	}
	c.topo = algos.BlockTopo(3, 2)
	row := algos.Lookup(algos.CollNetDirect, algos.AllReduce)
	s := row.Gen(&algos.Args{Rank: 0, Topo: c.topo, Count: 40, Part: algos.Part{Count: 40, Chunk: 8, Align: 1}, CollNetHeads: 2})
	if len(s.Lanes) != 4 {
		t.Errorf("head 0 of 2: %d lanes, want scatter, reduce, bcast, gather", len(s.Lanes))
	}
}

// TestCollNetInOrder: CollNet Direct's lanes, marked InOrder, give exact
// data when every rank runs them one after the other (the engine's short
// calls) while the server runs its own schedule, with FIFOs of 8 slots
// (protocols.NSteps), on counts small enough that every lane fits its
// FIFOs, as the engine requires (reduce-scatter and all-gather post one
// message per host on a link, so up to 8 hosts).
func TestCollNetInOrder(t *testing.T) {
	var cases []collnetCase
	for hosts := 1; hosts <= 4; hosts++ {
		for _, ppn := range []int{1, 2, 3, 4} {
			topo := algos.BlockTopo(hosts, ppn)
			for i, count := range []int64{1, int64(ppn) + 1, 3 * int64(ppn)} {
				k := hosts + ppn + i
				for _, coll := range []algos.Coll{algos.AllReduce, algos.ReduceScatter, algos.AllGather} {
					heads, red := 0, treeReductions[k%len(treeReductions)]
					switch coll {
					case algos.AllReduce:
						heads = []int{1, 2, 0}[k%3]
					case algos.AllGather:
						red = copyOnly
					}
					cases = append(cases, collnetCase{coll: coll, topo: topo, heads: heads, count: count, chunk: 1 << 14,
						align: 1, red: red, channels: 1, inPlace: i == 1,
						slots: 8, inOrder: true})
				}
			}
		}
	}
	runAll(t, cases, func(c collnetCase) error { _, err := runCollNet(c); return err })
}
