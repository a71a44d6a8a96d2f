// Package sim runs the schedules of every rank of a collective in memory,
// deterministically, to check what the algos generators produce: the final
// buffers (with exact integer data), deadlocks, and the messages, elements
// and FIFO depth on every connection.
//
// Usage:
//
//	ranks := make([]sim.Rank, n)             // In and Out of every rank
//	scheds := make([][]algos.Op, n)
//	for r := range n {
//		scheds[r] = algos.RingAllReduce(r, n, part)
//	}
//	sum := sim.Reduction{Op: func(a, b int64) int64 { return a + b }}
//	stats, err := sim.Run(ranks, scheds, sum, 8)
//
// The model. Every (channel, src, dst, connection index) is a FIFO holding
// at most slots messages; a message is the Count elements one Op sends to one
// peer. Each rank's schedule on a channel is one or more lanes (see
// algos.Schedule), and every lane is an actor. Time advances in rounds. In a
// round, every actor looks at its next Op, against the state at the start of
// the round:
//
//   - if a Wait holds the Op, it waits for the other lane's progress;
//   - for every peer the Op receives from and has not yet received from, it
//     takes the message at the head of that FIFO, if there is one; the
//     message's Count must equal the Op's;
//   - once it holds every message (or receives nothing), the Op completes if
//     every FIFO it sends to has a free slot: the value (the received
//     messages reduced in peer order, then the local operand) goes to each.
//
// So an Op that receives and sends frees its input slots as soon as it takes
// the messages and holds the data (a rank's staging buffer) until it can
// send: a ring completes even with one slot per FIFO. A slot freed in a round
// can be filled in the next, so with one slot a FIFO passes a message every
// other round, as a credit round trip would. An Op whose Count is 0 does
// nothing and is skipped. A round in which nothing happens while Ops remain
// is a deadlock, reported as a *DeadlockError. Stats.Rounds, the number of
// rounds, is the schedule's critical path in Op steps.
package sim

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/seed-760dd1f1/cc/algos"
)

// Rank is one rank's buffers as int64 values, so that reductions are exact.
type Rank struct {
	In, Out []int64
}

// Reduction is the arithmetic of a collective: Op combines a received value
// a with a local value b; Pre applies to every value read from a rank's In
// (e.g. premulsum's scale) and Post to the result of an Op with PostOp set
// (e.g. avg's divide). A nil Pre or Post is the identity; Op may be nil for
// collectives that do not reduce. Pass a Reduction without Pre for
// collectives that only copy: Pre applies to every read of In.
type Reduction struct {
	Op   func(a, b int64) int64
	Pre  func(rank int, x int64) int64
	Post func(x int64) int64
}

// Link names one FIFO: the messages rank Src sends to rank Dst on Channel
// and connection index Conn.
type Link struct {
	Channel, Src, Dst int
	Conn              uint8
}

// Traffic is what crossed one Link.
type Traffic struct {
	Messages int64 // messages, i.e. NCCL's steps per peer
	Elements int64 // elements in those messages
	MaxDepth int   // most messages queued at the end of a round
}

// Stats is what a Run measured.
type Stats struct {
	Rounds int              // rounds until every Op completed
	Ops    int64            // Ops completed, over all channels, ranks and lanes (Count 0 excluded)
	Links  map[Link]Traffic // every Link that carried a message
	// Rewrites counts element writes to Out beyond the first, over all
	// ranks: 0 for a schedule that writes every output element at most once
	// (algos.Algorithm.WritesOutputOnce). A run whose In and Out share
	// memory (in place) counts the writes all the same.
	Rewrites int64
	// McastWrites counts the messages stored into multicast regions
	// (algos.McastPeer): one per Op, whatever the number of readers, each
	// of which has its own Link on ConnMcast.
	McastWrites int64
	// DirectElems counts the elements read in place from other ranks'
	// Input (algos.Fan.Direct: NVLS over registered buffers), which cross
	// no Link.
	DirectElems int64
}

// ConnMcast is the connection index of the Links from a head to the
// readers of its multicast region: one write by the head is a message on
// each of them.
const ConnMcast uint8 = algos.MaxConns

// Between sums the traffic from src to dst over all channels; MaxDepth is the
// largest of any channel.
func (s Stats) Between(src, dst int) Traffic {
	var t Traffic
	for l, lt := range s.Links {
		if l.Src == src && l.Dst == dst {
			t.Messages += lt.Messages
			t.Elements += lt.Elements
			t.MaxDepth = max(t.MaxDepth, lt.MaxDepth)
		}
	}
	return t
}

// Blocked is one Op that could not progress in a deadlocked round.
type Blocked struct {
	Channel, Rank int
	Lane          int
	Index         int // position of Op in the lane
	Len           int // length of the lane
	Op            algos.Op
	Slot          *algos.SlotOp // the SlotOp, for a slot schedule (RunSlots); Op is then zero
	Waiting       string        // what the Op waits for
	Lanes         int           // lanes of the rank's schedule on the channel
}

// DeadlockError reports a round in which no Op could progress: every rank
// that still has Ops, with the Op it is blocked on.
type DeadlockError struct {
	Round   int
	Blocked []Blocked
}

func (e *DeadlockError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "deadlock in round %d: %d ops blocked", e.Round, len(e.Blocked))
	for _, k := range e.Blocked {
		op := fmt.Sprint(k.Op)
		if k.Slot != nil {
			op = fmt.Sprint(*k.Slot)
		}
		fmt.Fprintf(&b, "\n\tchannel %d rank %d%s op %d/%d (%s): waiting for %s",
			k.Channel, k.Rank, laneName(k.Lane, k.Lanes), k.Index, k.Len, op, k.Waiting)
	}
	return b.String()
}

// Run executes schedules[r], rank r's Ops on one channel, for every rank,
// with FIFOs of slots messages, and returns what crossed every link (up to
// the failure, if it fails). It writes the ranks' buffers in place. See the
// package doc for the model.
func Run(ranks []Rank, schedules [][]algos.Op, red Reduction, slots int) (Stats, error) {
	return RunChannels(ranks, [][][]algos.Op{schedules}, red, slots)
}

// RunChannels is Run for several channels: channels[c][r] is rank r's
// schedule on channel c. Channels have their own FIFOs and progress
// independently in the same rounds; they share the ranks' buffers.
func RunChannels(ranks []Rank, channels [][][]algos.Op, red Reduction, slots int) (Stats, error) {
	scheds := make([][]algos.Schedule, len(channels))
	for c, ch := range channels {
		scheds[c] = make([]algos.Schedule, len(ch))
		for r, ops := range ch {
			scheds[c][r] = algos.Single(ops)
		}
	}
	return RunSchedules(ranks, scheds, red, slots)
}

// RunSchedules is the general form: channels[c][r] is rank r's schedule (its
// lanes) on channel c.
func RunSchedules(ranks []Rank, channels [][]algos.Schedule, red Reduction, slots int) (Stats, error) {
	if len(ranks) == 0 {
		return Stats{}, errors.New("no ranks: need at least 1")
	}
	if slots < 1 {
		return Stats{}, fmt.Errorf("fifo slots %d: must be at least 1", slots)
	}
	s := &state{ranks: ranks, red: red, slots: slots, fifos: map[Link]*fifo{}, writes: newWriteCounter(ranks),
		readers: map[[2]int][]int{}}
	for _, b := range []algos.Buf{algos.Input, algos.Output} {
		s.smallest[b].size = math.MaxInt64
		for r := range ranks {
			if size := int64(len(s.buf(r, b))); size < s.smallest[b].size {
				s.smallest[b].rank, s.smallest[b].size = r, size
			}
		}
	}
	for c, scheds := range channels {
		if len(scheds) != len(ranks) {
			return Stats{}, fmt.Errorf("channel %d: %d schedules for %d ranks: need one per rank", c, len(scheds), len(ranks))
		}
		for r, sched := range scheds {
			if err := sched.CheckLanes(); err != nil {
				return Stats{}, fmt.Errorf("channel %d rank %d: %w", c, r, err)
			}
			lanes := make([]*actor, len(sched.Lanes))
			for l, lane := range sched.Lanes {
				wide := 0
				for i, op := range lane.Ops {
					err := s.check(op)
					if err == nil {
						err = s.checkMcast(c, r, op)
					}
					if err != nil {
						return Stats{}, fmt.Errorf("channel %d rank %d%s op %d (%v): %w", c, r, laneName(l, len(sched.Lanes)), i, op, err)
					}
					wide = max(wide, op.NumRecvs())
				}
				lanes[l] = &actor{ch: c, rank: r, lane: l, ops: lane.Ops, waits: lane.Waits, siblings: lanes, held: make([]message, wide)}
				s.actors = append(s.actors, lanes[l])
			}
		}
	}
	err := s.run()
	return s.stats(), err
}
