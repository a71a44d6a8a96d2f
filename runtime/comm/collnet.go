package comm

// CollNet Direct: the communicator's side of the aggregation server
// (runtime/collnet). A head's schedules name the server as the peer
// algos.CollNetPeer(nranks); sendTo and recvFrom hand out the two
// directions of its connection to the server on that channel, dialled on
// first use (at Init, for the algorithms that may run). Before the engine
// runs a collective that talks to the server, the head sends the server
// the collective's descriptor (beginCollNet).

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/collnet"
	"github.com/seed-760dd1f1/cc/runtime/param"
	"github.com/seed-760dd1f1/cc/runtime/tune"
	"github.com/seed-760dd1f1/cc/runtime/wire"
)

// collnetState is a communicator's CollNet set-up.
type collnetState struct {
	job   wire.Job // the job the server runs for: the launcher's, also for a Split
	seq   uint64   // CollNet collectives so far; the same on every rank
	mu    sync.Mutex
	links map[connKey]*lazy[*collnet.Link] // by channel (connKey.peer)
}

// collnetWhy says why CollNet Direct cannot run kind on this
// communicator, or "" if it can: NCCL_COLLNET_ENABLE=1 and a server are
// needed, algos.CollNetRuns' limits, and a tuner efficiency. Unlike
// NCCL, no NVSwitch is needed (there is none to have).
func (c *Comm) collnetWhy(kind algos.Coll) string {
	p := c.p
	switch {
	case !p.CollNetEnable:
		return "CollNet is disabled (NCCL_COLLNET_ENABLE=0)"
	case p.CollNetServer == "":
		return "CollNet has no aggregation server (CC_COLLNET_SERVER is not set: run under ccrun --collnet-server)"
	}
	if err := algos.CollNetRuns(kind, c.topo); err != nil {
		return err.Error()
	}
	for cl, k := range c.consts.Class {
		if k.Eff[algos.CollNetDirect] <= 0 {
			return fmt.Sprintf("the tuner's constants (%s) have no CollNetDirect efficiency for class %s", c.consts.Source, tune.Class(cl))
		}
	}
	return ""
}

// checkCollNetForced fails Init when NCCL_ALGO leaves a collective only
// CollNet Direct and CollNet cannot run it: a one-line error naming why,
// rather than a failure of every call.
func (c *Comm) checkCollNetForced() error {
	if !c.p.Algo.Set {
		return nil
	}
	for _, kind := range []algos.Coll{algos.AllReduce, algos.ReduceScatter, algos.AllGather} {
		allowed := c.p.Algo.For(kind)
		if !allowed.Has(algos.CollNetDirect) {
			continue
		}
		why := c.collnetWhy(kind)
		if why == "" {
			continue
		}
		other := false
		for _, row := range algos.Algorithms {
			other = other || (row.Coll == kind && row.Algo != algos.CollNetDirect && allowed.Has(row.Algo))
		}
		if !other {
			return fmt.Errorf("NCCL_ALGO=%q leaves %s only CollNetDirect, which cannot run: %s", c.p.Algo.Raw, kind, why)
		}
	}
	return nil
}

// serverSend and serverRecv are the channel's connections to and from the
// aggregation server, for protocol p (Simple: CollNet's only one).
func (ch *channel) serverSend(p protocols.Proto, conn int) (sender, error) {
	return get(&ch.mu, ch.send, connKey{ch.c.nranks, p, conn}, func() (sender, error) {
		l, err := ch.serverLink(p)
		if err != nil {
			return nil, err
		}
		return l.Sender(), nil
	})
}

func (ch *channel) serverRecv(p protocols.Proto, conn int) (receiver, error) {
	return get(&ch.mu, ch.recv, connKey{ch.c.nranks, p, conn}, func() (receiver, error) {
		l, err := ch.serverLink(p)
		if err != nil {
			return nil, err
		}
		return l.Receiver(), nil
	})
}

// serverLink dials the server once for the channel.
func (ch *channel) serverLink(p protocols.Proto) (*collnet.Link, error) {
	c := ch.c
	if p != protocols.Simple {
		return nil, fmt.Errorf("rank %d: %s: CollNet runs with Simple only, not %s", c.rank, ch.name(), p)
	}
	cs := &c.collnet
	return get(&cs.mu, cs.links, connKey{peer: ch.id}, func() (*collnet.Link, error) {
		host, local := c.topo.Host(c.rank)
		l, err := collnet.Dial(c.ctx, collnet.DialOptions{
			Addr: c.p.CollNetServer, Job: cs.job, RetryCnt: c.p.SocketRetryCnt, RetrySleep: c.p.SocketRetrySleep,
			Join: collnet.Join{Comm: c.job.ID, Rank: c.rank, NNodes: c.topo.NHosts(), Node: host, Rail: local,
				Channel: ch.id, StepBytes: c.buffSize[p] / protocols.NSteps},
			OnError: func(err error) { c.fail(fmt.Errorf("rank %d: %w", c.rank, err)) },
		})
		if err != nil {
			return nil, fmt.Errorf("rank %d: %s: %w", c.rank, ch.name(), err)
		}
		c.infof(param.SubsysNet, "%s: rank %d -> %s %s (host %d, rail %d)", ch.name(), c.rank, collnet.Name, c.p.CollNetServer, host, local)
		return l, nil
	})
}

// closeCollNet closes the connections to the server.
func (c *Comm) closeCollNet() {
	cs := &c.collnet
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for _, l := range cs.links {
		if v, ok := l.opened(); ok {
			v.Close()
		}
	}
}

// talksToServer reports whether a schedule has Ops with the server.
func talksToServer(s algos.Schedule, server int) bool {
	for _, l := range s.Links() {
		if l.Peer == server {
			return true
		}
	}
	return false
}

// beginCollNet sends the server the descriptor of k's share on channel
// ch, when this rank is a head with work for the server there.
func (c *Comm) beginCollNet(k *coll, ch int) error {
	if !k.plan.server[ch] {
		return nil
	}
	chn := c.channels[ch]
	l, err := chn.serverLink(k.proto)
	if err != nil {
		return err
	}
	esize := int64(k.dt.Size())
	align := max(1, 16/esize)
	off, n := partition(k.count, k.channels, align, ch)
	d := collnet.Desc{Seq: k.collnetSeq, Coll: k.kind, Type: k.dt, NNodes: c.topo.NHosts(), Count: k.count,
		Part:       algos.Part{Offset: off, Count: n, Chunk: k.plan.chunk, Align: align},
		ChunkSteps: k.plan.geo.ChunkSteps, SliceSteps: k.plan.geo.SliceSteps}
	switch {
	case k.kind == algos.AllReduce:
		d.NHeads = algos.CollNetHeads(c.topo, c.p.CollNetNHeads)
	default:
		d.NHeads = c.topo.MaxPerHost()
	}
	if k.fn != nil {
		d.Op = collnet.ServerOp(k.fn.Op())
	}
	if err := l.Begin(d); err != nil {
		return fmt.Errorf("rank %d: %s: %w", c.rank, chn.name(), err)
	}
	return nil
}

// InitLocalCollNet is InitLocalHosts with CollNet Direct: an aggregation
// server runs in this process for the communicators' job, and p (nil:
// the environment's settings) gets NCCL_COLLNET_ENABLE=1 and its address.
// Close the server after the communicators.
func InitLocalCollNet(ctx context.Context, hosts []string, p *param.Params) ([]*Comm, *collnet.Server, error) {
	if p == nil {
		var err error
		if p, err = param.Load(os.LookupEnv); err != nil {
			return nil, nil, err
		}
	}
	job, err := NewJob()
	if err != nil {
		return nil, nil, err
	}
	srv, err := collnet.Listen(collnet.Options{Job: job, Addr: "127.0.0.1:0"})
	if err != nil {
		return nil, nil, err
	}
	pc := *p
	pc.CollNetEnable, pc.CollNetServer = true, srv.Addr()
	cs, err := initLocalJob(ctx, hosts, &pc, job)
	if err != nil {
		srv.Close()
		return nil, nil, err
	}
	return cs, srv, nil
}
