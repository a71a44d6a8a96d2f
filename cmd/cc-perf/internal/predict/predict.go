// Package predict is the pure core of cc-perf predict (issue 22): for a
// collective on a cluster described by hosts, ranks per host, links and
// the tuner's calibration constants, it replays cc's own schedules on the
// timed simulator (algos/sim/timed) at every size and algorithm, and
// says which the tuner would pick, what that takes, which algorithm is
// fastest and which resource saturates. No I/O, clock or goroutines:
// cmd/cc-perf parses flags into a Config and prints the Rows.
//
// How the calibration maps onto the replay (runtime/tune's Consts, the
// CC_TUNE_FILE format): a slice's CPU stage streams at beta of its link's
// class (net between hosts; shm, or shm-busy when a host has more ranks
// than cores, inside one); a hop costs alpha of its class plus the link's
// latency, and where ranks outnumber the cores they share, alpha_cpu's
// share of a core (replayClass); a call starts after gamma (the job's class) plus the
// algorithm's lane latency. Eff, the tuner's fitted efficiency, is not an
// input: the replay makes the tree's and CTRING's efficiency itself.
package predict

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/algos/sim/timed"
	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/tune"
)

// Config is one prediction.
type Config struct {
	Coll       *bench.Coll
	Hosts, PPN int
	// LinkRate is each host's uplink and downlink in bytes per ns (GB/s),
	// 0 for unlimited; LinkLatency is added to every hop between hosts,
	// in ns.
	LinkRate, LinkLatency float64
	// MTU, when not 0, is the links' MTU: LinkRate is then what a shaper
	// counts, Ethernet frames, of which TCP's payload gets WireShare; 0
	// takes LinkRate as payload.
	MTU int
	// Burst, when not nil, is a token bucket on each host link (needs
	// LinkRate): what a shaper (tbf) or a cloud's egress limit lets an
	// idle link send above its rate.
	Burst              *timed.Bucket
	Consts             *tune.Consts
	Algos              []algos.Algo      // nil: every modelled algorithm the tuner may pick
	Protos             []protocols.Proto // nil: all
	Sizes              []int64           // bytes (nccl-tests' size column)
	ElemSize           int               // bytes per element (float: 4)
	Root               int
	Cores, SharedCores int // see timed.Params
	SlowHosts          []SlowHost
	SlowLinks          []timed.SlowLink
	LateStarts         []LateStart
	Fabric             *timed.LeafSpine
	// MaxTransfers bounds the slice transfers of one replay (estimated
	// before it runs); above it a ring is folded, a tree extrapolated,
	// anything else refused.
	MaxTransfers int64

	// Skipped lists, after Validate, the candidates left out because no
	// replay of them fits MaxTransfers (only without Algos).
	Skipped []string
	skip    []candidate
	// memo holds the exact replays of one Run by candidate, chunk and
	// count; Run's workers share it, each replay made once.
	memo *memo
}

// memo is a Run's exact replays, shared by its workers: the first to
// ask for a key replays it, the others wait for that replay.
type memo struct {
	mu    sync.Mutex
	cells map[memoKey]*memoCell
}

type memoCell struct {
	once sync.Once
	e    Entry
	err  error
}

// get returns the replay of key, making it with f on first use.
func (m *memo) get(key memoKey, f func() (Entry, error)) (Entry, error) {
	m.mu.Lock()
	cell := m.cells[key]
	if cell == nil {
		cell = &memoCell{}
		m.cells[key] = cell
	}
	m.mu.Unlock()
	cell.once.Do(func() { cell.e, cell.err = f() })
	return cell.e, cell.err
}

type memoKey struct {
	k            candidate
	chunk, count int64
}

// SlowHost makes one host's CPU stages Factor times slower.
type SlowHost struct {
	Host   int
	Factor float64
}

// LateStart delays one rank's start of every call by Ns.
type LateStart struct {
	Rank int
	Ns   float64
}

// DefaultMaxTransfers is the default bound of one exact replay, about a
// few seconds of the simulator here.
const DefaultMaxTransfers = 4 << 20

// TieMargin is the margin below which two algorithms are a near tie: the
// 10-20% a per-collective prediction can be trusted to (reference
// simulation-at-scale.md §3).
const TieMargin = 0.10

// Entry is one (algorithm, protocol)'s predicted call.
type Entry struct {
	Algo       algos.Algo
	Proto      protocols.Proto
	TimeUS     float64 // the replay's time
	ClosedUS   float64 // the tuner's closed form (runtime/tune.Model.Time)
	Bottleneck string
	Busy       float64 // the bottleneck's busy fraction
	Transfers  int64   // slices the replay moved
	// Shortcut, when not empty, says how the replay was made cheaper
	// (folded, extrapolated) and BoundUS bounds the error it adds.
	Shortcut string
	BoundUS  float64
}

// Row is one size.
type Row struct {
	Bytes, Count int64
	Pick         Entry   // the tuner's pick among Entries
	Entries      []Entry // every candidate, in algorithm then protocol order
	Best, Next   int     // fastest and runner-up in Entries (Next -1: none)
	Tie          bool    // Next within TieMargin of Best
	AlgBW, BusBW float64 // of Pick, GB/s
}

// Margin is how much slower the runner-up is than the winner (0 with one
// entry).
func (r *Row) Margin() float64 {
	if r.Next < 0 {
		return 0
	}
	return r.Entries[r.Next].TimeUS/r.Entries[r.Best].TimeUS - 1
}

// modelled reports why the replay cannot run algorithm a on the
// cluster, or "".
func (c *Config) modelled(a algos.Algo) string {
	switch a {
	case algos.HierRecDbl:
		if c.PPN > 1 {
			return "HierRecDbl's one-shot phases inside hosts of several ranks are not modelled by the timed replay"
		}
	case algos.PAT:
		return "PAT's slot programs are not modelled by the timed replay"
	case algos.NVLS, algos.NVLSTree:
		return a.String() + "'s multicast regions are not modelled by the timed replay"
	case algos.CollNetDirect, algos.CollNetChain:
		return a.String() + "'s aggregation server is not modelled by the timed replay"
	case algos.OneShot:
		return "OneShot's staging area is not modelled by the timed replay"
	case algos.CMA:
		return "CMA's reads of other processes' memory are not modelled by the timed replay"
	}
	return ""
}

// The MTUs --mtu accepts: IPv4's smallest datagram every host must take,
// and loopback's.
const (
	MinMTU = 576
	MaxMTU = 65536
)

// WireShare is the share of an Ethernet link's rate that carries TCP's
// payload over IPv4 at mtu, on a link that receives as much as it sends
// (a ring's, or any host's of an all-reduce): a full segment carries
// mtu-52 bytes (IPv4's 20 and TCP's 20 header bytes, the timestamp option's
// 12, on by default in Linux) in a frame of mtu+14 bytes (the Ethernet
// header; a shaper, tc's tbf, counts it, and the headers of every segment
// of a GSO packet), and the link also carries, the other way, one 66-byte
// ACK for every two segments it receives (delayed ACKs): half an ACK per
// segment. At 1500 bytes 1448 / (1514 + 33) = 0.936, at 9000 0.989.
// Preamble, inter-frame gap and FCS are left out: a shaper does not count
// them (a NIC's line rate does: 1448/1538 = 0.941 of it at 1500 without
// ACKs).
func WireShare(mtu int) float64 {
	if mtu == 0 {
		return 1
	}
	return float64(mtu-52) / (float64(mtu+14) + 66.0/2)
}

// payloadRate is the links' rate for TCP's payload: LinkRate x
// WireShare(MTU).
func (c *Config) payloadRate() float64 { return c.LinkRate * WireShare(c.MTU) }

// payloadBucket is Burst in payload bytes, as payloadRate.
func (c *Config) payloadBucket() *timed.Bucket {
	if c.Burst == nil || c.MTU == 0 {
		return c.Burst
	}
	w := WireShare(c.MTU)
	return &timed.Bucket{Size: c.Burst.Size * w, Peak: c.Burst.Peak * w}
}

// Validate checks a Config before anything runs: one-line errors naming
// the bad value and what is allowed.
func (c *Config) Validate() error {
	fn, ok := c.Coll.Func()
	switch {
	case !ok:
		return fmt.Errorf("%s is made of point-to-point calls: predict models all_reduce, all_gather, reduce_scatter, broadcast and reduce", c.Coll.Name)
	case c.Hosts < 1 || c.PPN < 1:
		return fmt.Errorf("--hosts %d --ranks-per-host %d: want at least 1 of each", c.Hosts, c.PPN)
	case c.Hosts*c.PPN < 2:
		return fmt.Errorf("%d rank: want at least 2 ranks (--hosts x --ranks-per-host)", c.Hosts*c.PPN)
	case c.Root < 0 || c.Root >= c.Hosts*c.PPN:
		return fmt.Errorf("root %d: want a rank in [0, %d)", c.Root, c.Hosts*c.PPN)
	case c.LinkRate < 0 || c.LinkLatency < 0:
		return fmt.Errorf("link rate %g, latency %g ns: want both >= 0", c.LinkRate, c.LinkLatency)
	case c.MTU != 0 && (c.MTU < MinMTU || c.MTU > MaxMTU):
		return fmt.Errorf("--mtu %d: want 0 (the link rate is payload) or %d..%d bytes", c.MTU, MinMTU, MaxMTU)
	case c.Burst != nil && c.LinkRate == 0:
		return errors.New("--burst: a token bucket lets a link exceed its rate, and --link gives none (unlimited)")
	case c.Burst != nil && !(c.Burst.Size > 0 && c.Burst.Peak > c.LinkRate && !math.IsInf(c.Burst.Peak, 1)):
		return fmt.Errorf("--burst %.0f bytes at %s: want a size above 0 and a finite rate above the link's %s", c.Burst.Size, rateString(c.Burst.Peak), rateString(c.LinkRate))
	}
	for _, s := range c.Sizes {
		if s < int64(c.ElemSize) {
			return fmt.Errorf("size %d bytes: below one %d-byte element", s, c.ElemSize)
		}
	}
	for _, a := range c.Algos {
		if algos.Lookup(a, fn) == nil {
			return fmt.Errorf("--algo %s: it has no %s (want one of %s)", a, fn, strings.Join(c.algoNames(fn), ", "))
		}
		if why := c.unavailable(a); why != "" {
			return fmt.Errorf("--algo %s: %s", a, why)
		}
		if why := c.modelled(a); why != "" {
			return fmt.Errorf("--algo %s: %s (want one of %s)", a, why, strings.Join(c.algoNames(fn), ", "))
		}
	}
	for _, h := range c.SlowHosts {
		if h.Host < 0 || h.Host >= c.Hosts || !(h.Factor >= 1) {
			return fmt.Errorf("--slow-host %d=%g: want a host in [0, %d) and a factor >= 1", h.Host, h.Factor, c.Hosts)
		}
	}
	for _, l := range c.SlowLinks {
		if l.A < 0 || l.A >= c.Hosts || l.B < 0 || l.B >= c.Hosts || l.A == l.B || !(l.Factor >= 1) {
			return fmt.Errorf("--slow-link %d-%d=%g: want two different hosts in [0, %d) and a factor >= 1", l.A, l.B, l.Factor, c.Hosts)
		}
		if c.LinkRate == 0 {
			return fmt.Errorf("--slow-link %d-%d=%g: slows the link's rate, and --link gives none (unlimited)", l.A, l.B, l.Factor)
		}
	}
	for _, l := range c.LateStarts {
		if l.Rank < 0 || l.Rank >= c.Hosts*c.PPN || l.Ns < 0 {
			return fmt.Errorf("--late-start %d: want a rank in [0, %d) and a delay >= 0", l.Rank, c.Hosts*c.PPN)
		}
	}
	if f := c.Fabric; f != nil && (f.HostsPerLeaf < 1 || !(f.Oversub >= 1) || c.LinkRate == 0) {
		return fmt.Errorf("--leaf-spine %d:%g: want hosts per leaf >= 1, oversubscription >= 1 and a --link rate", f.HostsPerLeaf, f.Oversub)
	}
	if len(c.candidates(fn)) == 0 {
		return fmt.Errorf("no modelled algorithm and protocol left for %s on %d hosts (--algo, --proto)", fn, c.Hosts)
	}
	return c.checkBounds(fn)
}

// unavailable says why the cluster's topology cannot run algorithm a at
// all, as the runtime would refuse it, or "": NVLS across hosts, NVLS_TREE
// on one, OneShot and CMA across hosts, PAT with several ranks on a host (the
// runtime's auto NCCL_PAT_ENABLE; predict has no knob to force it).
func (c *Config) unavailable(a algos.Algo) string {
	topo := c.topo()
	switch a {
	case algos.NVLS, algos.NVLSTree:
		return algos.NvlsUnavailable(topo, a == algos.NVLSTree)
	case algos.OneShot:
		return algos.OneShotUnavailable(topo)
	case algos.CMA:
		return algos.CMAUnavailable(topo)
	case algos.PAT:
		if c.PPN > 1 {
			return fmt.Sprintf("PAT runs only with one rank per host (the runtime's NCCL_PAT_ENABLE=2, auto) and --ranks-per-host is %d", c.PPN)
		}
	}
	return ""
}

// algoNames are the modelled algorithms of fn.
func (c *Config) algoNames(fn algos.Coll) []string {
	var out []string
	for _, a := range algos.Preference {
		if algos.Lookup(a, fn) != nil && c.modelled(a) == "" {
			out = append(out, a.String())
		}
	}
	return out
}

// candidates are the (row, protocol) entries predicted: the modelled rows
// the flags allow; without --algo, those the runtime's tuner may pick by
// default (the log-step rows only between hosts).
func (c *Config) candidates(fn algos.Coll) []candidate {
	var out []candidate
	for a := range algos.Algo(algos.NumAlgos) {
		row := algos.Lookup(a, fn)
		if row == nil || c.modelled(a) != "" {
			continue
		}
		if c.Algos == nil && (a == algos.RecDbl || a == algos.Rabenseifner) && c.Hosts == 1 {
			continue
		}
		if c.Algos != nil && !contains(c.Algos, a) {
			continue
		}
		for _, p := range row.Protos() {
			if (c.Protos == nil || contains(c.Protos, p)) && !contains(c.skip, candidate{row: row, proto: p}) {
				out = append(out, candidate{row: row, proto: p})
			}
		}
	}
	return out
}

type candidate struct {
	row   *algos.Algorithm
	proto protocols.Proto
}

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// topo is the cluster's topology: ranks numbered host by host.
func (c *Config) topo() *algos.Topo { return algos.BlockTopo(c.Hosts, c.PPN) }

// intra is the class of links inside a host, as the runtime's tuner picks
// it: shm-busy when a host's ranks outnumber its cores.
func (c *Config) intra() tune.Class {
	cores := c.Cores
	if c.SharedCores > 0 {
		cores = c.SharedCores / c.Hosts
	}
	if cores > 0 && c.PPN > cores {
		return tune.SHMBusy
	}
	return tune.SHM
}

// framed is algos.FramedLinks for the cluster: the machine is a host,
// or all of them with --shared-cores.
func (c *Config) framed() bool {
	if c.SharedCores > 0 {
		return algos.FramedLinks(c.Hosts > 1, c.Hosts*c.PPN, c.SharedCores)
	}
	return algos.FramedLinks(c.Hosts > 1, c.PPN, c.cores())
}

// cores is each host's core pool: --cores, else one core per rank, which
// the lanes of a rank (the tree's up and down halves) share.
func (c *Config) cores() int {
	if c.Cores == 0 {
		return c.PPN
	}
	return c.Cores
}

// model is the tuner's model over the candidates.
func (c *Config) model(fn algos.Coll) *tune.Model {
	var mask tune.Mask
	for _, k := range c.candidates(fn) {
		mask[fn][k.row.Algo][k.proto] = true
	}
	return tune.NewIntra(c.Consts, c.topo(), mask, nil, c.intra())
}

// closedConsts are the constants the tuner's closed form is priced with
// beside the replay (the pick stays the runtime's, which knows no link
// rate): the calibration's, but with a link rate and more than
// one host, the net class's bandwidth capped at the link rate (every
// protocol's TCP frames carry its payload without lines), so that the
// closed form sees the link the replay sees. Beta is bus bandwidth, which
// for the ring is the bytes through each host's link per second: the cap
// is exact for the ring, and the other rows keep their efficiency on it.
func (c *Config) closedConsts() *tune.Consts {
	if c.LinkRate <= 0 || c.Hosts < 2 {
		return c.Consts
	}
	k := *c.Consts
	net := &k.Class[tune.Net]
	rate := c.payloadRate()
	for p := range protocols.NumProtos {
		net.Beta[p] = min(net.Beta[p], rate)
		net.BetaMax[p] = min(net.BetaMax[p], rate)
	}
	return &k
}

// Run predicts every size.
func Run(c *Config) ([]Row, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	fn, _ := c.Coll.Func()
	m := c.model(fn)
	closed := m.With(c.closedConsts())
	c.memo = &memo{cells: map[memoKey]*memoCell{}}
	defer func() { c.memo = nil }()
	n := c.Hosts * c.PPN
	cands := c.candidates(fn)
	// Every (size, candidate) replay is independent: they run on a worker
	// per core (the replays dominate: 4096 ranks x 8 B..1 GiB took 58 s
	// on one core of this 2-core machine), replay i into slot i (size
	// i / len(cands), candidate i % len(cands)), and the rows are made
	// from the slots in order, as one worker would.
	var counts []bench.Counts // of each size that leaves every rank an element
	var sizeErr error
	for _, size := range c.Sizes {
		cn := c.Coll.Counts(size/int64(c.ElemSize), int64(c.ElemSize), n)
		if cn.Param == 0 {
			sizeErr = fmt.Errorf("size %d bytes: %s over %d ranks leaves 0 elements per rank: want at least %d bytes", size, c.Coll.Name, n, 16*n)
			break
		}
		counts = append(counts, cn)
	}
	nrep := len(counts) * len(cands)
	entries := make([]Entry, nrep)
	errs := make([]error, nrep)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), nrep) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < nrep; i = int(next.Add(1) - 1) {
				cn := counts[i/len(cands)]
				entries[i], errs[i] = c.replay(cands[i%len(cands)], cn.Param, cn.Bytes(int64(c.ElemSize)))
			}
		})
	}
	wg.Wait()
	rows := make([]Row, len(counts))
	for si, cn := range counts {
		nbytes := cn.Bytes(int64(c.ElemSize))
		row := &rows[si]
		*row = Row{Bytes: nbytes, Count: max(cn.Send, cn.Recv), Best: -1, Next: -1}
		pick, _ := m.Decide(fn, nbytes, 1, -1)
		for ki, k := range cands {
			e, err := entries[si*len(cands)+ki], errs[si*len(cands)+ki]
			if err != nil {
				return nil, fmt.Errorf("size %d bytes, %s/%s: %w", nbytes, k.row.Algo, k.proto, err)
			}
			e.ClosedUS = closed.Time(fn, k.row.Algo, k.proto, nbytes, 1)
			row.Entries = append(row.Entries, e)
			i := len(row.Entries) - 1
			if k.row.Algo == pick.Algo && k.proto == pick.Proto {
				row.Pick = e
			}
			switch {
			case row.Best < 0 || e.TimeUS < row.Entries[row.Best].TimeUS:
				row.Best, row.Next = i, row.Best
			case row.Next < 0 || e.TimeUS < row.Entries[row.Next].TimeUS:
				row.Next = i
			}
		}
		row.Tie = row.Next >= 0 && row.Margin() < TieMargin
		row.AlgBW, row.BusBW = c.Coll.Bandwidth(cn, int64(c.ElemSize), n, row.Pick.TimeUS/1e6)
	}
	if sizeErr != nil {
		return nil, sizeErr
	}
	return rows, nil
}

// shape is how one candidate runs at one size: the FIFO geometry, the
// slot's payload, the chunk in elements and the estimated transfers.
type shape struct {
	g         algos.Geometry
	step      int
	chunk     int64
	align     int64
	transfers int64
}

func (c *Config) shape(k candidate, nbytes int64) shape {
	p := k.proto
	// The runtime's default FIFO for the transport: LL128's is smaller
	// where ranks talk TCP and outnumber their cores
	// (protocols.LL128NetBuffSize); framed() is TCP with a core per rank.
	tcp := c.Hosts > 1
	step := p.Payload(p.DefaultBuffSizeFor(tcp, c.framed()) / protocols.NSteps)
	sh := shape{g: k.row.Geometry[p], step: step, align: int64(max(1, 16/c.ElemSize))}
	sh.chunk = k.row.ChunkFor(&algos.ChunkArgs{Proto: p, Geometry: sh.g, StepPayload: sh.step, ElemSize: c.ElemSize,
		Align: sh.align, Bytes: nbytes, NChannels: 1, Topo: c.topo(), Framed: c.framed()})
	sh.transfers = c.transfers(k.row.Algo, sh.g, c.Hosts*c.PPN, nbytes, sh.chunk*int64(c.ElemSize))
	return sh
}

// checkBounds refuses, before anything runs, a size and candidate whose
// replay would exceed MaxTransfers even with a shortcut. Without --algo
// such candidates are left out instead (Skipped says which).
func (c *Config) checkBounds(fn algos.Coll) error {
	n := c.Hosts * c.PPN
	c.skip, c.Skipped = nil, nil // Validate may run twice (the command, then Run)
	for _, size := range c.Sizes {
		cn := c.Coll.Counts(size/int64(c.ElemSize), int64(c.ElemSize), n)
		nbytes := cn.Bytes(int64(c.ElemSize))
		for _, k := range c.candidates(fn) {
			err := c.fits(k, c.shape(k, nbytes), cn.Param)
			switch {
			case err == nil:
			case c.Algos != nil:
				return fmt.Errorf("%s/%s at %d bytes: %w", k.row.Algo, k.proto, nbytes, err)
			default:
				c.skip = append(c.skip, k)
				c.Skipped = append(c.Skipped, fmt.Sprintf("%s/%s (at %d bytes: %v)", k.row.Algo, k.proto, nbytes, err))
			}
		}
	}
	if len(c.candidates(fn)) == 0 {
		return fmt.Errorf("no algorithm fits the replay's bound on %d ranks: %s", n, strings.Join(c.Skipped, "; "))
	}
	return nil
}

// fits says why a candidate's replay at count elements would exceed the
// bound, or nil.
func (c *Config) fits(k candidate, sh shape, count int64) error {
	switch {
	case sh.transfers <= c.MaxTransfers:
		return nil
	case c.foldable(k):
		if est := sh.transfers / int64(c.Hosts); est > c.MaxTransfers {
			return fmt.Errorf("%d ranks folded into one host still need about %d slice transfers, above the bound of %d (--max-transfers)", c.Hosts*c.PPN, est, c.MaxTransfers)
		}
		return nil
	case k.row.Algo == algos.Tree:
		_, _, err := c.loopPlan(sh, count)
		return err
	}
	return fmt.Errorf("%d ranks need about %d slice transfers, above the exact replay's bound of %d (--max-transfers); only rings fold and trees extrapolate", c.Hosts*c.PPN, sh.transfers, c.MaxTransfers)
}

// replay runs one candidate at count elements (the call's count
// argument): exactly when its estimated transfers are within
// MaxTransfers, else folded (shortcut.go) or extrapolated over loops.
func (c *Config) replay(k candidate, count, nbytes int64) (Entry, error) {
	sh := c.shape(k, nbytes)
	switch {
	case sh.transfers <= c.MaxTransfers:
		return c.exact(k, sh, count)
	case c.foldable(k):
		return c.fold(k, sh, count)
	case k.row.Algo == algos.Tree:
		return c.extrapolate(k, sh, count)
	}
	return Entry{}, c.fits(k, sh, count)
}

// exact replays every rank, once per candidate, chunk and count in a Run.
func (c *Config) exact(k candidate, sh shape, count int64) (Entry, error) {
	replay := func() (Entry, error) {
		topo := c.topo()
		scheds := make([]algos.Schedule, topo.NRanks)
		for r := range scheds {
			scheds[r] = c.gen(k, sh, topo, r, count)
		}
		return c.run(k, c.params(k, topo, sh.g, sh.step), scheds)
	}
	if c.memo == nil {
		return replay()
	}
	return c.memo.get(memoKey{k, sh.chunk, count}, replay)
}

func (c *Config) gen(k candidate, sh shape, topo *algos.Topo, r int, count int64) algos.Schedule {
	return k.row.Gen(&algos.Args{Rank: r, Topo: topo, Root: c.Root, Count: count, ElemSize: c.ElemSize,
		Part: algos.Part{Count: count, Chunk: sh.chunk, Align: sh.align}})
}

func (c *Config) run(k candidate, p *timed.Params, scheds []algos.Schedule) (Entry, error) {
	res, err := timed.Run(p, [][]algos.Schedule{scheds})
	if err != nil {
		return Entry{}, err
	}
	var moved int64
	for _, t := range res.Links {
		moved += t.Slices
	}
	return Entry{Algo: k.row.Algo, Proto: k.proto, TimeUS: res.Time / 1000, Bottleneck: res.Bottleneck, Busy: res.Busy, Transfers: moved}, nil
}

// transfers estimates the slice transfers of a replay: ranks x the
// sends of one loop x loops x slices per chunk. The ring family's loop
// moves nranks chunks, with a send per step of its critical path; the
// tree's moves one chunk down each of its two trees, a rank sending
// to at most 3 peers a tree; the log-step rows move every chunk at each
// of their exchanges.
func (c *Config) transfers(a algos.Algo, g algos.Geometry, n int, nbytes, chunkBytes int64) int64 {
	fn, _ := c.Coll.Func()
	sends := int64(tune.StepsOf(fn, a, c.topo()).Total() + 2)
	per := max(chunkBytes, 1)
	switch a {
	case algos.Tree:
		sends = 6
	case algos.RecDbl, algos.Rabenseifner, algos.HierRecDbl:
		// Every step moves the whole buffer in chunks (HierRecDbl: each
		// exchange through the leader), not a 1/n share of it: an upper
		// bound of the slices.
	default:
		per *= int64(n)
	}
	loops := max((nbytes+per-1)/per, 1)
	slices := int64(g.ChunkSteps / g.SliceSteps)
	return int64(n) * sends * loops * slices
}

// replayClass is a link class of the constants as the replay takes it:
// alpha (and the link's own latency, ns) is delay; where ranks outnumber
// the cores they share (q ranks per core, q > 1), each hop also charges
// alpha_cpu x (1 - 1/q) to those cores. With every rank stepping at once
// each gets 1/q of a core, so a step takes alpha + alpha_cpu x (q - 1):
// the line tune.FitCPU fits alpha_cpu to; fewer ranks at a time wait less.
func (c *Config) replayClass(k *tune.ClassConsts, p protocols.Proto, linkLatency float64) timed.Class {
	cl := timed.Class{Alpha: k.Alpha[p]*1000 + linkLatency, Beta: k.Beta[p]}
	if q := c.ranksPerCore(); q > 1 {
		cl.CPU = k.AlphaCPU[p] * 1000 * (1 - 1/q)
	}
	return cl
}

// ranksPerCore is how many ranks share each core: all ranks on the shared
// cores (--shared-cores), else a host's ranks on its pool (--cores).
func (c *Config) ranksPerCore() float64 {
	if c.SharedCores > 0 {
		return float64(c.Hosts*c.PPN) / float64(c.SharedCores)
	}
	return float64(c.PPN) / float64(c.cores())
}

// params maps the constants, links and what-ifs onto the replay.
func (c *Config) params(k candidate, topo *algos.Topo, g algos.Geometry, step int) *timed.Params {
	p := k.proto
	cs := c.Consts
	intra, inter := &cs.Class[c.intra()], &cs.Class[tune.Net]
	job := intra
	if c.Hosts > 1 {
		job = inter
	}
	gamma := job.Gamma[p]
	if ag := job.AlgoGamma[k.row.Algo]; ag != 0 {
		gamma = ag
	}
	tp := &timed.Params{Topo: topo, Geometry: g, StepPayload: step, ElemSize: c.ElemSize,
		Intra: c.replayClass(intra, p, 0),
		Inter: c.replayClass(inter, p, c.LinkLatency),
		Start: (gamma + job.AlgoLat[k.row.Algo]) * 1000,
		Cores: c.cores(), SharedCores: c.SharedCores,
		Uplink: c.payloadRate(), Downlink: c.payloadRate(), Bucket: c.payloadBucket(), SlowLinks: c.SlowLinks, Fabric: c.Fabric}
	if len(c.SlowHosts) > 0 {
		tp.SlowHost = make([]float64, c.Hosts)
		for h := range tp.SlowHost {
			tp.SlowHost[h] = 1
		}
		for _, s := range c.SlowHosts {
			tp.SlowHost[s.Host] = s.Factor
		}
	}
	if len(c.LateStarts) > 0 {
		tp.LateStart = make([]float64, topo.NRanks)
		for _, l := range c.LateStarts {
			tp.LateStart[l.Rank] = l.Ns
		}
	}
	return tp
}
