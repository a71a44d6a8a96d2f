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
	switch {
	case op.RecvFrom < algos.NoPeer || op.RecvFrom >= n:
		return fmt.Errorf("recv from rank %d: must be %d (none) or in [0, %d)", op.RecvFrom, algos.NoPeer, n)
	case op.SendTo < algos.NoPeer || op.SendTo >= n:
		return fmt.Errorf("send to rank %d: must be %d (none) or in [0, %d)", op.SendTo, algos.NoPeer, n)
	case op.Count < 0:
		return fmt.Errorf("count %d: must be at least 0", op.Count)
	case op.Src > algos.Output || op.Dst > algos.Output:
		return fmt.Errorf("buffers %v, %v: must be -, in or out", op.Src, op.Dst)
	case op.Count == 0:
		return nil
	case op.Reduce && (!recv || op.Src == algos.None):
		return errors.New("reduce needs both a receive and a local operand")
	case op.Reduce && s.red.Op == nil:
		return errors.New("reduce with a reduction that has no Op")
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
		op := a.ops[a.pc]
		var waiting string
		if op.RecvFrom != algos.NoPeer && !a.holding {
			waiting = fmt.Sprintf("a message from rank %d (fifo empty)", op.RecvFrom)
		} else {
			waiting = fmt.Sprintf("a free slot to rank %d (%d of %d full)", op.SendTo,
				s.fifo(a.ch, a.rank, op.SendTo).n, s.slots)
			if a.holding {
				waiting += fmt.Sprintf(", holding the message of rank %d op %d", op.RecvFrom, a.held.index)
			}
		}
		e.Blocked = append(e.Blocked, Blocked{Channel: a.ch, Rank: a.rank, Index: a.pc, Len: len(a.ops), Op: op, Waiting: waiting})
	}
	return e
}

// leftovers reports messages that were sent but never received: the sender's
// schedule has more messages for that peer than the receiver's.
func (s *state) leftovers() error {
	var errs []error
	for _, l := range s.sortedLinks() {
		if q := s.fifos[l]; q.n > 0 {
			m := q.front()
			errs = append(errs, fmt.Errorf("channel %d: %d messages from rank %d to rank %d never received, the first from op %d (%v)",
				l.Channel, q.n, l.Src, l.Dst, m.index, m.op))
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
		return cmp.Or(cmp.Compare(a.Channel, b.Channel), cmp.Compare(a.Src, b.Src), cmp.Compare(a.Dst, b.Dst))
	})
	return links
}

func (s *state) stats() Stats {
	st := Stats{Rounds: s.rounds, Ops: s.ops, Links: map[Link]Traffic{}}
	for l, q := range s.fifos {
		if q.traffic.Messages > 0 {
			st.Links[l] = q.traffic
		}
	}
	return st
}
