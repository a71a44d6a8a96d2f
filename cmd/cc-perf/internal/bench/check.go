package bench

import "github.com/seed-760dd1f1/cc/runtime/reduce"

// initData is nccl-tests' InitData for one half: zero the receive buffer,
// write this rank's input where the call reads it (inside the receive buffer
// in place) and, when expect is set, compute the expected content of the
// region checkData compares.
func (k *rank) initData(seed uint64, inPlace, expect bool) error {
	c, elt, me, n := k.counts, k.elt, int64(k.me), int64(k.n)
	b := k.buffers(0)
	clear(b.recv[:c.Recv*elt])
	data := b.send
	if inPlace {
		data, _ = k.inPlaceBufs(b.recv)
	}
	data = data[:c.Send*elt]
	exp := k.expected[:c.Recv*elt]
	blk := c.Param * elt // one rank's block in split collectives

	if k.coll.Reduces {
		op := k.op
		g := NewGen(k.dt, &op, k.n, seed)
		g.Fill(data, k.me, 0)
		if !expect {
			return nil
		}
		r, err := NewReducer(g)
		if err != nil {
			return err
		}
		switch k.coll.kind {
		case kindAllReduce:
			r.Expect(exp, 0)
		case kindReduceScatter:
			r.Expect(exp, me*c.Param)
		case kindReduce:
			copy(exp, b.recv[:c.Recv*elt]) // non-roots: untouched
			if k.me == k.root {
				r.Expect(exp, 0)
			}
		}
		return nil
	}

	g := NewGen(k.dt, nil, k.n, seed)
	switch k.coll.kind {
	case kindAllGather, kindHyperCube:
		g.Fill(data, k.me, 0)
		if expect {
			for j := int64(0); j < n; j++ {
				g.Fill(exp[j*blk:(j+1)*blk], int(j), 0)
			}
		}
	case kindBroadcast:
		if k.me == k.root {
			g.Fill(data, k.root, 0)
		}
		if expect {
			g.Fill(exp, k.root, 0)
		}
	case kindAllToAll:
		g.Fill(data, k.me, 0)
		if expect {
			for j := int64(0); j < n; j++ {
				g.Fill(exp[j*blk:(j+1)*blk], int(j), me*c.Param)
			}
		}
	case kindAllToAllV:
		g.Fill(data, k.me, 0) // this rank's parts, packed from the start
		if expect {
			k.expectAllToAllV(g, exp)
		}
	case kindSendRecv:
		g.Fill(data, k.me, 0)
		if expect {
			g.Fill(exp, (k.me-1+k.n)%k.n, 0)
		}
	case kindGather:
		g.Fill(data, k.me, 0)
		if expect {
			copy(exp, b.recv[:c.Recv*elt]) // non-roots: untouched
			if k.me == k.root {
				for j := int64(0); j < n; j++ {
					g.Fill(exp[j*blk:(j+1)*blk], int(j), 0)
				}
			}
		}
	case kindScatter:
		if k.me == k.root {
			g.Fill(data, k.root, 0)
		}
		if expect {
			g.Fill(exp, k.root, me*c.Param)
		}
	}
	return nil
}

// checkData counts this rank's wrong elements after the check call.
func (k *rank) checkData(inPlace bool) int64 {
	c, elt := k.counts, k.elt
	b := k.buffers(0)
	got := b.recv
	if inPlace {
		_, got = k.inPlaceBufs(b.recv)
	}
	var op *reduce.Op
	if k.coll.Reduces {
		op = &k.op
	}
	return CountWrong(got[:c.Recv*elt], k.expected[:c.Recv*elt], int(elt), Tolerance(k.dt, op))
}
