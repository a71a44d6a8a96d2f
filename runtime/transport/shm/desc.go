//go:build linux

package shm

import (
	"fmt"
	"sync/atomic"
)

// Call descriptors: how the local ranks of an NVLS call agree on the
// registered (direct) path, and the arrive/depart counter that makes it
// safe. Every local rank has one entry in the header:
//
//	entry of local rank r (descBytes)
//	 arrive | desc[0] (6 words) | desc[1] | ... depart | ... wait seq
//
// For the call of sequence number q (1, 2, ... per communicator, the same
// on every local rank), a rank writes its descriptor into desc[q%2] and
// stores arrive = q; it waits until every local rank's arrive >= q, reads
// every desc[q%2] and decides, as every other rank does from the same
// words. A rank cannot write desc[q%2] again (call q+2) before every rank
// has arrived at q+1, that is, finished reading the descriptors of q: two
// slots suffice. On the direct path every rank stores depart = q when its
// channels are done and waits until every local rank's depart >= q, so no
// rank returns, and reuses or frees its send buffer, while a head may
// still read it.
const (
	descBytes = 256
	eArrive   = 0   // uint64, written by the rank: the last call it entered
	eDesc     = 8   // [2][descWords]uint64: the descriptors of calls q%2 == 0, 1
	descWords = 6   // pool id (3 words), offset, pool size, flags
	eDepart   = 128 // uint64: the last direct call it finished
	eWait     = 192 // uint32, set by the rank while it sleeps on eSeq
	eSeq      = 196 // uint32, its futex word
)

// descOff is the offset of local rank 0's entry, after the owner entries.
func descOff(nranks int) int { return roundUp(hOwners+nranks*ownerBytes, descBytes) }

// Desc is what one local rank publishes for one call: whether its send
// buffer is registered and, if so, where other processes map it.
type Desc struct {
	Registered bool
	Pool       [3]uint64 // the pool's identity (comm names its file from it)
	Off        uint64    // the send buffer's offset in the pool
	Size       uint64    // the pool's size in bytes
}

// Arrive publishes d as this rank's descriptor of call q, waits until
// every local rank has arrived at q, and returns every local rank's
// descriptor (index = local rank) in descs, which it reuses. A failed
// segment or a dead local rank ends the wait with an error.
func (s *Segment) Arrive(q uint64, d Desc, descs []Desc) ([]Desc, error) {
	if s.mem == nil {
		return append(descs[:0], d), nil
	}
	me := s.entry(s.o.LocalRank)
	w := me + eDesc + int(q%2)*descWords*8
	for i, v := range [descWords]uint64{d.Pool[0], d.Pool[1], d.Pool[2], d.Off, d.Size, flag(d.Registered)} {
		atomic.StoreUint64(s.u64(w+8*i), v)
	}
	if err := s.publishAndWait(eArrive, q, "arrive"); err != nil {
		return nil, err
	}
	descs = descs[:0]
	for r := range s.geo.nranks {
		w := s.entry(r) + eDesc + int(q%2)*descWords*8
		var v [descWords]uint64
		for i := range v {
			v[i] = atomic.LoadUint64(s.u64(w + 8*i))
		}
		descs = append(descs, Desc{Pool: [3]uint64{v[0], v[1], v[2]}, Off: v[3], Size: v[4], Registered: v[5] != 0})
	}
	return descs, nil
}

// Depart says that this rank's part of direct call q is done and waits
// until every local rank's is: then no rank reads another's buffers for q.
func (s *Segment) Depart(q uint64) error {
	if s.mem == nil {
		return nil
	}
	return s.publishAndWait(eDepart, q, "depart")
}

// publishAndWait stores q into this rank's word at field, wakes every
// local rank that sleeps, and waits until every local rank's word is at
// least q.
func (s *Segment) publishAndWait(field int, q uint64, what string) error {
	me := s.o.LocalRank
	atomic.StoreUint64(s.u64(s.entry(me)+field), q)
	for r := range s.geo.nranks {
		if r != me {
			e := s.entry(r)
			(&conn{seg: s}).wake(s.u32(e+eWait), s.u32(e+eSeq))
		}
	}
	e := s.entry(me)
	for r := range s.geo.nranks {
		word := s.u64(s.entry(r) + field)
		c := &conn{seg: s, peer: r, key: connKey{from: me, to: r}}
		err := c.await(s.u32(e+eWait), s.u32(e+eSeq), func() bool { return atomic.LoadUint64(word) >= q })
		if err != nil {
			return fmt.Errorf("shm %s: NVLS call %d, %s of local rank %d: %w", s.name, q, what, r, err)
		}
	}
	return nil
}

// entry is the offset of local rank r's descriptor entry.
func (s *Segment) entry(r int) int { return descOff(s.geo.nranks) + r*descBytes }

func flag(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// Posted returns the FIFO steps this connection has posted so far
// (Simple protocol, whose tail counts them; 0 for LL and LL128), for
// tests and counters that ask whether data went through a FIFO.
func (c *SendConn) Posted() uint64 {
	if c.tail == nil {
		return 0
	}
	return atomic.LoadUint64(c.tail)
}

// Posted returns the steps the head has stored into this multicast region
// so far.
func (c *McastSendConn) Posted() uint64 { return atomic.LoadUint64(c.tail) }
