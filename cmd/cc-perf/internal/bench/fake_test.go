package bench

import (
	"errors"
	"fmt"
	"sync"

	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// fakeJob is an in-memory stand-in for the runtime, for tests only: every
// collective is an exchange of copies of the ranks' buffers, reduced in
// reverse rank order (the check must not depend on the order), and Send/Recv
// are channels.
type fakeJob struct {
	n int

	mu      sync.Mutex
	cond    *sync.Cond
	gen     int
	arrived int
	slots   []contrib
	result  []contrib
	err     error
	done    chan struct{}

	links map[[2]int]chan []byte

	// Test hooks, called with the rank and the index of its collective or
	// group (counted per rank): corrupt may change the rank's result, hang
	// blocks the call until the job aborts, sent sees (and may change) the
	// buffer an AllToAll or Send read, once it has been read.
	corrupt func(rank, call int, out []byte)
	hang    func(rank, call int) bool
	sent    func(rank, call int, buf []byte)
}

type contrib struct {
	data []byte
	fn   *reduce.Func
}

type fakeComm struct {
	j      *fakeJob
	rank   int
	calls  int
	depth  int
	queue  []func() error
	sends  []func() error
	recvs  []func() error
	custom map[reduce.Op]*reduce.Func
}

func newFakeJob(n int) (*fakeJob, []Communicator) {
	j := &fakeJob{n: n, slots: make([]contrib, n), done: make(chan struct{}), links: map[[2]int]chan []byte{}}
	j.cond = sync.NewCond(&j.mu)
	for s := 0; s < n; s++ {
		for d := 0; d < n; d++ {
			j.links[[2]int{s, d}] = make(chan []byte, 4096)
		}
	}
	cs := make([]Communicator, n)
	for r := range cs {
		cs[r] = &fakeComm{j: j, rank: r, custom: map[reduce.Op]*reduce.Func{}}
	}
	return j, cs
}

func (j *fakeJob) abort(cause error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err == nil {
		j.err = fmt.Errorf("job aborted: %w", cause)
		close(j.done)
		j.cond.Broadcast()
	}
}

// exchange blocks until every rank contributed, then returns every rank's
// contribution.
func (j *fakeJob) exchange(rank int, c contrib) ([]contrib, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.err != nil {
		return nil, j.err
	}
	gen := j.gen
	j.slots[rank] = c
	j.arrived++
	if j.arrived == j.n {
		j.result, j.slots, j.arrived = j.slots, make([]contrib, j.n), 0
		j.gen++
		j.cond.Broadcast()
		return j.result, nil
	}
	for j.gen == gen && j.err == nil {
		j.cond.Wait()
	}
	if j.gen == gen {
		return nil, j.err
	}
	return j.result, nil
}

func (c *fakeComm) Rank() int { return c.rank }

// Control is the fake itself: its collectives know no algorithms.
func (c *fakeComm) Control() Control { return c }
func (c *fakeComm) NRanks() int      { return c.j.n }
func (c *fakeComm) Abort(cause error) {
	c.j.abort(cause)
}

func (c *fakeComm) GroupStart() { c.depth++ }

func (c *fakeComm) GroupEnd() error {
	if c.depth == 0 {
		return errors.New("GroupEnd without GroupStart")
	}
	c.depth--
	if c.depth > 0 {
		return nil
	}
	q, s, r := c.queue, c.sends, c.recvs
	c.queue, c.sends, c.recvs = nil, nil, nil
	if err := c.enter(); err != nil {
		return err
	}
	for _, f := range append(append(q, s...), r...) {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// enter counts a call (or group) and applies the hang hook.
func (c *fakeComm) enter() error {
	call := c.calls
	c.calls++
	if c.j.hang != nil && c.j.hang(c.rank, call) {
		<-c.j.done
		return c.j.err
	}
	return nil
}

func (c *fakeComm) run(f func() error) error {
	if c.depth > 0 {
		c.queue = append(c.queue, f)
		return nil
	}
	if err := c.enter(); err != nil {
		return err
	}
	return f()
}

func (c *fakeComm) corrupt(out []byte) {
	if c.j.corrupt != nil {
		c.j.corrupt(c.rank, c.calls-1, out)
	}
}

func (c *fakeComm) sent(buf []byte) {
	if c.j.sent != nil {
		c.j.sent(c.rank, c.calls-1, buf)
	}
}

func (c *fakeComm) fn(dt reduce.DataType, op reduce.Op) (*reduce.Func, error) {
	if f, ok := c.custom[op]; ok {
		if f.Type() != dt {
			return nil, fmt.Errorf("op %d created for %s, used with %s", op, f.Type(), dt)
		}
		return f, nil
	}
	if op == reduce.PreMulSum {
		return nil, errors.New("premulsum needs CreatePreMulSum")
	}
	return reduce.NewFunc(dt, op, c.j.n, 0)
}

func (c *fakeComm) CreatePreMulSum(scalar float64, dt reduce.DataType) (reduce.Op, error) {
	f, err := reduce.NewFunc(dt, reduce.PreMulSum, c.j.n, scalar)
	if err != nil {
		return 0, err
	}
	op := reduce.Op(64 + len(c.custom))
	c.custom[op] = f
	return op, nil
}

// reduceAll reduces the contributions' [off, off+len) bytes in reverse rank
// order into out.
func reduceAll(cs []contrib, off, length int, out []byte) {
	acc := make([]byte, length)
	tmp := make([]byte, length)
	last := len(cs) - 1
	cs[last].fn.Pre(acc, cs[last].data[off:off+length])
	for r := last - 1; r >= 0; r-- {
		cs[r].fn.Pre(tmp, cs[r].data[off:off+length])
		cs[r].fn.Reduce(acc, tmp, acc)
	}
	cs[0].fn.Post(out[:length], acc)
}

func snapshot(b []byte) []byte { return append([]byte(nil), b...) }

func (c *fakeComm) AllReduce(send, recv []byte, count int, dt reduce.DataType, op reduce.Op) error {
	f, err := c.fn(dt, op)
	if err != nil {
		return err
	}
	nb := count * dt.Size()
	return c.run(func() error {
		cs, err := c.j.exchange(c.rank, contrib{snapshot(send[:nb]), f})
		if err != nil {
			return err
		}
		reduceAll(cs, 0, nb, recv)
		c.corrupt(recv[:nb])
		return nil
	})
}

func (c *fakeComm) ReduceScatter(send, recv []byte, recvCount int, dt reduce.DataType, op reduce.Op) error {
	f, err := c.fn(dt, op)
	if err != nil {
		return err
	}
	nb := recvCount * dt.Size()
	return c.run(func() error {
		cs, err := c.j.exchange(c.rank, contrib{snapshot(send[:nb*c.j.n]), f})
		if err != nil {
			return err
		}
		reduceAll(cs, c.rank*nb, nb, recv)
		c.corrupt(recv[:nb])
		return nil
	})
}

func (c *fakeComm) Reduce(send, recv []byte, count int, dt reduce.DataType, op reduce.Op, root int) error {
	f, err := c.fn(dt, op)
	if err != nil {
		return err
	}
	nb := count * dt.Size()
	return c.run(func() error {
		cs, err := c.j.exchange(c.rank, contrib{snapshot(send[:nb]), f})
		if err != nil {
			return err
		}
		if c.rank == root {
			reduceAll(cs, 0, nb, recv)
			c.corrupt(recv[:nb])
		}
		return nil
	})
}

func (c *fakeComm) AllGather(send, recv []byte, sendCount int, dt reduce.DataType) error {
	nb := sendCount * dt.Size()
	return c.run(func() error {
		cs, err := c.j.exchange(c.rank, contrib{data: snapshot(send[:nb])})
		if err != nil {
			return err
		}
		for r, x := range cs {
			copy(recv[r*nb:(r+1)*nb], x.data)
		}
		c.corrupt(recv[:nb*c.j.n])
		return nil
	})
}

func (c *fakeComm) Broadcast(send, recv []byte, count int, dt reduce.DataType, root int) error {
	nb := count * dt.Size()
	return c.run(func() error {
		var mine []byte
		if c.rank == root {
			mine = snapshot(send[:nb])
		}
		cs, err := c.j.exchange(c.rank, contrib{data: mine})
		if err != nil {
			return err
		}
		copy(recv[:nb], cs[root].data)
		c.corrupt(recv[:nb])
		return nil
	})
}

func (c *fakeComm) AllToAll(send, recv []byte, count int, dt reduce.DataType) error {
	nb := count * dt.Size()
	if nb > 0 && &send[0] == &recv[0] {
		return errors.New("AllToAll has no in-place form")
	}
	return c.run(func() error {
		data := snapshot(send[:nb*c.j.n])
		c.sent(send[:nb*c.j.n])
		cs, err := c.j.exchange(c.rank, contrib{data: data})
		if err != nil {
			return err
		}
		for r, x := range cs {
			copy(recv[r*nb:(r+1)*nb], x.data[c.rank*nb:(c.rank+1)*nb])
		}
		c.corrupt(recv[:nb*c.j.n])
		return nil
	})
}

func (c *fakeComm) Send(buf []byte, count int, dt reduce.DataType, peer int) error {
	if peer < 0 || peer >= c.j.n {
		return fmt.Errorf("peer %d out of range", peer)
	}
	data := snapshot(buf[:count*dt.Size()])
	f := func() error {
		c.sent(buf[:len(data)])
		select {
		case c.j.links[[2]int{c.rank, peer}] <- data:
			return nil
		case <-c.j.done:
			return c.j.err
		}
	}
	if c.depth > 0 {
		// Snapshot at GroupEnd, as the runtime reads the buffer then.
		c.sends = append(c.sends, func() error { data = snapshot(buf[:count*dt.Size()]); return f() })
		return nil
	}
	if err := c.enter(); err != nil {
		return err
	}
	return f()
}

func (c *fakeComm) Recv(buf []byte, count int, dt reduce.DataType, peer int) error {
	if peer < 0 || peer >= c.j.n {
		return fmt.Errorf("peer %d out of range", peer)
	}
	f := func() error {
		select {
		case data := <-c.j.links[[2]int{peer, c.rank}]:
			if len(data) != count*dt.Size() {
				return fmt.Errorf("rank %d: recv of %d bytes from %d matched a send of %d", c.rank, count*dt.Size(), peer, len(data))
			}
			copy(buf, data)
			c.corrupt(buf[:len(data)])
			return nil
		case <-c.j.done:
			return c.j.err
		}
	}
	if c.depth > 0 {
		c.recvs = append(c.recvs, f)
		return nil
	}
	if err := c.enter(); err != nil {
		return err
	}
	return f()
}

var _ Communicator = (*fakeComm)(nil)
