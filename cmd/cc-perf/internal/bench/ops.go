package bench

import (
	"errors"
	"fmt"

	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// bufs are the buffers of one call: nccl-tests' startColl moves them by a
// multiple of the call's size each iteration (so consecutive iterations touch
// different memory, up to -e bytes) and by -u elements.
type bufs struct {
	send, recv []byte // out-of-place send and receive buffers
	// stage mirrors recv in the staging buffer of in-place alltoall,
	// alltoallv and sendrecv (nil for the other collectives).
	stage []byte
}

func (k *rank) buffers(iter int) bufs { return k.buffersAt(k.offset(iter)) }

// buffersAt is the buffers of a call at off in the allocations.
func (k *rank) buffersAt(off int64) bufs {
	b := bufs{send: k.send[off:], recv: k.recv[off:]}
	if k.stage != nil {
		b.stage = k.stage[off:]
	}
	return b
}

// offset is where iteration iter's buffers start in the allocations.
func (k *rank) offset(iter int) int64 {
	return int64(k.o.Unalign)*k.elt + k.counts.Bytes(k.elt)*k.region(iter)
}

// regions is where buffers' call regions repeat: how many calls of the
// current size fit in -e bytes, nccl-tests' maxbytes/totalnbytes (1 for
// an empty call). setup sets it.
type regions struct {
	n          int64 // regions in -e bytes
	iter, last int64 // the last iteration asked and its region
}

func (g *regions) reset(total, maxBytes int64) {
	*g = regions{n: 1, iter: -1, last: -1}
	if total > 0 {
		g.n = max(maxBytes/total, 1)
	}
}

// region returns iteration iter's region, iter % n: counted on from the
// last iteration when iter follows it, as the timed loop asks, so that the
// loop pays no division per call (a 64-bit divide was 6% of an 8 B
// all-reduce's profile through cc-perf).
func (k *rank) region(iter int) int64 {
	g := &k.regions
	it := int64(iter)
	switch {
	case it == g.iter+1:
		g.last++
		if g.last == g.n {
			g.last = 0
		}
	case it != g.iter:
		g.last = it % g.n
	}
	g.iter = it
	return g.last
}

// stageInPlace copies what the first calls in-place calls find in their
// receive buffers to the staging buffer they send from: the runtime has no
// in-place alltoall, alltoallv or sendrecv, so cc-perf sends a copy of the
// buffer the results replace, as MPI_IN_PLACE implementations do. The copy
// is made before the calls, outside the timed loop (nccl-tests times the
// call alone); a call that reuses a region an earlier call of the loop wrote
// sends the region's content from before the loop, which changes values,
// not the work. A no-op for the other collectives.
func (k *rank) stageInPlace(calls int) {
	if k.stage == nil {
		return
	}
	total := k.counts.Bytes(k.elt)
	if total > 0 {
		calls = min(calls, int(k.o.MaxBytes/total)) // the regions repeat after that
	}
	for it := 0; it < calls; it++ {
		b := k.buffers(it)
		copy(b.stage[:total], b.recv[:total])
	}
}

// inPlaceBufs returns the send and receive buffers of an in-place call:
// both inside the receive buffer recv, at the collective's in-place offsets.
func (k *rank) inPlaceBufs(recv []byte) (send, recvAt []byte) {
	c := &k.counts
	me := int64(k.me)
	return recv[c.SendInPlaceOffset*me*k.elt:], recv[c.RecvInPlaceOffset*me*k.elt:]
}

func (k *rank) reduceOp() (reduce.Op, error) {
	if k.op != reduce.PreMulSum {
		return k.op, nil
	}
	return k.preMulOp()
}

// preMulOp is reduceOp's PreMulSum: this rank's op for the datatype, made
// on first use.
func (k *rank) preMulOp() (reduce.Op, error) {
	if op, ok := k.preMul[k.dt]; ok {
		return op, nil
	}
	op, err := k.c.CreatePreMulSum(PreMulScalar(k.me), k.dt)
	if err != nil {
		return 0, err
	}
	k.preMul[k.dt] = op
	return op, nil
}

// startColl runs one call of the collective (queued when inside a group).
// The five NCCL collectives run here; the others in startOther, whose
// groups and joined errors would give this function, which the timed loop
// calls for every iteration, a stack frame of 700 bytes to clear.
func (k *rank) startColl(inPlace bool, iter int) error {
	c, elt := &k.counts, k.elt
	off := k.offset(iter)
	send, recv := k.send[off:], k.recv[off:]
	if inPlace {
		send, recv = k.inPlaceBufs(recv)
	}
	send, recv = send[:c.Send*elt], recv[:c.Recv*elt]
	p := int(c.Param)
	switch k.coll.kind {
	case kindAllReduce, kindReduceScatter, kindReduce:
		op, err := k.reduceOp()
		if err != nil {
			return err
		}
		switch k.coll.kind {
		case kindAllReduce:
			return k.c.AllReduce(send, recv, p, k.dt, op)
		case kindReduceScatter:
			return k.c.ReduceScatter(send, recv, p, k.dt, op)
		}
		return k.c.Reduce(send, recv, p, k.dt, op, k.root)
	case kindAllGather:
		return k.c.AllGather(send, recv, p, k.dt)
	case kindBroadcast:
		return k.c.Broadcast(send, recv, p, k.dt, k.root)
	}
	return k.startOther(k.buffersAt(off), inPlace, send, recv, p)
}

// startOther is startColl for the collectives nccl-tests builds from
// point-to-point calls, and alltoall.
func (k *rank) startOther(b bufs, inPlace bool, send, recv []byte, p int) error {
	c, elt, n := k.counts, k.elt, k.n
	switch k.coll.kind {
	case kindAllToAll:
		if inPlace {
			send = b.stage[:len(recv)] // see stageInPlace
		}
		return k.c.AllToAll(send, recv, p, k.dt)
	case kindAllToAllV:
		if inPlace {
			send = b.stage[:len(send)]
		}
		return k.allToAllV(send, recv)
	case kindSendRecv:
		if inPlace {
			send = b.stage[:len(recv)]
		}
		k.c.GroupStart()
		err := k.c.Send(send, p, k.dt, (k.me+1)%n)
		err = errors.Join(err, k.c.Recv(recv, p, k.dt, (k.me-1+n)%n))
		return errors.Join(err, k.c.GroupEnd())
	case kindGather:
		if p == 0 {
			return nil
		}
		k.c.GroupStart()
		err := k.c.Send(send, p, k.dt, k.root)
		if k.me == k.root {
			blk := c.Param * elt
			for r := int64(0); r < int64(n); r++ {
				err = errors.Join(err, k.c.Recv(recv[r*blk:(r+1)*blk], p, k.dt, int(r)))
			}
		}
		return errors.Join(err, k.c.GroupEnd())
	case kindScatter:
		if p == 0 {
			return nil
		}
		k.c.GroupStart()
		var err error
		if k.me == k.root {
			blk := c.Param * elt
			for r := int64(0); r < int64(n); r++ {
				err = errors.Join(err, k.c.Send(send[r*blk:(r+1)*blk], p, k.dt, int(r)))
			}
		}
		err = errors.Join(err, k.c.Recv(recv, p, k.dt, k.root))
		return errors.Join(err, k.c.GroupEnd())
	case kindHyperCube:
		return k.hyperCube(send, b.recv[:c.Recv*elt], p)
	}
	return fmt.Errorf("bench: unknown collective %s", k.coll.Name)
}

// hyperCube is nccl-tests' hypercube all-gather: in step mask, rank r
// exchanges with r^mask the mask blocks it has gathered so far.
//
//	ranks 0..3, blocks a b c d:   mask 1: 0<->1, 2<->3   -> ab ab cd cd
//	                              mask 2: 0<->2, 1<->3   -> abcd everywhere
func (k *rank) hyperCube(send, recv []byte, p int) error {
	blk := int64(p) * k.elt
	me := int64(k.me)
	if own := recv[me*blk : (me+1)*blk]; len(own) > 0 && &own[0] != &send[:1][0] {
		copy(own, send[:blk])
	}
	for mask := int64(1); mask < int64(k.n); mask <<= 1 {
		s := me &^ (mask - 1) // first block this rank holds
		r := s ^ mask         // first block the peer holds
		peer := int(me ^ mask)
		k.c.GroupStart()
		err := k.c.Send(recv[s*blk:(s+mask)*blk], p*int(mask), k.dt, peer)
		err = errors.Join(err, k.c.Recv(recv[r*blk:(r+mask)*blk], p*int(mask), k.dt, peer))
		if err = errors.Join(err, k.c.GroupEnd()); err != nil {
			return err
		}
	}
	return nil
}
