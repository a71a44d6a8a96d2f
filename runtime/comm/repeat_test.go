package comm

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// repeatCase is one collective of TestOneShotRepeat: how many elements
// it sends and receives for a count, how it runs, and element i of rank
// r's result when rank q's send element j is 1000k + 10q + j at
// repetition k.
type repeatCase struct {
	name  string
	sizes func(count, n int) (send, recv int)
	run   func(c *Comm, send, recv []byte, count int) error
	want  func(k, r, n, count, i int) int32
}

var repeatCases = []repeatCase{
	{"AllReduce", func(c, n int) (int, int) { return c, c },
		func(c *Comm, s, r []byte, count int) error { return c.AllReduce(s, r, count, reduce.Int32, reduce.Sum) },
		func(k, _, n, _, i int) int32 { return int32(n*1000*k + 10*n*(n-1)/2 + n*i) }},
	{"ReduceScatter", func(c, n int) (int, int) { return n * c, c },
		func(c *Comm, s, r []byte, count int) error {
			return c.ReduceScatter(s, r, count, reduce.Int32, reduce.Sum)
		},
		func(k, r, n, count, i int) int32 { return int32(n*1000*k + 10*n*(n-1)/2 + n*(r*count+i)) }},
	{"AllGather", func(c, n int) (int, int) { return c, n * c },
		func(c *Comm, s, r []byte, count int) error { return c.AllGather(s, r, count, reduce.Int32) },
		func(k, _, _, count, i int) int32 { return int32(1000*k + 10*(i/count) + i%count) }},
	{"Broadcast", func(c, n int) (int, int) { return c, c },
		func(c *Comm, s, r []byte, count int) error { return c.Broadcast(s, r, count, reduce.Int32, 0) },
		func(k, _, _, _, i int) int32 { return int32(1000*k + i) }},
}

// TestOneShotRepeat: a one-shot call repeated with the same arguments
// (which skips validation, the tuner and the plan lookup) reads the
// input's new values and writes every element of the output, each time,
// with counts whose data rides with the sequence numbers (up to 56 bytes
// per rank) and counts that use the slots; and a Control call, another
// count, Force and ForceNone between two repetitions are honoured.
func TestOneShotRepeat(t *testing.T) {
	for _, n := range []int{2, 3, 5} {
		cs := withHosts(t, hostLayouts(n)["onehost"], testParams(t, oneShotEnv()))
		for _, cc := range repeatCases {
			for _, count := range []int{1, 3, 14, 15, 300} {
				t.Run(fmt.Sprintf("n%d/%s/count%d", n, cc.name, count), func(t *testing.T) {
					mustEach(t, cs, cc.name, func(c *Comm) error { return repeatCalls(c, cc, count) })
				})
			}
		}
	}
}

// repeatCalls is one rank's part of TestOneShotRepeat: six repetitions,
// alternating between two pairs of buffers, then two calls of the same
// arguments with buffers that validation refuses.
func repeatCalls(c *Comm, cc repeatCase, count int) error {
	n, r := c.NRanks(), c.Rank()
	ns, nr := cc.sizes(count, n)
	// two buffer pairs, used in turn (cc-perf moves its buffers every call)
	pairs := [2][2][]byte{{make([]byte, 4*ns), make([]byte, 4*nr)}, {make([]byte, 4*ns+8), make([]byte, 4*nr+8)}}
	ns2, nr2 := cc.sizes(count+1, n)
	send2, recv2 := make([]byte, 4*ns2), make([]byte, 4*nr2)
	for k := range 6 {
		send, recv := pairs[k%2][0], pairs[k%2][1]
		switch k {
		case 2: // a Control call of the same shape
			if err := c.Control().AllReduce(send[:4], recv[:4], 1, reduce.Int32, reduce.Sum); err != nil {
				return err
			}
		case 3: // another count, then the same again
			if err := cc.run(c, send2, recv2, count+1); err != nil {
				return err
			}
		case 4: // a forced entry (a new Force, though the same row)
			if err := c.Force(algos.OneShot, protocols.Simple, 0); err != nil {
				return err
			}
		case 5:
			c.ForceNone()
		}
		for j := range ns {
			putI32(send, j, int32(1000*k+10*r+j))
		}
		for i := range nr {
			putI32(recv, i, sentinel)
		}
		if err := cc.run(c, send, recv, count); err != nil {
			return fmt.Errorf("repetition %d: %w", k, err)
		}
		for i := range nr {
			if got, want := getI32(recv, i), cc.want(k, r, n, count, i); got != want {
				return fmt.Errorf("repetition %d: element %d = %d, want %d", k, i, got, want)
			}
		}
		if algo, _, _, _ := c.Ran(); algo != algos.OneShot {
			return fmt.Errorf("repetition %d ran %s, want OneShot", k, algo)
		}
	}
	// In place three times (the repeat path checks the in-place offset),
	// then apart again.
	buf := make([]byte, 4*max(ns, nr))
	for k := 6; k < 10; k++ {
		send, recv := pairs[0][0], pairs[0][1]
		if k < 9 {
			send, recv = inPlaceOf(cc.name, buf, r, count)
		}
		for i := range nr {
			putI32(recv, i, sentinel)
		}
		for j := range ns {
			putI32(send, j, int32(1000*k+10*r+j))
		}
		if err := cc.run(c, send, recv, count); err != nil {
			return fmt.Errorf("repetition %d (in place: %v): %w", k, k < 9, err)
		}
		for i := range nr {
			if got, want := getI32(recv, i), cc.want(k, r, n, count, i); got != want {
				return fmt.Errorf("repetition %d (in place: %v): element %d = %d, want %d", k, k < 9, i, got, want)
			}
		}
	}
	send, recv := pairs[1][0], pairs[1][1]
	if nr > 0 {
		if err := cc.run(c, send, recv[:4*nr-4], count); err == nil || !strings.Contains(err.Error(), "recvbuff has") {
			return fmt.Errorf("a short recv buffer: %v, want the recvbuff error", err)
		}
	}
	if ns > 0 && nr > 0 && (cc.name != "Broadcast" || r == 0) { // broadcast's non-roots do not read send
		big := make([]byte, 4*max(ns, nr)+8)
		if err := cc.run(c, big[2:2+4*ns], big[:4*nr], count); err == nil || !strings.Contains(err.Error(), "overlap") {
			return fmt.Errorf("overlapping buffers not in place: %v, want the overlap error", err)
		}
	}
	return nil
}

// inPlaceOf returns rank r's send and recv of an in-place call of
// collective name in buf: send at recv's block r for AllGather, recv at
// send's block r for ReduceScatter, the same memory otherwise.
func inPlaceOf(name string, buf []byte, r, count int) (send, recv []byte) {
	switch name {
	case "AllGather":
		return buf[4*r*count : 4*(r+1)*count], buf
	case "ReduceScatter":
		return buf, buf[4*r*count : 4*(r+1)*count]
	}
	return buf[:4*count], buf[:4*count]
}

func putI32(b []byte, i int, v int32) { binary.LittleEndian.PutUint32(b[4*i:], uint32(v)) }

// TestOneShotKilledPeer: a rank killed while the others repeat an 8 B
// one-shot all-reduce (inline bytes, the repeat path) is named in every
// other rank's error, and no rank hangs.
func TestOneShotKilledPeer(t *testing.T) {
	killPeer(t, "forever-small", func(int) []string { return []string{"NCCL_SHM_DISABLE=0", "NCCL_ALGO=oneshot"} })
}

// TestForcedExcludedEntry: a call forced onto an entry that may not run
// fails once per rank, naming the rank and the collective once.
func TestForcedExcludedEntry(t *testing.T) {
	cs := withHosts(t, hostLayouts(2)["onehost"], testParams(t, map[string]string{"NCCL_ALGO": "ring"}))
	c := cs[0]
	if err := c.Force(algos.Tree, protocols.Simple, 0); err != nil {
		t.Fatal(err)
	}
	defer c.ForceNone()
	b := make([]byte, 8)
	err := c.AllReduce(b, b, 2, reduce.Int32, reduce.Sum)
	const want = "rank 0: AllReduce: forced Tree/Simple may not run: "
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Count(err.Error(), "rank 0") != 1 {
		t.Errorf("forced excluded entry: %v, want one error starting %q", err, want)
	}
}
