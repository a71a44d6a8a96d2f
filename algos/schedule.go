package algos

import (
	"fmt"
	"slices"

	"github.com/seed-760dd1f1/cc/protocols"
)

// Schedule is one rank's work on one channel: lanes that run concurrently.
// A single-lane schedule without waits runs its Ops in order, as every ring
// does. A slot-level schedule (PAT's) has Slots instead of Lanes: one
// sequence of SlotOps run in order.
type Schedule struct {
	Lanes []Lane
	Slots []SlotOp
	// InOrder says the lanes may also run one after the other, lane 0
	// first: a lane receives only what lower lanes (of any rank) or
	// another process send, and waits only for lower lanes of its rank.
	// The engine runs them so, on one goroutine, when no send of the task
	// can wait for its receiver (runtime/engine: every lane's slices fit
	// in a FIFO): a small collective then costs no hand-off between lanes.
	InOrder bool
}

// Lane is one stream of Ops (NCCL: one thread group of a channel). Lanes of
// a rank and channel progress independently except where a Wait ties them,
// and no two lanes of a rank and channel use the same directed link (peer,
// connection index, direction): each FIFO has one producer and one consumer.
type Lane struct {
	Ops   []Op
	Waits []Wait // sorted by At; usually none
}

// Wait holds Ops[At] of its lane until lane Lane of the same rank and
// channel has completed its first Done Ops.
type Wait struct {
	At, Lane, Done int
}

// Single wraps the Ops of a one-lane schedule.
func Single(ops []Op) Schedule { return Schedule{Lanes: []Lane{{Ops: ops}}} }

// NumOps is the number of Ops over every lane.
func (s Schedule) NumOps() int {
	n := len(s.Slots)
	for _, l := range s.Lanes {
		n += len(l.Ops)
	}
	return n
}

// Link is one directed connection of a rank on a channel: to or from Peer on
// connection index Conn.
type Link struct {
	Peer int
	Conn uint8
	Send bool // the rank sends to Peer; false: receives from Peer
}

func (l Link) String() string {
	dir := "<-"
	if l.Send {
		dir = "->"
	}
	return fmt.Sprintf("%s%d/conn%d", dir, l.Peer, l.Conn)
}

// Links returns the directed links a schedule uses, each once, in order of
// first use. It is what a generator's Peers function must cover.
func (s Schedule) Links() []Link {
	var out []Link
	add := func(l Link) {
		if !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	for _, lane := range s.Lanes {
		for i := range lane.Ops {
			o := &lane.Ops[i]
			if o.Count == 0 {
				continue
			}
			for k := range o.NumRecvs() {
				add(Link{Peer: o.RecvPeer(k), Conn: o.Conn})
			}
			for k := range o.NumSends() {
				add(Link{Peer: o.SendPeer(k), Conn: o.Conn, Send: true})
			}
		}
	}
	for _, o := range s.Slots {
		if o.Recv != NoPeer {
			add(Link{Peer: o.Recv})
		}
		if o.Send != NoPeer {
			add(Link{Peer: o.Send, Send: true})
		}
	}
	return out
}

// CheckLanes checks what the engine and the simulator rely on in one rank's
// schedule: waits name another lane, are sorted and point inside it; no
// two lanes share a directed link; no Op names more peers than MaxPeers.
func (s Schedule) CheckLanes() error {
	if len(s.Slots) > 0 && len(s.Lanes) > 0 {
		return fmt.Errorf("a schedule has lanes (%d) or slots (%d), not both", len(s.Lanes), len(s.Slots))
	}
	for i, o := range s.Slots {
		if o.RecvAhead < 0 || o.RecvAhead >= protocols.NSteps || o.SendAhead < 0 || o.SendAhead >= protocols.NSteps {
			return fmt.Errorf("slot op %d (%v): ahead beyond the %d-slot FIFO", i, o, protocols.NSteps)
		}
	}
	owner := map[Link]int{}
	for li, lane := range s.Lanes {
		for wi, w := range lane.Waits {
			switch {
			case w.Lane < 0 || w.Lane >= len(s.Lanes) || w.Lane == li:
				return fmt.Errorf("lane %d wait %d: lane %d: want another of the %d lanes", li, wi, w.Lane, len(s.Lanes))
			case w.At < 0 || w.At > len(lane.Ops):
				return fmt.Errorf("lane %d wait %d: at op %d of %d", li, wi, w.At, len(lane.Ops))
			case w.Done < 0 || w.Done > len(s.Lanes[w.Lane].Ops):
				return fmt.Errorf("lane %d wait %d: %d ops done of lane %d, which has %d", li, wi, w.Done, w.Lane, len(s.Lanes[w.Lane].Ops))
			case wi > 0 && lane.Waits[wi-1].At > w.At:
				return fmt.Errorf("lane %d: waits not sorted by op (%d after %d)", li, w.At, lane.Waits[wi-1].At)
			}
		}
		for i := range lane.Ops {
			o := &lane.Ops[i]
			if o.NumRecvs() > MaxPeers || o.NumSends() > MaxPeers {
				return fmt.Errorf("lane %d op %d (%v): more than %d peers one way", li, i, *o, MaxPeers)
			}
		}
		for _, l := range (Schedule{Lanes: []Lane{lane}}).Links() {
			if other, ok := owner[l]; ok && other != li {
				return fmt.Errorf("lanes %d and %d both use link %v: a FIFO has one producer and one consumer", other, li, l)
			}
			owner[l] = li
		}
	}
	return nil
}
