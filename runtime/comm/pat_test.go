package comm

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// patEnv forces PAT for reduce-scatter and all-gather with small FIFO
// slots (512 bytes: chunks of 128 int32), so that counts span many chunks
// and the packed path (a part far smaller than a chunk) runs too.
func patEnv(extra ...string) map[string]string {
	env := map[string]string{"NCCL_ALGO": "reducescatter:pat;allgather:pat", "NCCL_BUFFSIZE": "4096"}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	return env
}

// TestPAT runs PAT reduce-scatter and all-gather over real connections:
// each rank alone on its host (TCP, PAT's automatic case) and every rank
// on one host (shared memory, NCCL_PAT_ENABLE=1), in and out of place, at
// counts around chunk and channel boundaries, checking every element.
func TestPAT(t *testing.T) {
	for _, n := range []int{2, 3, 5, 8} {
		for _, layout := range []string{"alone", "onehost"} {
			for _, nc := range []string{"1", "2"} {
				t.Run(fmt.Sprintf("n%d/%s/ch%s", n, layout, nc), func(t *testing.T) {
					cs := withHosts(t, hostLayouts(n)[layout], testParams(t, patEnv("NCCL_PAT_ENABLE", "1", "NCCL_NCHANNELS", nc)))
					for _, cc := range collCases()[1:3] { // ReduceScatter, AllGather
						for _, count := range []int{0, 1, n - 1, 127, 1009} {
							runCase(t, cs, cc, count, false)
							runCase(t, cs, cc, count, true)
						}
					}
				})
			}
		}
	}
}

// TestPATEveryDataTypeAndOp runs PAT reduce-scatter for every data type
// and op (avg and premulsum included, which NCCL's PAT excludes) and
// all-gather for every type, each rank alone on its host, comparing bytes
// exactly.
func TestPATEveryDataTypeAndOp(t *testing.T) {
	const n, count, scalar = 3, 67, 2.0
	cs := withHosts(t, hostLayouts(n)["alone"], testParams(t, patEnv()))
	for _, dt := range reduce.DataTypes() {
		es := dt.Size()
		for _, op := range reduce.Ops() {
			reduceScatterExact(t, cs, dt, op, count, scalar)
		}
		outs := make([][]byte, n)
		mustEach(t, cs, "AllGather", func(c *Comm) error {
			r := c.Rank()
			send := exactValues(dt, reduce.Sum, r, count)
			outs[r] = make([]byte, n*count*es)
			return c.AllGather(send, outs[r], count, dt)
		})
		want := make([]byte, n*count*es)
		for src := range n {
			for i := range count {
				reduce.Encode(dt, want[(src*count+i)*es:], exactValue(dt, reduce.Sum, src, i))
			}
		}
		for r := range n {
			if !bytes.Equal(outs[r], want) {
				t.Errorf("AllGather %s rank %d: %s", dt, r, firstDiff(dt, outs[r], want))
			}
		}
	}
}

// reduceScatterExact runs a reduce-scatter of count elements of dt with
// op (premulsum with scalar) on cs and compares every rank's bytes with the
// exact result.
func reduceScatterExact(t *testing.T, cs []*Comm, dt reduce.DataType, op reduce.Op, count int, scalar float64) {
	t.Helper()
	n := len(cs)
	outs := make([][]byte, n)
	mustEach(t, cs, "ReduceScatter", func(c *Comm) error {
		r := c.Rank()
		send := exactValues(dt, op, r, n*count)
		o, done, err := testOp(c, op, dt, scalar)
		if err != nil {
			return err
		}
		defer done()
		outs[r] = make([]byte, count*dt.Size())
		return c.ReduceScatter(send, outs[r], count, dt, o)
	})
	for r := range n {
		want := exactResults(dt, op, n, r*count, count, scalar)
		if !bytes.Equal(outs[r], want) {
			t.Errorf("ReduceScatter %s/%s rank %d: %s", dt, op, r, firstDiff(dt, outs[r], want))
		}
	}
}

// TestPATDisabled: PAT forced while NCCL_PAT_ENABLE=0, or while ranks
// share a host under the automatic setting, fails every rank's call with
// NCCL's error saying why; the other collectives still run.
func TestPATDisabled(t *testing.T) {
	for _, c := range []struct {
		layout, enable, want string
	}{
		{"alone", "0", "PAT is disabled (NCCL_PAT_ENABLE=0)"},
		{"pairs", "2", "PAT runs only with one rank per host when NCCL_PAT_ENABLE=2 (auto), and a host has 2 ranks"},
	} {
		t.Run(c.layout+"/"+c.enable, func(t *testing.T) {
			const n, count = 4, 8
			cs := withHosts(t, hostLayouts(n)[c.layout], testParams(t, patEnv("NCCL_PAT_ENABLE", c.enable)))
			errs := each(cs, func(cm *Comm) error {
				return cm.ReduceScatter(make([]byte, 4*n*count), make([]byte, 4*count), count, reduce.Int32, reduce.Sum)
			})
			for r, err := range errs {
				if err == nil || !strings.Contains(err.Error(), c.want) ||
					!strings.Contains(err.Error(), `no algorithm/protocol available for function ReduceScatter with datatype int32: NCCL_ALGO was set to "reducescatter:pat;allgather:pat"`) {
					t.Errorf("rank %d: %v, want the no-algorithm error naming %q", r, err, c.want)
				}
			}
			runCase(t, cs, collCases()[0], 100, false) // AllReduce runs the ring
		})
	}
}

// TestPATAbort: one rank aborts while the others are in a stream of PAT
// reduce-scatters, over TCP and over shared memory; every other rank's
// call fails naming it (blocked in a slot wait or not).
func TestPATAbort(t *testing.T) {
	for _, layout := range []string{"alone", "onehost"} {
		t.Run(layout, func(t *testing.T) {
			const n, count = 5, 1 << 12
			cs := withHosts(t, hostLayouts(n)[layout], testParams(t, patEnv("NCCL_PAT_ENABLE", "1")))
			abortMidStream(t, cs, func(c *Comm) func() error {
				send, recv := make([]byte, 4*n*count), make([]byte, 4*count)
				return func() error { return c.ReduceScatter(send, recv, count, reduce.Int32, reduce.Sum) }
			})
		})
	}
}
