package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
	"github.com/seed-760dd1f1/cc/runtime/tune"
)

// tunedFake is the fake with a tuner: it runs every call the same way, but
// remembers what it was told and reports it as Ran; the automatic pick is
// Ring/Simple on 1 channel, and the communicator's channel choice is 1.
type tunedFake struct {
	*fakeComm
	forced *Ran     // Channels 0: the communicator's choice
	log    []string // every Force ("Tree/LL/2", "Tree/LL/auto") and ForceNone ("auto"), in order
	// delay, when set, is how long the call-th all-reduce, all-gather
	// or reduce-scatter (counted from 0 per configuration run, per rank) of
	// configuration ran sleeps before it runs.
	delay func(ran Ran, call int) time.Duration
	calls map[Ran]int
}

// autoFastest is a delay under which the automatic pick (Ring/Simple/1) is
// the fastest by far: every other configuration sleeps 2 ms a call, so no
// row needs a confirmation round.
func autoFastest(ran Ran, call int) time.Duration {
	if ran == (Ran{Algo: algos.Ring, Proto: protocols.Simple, Channels: 1}) {
		return 0
	}
	return 2 * time.Millisecond
}

func (f *tunedFake) wait() {
	if f.delay == nil {
		return
	}
	if f.calls == nil {
		f.calls = map[Ran]int{}
	}
	a, p, ch, _ := f.Ran()
	r := Ran{Algo: a, Proto: p, Channels: ch}
	time.Sleep(f.delay(r, f.calls[r]))
	f.calls[r]++
}

func (f *tunedFake) AllReduce(send, recv []byte, count int, dt reduce.DataType, op reduce.Op) error {
	f.wait()
	return f.fakeComm.AllReduce(send, recv, count, dt, op)
}

func (f *tunedFake) AllGather(send, recv []byte, sendCount int, dt reduce.DataType) error {
	f.wait()
	return f.fakeComm.AllGather(send, recv, sendCount, dt)
}

func (f *tunedFake) ReduceScatter(send, recv []byte, recvCount int, dt reduce.DataType, op reduce.Op) error {
	f.wait()
	return f.fakeComm.ReduceScatter(send, recv, recvCount, dt, op)
}

var fakeEntries = []tune.Choice{
	{Algo: algos.Tree, Proto: protocols.LL},
	{Algo: algos.Ring, Proto: protocols.LL128},
	{Algo: algos.Ring, Proto: protocols.Simple},
}

func (f *tunedFake) Ran() (algos.Algo, protocols.Proto, int, float64) {
	if f.forced == nil {
		return algos.Ring, protocols.Simple, 1, 1.5
	}
	return f.forced.Algo, f.forced.Proto, max(f.forced.Channels, 1), 1.5
}

func (f *tunedFake) Force(a algos.Algo, p protocols.Proto, ch int) error {
	f.forced = &Ran{Algo: a, Proto: p, Channels: ch}
	chs := "auto"
	if ch > 0 {
		chs = fmt.Sprint(ch)
	}
	f.log = append(f.log, fmt.Sprintf("%s/%s/%s", a, p, chs))
	return nil
}

func (f *tunedFake) ForceNone() {
	f.forced = nil
	f.log = append(f.log, "auto")
}

func (f *tunedFake) Entries(kind algos.Coll) []tune.Choice { return fakeEntries }

// TestRunShowAlgo: with -A every half records what its communicator says
// the timed calls ran; nothing for point-to-point collectives and without -A.
func TestRunShowAlgo(t *testing.T) {
	for _, tt := range []struct {
		name string
		show bool
		want *Ran
	}{
		{"all_reduce", true, &Ran{Algo: algos.Tree, Proto: protocols.LL, Channels: 2}},
		{"all_reduce", false, nil},
		{"alltoall", true, nil},
	} {
		c, _ := Lookup(tt.name)
		o := smallOptions(c)
		o.Types, o.Ops, o.ShowAlgo = []reduce.DataType{reduce.Int32}, []reduce.Op{reduce.Sum}, tt.show
		_, comms := newFakeJob(2)
		for i, fc := range comms {
			f := &tunedFake{fakeComm: fc.(*fakeComm)}
			_ = f.Force(algos.Tree, protocols.LL, 2)
			comms[i] = f
		}
		rec := &recorder{}
		if _, err := Run(context.Background(), comms, devicesFor(2), o, rec); err != nil {
			t.Fatal(err)
		}
		for _, r := range rec.rows {
			for _, h := range []Half{r.OutOfPlace, r.InPlace} {
				if !cmp.Equal(h.Ran, tt.want) {
					t.Errorf("%s -A %v: ran %v, want %v", tt.name, tt.show, h.Ran, tt.want)
				}
			}
		}
	}
}
