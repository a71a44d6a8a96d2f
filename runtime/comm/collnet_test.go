package comm

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/runtime/collnet"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
	"github.com/seed-760dd1f1/cc/runtime/tune"
)

// CollNet Direct over real connections: fake hosts (CC_HOST_ID) in one
// process, an in-process aggregation server (InitLocalCollNet), every
// element checked.

// withCollNet makes communicators over hosts with an in-process server;
// the server closes after them.
func withCollNet(t testing.TB, hosts []string, env map[string]string) ([]*Comm, *collnet.Server) {
	t.Helper()
	cs, srv, err := InitLocalCollNet(t.Context(), hosts, testParams(t, env))
	if err != nil {
		t.Fatalf("InitLocalCollNet(%v): %v", hosts, err)
	}
	t.Cleanup(func() {
		closeAll(t, cs)
		srv.Close()
	})
	return cs, srv
}

// hostsOf is nhosts fake hosts of ppn ranks each.
func hostsOf(nhosts, ppn int) []string {
	out := make([]string, nhosts*ppn)
	for r := range out {
		out[r] = fmt.Sprintf("cn%d", r/ppn)
	}
	return out
}

// TestCollNetCollectives: all-reduce with 1, 2 and all heads, and
// reduce-scatter and all-gather (every rank a head), on 2 and 3 hosts,
// in and out of place, at counts around chunk boundaries, on 1 and 2
// channels.
func TestCollNetCollectives(t *testing.T) {
	const buffSize = 8 * 512 // 512-byte slots: chunks of 128 int32
	for _, shape := range [][2]int{{2, 2}, {3, 2}, {2, 3}} {
		for _, heads := range []int{1, 2, 0} {
			if heads > shape[1] {
				continue
			}
			name := fmt.Sprintf("%dx%d/heads%d", shape[0], shape[1], heads)
			t.Run(name, func(t *testing.T) {
				cs, _ := withCollNet(t, hostsOf(shape[0], shape[1]), map[string]string{"NCCL_ALGO": "collnetdirect",
					"NCCL_BUFFSIZE": strconv.Itoa(buffSize), "NCCL_NCHANNELS": strconv.Itoa(1 + heads%2),
					"CC_COLLNET_NHEADS": strconv.Itoa(heads)})
				for _, cc := range collCases()[:3] { // AllReduce, ReduceScatter, AllGather
					if heads != 0 && cc.name != "AllReduce" {
						continue
					}
					for _, count := range []int{0, 1, 5, 1009, 4099} {
						runCase(t, cs, cc, count, false)
						if cc.inPlace != nil {
							runCase(t, cs, cc, count, true)
						}
					}
					if algo, _, _, _ := cs[0].Ran(); algo.String() != "CollNetDirect" {
						t.Errorf("%s ran %v, want CollNetDirect", cc.name, algo)
					}
				}
			})
		}
	}
}

// TestCollNetEveryDataTypeAndOp: all-reduce of every type and op, exact;
// avg and premulsum reach the server as sum.
func TestCollNetEveryDataTypeAndOp(t *testing.T) {
	const n, count, scalar = 4, 301, 2.0
	cs, _ := withCollNet(t, hostsOf(2, 2), map[string]string{"NCCL_ALGO": "collnetdirect", "NCCL_BUFFSIZE": "8192"})
	for _, dt := range reduce.DataTypes() {
		for _, op := range reduce.Ops() {
			want := exactResults(dt, op, n, 0, count, scalar)
			outs := make([][]byte, n)
			mustEach(t, cs, "AllReduce", func(c *Comm) error {
				r := c.Rank()
				o, done, err := testOp(c, op, dt, scalar)
				if err != nil {
					return err
				}
				defer done()
				outs[r] = make([]byte, count*dt.Size())
				return c.AllReduce(exactValues(dt, op, r, count), outs[r], count, dt, o)
			})
			for r := range n {
				if !bytes.Equal(outs[r], want) {
					t.Errorf("%s/%s rank %d: %s", dt, op, r, firstDiff(dt, outs[r], want))
				}
			}
		}
	}
}

// TestCollNetServerKilled: the server closes in the middle of a stream of
// all-reduces; every rank's call fails naming it.
func TestCollNetServerKilled(t *testing.T) {
	const count = 1 << 14
	cs, srv := withCollNet(t, hostsOf(2, 2), map[string]string{"NCCL_ALGO": "collnetdirect", "NCCL_BUFFSIZE": "8192"})
	var once sync.Once
	errs := make([]error, len(cs))
	hangGuard(t, 60*time.Second, "all-reduces with the server killed", func() {
		errs = each(cs, func(c *Comm) error {
			send, recv := make([]byte, 4*count), make([]byte, 4*count)
			for i := 0; ; i++ {
				if i == 3 && c.Rank() == 0 {
					once.Do(func() { srv.Close() })
				}
				if err := c.AllReduce(send, recv, count, reduce.Int32, reduce.Sum); err != nil {
					return err
				}
			}
		})
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "collnet aggregation server "+srv.Addr()+" lost") {
			t.Errorf("rank %d: %v, want the server %s lost", r, err, srv.Addr())
		}
	}
}

// TestCollNetDescriptorMismatch: heads whose descriptors disagree (here a
// count) all fail with the server's error naming the field, instead of
// reducing garbage or hanging.
func TestCollNetDescriptorMismatch(t *testing.T) {
	cs, _ := withCollNet(t, hostsOf(2, 1), map[string]string{"NCCL_ALGO": "collnetdirect", "NCCL_BUFFSIZE": "8192"})
	errs := make([]error, len(cs))
	hangGuard(t, 60*time.Second, "mismatched all-reduce", func() {
		errs = each(cs, func(c *Comm) error {
			count := 100 + 4*c.Rank()
			return c.AllReduce(make([]byte, 4*count), make([]byte, 4*count), count, reduce.Int32, reduce.Sum)
		})
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "descriptor mismatch") || !strings.Contains(err.Error(), "count") {
			t.Errorf("rank %d: %v, want the server's descriptor mismatch naming the count", r, err)
		}
	}
}

// TestCollNetForcedUnavailable: NCCL_ALGO=collnetdirect without
// NCCL_COLLNET_ENABLE=1 or without a server is a one-line Init error
// naming why; with the ring also allowed, Init succeeds and the ring runs.
func TestCollNetForcedUnavailable(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"NCCL_ALGO": "collnetdirect", "CC_COLLNET_SERVER": "127.0.0.1:9"}, "NCCL_COLLNET_ENABLE=0"},
		{map[string]string{"NCCL_ALGO": "collnetdirect", "NCCL_COLLNET_ENABLE": "1"}, "CC_COLLNET_SERVER is not set"},
		{map[string]string{"NCCL_ALGO": "allreduce:collnetdirect", "NCCL_COLLNET_ENABLE": "1"}, "CC_COLLNET_SERVER is not set"},
	} {
		_, err := InitLocalHosts(t.Context(), hostsOf(2, 1), testParams(t, tc.env))
		if err == nil {
			t.Errorf("%v: Init succeeded, want an error naming %q", tc.env, tc.want)
			continue
		}
		// Every rank fails with one line (InitLocalHosts joins them).
		for _, line := range strings.Split(err.Error(), "\n") {
			if !strings.Contains(line, tc.want) || !strings.Contains(line, "only CollNetDirect") {
				t.Errorf("%v: %q, want a line naming %q", tc.env, line, tc.want)
			}
		}
	}
	cs := withHosts(t, hostsOf(2, 1), testParams(t, map[string]string{"NCCL_ALGO": "ring,collnetdirect"}))
	runCase(t, cs, collCases()[0], 10, false)
	if algo, _, _, _ := cs[0].Ran(); algo.String() != "Ring" {
		t.Errorf("ran %v, want Ring", algo)
	}
	// The tuner has no CollNet entry unless CollNet is enabled with a server.
	for _, e := range cs[0].Entries(algos.AllReduce) {
		if e.Algo == algos.CollNetDirect {
			t.Errorf("entry %v/%v without NCCL_COLLNET_ENABLE=1 and a server", e.Algo, e.Proto)
		}
	}
	on, _ := withCollNet(t, hostsOf(2, 1), nil)
	if es := on[0].Entries(algos.AllReduce); !slices.ContainsFunc(es, func(e tune.Choice) bool { return e.Algo == algos.CollNetDirect }) {
		t.Errorf("entries %v with CollNet enabled and a server: no CollNetDirect", es)
	}
}

// TestCollNetWrongSecret: a server of another secret rejects the heads'
// handshake with one log line, and Init fails naming the server.
func TestCollNetWrongSecret(t *testing.T) {
	job, err := NewJob()
	if err != nil {
		t.Fatal(err)
	}
	job.Secret = []byte("not the job's secret")
	var mu sync.Mutex
	var logs []string
	srv, err := collnet.Listen(collnet.Options{Job: job, Addr: "127.0.0.1:0", Logf: func(f string, a ...any) {
		mu.Lock()
		logs = append(logs, fmt.Sprintf(f, a...))
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	p := testParams(t, map[string]string{"NCCL_ALGO": "collnetdirect", "NCCL_COLLNET_ENABLE": "1", "CC_COLLNET_SERVER": srv.Addr()})
	_, err = InitLocalHosts(t.Context(), hostsOf(2, 1), p)
	if err == nil || !strings.Contains(err.Error(), "collnet aggregation server "+srv.Addr()) {
		t.Errorf("Init: %v, want a failure naming the server", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logs) == 0 || !strings.Contains(logs[0], "dropped connection") {
		t.Errorf("server logs %q, want a dropped connection", logs)
	}
	for _, l := range logs {
		if strings.Contains(l, "\n") {
			t.Errorf("log %q spans lines", l)
		}
	}
}

// TestCollNetSplit: communicators made by Split reach the server with the
// launcher's job (their own job ids differ) and are served apart: two
// halves of 2 hosts x 2 ranks, each 2 hosts x 1 rank, all-reduce at once.
func TestCollNetSplit(t *testing.T) {
	cs, _ := withCollNet(t, hostsOf(2, 2), map[string]string{"NCCL_ALGO": "collnetdirect", "NCCL_BUFFSIZE": "8192"})
	const count = 1000
	outs := make([][]byte, len(cs))
	mustEach(t, cs, "split and all-reduce", func(c *Comm) error {
		nc, err := c.Split(t.Context(), c.Rank()%2, c.Rank())
		if err != nil {
			return err
		}
		defer nc.Close()
		send := make([]byte, 4*count)
		for i := range count {
			send[4*i] = byte(c.Rank() + 1)
		}
		outs[c.Rank()] = make([]byte, 4*count)
		if err := nc.AllReduce(send, outs[c.Rank()], count, reduce.Int32, reduce.Sum); err != nil {
			return err
		}
		if algo, _, _, _ := nc.Ran(); algo.String() != "CollNetDirect" {
			return fmt.Errorf("ran %v, want CollNetDirect", algo)
		}
		return nil
	})
	for r, out := range outs {
		want := byte(r%2 + 1 + r%2 + 3) // ranks r%2 and r%2+2, plus one each
		for i := range count {
			if out[4*i] != want {
				t.Fatalf("rank %d element %d: %d, want %d", r, i, out[4*i], want)
			}
		}
	}
}
