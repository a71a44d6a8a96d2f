package algos

import (
	"fmt"
	"sync"

	"github.com/seed-760dd1f1/cc/protocols"
)

// SlotOp is one step of a slot-level schedule (Schedule.Slots), the form
// PAT runs in: unlike an Op, which moves a whole message through the next
// FIFO slices, a SlotOp reads and writes pieces of FIFO slots that stay
// open across steps (NCCL's patReduce and patCopy, Simple protocol):
//
//	received := the Count elements at RecvOff of the slot RecvAhead after
//	            the oldest unreleased one from Recv (posted with RecvSize)
//	local    := Src at SrcOff (reads of Input apply the pre-operation),
//	            or, with Acc, what the outgoing slot holds at SendOff
//	value    := received ⊕ local, or whichever of them exists
//	if PostOp: value = postOp(value)
//	write value to the slot SendAhead after the oldest unposted one to
//	Send, at SendOff, and/or to Dst at DstOff
//	if Post > 0: post the oldest unposted slot to Send, holding Post elements
//	release the Release oldest unreleased slots from Recv
//
// A SlotOp with Count 0 only posts. Every connection is a pair's Simple
// connection 0.
type SlotOp struct {
	Recv      int   // peer received from, or NoPeer
	RecvAhead int   // slots after the oldest unreleased one, < protocols.NSteps
	RecvOff   int64 // element offset in the slot
	RecvSize  int64 // elements the slot was posted with
	Send      int   // peer sent to, or NoPeer
	SendAhead int   // slots after the oldest unposted one, < protocols.NSteps
	SendOff   int64 // element offset in the slot
	Src       Buf   // local operand: None, Input or Output
	SrcOff    int64
	Acc       bool // the local operand is the outgoing slot at SendOff
	Dst       Buf  // None or Output
	DstOff    int64
	Count     int64
	PostOp    bool
	Post      int64 // > 0: post the oldest unposted slot with Post elements
	Release   int   // slots released after the op, oldest first
}

func (o SlotOp) String() string {
	s := ""
	if o.Recv != NoPeer {
		s += fmt.Sprintf("recv %d+%d@%d/%d ", o.Recv, o.RecvAhead, o.RecvOff, o.RecvSize)
	}
	if o.Src != None {
		s += fmt.Sprintf("%s[%d] ", o.Src, o.SrcOff)
	}
	if o.Acc {
		s += "acc "
	}
	if o.Send != NoPeer {
		s += fmt.Sprintf("send %d+%d@%d ", o.Send, o.SendAhead, o.SendOff)
	}
	if o.Dst != None {
		s += fmt.Sprintf("%s[%d] ", o.Dst, o.DstOff)
	}
	s += fmt.Sprintf("n=%d", o.Count)
	if o.PostOp {
		s += " postop"
	}
	if o.Post > 0 {
		s += fmt.Sprintf(" post %d", o.Post)
	}
	if o.Release > 0 {
		s += fmt.Sprintf(" release %d", o.Release)
	}
	return s
}

// PatReduceScatter returns rank's slot program for its channel part of a
// PAT reduce-scatter of count elements per rank (see pat.go).
func PatReduceScatter(rank, n int, count int64, part Part) []SlotOp {
	return patSchedule(rank, n, count, part, true)
}

// PatAllGather returns rank's slot program for its channel part of a PAT
// all-gather of count elements per rank.
func PatAllGather(rank, n int, count int64, part Part) []SlotOp {
	return patSchedule(rank, n, count, part, false)
}

// patSchedule lowers the steps of every chunk of part into rank's SlotOps:
// dimensions become peers, piece positions element offsets, and relative
// blocks buffer offsets.
func patSchedule(rank, n int, count int64, part Part, rs bool) []SlotOp {
	if n < 2 || part.Count <= 0 {
		return nil
	}
	if part.Chunk <= 0 {
		panic(fmt.Sprintf("algos: PAT part %+v without a chunk", part))
	}
	steps := patStepsCached(PatGeometry(n, part.Chunk, part.Count), rs)
	to := func(d int) int { // the peer a rank sends to on dimension d
		if rs {
			return (rank + 1<<d) % n
		}
		return ((rank-1<<d)%n + n) % n
	}
	from := func(d int) int {
		if rs {
			return ((rank-1<<d)%n + n) % n
		}
		return (rank + 1<<d) % n
	}
	var ops []SlotOp
	end := part.Offset + part.Count
	for off := part.Offset; off < end; off += part.Chunk {
		ne := min(part.Chunk, end-off)
		block := func(data int) int64 { return int64((rank+data)%n)*count + off }
		for _, st := range steps {
			op := SlotOp{Recv: NoPeer, Send: NoPeer, Count: ne, Release: st.Release, Post: int64(st.PostSend) * ne}
			if st.RecvDim >= 0 {
				op.Recv, op.RecvAhead = from(st.RecvDim), st.RecvAhead
				op.RecvOff, op.RecvSize = int64(st.RecvPos)*ne, int64(st.RecvSize)*ne
			}
			if st.SendDim >= 0 {
				op.Send, op.SendAhead, op.SendOff = to(st.SendDim), st.SendAhead, int64(st.SendPos)*ne
			}
			switch {
			case st.Input && rs:
				op.Src, op.SrcOff = Input, block(st.Data)
			case st.Input:
				op.Src, op.SrcOff = Input, off
			case st.Acc && st.SendDim >= 0:
				op.Acc = true
			case st.Acc:
				op.Src, op.SrcOff = Output, off
			}
			if st.Out {
				op.Dst, op.DstOff = Output, off
				if !rs {
					op.DstOff = block(st.Data)
				}
			}
			op.PostOp = st.Final
			if st.RecvDim < 0 && op.Src == None && !op.Acc {
				op.Count = 0 // a post with nothing to add
			}
			ops = append(ops, op)
		}
	}
	return ops
}

// patCache holds PatSteps per (geometry, direction): every rank's program
// for a shape is lowered from the same steps.
var patCache sync.Map // patKey -> []PatStep

type patKey struct {
	g  PatGeom
	rs bool
}

func patStepsCached(g PatGeom, rs bool) []PatStep {
	k := patKey{g, rs}
	if v, ok := patCache.Load(k); ok {
		return v.([]PatStep)
	}
	v, _ := patCache.LoadOrStore(k, PatSteps(g, rs))
	return v.([]PatStep)
}

// patPeers are the ceil(log2 n) peers each way: r+2^d and r-2^d.
func patPeers(rs bool) func(a *Args) []Link {
	return func(a *Args) []Link {
		n := a.NRanks()
		var links []Link
		for d := 0; 1<<d < n; d++ {
			up, down := (a.Rank+1<<d)%n, ((a.Rank-1<<d)%n+n)%n
			if !rs {
				up, down = down, up
			}
			links = append(links, Link{Peer: up, Send: true}, Link{Peer: down})
		}
		return links
	}
}

// patChunk is NCCL's PAT chunk: one Simple slot, halved while the
// collective is small against it (reduce-scatter: chunk*channels*16 >
// bytes; all-gather: *32), down to 64 KiB.
func patChunk(rs bool) func(c *ChunkArgs) int64 {
	factor := int64(32)
	if rs {
		factor = 16
	}
	return func(c *ChunkArgs) int64 {
		chunk := int64(c.StepPayload)
		for chunk*int64(max(c.NChannels, 1))*factor > c.Bytes && chunk > 64<<10 {
			chunk /= 2
		}
		align := max(c.Align, 1)
		return max(chunk/int64(c.ElemSize)/align*align, align)
	}
}

// patExplain names the aggregation a call's channel 0 runs with.
func patExplain(a *Args) string {
	if a.NRanks() < 2 || a.Part.Count == 0 {
		return "PAT: nothing to do"
	}
	g := PatGeometry(a.NRanks(), a.Part.Chunk, a.Part.Count)
	return fmt.Sprintf("PAT aggregation %d, %d pieces per slot", g.Agg, g.Pack)
}

// patRow is the row of PAT reduce-scatter or all-gather: Simple only, one
// slot per chunk.
func patRow(c Coll) Algorithm {
	rs := c == ReduceScatter
	r := Algorithm{Algo: PAT, Coll: c, Chunk: patChunk(rs), Peers: patPeers(rs),
		WritesOutputOnce: !rs, Explain: patExplain,
		Gen: func(a *Args) Schedule {
			return Schedule{Slots: patSchedule(a.Rank, a.NRanks(), a.Count, a.Part, rs)}
		}}
	r.Geometry[protocols.Simple] = Geometry{ChunkSteps: 1, SliceSteps: 1}
	return r
}
