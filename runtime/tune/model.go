package tune

import (
	"fmt"
	"math/bits"
	"strings"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
)

// Steps are the pipeline steps on the critical path of one chunk of a
// collective: those between ranks of one host and those between hosts,
// and, for algorithms whose ranks run many small steps in order (PAT:
// NCCL's 2.8 µs x nRanks term), the number of those steps.
type Steps struct{ Intra, Inter, Ops int }

// Total is Intra + Inter.
func (s Steps) Total() int { return s.Intra + s.Inter }

// Mask says which (collective, algorithm, protocol) entries may run: the
// table has a row, NCCL_ALGO and NCCL_PROTO allow them, and the algorithm
// is enabled on the topology (PAT). The communicator fills it.
type Mask [algos.NumColls][algos.NumAlgos][protocols.NumProtos]bool

// Model predicts the time of every (collective, algorithm, protocol) on a
// topology and picks the fastest. It is immutable once built, and the
// same on every rank given the same constants, topology and mask.
type Model struct {
	c     *Consts
	mask  Mask
	cfg   *Config // NCCL_TUNER_CONFIG_FILE's rows, or nil
	n     int
	nodes int
	intra Class // SHM, SHMBusy on hosts with more ranks than cores, or Net when ranks of a host talk TCP
	steps [algos.NumColls][algos.NumAlgos]Steps
	// traffic is TrafficOn of every entry on the model's topology.
	traffic [algos.NumColls][algos.NumAlgos]float64
}

// New builds the model of the ranks of topo over the entries of mask; the
// rows of cfg (a tuner config file; nil for none) override its choices
// for the calls they cover.
//
// busy says that a host has more ranks than cores: steps inside hosts then
// cost the SHMBusy class's latency and bandwidth.
func New(c *Consts, topo *algos.Topo, mask Mask, cfg *Config, busy bool) *Model {
	intra := SHM
	if busy {
		intra = SHMBusy
	}
	return NewIntra(c, topo, mask, cfg, intra)
}

// NewIntra is New with the class of the links between ranks of one host
// named: SHM, SHMBusy, or Net when they talk TCP (NCCL_SHM_DISABLE=1), so
// that the model prices the transport the ranks actually use.
func NewIntra(c *Consts, topo *algos.Topo, mask Mask, cfg *Config, intra Class) *Model {
	m := &Model{c: c, mask: mask, cfg: cfg, n: topo.NRanks, nodes: topo.NHosts(), intra: intra}
	for coll := range algos.Coll(algos.NumColls) {
		for a := range algos.Algo(algos.NumAlgos) {
			m.steps[coll][a] = StepsOf(coll, a, topo)
			m.traffic[coll][a] = TrafficOn(coll, a, topo)
		}
	}
	return m
}

// WithStagedHier returns the model with HierRecDbl priced in its staged
// form (HierStagedSteps, HierStagedTraffic), which runtime/comm runs where
// the hosts' ranks share a one-shot staging area: topo must be the
// model's.
func (m *Model) WithStagedHier(topo *algos.Topo) *Model {
	w := *m
	w.steps[algos.AllReduce][algos.HierRecDbl] = HierStagedSteps(topo)
	w.traffic[algos.AllReduce][algos.HierRecDbl] = HierStagedTraffic(topo)
	return &w
}

// HierStagedSteps are HierRecDbl's steps in its staged form: inside the
// hosts of several ranks one synchronization up (every rank's input into
// its slot, the leader reduces them) and one down (the leader's result
// through its slot), whatever the ranks per host; between the hosts the
// leaders' recursive doubling (algos.LogStepHops).
func HierStagedSteps(topo *algos.Topo) Steps {
	if topo.NRanks == 1 {
		return Steps{}
	}
	s := Steps{Inter: algos.LogStepHops(algos.RecDbl, algos.AllReduce, topo.NHosts())}
	if topo.MaxPerHost() > 1 {
		s.Intra = 2
	}
	return s
}

// HierStagedTraffic is HierRecDbl's Traffic in its staged form: the whole
// buffers the busiest leader exchanges with other leaders (log2 of the
// hosts, once more folding when they are not a power of two), plus one
// for the host's two phases (a leader reads its ranks' slots and writes
// one in memory, several times faster than the links between hosts), over
// the ring's 2(n-1)/n.
func HierStagedTraffic(topo *algos.Topo) float64 {
	n, nodes := topo.NRanks, topo.NHosts()
	if n <= 1 {
		return Traffic(algos.AllReduce, algos.HierRecDbl, n)
	}
	local := 0.0
	if topo.MaxPerHost() > 1 {
		local = 1
	}
	return leaderTraffic(local, n, nodes)
}

// leaderTraffic is the Traffic of a leader that moves local whole buffers
// inside its host and exchanges the whole buffer with the other leaders,
// log2 of the hosts times and once more folding when they are not a power
// of two: over the ring's 2(n-1)/n.
func leaderTraffic(local float64, n, nodes int) float64 {
	bufs := local
	if nodes > 1 {
		pof2 := algos.Pof2Below(nodes)
		bufs += float64(bits.Len(uint(pof2)) - 1)
		if pof2 != nodes {
			bufs++
		}
	}
	return bufs / (2 * float64(n-1) / float64(n))
}

// Class is the job's slowest link class, whose bandwidth, efficiencies
// and per-call latencies the model uses: Net when the job spans hosts or
// the ranks of a host talk TCP, else SHM (SHMBusy on a host with more
// ranks than cores).
func (m *Model) Class() Class {
	if m.nodes > 1 || m.intra == Net {
		return Net
	}
	return m.intra
}

// Steps returns the steps on the critical path of one chunk of coll by
// algorithm a on the model's topology (StepsOf).
func (m *Model) Steps(coll algos.Coll, a algos.Algo) Steps { return m.steps[coll][a] }

// With returns the model of the same job, mask and config file on the
// constants c.
func (m *Model) With(c *Consts) *Model {
	w := *m
	w.c = c
	return &w
}

// Consts returns the model's constants.
func (m *Model) Consts() *Consts { return m.c }

// StepsOf returns the steps on the critical path of one chunk of coll run
// by algorithm a on topo, from the algorithm's own structure (the
// simulator's rounds are these plus one: the first send). Zero for
// algorithms that cannot run coll.
func StepsOf(coll algos.Coll, a algos.Algo, topo *algos.Topo) Steps {
	n, nodes := topo.NRanks, topo.NHosts()
	if n == 1 {
		return Steps{}
	}
	switch {
	case a == algos.Ring:
		total, inter := n-1, nodes-1
		if coll == algos.AllReduce {
			total, inter = 2*(n-1), 2*(nodes-1)
		}
		return Steps{Intra: total - inter, Inter: inter}
	case a == algos.Tree && coll == algos.AllReduce:
		return treeSteps(topo)
	case a == algos.CTRing && coll == algos.AllReduce:
		// The reduce-scatter ring, then the all-gather split between the
		// forward ring and the reverse one (ceil((n-1)/2) steps forward),
		// and one more step for odd n, where the forward half is the
		// longer.
		total := n - 1 + (n-1+1)/2
		if n%2 == 1 && n > 2 {
			total++
		}
		inter := 0
		if nodes > 1 {
			inter = min(total, nodes-1+nodes/2)
		}
		return Steps{Intra: total - inter, Inter: inter}
	case a == algos.CollNetDirect && algos.CollNetRuns(coll, topo) == nil:
		return collnetSteps(coll, topo)
	case a == algos.NVLS && (coll == algos.ReduceScatter || coll == algos.AllGather):
		// One hop: the scatter to the head (reduce-scatter) or the
		// multicast store (all-gather).
		return Steps{Intra: 1}
	case a == algos.NVLS && coll == algos.AllReduce:
		return Steps{Intra: 2} // the scatter, then the multicast store
	case a == algos.NVLSTree && coll == algos.AllReduce:
		// NVLS inside the hosts, and up and down a binary tree of hosts.
		depth := bits.Len(uint(nodes - 1))
		return Steps{Intra: 2, Inter: 2 * depth}
	case (a == algos.RecDbl && (coll == algos.AllReduce || coll == algos.AllGather)) || (a == algos.Rabenseifner && coll == algos.AllReduce):
		// The log-step rows' message hops (algos.LogStepHops): log2 n
		// exchanges, twice for Rabenseifner, plus the fold and unfold
		// of the ranks beyond a power of two; all-gather ceil(log2 n).
		// They run between all ranks: with ranks sharing hosts, every
		// hop is charged as a hop between hosts (most partners are).
		hops := algos.LogStepHops(a, coll, n)
		if nodes > 1 {
			return Steps{Inter: hops}
		}
		return Steps{Intra: hops}
	case a == algos.HierRecDbl && coll == algos.AllReduce:
		// Up to the host's leader and back down, one local rank after
		// the other, and recursive doubling between the leaders.
		return Steps{Intra: 2 * (topo.MaxPerHost() - 1), Inter: algos.LogStepHops(algos.RecDbl, coll, nodes)}
	case a == algos.OneShot && algos.OneShotUnavailable(topo) == "":
		// Copy into the own slot, one synchronization, read the slots.
		return Steps{Intra: 1}
	case a == algos.CMA && algos.CMAUnavailable(topo) == "":
		// Publish the address, read the others' inputs, and a second
		// synchronization before returning (algos.Flat.Hold).
		return Steps{Intra: 2}
	case a == algos.PAT && (coll == algos.ReduceScatter || coll == algos.AllGather):
		// A piece crosses at most ceil(log2 n) links; the rank runs its
		// program's steps in order (the first is a send, as the ring's).
		// With one rank per host (PAT's case) every link crosses hosts.
		depth := bits.Len(uint(n - 1))
		ops := len(algos.PatSteps(algos.PatGeometry(n, 1<<20, 1), coll == algos.ReduceScatter)) - 1
		if nodes > 1 {
			return Steps{Inter: depth, Ops: ops}
		}
		return Steps{Intra: depth, Ops: ops}
	}
	return Steps{}
}

// collnetSteps are CollNet Direct's steps with as many heads as possible:
// up to the server, through its scratch (all-reduce) and down again, plus
// the scatter and gather inside a host, whose Ops to the host's other
// ranks run one after the other (ppn-1 each way). Reduce-scatter and
// all-gather pass every host's block of a rail through one lane of the
// server and of the head: ppn-1 steps per host inside, or, alone on the
// host, one per further host at the server.
func collnetSteps(coll algos.Coll, topo *algos.Topo) Steps {
	ppn, nodes := topo.MaxPerHost(), topo.NHosts()
	if coll == algos.AllReduce {
		return Steps{Intra: 2 * (ppn - 1), Inter: 3}
	}
	intra := (ppn - 1) * nodes
	if ppn == 1 {
		intra = nodes - 1 // the server's lane, one host after the other
	}
	return Steps{Intra: intra, Inter: 2}
}

// treeSteps walks the double tree from every rank up to its root, counting
// the hops inside and between hosts, and returns twice the longest path
// (up and down again).
func treeSteps(topo *algos.Topo) Steps {
	var worst Steps
	nodes := make([][2]algos.TreeNode, topo.NRanks)
	for r := range nodes {
		nodes[r] = algos.DoubleTree(topo, r)
	}
	for t := range 2 {
		for r := range nodes {
			var s Steps
			for cur := r; nodes[cur][t].Up != algos.NoPeer; cur = nodes[cur][t].Up {
				h, _ := topo.Host(cur)
				hu, _ := topo.Host(nodes[cur][t].Up)
				if h == hu {
					s.Intra++
				} else {
					s.Inter++
				}
			}
			if s.Total() > worst.Total() || (s.Total() == worst.Total() && s.Inter > worst.Inter) {
				worst = s
			}
		}
	}
	return Steps{Intra: 2 * worst.Intra, Inter: 2 * worst.Inter}
}

// Lat returns the latency of one call of coll by (a, p), in µs: the call's
// cost plus every step of its critical path.
func (m *Model) Lat(coll algos.Coll, a algos.Algo, p protocols.Proto) float64 {
	s := m.steps[coll][a]
	k := &m.c.Class[m.Class()]
	gamma := k.Gamma[p]
	if g := k.AlgoGamma[a]; g != 0 {
		gamma = g // a row with its own fast path does not pay the engine's per-call cost
	}
	return gamma + k.AlgoLat[a] + float64(s.Intra)*m.c.Class[m.intra].Alpha[p] + float64(s.Inter)*m.c.Class[Net].Alpha[p] + float64(s.Ops)*k.OpCost
}

// BW returns the algorithm bandwidth of coll by (a, p) on nch channels, in
// GB/s: the slowest class's bandwidth for nch channels (up to its ceiling),
// times the algorithm's efficiency and the ring's bus-to-algorithm factor.
func (m *Model) BW(coll algos.Coll, a algos.Algo, p protocols.Proto, nch int) float64 {
	k := &m.c.Class[m.Class()]
	return min(float64(max(nch, 1))*k.Beta[p], k.BetaMax[p]) * k.Eff[a] * m.algFactor(coll) / m.traffic[coll][a]
}

// Traffic is the bytes an algorithm moves through one rank's links on its
// critical path, relative to the ring's (2(n-1)/n of the buffer for
// all-reduce, (n-1)/n for all-gather and reduce-scatter): it divides the
// bandwidth, where Eff stays a fitted constant. Recursive doubling
// all-reduce moves the whole buffer at each of its exchanges: n log2 n /
// (2(n-1)) for a power of two (1, 1.33, 1.71 at n = 2, 4, 8; 3 at 64).
// Rabenseifner moves the ring's bytes. Beyond a power of two both move the
// whole buffer once more each way: a rank that takes a folded rank's
// vector receives it and later sends the result back, and with the call
// cut in chunks those two overlap the exchanges of other chunks (1.5 at
// n = 3 for both, 1.56 at 5 for Rabenseifner; algos/sim's
// TestModelMatchesSimulator counts them). PAT beyond a power of two moves
// more (below). OneShot: oneShotTraffic. Tree, CollNet, NVLS all-reduce
// and NVLS_TREE, 1: what they move depends on the layout of ranks on
// hosts, which this does not see, and their fitted efficiency absorbs it.
// Every other row moves the ring's bytes, 1.
func Traffic(coll algos.Coll, a algos.Algo, n int) float64 {
	if a == algos.OneShot {
		return oneShotTraffic(coll, n)
	}
	if a == algos.PAT && n > 3 {
		// PAT walks the schedule of the next power of two, P: its
		// busiest rank moves (P-1)/P of the buffer where the ring moves
		// (n-1)/n (1.75 at n = 5, 1.4 at 6, 1 at powers of two; at
		// n = 3 the ring's bytes, as algos/sim counts them).
		p := 1 << bits.Len(uint(n-1))
		return float64(p-1) / float64(n-1)
	}
	if n <= 1 || coll != algos.AllReduce || (a != algos.RecDbl && a != algos.Rabenseifner) {
		return 1
	}
	pof2 := algos.Pof2Below(n)
	ring := 2 * float64(n-1) / float64(n)
	fold := 0.0
	if pof2 != n {
		fold = 1
	}
	if a == algos.Rabenseifner {
		return (2*float64(pof2-1)/float64(pof2) + fold) / ring
	}
	return (float64(bits.Len(uint(pof2))-1) + fold) / ring
}

// TrafficOn is Traffic for the ranks of topo: the same, but for HierRecDbl,
// whose bytes depend on the ranks per host. Its busiest rank is a leader of
// the largest host, which takes the vectors of its ppn-1 other ranks one
// after the other, exchanges the whole vector log2 times with the other
// leaders (once more folding when the hosts are not a power of two) and
// sends the result back to its ppn-1 ranks: (ppn-1 + log2 + fold) whole
// buffers each way, against the ring's 2(n-1)/n (exact when every host has
// as many ranks, an upper bound otherwise).
func TrafficOn(coll algos.Coll, a algos.Algo, topo *algos.Topo) float64 {
	n := topo.NRanks
	if a != algos.HierRecDbl || n <= 1 {
		return Traffic(coll, a, n)
	}
	return leaderTraffic(float64(topo.MaxPerHost()-1), n, topo.NHosts())
}

// oneShotTraffic is OneShot's Traffic (reference small-message-algorithms.md
// §6): the elements the busiest rank copies (into its slot and out of the
// other ranks'), over the ring's bytes, relative to the all-gather's,
// whose own factor is 1 (Eff is fitted on them): an all-gather copies one
// block in and n-1 out, S, n/(n-1) times the ring's (n-1)S/n. An
// all-reduce copies S in and reads the n-1 other slots, nS, against the
// ring's 2(n-1)S/n: n/2. A reduce-scatter copies the n-1 blocks other
// ranks reduce into its slot (its own block it reads from its input: a
// FlatPut.Own, out of place) and reads n-1 blocks, 2(n-1)S/n: 2(n-1)/n
// (1 at n = 2; in place it copies its own block too, (2n-1)/n). A reduce's
// root reads the n-1 other slots (its own data from its input, out of
// place), (n-1)S against the ring's S: (n-1)^2/n (in place it copies S in
// too: n-1); every other rank copies S, less or as much. A broadcast's busiest rank
// copies S (the root in, every other rank out), the ring's S: (n-1)/n.
// Measured on 4 ranks and 2 cores, 2026-11-27, when every block was
// copied: a 2 MiB reduce-scatter took 700-1000 µs by OneShot against the
// ring's 384-403 µs, which factor 1 priced at 481 µs and (2n-1)/n at 837 µs.
func oneShotTraffic(coll algos.Coll, n int) float64 {
	if n <= 1 {
		return 1
	}
	switch coll {
	case algos.AllReduce:
		return float64(n) / 2
	case algos.Reduce:
		return float64((n-1)*(n-1)) / float64(n)
	case algos.ReduceScatter:
		return 2 * float64(n-1) / float64(n)
	case algos.Broadcast:
		return float64(n-1) / float64(n)
	}
	return 1
}

// algFactor turns bus bandwidth into algorithm bandwidth for coll: the
// inverse of nccl-tests' bus factor (all-reduce 2(n-1)/n, reduce-scatter
// and all-gather (n-1)/n, the others 1).
func (m *Model) algFactor(coll algos.Coll) float64 {
	n := float64(m.n)
	switch {
	case m.n == 1:
	case coll == algos.AllReduce:
		return n / (2 * (n - 1))
	case coll == algos.ReduceScatter || coll == algos.AllGather:
		return n / (n - 1)
	}
	return 1
}

// Time returns the predicted time of a call of coll moving nbytes (NCCL's
// nBytes: the larger of the send and receive sizes) by (a, p) on nch
// channels, in µs, or -1 when the entry may not run.
func (m *Model) Time(coll algos.Coll, a algos.Algo, p protocols.Proto, nbytes int64, nch int) float64 {
	if !m.mask[coll][a][p] {
		return -1
	}
	if m.BW(coll, a, p, nch) <= 0 {
		return -1
	}
	return m.predict(coll, a, p, nbytes, nch)
}

// predict is Time without the mask.
func (m *Model) predict(coll algos.Coll, a algos.Algo, p protocols.Proto, nbytes int64, nch int) float64 {
	return m.Lat(coll, a, p) + float64(nbytes)/(1000*m.BW(coll, a, p, nch))
}

// Choice is one entry of the model and its predicted time.
type Choice struct {
	Algo     algos.Algo
	Proto    protocols.Proto
	Channels int
	Time     float64 // µs; -1: no entry
	// Line is the line of the tuner config file row that made the choice,
	// or 0 when the model did.
	Line int
}

func (c Choice) String() string {
	if c.Time < 0 {
		return "none"
	}
	return fmt.Sprintf("%s/%s %.1f us", c.Algo, c.Proto, c.Time)
}

// Decide returns the fastest entry for a call of coll moving nbytes on nch
// channels and the runner-up (Time -1 when there is none): NCCL's argmin,
// algorithm-major in NCCL's order, then LL, LL128, Simple, a strict < so
// that ties go to the lower index. With one rank it is the ring's Simple,
// as NCCL's. When only is not negative, only that algorithm is considered
// and the mask and config file are ignored (a communicator's own
// coordination). Otherwise the first config-file row that covers the call
// and names an entry that may run replaces the model's choice (rows whose
// entry may not run are skipped, as NCCL's example tuner plugin does);
// its fields of -1 are the model's best among the entries that match the
// others.
func (m *Model) Decide(coll algos.Coll, nbytes int64, nch int, only algos.Algo) (best, next Choice) {
	if m.n == 1 {
		return Choice{Algo: algos.Ring, Proto: protocols.Simple, Channels: nch, Time: m.c.Class[m.Class()].Gamma[protocols.Simple]}, Choice{Time: -1}
	}
	best, next = m.argmin(coll, nbytes, nch, only, KeepAlgo, KeepProto)
	if only >= 0 || m.cfg == nil {
		return best, next
	}
	for _, row := range m.cfg.Rows {
		if !row.Covers(coll, nbytes, m.nodes, m.n) {
			continue
		}
		ch := nch
		if row.Channels > 0 {
			ch = row.Channels
		}
		c, _ := m.argmin(coll, nbytes, ch, -1, row.Algo, row.Proto)
		if c.Time < 0 {
			continue
		}
		c.Line = row.Line
		if c.Algo != best.Algo || c.Proto != best.Proto {
			next = best
		}
		return c, next
	}
	return best, next
}

// argmin is Decide's search over the entries matching algo and proto
// (KeepAlgo, KeepProto: any). Entries beyond their MaxBytes count only
// when no other entry may run.
func (m *Model) argmin(coll algos.Coll, nbytes int64, nch int, only, algo algos.Algo, proto protocols.Proto) (best, next Choice) {
	in, over := newTop2(), newTop2() // within and beyond MaxBytes
	for a := range algos.Algo(algos.NumAlgos) {
		if (only >= 0 && a != only) || (algo != KeepAlgo && a != algo) {
			continue
		}
		bound := m.c.Class[m.Class()].MaxBytes[a]
		for p := range protocols.Proto(protocols.NumProtos) {
			if proto != KeepProto && p != proto {
				continue
			}
			var t float64
			if only >= 0 {
				t = m.predict(coll, a, p, nbytes, nch)
			} else if t = m.Time(coll, a, p, nbytes, nch); t < 0 {
				continue
			}
			c := Choice{Algo: a, Proto: p, Channels: nch, Time: t}
			if bound > 0 && float64(nbytes) > bound {
				over.add(c)
			} else {
				in.add(c)
			}
		}
	}
	if in[0].Time < 0 {
		return over[0], over[1]
	}
	if in[1].Time < 0 {
		in[1] = over[0] // the runner-up, when nothing else within runs
	}
	return in[0], in[1]
}

// top2 is the fastest choice seen and the runner-up (Time -1: none).
type top2 [2]Choice

func newTop2() top2 { return top2{{Time: -1}, {Time: -1}} }

// add counts c, unless it is none.
func (t *top2) add(c Choice) {
	switch {
	case c.Time < 0:
	case t[0].Time < 0 || c.Time < t[0].Time:
		t[0], t[1] = c, t[0]
	case t[1].Time < 0 || c.Time < t[1].Time:
		t[1] = c
	}
}

// Table writes the model's latency and bandwidth for every collective and
// enabled entry in NCCL's TUNING layout (blocks of algorithms; per
// function "lat/bw |" with latency in µs and algorithm bandwidth in GB/s
// on nch channels; disabled entries 0.0/0.0), one line per string.
func (m *Model) Table(nch int) []string {
	var lines []string
	for lo := 0; lo < algos.NumAlgos; lo += 3 {
		hi := min(lo+3, algos.NumAlgos)
		var algo, proto strings.Builder
		algo.WriteString("  Algorithm   |")
		proto.WriteString("  Protocol    |")
		for a := lo; a < hi; a++ {
			for p := range protocols.Proto(protocols.NumProtos) {
				fmt.Fprintf(&algo, "%14s   |", algos.Algo(a))
				fmt.Fprintf(&proto, "%14s   |", p)
			}
		}
		lines = append(lines, algo.String(), proto.String())
		for coll := range algos.Coll(algos.NumColls) {
			var b strings.Builder
			fmt.Fprintf(&b, "%13s |", coll)
			for a := lo; a < hi; a++ {
				for p := range protocols.Proto(protocols.NumProtos) {
					lat, bw := 0.0, 0.0
					if m.mask[coll][a][p] {
						lat, bw = m.Lat(coll, algos.Algo(a), p), m.BW(coll, algos.Algo(a), p, nch)
					}
					fmt.Fprintf(&b, "%8.1f/%6.1f |", lat, bw)
				}
			}
			lines = append(lines, b.String())
		}
	}
	return lines
}
