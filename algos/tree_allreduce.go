package algos

// Tree all-reduce (NVIDIA/nccl src/device/all_reduce.h runTreeSplit;
// shared/reference/wave2-algorithms-design.md §2.1).
//
// Every chunk is reduced up a tree and the result broadcast down it. The
// up and down halves run at once, as two lanes of every rank but the root,
// so that while chunk k travels down, chunk k+1 travels up: with L chunks
// and depth d the all-reduce takes about L + 2d steps, where the halves
// one after the other (NCCL's older runTreeUpDown) take 2(L + d). Per
// chunk:
//
//	root        recvReduceCopySend   children ⊕ Input, postOp → Output, children
//	up lane     send                 a leaf's Input → parent
//	            recvReduceSend       children ⊕ Input → parent
//	down lane   recv                 parent → a leaf's Output
//	            recvCopySend         parent → Output, children
//
// The postOp applies once, at the root, and everyone else receives its
// result. Both trees of DoubleTree run in every channel: the first half of
// the channel's part on tree 0 with connection index 0, the second half on
// tree 1 with connection index 1 (NCCL runs them on channels c and
// c+nChannels; connection indices keep a pair's streams of the two trees
// apart, e.g. with two ranks tree 0's down link 0 → 1 is tree 1's up link).

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"math/bits"

	"github.com/seed-760dd1f1/cc/protocols"
)

// TreeAllReduce returns rank's schedule for the part p of a double binary
// tree all-reduce over the ranks of t: Input[Offset, Offset+Count) of every
// rank is reduced into Output[Offset, Offset+Count) of every rank. Its
// lanes are, for tree 0 and then tree 1, the root's one lane or a non-root's
// up and down lanes; the lanes depend on where rank sits in the trees, not
// on p. Ops move at most p.Chunk elements. One rank is a single local copy.
// It panics if rank, t or p are invalid.
func TreeAllReduce(rank int, t *Topo, p Part) Schedule {
	mustCheck("tree all-reduce", checkTree(rank, t, p))
	if t.NRanks == 1 {
		var ops []Op
		if p.Count > 0 {
			ops = append(ops, Op{RecvFrom: NoPeer, SendTo: NoPeer, Src: Input, SrcOff: p.Offset,
				Dst: Output, DstOff: p.Offset, Count: p.Count, PostOp: true})
		}
		return Single(ops)
	}
	var s Schedule
	for tr, node := range DoubleTree(t, rank) {
		off, count := treeHalf(p, tr)
		s.Lanes = append(s.Lanes, treeLanes(node, uint8(tr), off, count, p.Chunk, len(s.Lanes))...)
	}
	return s
}

// treeHalf is the range of part p that tree tr reduces: the first half,
// rounded up to p.Align, for tree 0, the rest for tree 1. Example: 5
// elements with Align 4 are 4 on tree 0 and 1 on tree 1.
func treeHalf(p Part, tr int) (off, count int64) {
	half := min(alignUp(divUp(p.Count, 2), p.Align), p.Count)
	if tr == 0 {
		return p.Offset, half
	}
	return p.Offset + half, p.Count - half
}

// chunks yields the offset and length of every chunk of [off, off+count):
// NCCL's "for elemOffset in [0, count) step chunkCount", the last one
// shorter.
func chunks(off, count, chunk int64) iter.Seq2[int64, int64] {
	return func(yield func(int64, int64) bool) {
		for o := off; o < off+count; o += chunk {
			if !yield(o, min(chunk, off+count-o)) {
				return
			}
		}
	}
}

// treeLanes builds node's lanes of one tree for the elements [off,
// off+count) on connection index conn; they will be the schedule's lanes
// base, base+1.
func treeLanes(node TreeNode, conn uint8, off, count, chunk int64, base int) []Lane {
	nchunks := min(divUp(count, chunk), 1<<16)
	kids := node.Down
	if node.Up == NoPeer {
		// The root: receive every child's partial result, add its Input,
		// apply the postOp, keep the result and send it back down.
		root, fan := make([]Op, 0, nchunks), fanOf(kids[1:], kids[1:])
		for o, n := range chunks(off, count, chunk) {
			root = append(root, Op{RecvFrom: kids[0], SendTo: kids[0], Fan: fan, Conn: conn,
				Src: Input, SrcOff: o, Dst: Output, DstOff: o, Count: n, Reduce: true, PostOp: true})
		}
		return []Lane{{Ops: root}}
	}

	up, down := make([]Op, 0, nchunks), make([]Op, 0, nchunks)
	if len(kids) == 0 {
		// A leaf sends its Input up and receives the result.
		for o, n := range chunks(off, count, chunk) {
			up = append(up, Op{RecvFrom: NoPeer, SendTo: node.Up, Conn: conn, Src: Input, SrcOff: o, Count: n})
			down = append(down, Op{RecvFrom: node.Up, SendTo: NoPeer, Conn: conn, Dst: Output, DstOff: o, Count: n})
		}
		return []Lane{{Ops: up}, {Ops: down, Waits: downAfterUp(len(down), base)}}
	}

	// An inner rank adds its Input to its children's partial results on the
	// way up, and keeps and forwards the result on the way down.
	upFan, downFan := fanOf(kids[1:], nil), fanOf(nil, kids[1:])
	for o, n := range chunks(off, count, chunk) {
		up = append(up, Op{RecvFrom: kids[0], SendTo: node.Up, Fan: upFan, Conn: conn,
			Src: Input, SrcOff: o, Count: n, Reduce: true})
		down = append(down, Op{RecvFrom: node.Up, SendTo: kids[0], Fan: downFan, Conn: conn,
			Dst: Output, DstOff: o, Count: n})
	}
	return []Lane{{Ops: up}, {Ops: down, Waits: downAfterUp(len(down), base)}}
}

// downAfterUp makes the down lane's Op i wait for Op i of the up lane, lane
// up of the schedule. The
// wait is always already satisfied when the down value arrives (the root
// needed this rank's contribution to the chunk), so it costs one atomic
// load; it states in the schedule, rather than through the other ranks,
// that a chunk's Input is read before the same chunk's Output is written,
// which an in-place call relies on (Input and Output are one buffer).
func downAfterUp(n, up int) []Wait {
	ws := make([]Wait, n)
	for i := range ws {
		ws[i] = Wait{At: i, Lane: up, Done: i + 1}
	}
	return ws
}

// fanOf is the Fan of further peers, or nil when there are none. The lane's
// Ops share it.
func fanOf(recv, send []int) *Fan {
	if len(recv) == 0 && len(send) == 0 {
		return nil
	}
	return &Fan{Recv: recv, Send: send}
}

// checkTree validates TreeAllReduce's arguments.
func checkTree(rank int, t *Topo, p Part) error {
	if t == nil || t.NRanks < 1 || len(t.host) != t.NRanks {
		return errors.New("no topology: build it with NewTopo")
	}
	if err := checkRankPart(rank, t.NRanks, p); err != nil {
		return err
	}
	switch {
	case p.Chunk < 1:
		return fmt.Errorf("part chunk %d: must be at least 1", p.Chunk)
	case p.Align < 0:
		return fmt.Errorf("part align %d: must be at least 0", p.Align)
	case p.Offset > math.MaxInt64-p.Count-max(p.Chunk, p.Align):
		return fmt.Errorf("part [%d, +%d) in chunks of %d: end overflows int64", p.Offset, p.Count, p.Chunk)
	}
	return nil
}

// treeRow is the table's row for tree all-reduce: one FIFO slot per chunk
// and per slice for every protocol (NCCL's calcCollChunking gives
// chunkSteps = sliceSteps = 1 to every algorithm but the ring).
func treeRow() Algorithm {
	one := Geometry{ChunkSteps: 1, SliceSteps: 1}
	r := Algorithm{Algo: Tree, Coll: AllReduce, Chunk: treeChunk, WritesOutputOnce: true,
		Gen:   func(a *Args) Schedule { return TreeAllReduce(a.Rank, a.Topo, a.Part) },
		Peers: treePeers}
	r.Geometry[protocols.Simple] = one
	r.Geometry[protocols.LL] = one
	r.Geometry[protocols.LL128] = one
	return r
}

// treePeers are the links to the parent and every child in both trees,
// each way, on the tree's connection index.
func treePeers(a *Args) []Link {
	if a.NRanks() == 1 {
		return nil
	}
	var links []Link
	for tr, node := range DoubleTree(a.Topo, a.Rank) {
		peers := node.Down
		if node.Up != NoPeer {
			peers = append([]int{node.Up}, peers...)
		}
		for _, p := range peers {
			links = append(links, Link{Peer: p, Conn: uint8(tr), Send: true}, Link{Peer: p, Conn: uint8(tr)})
		}
	}
	return links
}

// treeChunk is DefaultChunk, except that LL128 chunks shrink for messages
// too small to fill the pipeline.
func treeChunk(c *ChunkArgs) int64 {
	if c.Proto != protocols.LL128 {
		return DefaultChunk(c)
	}
	// Each channel runs both trees, each on half the part: 2 NCCL channels.
	chunk := treeLL128Chunk(int64(c.StepPayload*c.Geometry.ChunkSteps), c.Bytes, 2*max(c.NChannels, 1),
		c.Topo.NHosts(), c.Topo.NRanks)
	align := max(c.Align, 1)
	return max(chunk/int64(c.ElemSize)/align*align, align)
}

// treeLL128Chunk is NCCL's Tree/LL128 shrink loop (calcCollChunking in
// src/enqueue.cc), in bytes: a tree of nNodes hosts and ppn ranks per host
// needs about nsteps = 1 + log2(nNodes) + ppn/10 chunks in flight, so the
// chunk halves while the message gives every channel fewer than
// 64·nsteps/ppn chunks and the chunk is above 128 KiB, then while fewer
// than 16·nsteps/ppn and above 32 KiB. NCCL computes in float with an integer
// quotient on the left; so do we. nChannels counts NCCL's channels, each
// running one tree. Example: with 2 hosts of 1 rank, nsteps is 2.1 and the
// thresholds 134.4 and 33.6 chunks: 1 MiB on 2 channels halves the
// 576000-byte LL128 chunk 5 times, to 18000 bytes.
func treeLL128Chunk(chunk, nBytes int64, nChannels, nNodes, nRanks int) int64 {
	ppn := float32(nRanks) / float32(nNodes)
	log2Nodes := bits.Len(uint(nNodes)) - 1 // NCCL's log2i: rounded down
	nsteps := float32(1 + float64(log2Nodes) + 0.1*float64(ppn))
	perChannel := func() float32 { return float32(nBytes / (int64(nChannels) * chunk)) }
	for perChannel() < nsteps*64/ppn && chunk > 131072 {
		chunk /= 2
	}
	for perChannel() < nsteps*16/ppn && chunk > 32768 {
		chunk /= 2
	}
	return chunk
}
