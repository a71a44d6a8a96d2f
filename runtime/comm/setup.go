package comm

// What Init decides once the ranks have joined: the settings they must
// share, the channel count, the algorithm of each collective and the links
// to connect ahead of the first call.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/param"
	"github.com/seed-760dd1f1/cc/runtime/tune"
)

// agree exchanges through the bootstrap what every rank must share: the
// settings of param.Agreed (a mismatch would make ranks run different
// schedules and wait for each other forever, so it is an error on every
// rank, naming the variable), each rank's channel count proposal (its
// cores and channel knobs), of which the communicator takes the smallest,
// as NCCL does, so that hosts with different core counts agree, its cores
// (the tuner's model knows whether a host has more ranks than the fewest
// cores any rank has), whether its machine has a core for each of its
// ranks (roomy: LL128's chunks are cut for TCP frames only when every
// machine has, since every rank must cut them alike), and rank 0's tuner
// inputs.
func (c *Comm) agree(ctx context.Context, channels, cores int, roomy bool) error {
	blob := append([]byte(fmt.Sprintf("%d %d %d\n", channels, cores, b2i(roomy))), c.tuneLine()...)
	blob = append(blob, '\n')
	blob = append(blob, c.p.AgreedText()...)
	parts, err := c.boot.AllGather(ctx, blob)
	if err != nil {
		return err
	}
	texts := make([][]byte, len(parts))
	c.nchannels = channels
	c.allRoomy = true
	for r, part := range parts {
		first, rest, ok := bytes.Cut(part, []byte("\n"))
		n, cores, roomy, err := parseSettings(first)
		if !ok || err != nil {
			return fmt.Errorf("rank %d sent a malformed settings block (%q): is it running another version of cc?", r, first)
		}
		c.allRoomy = c.allRoomy && roomy
		c.nchannels = min(c.nchannels, n)
		if r == 0 || cores < c.minCores {
			c.minCores = cores
		}
		tuneLine, rest, _ := bytes.Cut(rest, []byte("\n"))
		if r == 0 {
			if err := c.useTuneLine(tuneLine); err != nil {
				return err
			}
		}
		texts[r] = rest
	}
	return param.Disagreement(texts, func(r int) string { return "host " + c.peers[r].Host })
}

// tuneShare is what rank 0 sends every rank of the tuner's inputs in the
// settings exchange, so that every rank takes the same decisions: its
// constants (CC_TUNE_FILE, or the built-in ones) and its tuner config
// file (NCCL_TUNER_CONFIG_FILE), or why it could not read them.
type tuneShare struct {
	Consts     *tune.Consts `json:"consts,omitempty"`
	ConfigPath string       `json:"config_path,omitempty"`
	ConfigText string       `json:"config_text,omitempty"`
	Error      string       `json:"error,omitempty"`
}

// tuneLine is this rank's line of the settings exchange: rank 0's
// tuneShare as one line of JSON; "-" on the other ranks, whose files are
// not read.
func (c *Comm) tuneLine() []byte {
	if c.rank != 0 {
		return []byte("-")
	}
	sh := tuneShare{Consts: tune.Default()}
	var err error
	if c.p.TuneFile != "" {
		if sh.Consts, err = tune.LoadConsts(c.p.TuneFile); err != nil {
			sh = tuneShare{Error: "CC_TUNE_FILE: " + err.Error()}
		}
	}
	if path := c.p.TunerConfigFile; path != "" && sh.Error == "" {
		b, err := os.ReadFile(path)
		if err == nil {
			_, err = tune.ParseConfig(path, b)
		}
		if err != nil {
			sh = tuneShare{Error: "NCCL_TUNER_CONFIG_FILE: " + err.Error()}
		}
		sh.ConfigPath, sh.ConfigText = path, string(b)
	}
	b, err := json.Marshal(sh)
	if err != nil {
		b, _ = json.Marshal(tuneShare{Error: err.Error()})
	}
	return b
}

// useTuneLine takes rank 0's tuneLine.
func (c *Comm) useTuneLine(line []byte) error {
	var sh tuneShare
	if err := json.Unmarshal(line, &sh); err != nil {
		return fmt.Errorf("rank 0 sent malformed tuner settings (%v): is it running another version of cc?", err)
	}
	if sh.Error != "" {
		return fmt.Errorf("rank 0: %s", sh.Error)
	}
	if sh.Consts == nil {
		return errors.New("rank 0 sent no tuner constants: is it running another version of cc?")
	}
	if err := sh.Consts.Check(); err != nil {
		return fmt.Errorf("rank 0's tuner constants: %w", err)
	}
	c.consts = sh.Consts
	if sh.ConfigPath != "" {
		cfg, err := tune.ParseConfig(sh.ConfigPath, []byte(sh.ConfigText))
		if err != nil {
			return fmt.Errorf("rank 0's NCCL_TUNER_CONFIG_FILE: %w", err)
		}
		c.tunerCfg = cfg
	}
	return nil
}

// pickAlgos decides which entries (collective, algorithm, protocol) may
// run (or why a collective has none: an error for its calls, not for
// Init), builds the tuner's model over them, and returns the links of
// every algorithm that may run, which Init connects on every channel.
func (c *Comm) pickAlgos() []algos.Link {
	var links []algos.Link
	var mask tune.Mask
	pat := patDisabled(c.p, c.topo)
	for kind := range algos.Coll(algos.NumColls) {
		excluded := "" // why an algorithm that is allowed and has a row is disabled
		some := false
		for _, row := range algos.Algorithms {
			if row.Coll != kind || !c.p.Algo.For(kind).Has(row.Algo) {
				continue
			}
			if row.Algo == algos.PAT && pat != "" {
				excluded = pat
				continue
			}
			if why := c.logStepDisabled(row.Algo); why != "" {
				excluded = why // the ring runs every collective they do: never the last
				continue
			}
			if why := c.nvlsDisabled(row.Algo); why != "" {
				excluded = why
				continue
			}
			if why := c.flatDisabled(&row); why != "" {
				excluded = why
				continue
			}
			if row.Algo == algos.CollNetDirect && c.collnetWhy(kind) != "" {
				continue // NCCL_ALGO forcing it alone failed Init (checkCollNetForced)
			}
			runs := false
			for _, p := range row.Protos() {
				if c.p.Proto.For(kind).Has(p) {
					mask[kind][row.Algo][p], runs = true, true
				}
			}
			some = some || runs
			if !runs || c.nranks == 1 || row.Peers == nil {
				continue // a flat row connects nothing: its staging area is the segment's
			}
			for _, l := range row.Peers(&algos.Args{Rank: c.rank, Topo: c.topo}) {
				if !slices.Contains(links, l) {
					links = append(links, l)
				}
			}
		}
		if !some {
			c.algoErr[kind] = noAlgo(c.p, kind, excluded)
			c.infof(param.SubsysInit, "%s: %v", kind, c.algoErr[kind])
		}
	}
	c.model = tune.NewIntra(c.consts, c.topo, mask, c.tunerCfg, c.intraClass())
	if c.hierOneChannel() {
		c.model = c.model.WithStagedHier(c.topo) // hosts of several ranks stage it (hier.go)
	}
	return links
}

// intraClass is the tuner's class of the links between ranks of one host:
// the ranks' transport, shared memory (busy when a host has more ranks
// than cores) or, with NCCL_SHM_DISABLE=1, TCP.
func (c *Comm) intraClass() tune.Class {
	switch {
	case c.p.SHMDisable:
		return tune.Net
	case c.topo.MaxPerHost() > c.minCores:
		return tune.SHMBusy
	}
	return tune.SHM
}

// logGraph prints the ring of every channel (INIT, as before) and, with
// NCCL_DEBUG_SUBSYS=GRAPH, the hosts, each collective's algorithm and this
// rank's place in both trees of every channel, numbered as NCCL does
// (channel c: tree 0 is "Tree c", tree 1 is "Tree c+nchannels").
func (c *Comm) logGraph() {
	if c.rank == 0 && c.log.Enabled(param.DebugInfo, param.SubsysTuning) {
		cl := c.model.Class()
		k := &c.consts.Class[cl]
		g3 := func(v [protocols.NumProtos]float64) string {
			return fmt.Sprintf("%.3g/%.3g/%.3g", v[protocols.LL], v[protocols.LL128], v[protocols.Simple])
		}
		c.infof(param.SubsysTuning, "tuner constants: %s; this job's class %s (%s): LL/LL128/Simple gamma %s us, alpha %s us, beta %s GB/s per channel, at most %s",
			c.consts.Source, cl, k.Source, g3(k.Gamma), g3(k.Alpha), g3(k.Beta), g3(k.BetaMax))
		for _, line := range c.model.Table(c.nchannels) {
			c.infof(param.SubsysTuning, "%s", line)
		}
	}
	if c.nranks > 1 {
		c.infof(param.SubsysInit, "%d channels: ring %d -> %d -> %d", c.nchannels,
			algos.RingPrev(c.rank, c.nranks), c.rank, algos.RingNext(c.rank, c.nranks))
	}
	c.logNVLS()
	if !c.log.Enabled(param.DebugInfo, param.SubsysGraph) {
		return
	}
	host, local := c.topo.Host(c.rank)
	c.infof(param.SubsysGraph, "%d hosts; rank %d is rank %d of %d on host %d", c.topo.NHosts(), c.rank, local, len(c.topo.Hosts[host]), host)
	for kind := range algos.Coll(algos.NumColls) {
		var can []string
		for a := range algos.Algo(algos.NumAlgos) {
			for p := range protocols.Proto(protocols.NumProtos) {
				if c.model.Time(kind, a, p, 0, 1) >= 0 {
					can = append(can, a.String()+"/"+p.String())
				}
			}
		}
		c.infof(param.SubsysGraph, "%s may run %s (the tuner picks per call)", kind, strings.Join(can, ", "))
	}
	trees := algos.DoubleTree(c.topo, c.rank)
	for ch := range c.nchannels {
		for t, node := range trees {
			c.infof(param.SubsysGraph, "%s", node.GraphLine(ch+t*c.nchannels, c.rank))
		}
	}
}

// logNVLS prints, with NCCL_DEBUG_SUBSYS=NVLS, this rank's place in NVLS
// when NVLS or NVLS_TREE may run: its head index among the host's ranks,
// the multicast regions, and its parent and children in NVLS_TREE's tree
// of heads.
func (c *Comm) logNVLS() {
	if !c.log.Enabled(param.DebugInfo, param.SubsysNVLS) {
		return
	}
	host, head := c.topo.Host(c.rank)
	if c.model.Time(algos.ReduceScatter, algos.NVLS, protocols.Simple, 0, 1) >= 0 || c.model.Time(algos.AllReduce, algos.NVLS, protocols.Simple, 0, 1) >= 0 {
		c.infof(param.SubsysNVLS, "NVLS: rank %d is head %d of %d on host %d; multicast regions of %d slots x %d bytes (NCCL_NVLS_CHUNKSIZE) per local rank and channel",
			c.rank, head, len(c.topo.Hosts[host]), host, protocols.NSteps, c.p.NVLSChunkSize)
	}
	if c.model.Time(algos.AllReduce, algos.NVLSTree, protocols.Simple, 0, 1) >= 0 {
		node := algos.Btree(c.topo.NHosts(), host)
		c.infof(param.SubsysNVLS, "NVLS_TREE: rank %d is head %d of host %d; tree of hosts %d -> %d -> %d/%d (the ranks of head index %d)",
			c.rank, head, host, node.Up, host, node.Down[0], node.Down[1], head)
	}
}

// parseSettings reads the first line of a rank's settings block: its
// channel proposal, its cores and whether its machine is roomy (0 or 1).
func parseSettings(line []byte) (channels, cores int, roomy bool, err error) {
	f := strings.Fields(string(line))
	bad := fmt.Errorf("malformed settings line %q", line)
	if len(f) != 3 {
		return 0, 0, false, bad
	}
	var v [3]int
	for i := range f {
		if v[i], err = strconv.Atoi(f[i]); err != nil {
			return 0, 0, false, bad
		}
	}
	if v[0] < 1 || v[1] < 1 || v[2] < 0 || v[2] > 1 {
		return 0, 0, false, bad
	}
	return v[0], v[1], v[2] == 1, nil
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
