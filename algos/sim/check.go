package sim

// Everything a Run refuses or reports: malformed Ops, deadlocks, and
// messages nobody received.

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/seed-760dd1f1/cc/algos"
)

// check rejects an Op the model cannot execute; the caller adds where it is.
func (s *state) check(op algos.Op) error {
	n := len(s.ranks)
	recv, send := op.RecvFrom != algos.NoPeer, op.SendTo != algos.NoPeer
	nrecv := op.NumRecvs()
	switch {
	case op.RecvFrom < algos.NoPeer || (op.RecvFrom >= n && !isMcast(op.RecvFrom, n)):
		return fmt.Errorf("recv from rank %d: must be %d (none) or in [0, %d)", op.RecvFrom, algos.NoPeer, n)
	case op.SendTo < algos.NoPeer || (op.SendTo >= n && !isMcast(op.SendTo, n)):
		return fmt.Errorf("send to rank %d: must be %d (none) or in [0, %d)", op.SendTo, algos.NoPeer, n)
	case op.Count < 0:
		return fmt.Errorf("count %d: must be at least 0", op.Count)
	case op.Src > algos.Output || op.Dst > algos.Output:
		return fmt.Errorf("buffers %v, %v: must be -, in or out", op.Src, op.Dst)
	case int(op.Conn) >= algos.MaxConns:
		return fmt.Errorf("connection index %d: must be below %d", op.Conn, algos.MaxConns)
	}
	if err := checkFan(op, n); err != nil {
		return err
	}
	if op.Fan != nil && (op.Fan.SendOff != nil || op.Fan.RecvOff != nil) {
		return s.checkScatterGather(op)
	}
	if op.Fan != nil && op.Fan.Direct != nil {
		if err := s.checkDirect(op); err != nil || op.Fan.DirectOff != nil {
			return err
		}
		nrecv += len(op.Fan.Direct) // in-place reads are operands like received ones
	}
	switch {
	case op.Count == 0:
		return nil
	case op.Reduce && nrecv == 0:
		return errors.New("reduce without a receive")
	case op.Reduce && nrecv == 1 && op.Src == algos.None:
		return errors.New("reduce needs two values: a receive and a local operand, or several receives")
	case op.Reduce && s.red.Op == nil:
		return errors.New("reduce with a reduction that has no Op")
	case nrecv > 1 && !op.Reduce:
		return errors.New("receives from several peers without reduce: which value does it use")
	case recv && !op.Reduce && op.Src != algos.None:
		return errors.New("receives without reduce but names a local operand: which value does it use")
	case !recv && op.Src == algos.None:
		return errors.New("neither receives nor reads a local operand: it has no value")
	case !send && op.Dst == algos.None && !recv:
		return errors.New("neither receives, sends nor writes: it does nothing")
	}
	if err := s.checkRange("src", op.Src, op.SrcOff, op.Count); err != nil {
		return err
	}
	return s.checkRange("dst", op.Dst, op.DstOff, op.Count)
}

// checkFan checks the peer lists of an Op: further peers need a first one,
// lie in range and appear once each way.
func checkFan(op algos.Op, n int) error {
	if op.Fan == nil {
		return nil
	}
	if len(op.Fan.Recv) > 0 && op.RecvFrom == algos.NoPeer {
		return errors.New("fan receives without RecvFrom")
	}
	if len(op.Fan.Send) > 0 && op.SendTo == algos.NoPeer {
		return errors.New("fan sends without SendTo")
	}
	for _, list := range [][]int{op.Recvs(), op.Sends()} {
		for i, p := range list {
			if p < 0 || (p >= n && !isMcast(p, n)) {
				return fmt.Errorf("peer %d: must be in [0, %d)", p, n)
			}
			if slices.Contains(list[:i], p) {
				return fmt.Errorf("peer %d named twice one way", p)
			}
		}
	}
	return nil
}

func isMcast(peer, n int) bool {
	_, ok := algos.McastHead(n, peer)
	return ok
}

// checkScatterGather checks a scatter (Fan.SendOff) or a gather
// (Fan.RecvOff): one offset per peer, ranges inside the buffers, and none
// of the parts the other kinds of Op have.
func (s *state) checkScatterGather(op algos.Op) error {
	f := op.Fan
	switch {
	case f.SendOff != nil && f.RecvOff != nil:
		return errors.New("both a scatter and a gather")
	case f.SendOff != nil && (len(f.SendOff) != op.NumSends() || op.NumRecvs() > 0 || op.Dst != algos.None || op.Src == algos.None):
		return fmt.Errorf("a scatter reads Src and sends one range per peer (%d offsets for %d peers), receiving and writing nothing", len(f.SendOff), op.NumSends())
	case f.RecvOff != nil && (len(f.RecvOff) != op.NumRecvs() || op.NumSends() > 0 || op.Src != algos.None || op.Reduce || op.Dst == algos.None):
		return fmt.Errorf("a gather writes one range of Dst per peer (%d offsets for %d peers), reading, reducing and sending nothing", len(f.RecvOff), op.NumRecvs())
	case op.Count == 0:
		return nil
	}
	for _, off := range f.SendOff {
		if err := s.checkRange("src", op.Src, op.SrcOff+off, op.Count); err != nil {
			return err
		}
	}
	for _, off := range f.RecvOff {
		if err := s.checkRange("dst", op.Dst, op.DstOff+off, op.Count); err != nil {
			return err
		}
	}
	return nil
}

// checkMcast checks that rank stores only into its own multicast region,
// and that it does not read its own.
func (s *state) checkMcast(ch, rank int, op algos.Op) error {
	n := len(s.ranks)
	for _, p := range op.Sends() {
		if h, ok := algos.McastHead(n, p); ok && h != rank {
			return fmt.Errorf("stores into the multicast region of rank %d: a rank stores only into its own", h)
		}
	}
	for _, p := range op.Recvs() {
		if h, ok := algos.McastHead(n, p); ok {
			if h == rank {
				return errors.New("reads its own multicast region")
			}
			if op.Count > 0 && !slices.Contains(s.readers[[2]int{ch, h}], rank) {
				s.readers[[2]int{ch, h}] = append(s.readers[[2]int{ch, h}], rank)
			}
		}
	}
	return nil
}

// checkRange checks that [off, off+count) lies inside buffer b of every rank.
func (s *state) checkRange(what string, b algos.Buf, off, count int64) error {
	if b == algos.None {
		return nil
	}
	r, size := s.smallest[b].rank, s.smallest[b].size
	if off < 0 || off > size-count {
		return fmt.Errorf("%s %v[%d, %d): outside rank %d's %d elements", what, b, off, off+count, r, size)
	}
	return nil
}

func (s *state) deadlock() error {
	e := &DeadlockError{Round: s.rounds + 1}
	for _, a := range s.actors {
		if a.pc == len(a.ops) {
			continue
		}
		e.Blocked = append(e.Blocked, Blocked{Channel: a.ch, Rank: a.rank, Lane: a.lane, Index: a.pc,
			Len: len(a.ops), Op: a.ops[a.pc], Waiting: s.waiting(a), Lanes: len(a.siblings)})
	}
	return e
}

// waiting says what a blocked lane waits for.
func (s *state) waiting(a *actor) string {
	if !a.waitsOK() {
		w := a.waits[a.wi]
		return fmt.Sprintf("lane %d to complete %d ops (it has completed %d)", w.Lane, w.Done, a.siblings[w.Lane].pc)
	}
	op := &a.ops[a.pc]
	conn := ""
	if op.Conn != 0 {
		conn = fmt.Sprintf(" on connection %d", op.Conn)
	}
	for k := range op.NumRecvs() {
		if a.holding&(1<<k) == 0 {
			return fmt.Sprintf("a message from rank %d%s (fifo empty)", op.RecvPeer(k), conn)
		}
	}
	for k := range op.NumSends() {
		peer := op.SendPeer(k)
		for _, q := range s.sendFifos(a, peer, op.Conn) {
			if q.n >= s.slots {
				w := fmt.Sprintf("a free slot to rank %d%s (%d of %d full)", peer, conn, q.n, s.slots)
				if a.holding != 0 {
					w += fmt.Sprintf(", holding the message of rank %d op %d", op.RecvFrom, a.held[0].index)
				}
				return w
			}
		}
	}
	return "nothing (a bug in the simulator)"
}

// leftovers reports messages that were sent but never received: the sender's
// schedule has more messages for that peer than the receiver's.
func (s *state) leftovers() error {
	var errs []error
	for _, l := range s.sortedLinks() {
		if q := s.fifos[l]; q.n > 0 {
			m := q.front()
			conn := ""
			if l.Conn != 0 {
				conn = fmt.Sprintf(" on connection %d", l.Conn)
			}
			errs = append(errs, fmt.Errorf("channel %d: %d messages from rank %d to rank %d%s never received, the first from op %d (%v)",
				l.Channel, q.n, l.Src, l.Dst, conn, m.index, m.op))
		}
	}
	return errors.Join(errs...)
}

func (s *state) sortedLinks() []Link {
	links := make([]Link, 0, len(s.fifos))
	for l := range s.fifos {
		links = append(links, l)
	}
	slices.SortFunc(links, func(a, b Link) int {
		return cmp.Or(cmp.Compare(a.Channel, b.Channel), cmp.Compare(a.Src, b.Src), cmp.Compare(a.Dst, b.Dst), cmp.Compare(a.Conn, b.Conn))
	})
	return links
}

func (s *state) stats() Stats {
	st := Stats{Rounds: s.rounds, Ops: s.ops, Links: map[Link]Traffic{}, Rewrites: s.writes.rewrites, McastWrites: s.mcastWrites, DirectElems: s.directElems}
	for l, q := range s.fifos {
		if q.traffic.Messages > 0 {
			st.Links[l] = q.traffic
		}
	}
	return st
}

// checkDirect checks an Op that reads other ranks' Input in place
// (Fan.Direct): ranks in range, once each; a direct gather (DirectOff)
// writes one range of Dst per rank and does nothing else; a direct
// load-reduce reduces from Input.
func (s *state) checkDirect(op algos.Op) error {
	f, n := op.Fan, len(s.ranks)
	for i, p := range f.Direct {
		if p < 0 || p >= n || slices.Contains(f.Direct[:i], p) {
			return fmt.Errorf("direct read of rank %d: must be in [0, %d), once", p, n)
		}
	}
	switch {
	case f.DirectOff != nil && (len(f.DirectOff) != len(f.Direct) || op.NumRecvs() > 0 || op.NumSends() > 0 || op.Reduce || op.Src != algos.Input || op.Dst == algos.None):
		return fmt.Errorf("a direct gather writes one range of Dst per rank read (%d offsets for %d ranks), from their Input, receiving, reducing and sending nothing", len(f.DirectOff), len(f.Direct))
	case f.DirectOff == nil && (!op.Reduce || op.Src != algos.Input):
		return errors.New("a direct load-reduce reduces the ranks' Input with its own")
	case op.Count == 0:
		return nil
	}
	if err := s.checkRange("src", op.Src, op.SrcOff, op.Count); err != nil {
		return err
	}
	for _, off := range f.DirectOff {
		if err := s.checkRange("dst", op.Dst, op.DstOff+off, op.Count); err != nil {
			return err
		}
	}
	return nil
}
