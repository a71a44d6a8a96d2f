package comm

// What Init decides once the ranks have joined: the settings they must
// share, the channel count, the algorithm of each collective and the links
// to connect ahead of the first call.

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/param"
)

// agree exchanges through the bootstrap what every rank must share: the
// settings of param.Agreed (a mismatch would make ranks run different
// schedules and wait for each other forever, so it is an error on every
// rank, naming the variable), and each rank's channel count proposal (its
// cores and channel knobs), of which the communicator takes the smallest,
// as NCCL does, so that hosts with different core counts agree.
func (c *Comm) agree(ctx context.Context, channels int) error {
	blob := append([]byte(strconv.Itoa(channels)+"\n"), c.p.AgreedText()...)
	parts, err := c.boot.AllGather(ctx, blob)
	if err != nil {
		return err
	}
	texts := make([][]byte, len(parts))
	c.nchannels = channels
	for r, part := range parts {
		first, rest, ok := bytes.Cut(part, []byte("\n"))
		n, err := strconv.Atoi(string(first))
		if !ok || err != nil || n < 1 {
			return fmt.Errorf("rank %d sent a malformed settings block (%q): is it running another version of cc?", r, first)
		}
		c.nchannels = min(c.nchannels, n)
		texts[r] = rest
	}
	return param.Disagreement(texts, func(r int) string { return "host " + c.peers[r].Host })
}

// pickAlgos decides which row runs each collective (or why none can: an
// error for the calls, not for Init) and returns the links of those rows,
// which Init connects on every channel.
func (c *Comm) pickAlgos() []algos.Link {
	var links []algos.Link
	for kind := range algos.Coll(algos.NumColls) {
		row, err := pickAlgo(c.p, kind, c.topo)
		c.algoFor[kind], c.algoErr[kind] = row, err
		if err != nil {
			c.infof(param.SubsysInit, "%s: %v", kind, err)
			continue
		}
		if c.nranks == 1 || !row.Runs(protocols.Simple) {
			continue
		}
		for _, l := range row.Peers(&algos.Args{Rank: c.rank, Topo: c.topo}) {
			if !slices.Contains(links, l) {
				links = append(links, l)
			}
		}
	}
	return links
}

// logGraph prints the ring of every channel (INIT, as before) and, with
// NCCL_DEBUG_SUBSYS=GRAPH, the hosts, each collective's algorithm and this
// rank's place in both trees of every channel, numbered as NCCL does
// (channel c: tree 0 is "Tree c", tree 1 is "Tree c+nchannels").
func (c *Comm) logGraph() {
	if c.nranks > 1 {
		c.infof(param.SubsysInit, "%d channels: ring %d -> %d -> %d", c.nchannels,
			algos.RingPrev(c.rank, c.nranks), c.rank, algos.RingNext(c.rank, c.nranks))
	}
	if !c.log.Enabled(param.DebugInfo, param.SubsysGraph) {
		return
	}
	host, local := c.topo.Host(c.rank)
	c.infof(param.SubsysGraph, "%d hosts; rank %d is rank %d of %d on host %d", c.topo.NHosts(), c.rank, local, len(c.topo.Hosts[host]), host)
	for kind := range algos.Coll(algos.NumColls) {
		if row := c.algoFor[kind]; row != nil {
			c.infof(param.SubsysGraph, "%s runs %s", kind, row.Algo)
		}
	}
	trees := algos.DoubleTree(c.topo, c.rank)
	for ch := range c.nchannels {
		for t, node := range trees {
			c.infof(param.SubsysGraph, "%s", node.GraphLine(ch+t*c.nchannels, c.rank))
		}
	}
}
