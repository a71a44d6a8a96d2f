package timed_test

import (
	"math"
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/algos/sim/timed"
)

// pipe is one slot per slice and per chunk; big slots so that an Op of a
// few thousand elements is one slice.
var pipe = algos.Geometry{ChunkSteps: 1, SliceSteps: 1}

func near(got, want float64) bool { return math.Abs(got-want) <= 1e-6*max(1, math.Abs(want)) }

func run(t *testing.T, p *timed.Params, scheds []algos.Schedule) timed.Result {
	t.Helper()
	res, err := timed.Run(p, [][]algos.Schedule{scheds})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// oneWay is rank 0 sending count elements to rank 1.
func oneWay(count int64) []algos.Schedule {
	return []algos.Schedule{
		algos.Single([]algos.Op{{RecvFrom: algos.NoPeer, SendTo: 1, Src: algos.Input, Count: count}}),
		algos.Single([]algos.Op{{RecvFrom: 0, SendTo: algos.NoPeer, Dst: algos.Output, Count: count}}),
	}
}

func TestOneFlowOneLink(t *testing.T) {
	// 1 MB over a 0.1 GB/s uplink with 50 µs latency: 50000 + 1e6/0.1 ns,
	// whether it goes as one slice or is pipelined in many.
	for _, step := range []int{1 << 20, 1 << 14} {
		p := &timed.Params{Topo: algos.FlatTopo(2), Geometry: pipe, StepPayload: step, ElemSize: 4,
			Inter: timed.Class{Alpha: 50000}, Uplink: 0.1}
		res := run(t, p, oneWay(250000))
		if want := 50000 + 1e6/0.1; !near(res.Time, want) {
			t.Errorf("step %d: time %.1f ns, want %.1f", step, res.Time, want)
		}
		if res.Bottleneck != "uplink of host 0" || !near(res.Busy, 1e7/(1e7+50000)) {
			t.Errorf("step %d: bottleneck %q at %.4f, want the uplink of host 0 at %.4f", step, res.Bottleneck, res.Busy, 1e7/(1e7+50000))
		}
	}
}

func TestTokenBucket(t *testing.T) {
	// A 0.1 GB/s uplink with a 90 kB bucket spent at up to 1 GB/s, 50 µs
	// latency, free CPU; rank 0 starts 900 µs late, so that its link,
	// idle until then, has a full bucket whatever the call before left.
	// A full bucket runs dry after B/(P-R) ns, having moved P times that;
	// the rest goes at R: S bytes take (S-B)/R in all when S > B P/(P-R)
	// (100 kB here), else S/P. One slice or many, the same.
	const late = 9e5
	for _, step := range []int{1 << 20, 1 << 14} {
		for _, tc := range []struct{ bytes, want float64 }{
			{1e6, late + 50000 + (1e6-9e4)/0.1},
			{5e4, late + 50000 + 5e4/1},
			{1e5, late + 50000 + 1e5/1}, // runs dry on the last byte
		} {
			p := &timed.Params{Topo: algos.FlatTopo(2), Geometry: pipe, StepPayload: step, ElemSize: 4, LateStart: []float64{late, 0},
				Inter: timed.Class{Alpha: 50000}, Uplink: 0.1, Bucket: &timed.Bucket{Size: 9e4, Peak: 1}}
			if res := run(t, p, oneWay(int64(tc.bytes/4))); !near(res.Time, tc.want) {
				t.Errorf("step %d, %.0f bytes: %.1f ns, want %.1f", step, tc.bytes, res.Time, tc.want)
			}
		}
	}
	// Calls back to back: rank 0 sends 1 MB, rank 1 answers 4 bytes, rank
	// 0 sends 1 MB again; 100 µs latency, a 100 kB bucket. The call
	// starts with what the one before left: host 0's link idled for the
	// last latency, 0.1 x 1e5 = 1e4 bytes, so the first 1 MB drains at
	// (1e6-1e4)/0.1. The answer leaves host 1 at its peak (its bucket
	// filled while it waited), 4 ns; host 0's link, dry, refilled for the
	// 200004 ns until the second 1 MB, which the second spends at 1 GB/s.
	twice := []algos.Schedule{
		algos.Single([]algos.Op{
			{RecvFrom: algos.NoPeer, SendTo: 1, Src: algos.Input, Count: 250000},
			{RecvFrom: 1, SendTo: algos.NoPeer, Dst: algos.Output, Count: 1},
			{RecvFrom: algos.NoPeer, SendTo: 1, Src: algos.Input, Count: 250000},
		}),
		algos.Single([]algos.Op{
			{RecvFrom: 0, SendTo: algos.NoPeer, Dst: algos.Output, Count: 250000},
			{RecvFrom: algos.NoPeer, SendTo: 0, Src: algos.Input, Count: 1},
			{RecvFrom: 0, SendTo: algos.NoPeer, Dst: algos.Output, Count: 250000},
		}),
	}
	p := &timed.Params{Topo: algos.FlatTopo(2), Geometry: pipe, StepPayload: 1 << 22, ElemSize: 4,
		Inter: timed.Class{Alpha: 100000}, Uplink: 0.1, Bucket: &timed.Bucket{Size: 1e5, Peak: 1}}
	drained := (1e6 - 0.1*100000) / 0.1
	second := drained + 100000 + 4 + 100000 // its first arrives, the answer leaves and arrives
	want := second + (1e6-0.1*(second-drained))/0.1 + 100000
	if res := run(t, p, twice); !near(res.Time, want) {
		t.Errorf("two transfers 200 µs apart: %.1f ns, want %.1f", res.Time, want)
	}
	// With a leaf/spine fabric too (its resources come after the host
	// links'): the same one-way transfer across leaves, the spine links
	// without buckets (2 hosts per leaf at 0.1 GB/s, no oversubscription:
	// 0.2 GB/s each), so the host's bucket still sets the time.
	leaves := &timed.Params{Topo: algos.FlatTopo(4), Geometry: pipe, StepPayload: 1 << 20, ElemSize: 4, LateStart: []float64{late, 0, 0, 0},
		Inter: timed.Class{Alpha: 50000}, Uplink: 0.1, Fabric: &timed.LeafSpine{HostsPerLeaf: 2, Oversub: 1}, Bucket: &timed.Bucket{Size: 9e4, Peak: 1}}
	across := make([]algos.Schedule, 4)
	across[0] = algos.Single([]algos.Op{{RecvFrom: algos.NoPeer, SendTo: 3, Src: algos.Input, Count: 250000}})
	across[3] = algos.Single([]algos.Op{{RecvFrom: 0, SendTo: algos.NoPeer, Dst: algos.Output, Count: 250000}})
	// At 1 GB/s the bucket's burst is capped by the leaf's 0.2 GB/s spine link:
	// 9e4 tokens drain at 0.2-0.1 GB/s, over 9e5 ns moving 1.8e5 bytes; the
	// rest at 0.1.
	if res := run(t, leaves, across); !near(res.Time, late+50000+9e5+(1e6-1.8e5)/0.1) {
		t.Errorf("across leaves: %.1f ns, want %.1f", res.Time, late+50000+9e5+(1e6-1.8e5)/0.1)
	}
	// A rate and no host link, or a peak not above the rate: refused.
	for _, bad := range []*timed.Params{
		{Topo: algos.FlatTopo(2), Geometry: pipe, StepPayload: 4096, ElemSize: 4, Bucket: &timed.Bucket{Size: 1e5, Peak: 1}},
		{Topo: algos.FlatTopo(2), Geometry: pipe, StepPayload: 4096, ElemSize: 4, Uplink: 0.1, Bucket: &timed.Bucket{Size: 1e5, Peak: 0.1}},
		{Topo: algos.FlatTopo(2), Geometry: pipe, StepPayload: 4096, ElemSize: 4, Uplink: 0.1, Bucket: &timed.Bucket{Size: 0, Peak: 1}},
	} {
		if _, err := timed.Run(bad, [][]algos.Schedule{oneWay(8)}); err == nil || !strings.Contains(err.Error(), "token bucket") {
			t.Errorf("bucket %+v, uplink %g: error %v, want the token bucket refused", *bad.Bucket, bad.Uplink, err)
		}
	}
}

func TestSocketStreamsWhatTheStageProduces(t *testing.T) {
	// One slice of 1 MB between hosts, CPU at 0.25 GB/s and the link at
	// 0.1 GB/s: the socket carries the bytes as the sender's stage makes
	// them (cut-through), so the slice arrives at the later of the two,
	// 1e7 ns, plus alpha, not after their sum; with the CPU the slower,
	// at its end.
	for _, tc := range []struct{ beta, up, want float64 }{
		{0.25, 0.1, 50000 + 1e7},
		{0.05, 0.1, 50000 + 2e7},
	} {
		p := &timed.Params{Topo: algos.FlatTopo(2), Geometry: pipe, StepPayload: 1 << 20, ElemSize: 4,
			Inter: timed.Class{Alpha: 50000, Beta: tc.beta}, Uplink: tc.up}
		if res := run(t, p, oneWay(250000)); !near(res.Time, tc.want) {
			t.Errorf("beta %g, link %g: time %.1f ns, want %.1f", tc.beta, tc.up, res.Time, tc.want)
		}
	}
}

func TestTwoFlowsShareMaxMin(t *testing.T) {
	// Ranks 0 and 1 send 1 MB each to rank 2 through its 0.1 GB/s
	// downlink: each gets half, both arrive at 2e6/0.1 ns.
	incast := []algos.Schedule{
		algos.Single([]algos.Op{{RecvFrom: algos.NoPeer, SendTo: 2, Src: algos.Input, Count: 250000}}),
		algos.Single([]algos.Op{{RecvFrom: algos.NoPeer, SendTo: 2, Src: algos.Input, Count: 250000}}),
		{Lanes: []algos.Lane{
			{Ops: []algos.Op{{RecvFrom: 0, SendTo: algos.NoPeer, Dst: algos.Output, Count: 250000}}},
			{Ops: []algos.Op{{RecvFrom: 1, SendTo: algos.NoPeer, Dst: algos.Output, DstOff: 250000, Count: 250000}}},
		}},
	}
	p := &timed.Params{Topo: algos.FlatTopo(3), Geometry: pipe, StepPayload: 1 << 22, ElemSize: 4, Downlink: 0.1}
	if res := run(t, p, incast); !near(res.Time, 2e6/0.1) {
		t.Errorf("two flows on one downlink: %.1f ns, want %.1f", res.Time, 2e6/0.1)
	}
	// Max-min, not equal shares: rank 0's flow capped at 0.02 GB/s by a
	// slow link leaves 0.08 to rank 1's, which ends at 1e6/0.08; then
	// rank 0's runs alone at its cap: 1e6 - 0.02*12.5e6 = 0.75e6 bytes
	// left at 0.02 GB/s.
	p.SlowLinks = []timed.SlowLink{{A: 0, B: 2, Factor: 5}}
	want := 1e6/0.08 + (1e6-0.02*(1e6/0.08))/0.02
	if res := run(t, p, incast); !near(res.Time, want) {
		t.Errorf("a capped flow beside a free one: %.1f ns, want %.1f", res.Time, want)
	}
}

func TestCreditWindow(t *testing.T) {
	// Free CPU and links, 10 µs each way: a connection has 8 slots, so
	// slices 1-8 go at 0 and arrive at 10 µs, their credits are back at
	// 20 µs, slices 9-16 arrive at 30 µs: 8 slices per round trip.
	for _, tc := range []struct {
		slices int64
		want   float64
	}{{8, 10000}, {16, 30000}, {17, 50000}, {24, 50000}} {
		p := &timed.Params{Topo: algos.FlatTopo(2), Geometry: pipe, StepPayload: 4096, ElemSize: 4,
			Inter: timed.Class{Alpha: 10000}}
		res := run(t, p, oneWay(tc.slices*1024))
		if !near(res.Time, tc.want) {
			t.Errorf("%d slices: %.0f ns, want %.0f", tc.slices, res.Time, tc.want)
		}
	}
}

// ringAllReduce is the ring's schedules with one chunk, one slice per Op.
func ringAllReduce(n int, count int64) []algos.Schedule { return ringChunked(n, count, count) }

// ringChunked is the ring's schedules in chunks of chunk elements.
func ringChunked(n int, count, chunk int64) []algos.Schedule {
	row := algos.Lookup(algos.Ring, algos.AllReduce)
	topo := algos.FlatTopo(n)
	out := make([]algos.Schedule, n)
	for r := range n {
		out[r] = row.Gen(&algos.Args{Rank: r, Topo: topo, Count: count, Part: algos.Part{Count: count, Chunk: chunk}, ElemSize: 4})
	}
	return out
}

func TestRingOfFour(t *testing.T) {
	// 4 ranks, 4096 elements: Ops of 1024 elements (4096 bytes), one
	// slice each. 6 of the 7 Ops send, each stage 4096/2 = 2048 ns, each
	// hop 1000 ns: 6 x (2048 + 1000) after the call's 5000 ns.
	p := &timed.Params{Topo: algos.FlatTopo(4), Geometry: pipe, StepPayload: 1 << 20, ElemSize: 4,
		Inter: timed.Class{Alpha: 1000, Beta: 2}, Start: 5000}
	res := run(t, p, ringAllReduce(4, 4096))
	if want := 5000 + 6*(2048+1000.0); !near(res.Time, want) {
		t.Errorf("ring of 4: %.1f ns, want %.1f", res.Time, want)
	}
}

func TestSlowHostPacesTheRing(t *testing.T) {
	// Host 0 at half speed: its stages take 2t, and the ring waits for
	// it at every step: rank 0's sixth sending Op ends at 12t, twice the
	// 6t of the even ring (t = 4096 bytes / 2 GB/s; no latency).
	const tt = 2048.0
	p := &timed.Params{Topo: algos.FlatTopo(4), Geometry: pipe, StepPayload: 1 << 20, ElemSize: 4,
		Inter: timed.Class{Beta: 2}}
	if res := run(t, p, ringAllReduce(4, 4096)); !near(res.Time, 6*tt) {
		t.Errorf("even ring: %.1f ns, want %.1f", res.Time, 6*tt)
	}
	p.SlowHost = []float64{2, 1, 1, 1}
	if res := run(t, p, ringAllReduce(4, 4096)); !near(res.Time, 12*tt) {
		t.Errorf("slow host 0: %.1f ns, want %.1f", res.Time, 12*tt)
	}
}

func TestSharedCores(t *testing.T) {
	// 4 ranks on one machine of 2 cores: each stage runs at half speed.
	p := &timed.Params{Topo: algos.FlatTopo(4), Geometry: pipe, StepPayload: 1 << 20, ElemSize: 4,
		Inter: timed.Class{Beta: 2}, SharedCores: 2}
	res := run(t, p, ringAllReduce(4, 4096))
	if want := 12 * 2048.0; !near(res.Time, want) {
		t.Errorf("4 ranks on 2 cores: %.1f ns, want %.1f", res.Time, want)
	}
	if res.Bottleneck != "the 2 shared cores" || res.Busy < 0.99 {
		t.Errorf("bottleneck %q at %.3f, want the 2 shared cores at 1", res.Bottleneck, res.Busy)
	}
}

func TestHopCPU(t *testing.T) {
	// A hop of 1000 ns, 600 of them CPU (Alpha 400, CPU 600), bytes free:
	// on a core per rank it is latency, 6 hops of the ring of 4 in a row.
	p := &timed.Params{Topo: algos.FlatTopo(4), Geometry: pipe, StepPayload: 1 << 20, ElemSize: 4,
		Inter: timed.Class{Alpha: 400, CPU: 600}, Start: 5000}
	if res := run(t, p, ringAllReduce(4, 4096)); !near(res.Time, 5000+6*1000) {
		t.Errorf("a core per rank: %.1f ns, want %.1f", res.Time, 5000+6*1000.0)
	}
	// 4 ranks on 2 cores: the 4 hops of a step share them, 2 x 600 each,
	// so a step takes alpha + CPU x (ranks/cores - 1), what
	// tune.FitCPU assumes.
	p.SharedCores = 2
	if res := run(t, p, ringAllReduce(4, 4096)); !near(res.Time, 5000+6*(1000+600)) {
		t.Errorf("4 ranks on 2 cores: %.1f ns, want %.1f", res.Time, 5000+6*1600.0)
	}
	// 8 on 2: three times the CPU beyond the hop, 14 steps.
	p.Topo, p.SharedCores = algos.FlatTopo(8), 2
	if res := run(t, p, ringAllReduce(8, 8192)); !near(res.Time, 5000+14*(1000+3*600)) {
		t.Errorf("8 ranks on 2 cores: %.1f ns, want %.1f", res.Time, 5000+14*(1000+3*600.0))
	}
	// Many slices per Op pay it once, in the first: the other three
	// follow it one Alpha behind and the 6 hops take what one slice's do
	// (CPU per slice would be 4 x 600 per hop).
	p.Topo, p.SharedCores, p.StepPayload = algos.FlatTopo(4), 0, 1024
	if res := run(t, p, ringAllReduce(4, 4096)); !near(res.Time, 5000+6*1000) {
		t.Errorf("4 slices per Op: %.1f ns, want %.1f", res.Time, 5000+6*1000.0)
	}
}

func TestTwoRankRingClosedForm(t *testing.T) {
	// With one slice per Op the replay is the closed form exactly:
	// start + 2 alpha + bytes/beta.
	const start, alpha, beta = 65100.0, 36500.0, 1.39
	p := &timed.Params{Topo: algos.FlatTopo(2), Geometry: pipe, StepPayload: 1 << 22, ElemSize: 4,
		Inter: timed.Class{Alpha: alpha, Beta: beta}, Start: start}
	const count = 1 << 18
	closed := start + 2*alpha + count*4/beta
	if res := run(t, p, ringAllReduce(2, count)); !near(res.Time, closed) {
		t.Errorf("one slice per Op: %.1f ns, closed form %.1f", res.Time, closed)
	}
	// Simple's two slices per Op (one 4 MiB chunk) hide one hop's
	// latency behind the other slice: never slower than the closed form,
	// never below start + bytes/beta.
	p.Geometry = algos.Geometry{ChunkSteps: 4, SliceSteps: 2}
	res := run(t, p, ringChunked(2, count, 1<<20))
	if res.Time >= closed || res.Time < start+count*4/beta {
		t.Errorf("two slices per Op: %.1f ns, want within [%.1f, %.1f)", res.Time, start+count*4/beta, closed)
	}
	// Small chunks cost the two hops per loop (a lane runs its loops in
	// order): 32 loops of 4096 elements take 32 x 2 alpha at least.
	p.Geometry, p.StepPayload = pipe, 1<<14
	if res := run(t, p, ringChunked(2, count, 1<<12)); res.Time < start+32*2*alpha+count*4/beta {
		t.Errorf("32 loops: %.1f ns, want at least %.1f", res.Time, start+32*2*alpha+count*4/beta)
	}
}

func TestLateStart(t *testing.T) {
	p := &timed.Params{Topo: algos.FlatTopo(4), Geometry: pipe, StepPayload: 1 << 20, ElemSize: 4,
		Inter: timed.Class{Beta: 2}, LateStart: []float64{0, 0, 7000, 0}}
	if res := run(t, p, ringAllReduce(4, 4096)); !near(res.Time, 7000+6*2048) {
		t.Errorf("rank 2 late by 7 µs: %.1f ns, want %.1f", res.Time, 7000+6*2048.0)
	}
}

func TestDeterministic(t *testing.T) {
	p := &timed.Params{Topo: algos.BlockTopo(4, 2), Geometry: algos.Geometry{ChunkSteps: 4, SliceSteps: 2}, StepPayload: 1 << 16, ElemSize: 4,
		Intra: timed.Class{Alpha: 600, Beta: 3.68}, Inter: timed.Class{Alpha: 36500, Beta: 1.39}, Uplink: 0.125, Downlink: 0.125, Cores: 2}
	a := run(t, p, ringChunked(8, 1<<20, 1<<16))
	b := run(t, p, ringChunked(8, 1<<20, 1<<16))
	if a.Time != b.Time || a.Events != b.Events || a.Bottleneck != b.Bottleneck {
		t.Errorf("two runs differ: %+v, %+v", a, b)
	}
}

func TestRejects(t *testing.T) {
	p := &timed.Params{Topo: algos.FlatTopo(2), Geometry: pipe, StepPayload: 1 << 20, ElemSize: 4}
	deaf := []algos.Schedule{oneWay(10)[0], algos.Single(nil)}
	if _, err := timed.Run(p, [][]algos.Schedule{deaf}); err == nil || !strings.Contains(err.Error(), "never receives") {
		t.Errorf("a send nobody receives: %v", err)
	}
	// Both ranks first receive from each other: a deadlock.
	stuck := []algos.Schedule{
		algos.Single([]algos.Op{{RecvFrom: 1, SendTo: algos.NoPeer, Dst: algos.Output, Count: 4}, {RecvFrom: algos.NoPeer, SendTo: 1, Src: algos.Input, Count: 4}}),
		algos.Single([]algos.Op{{RecvFrom: 0, SendTo: algos.NoPeer, Dst: algos.Output, Count: 4}, {RecvFrom: algos.NoPeer, SendTo: 0, Src: algos.Input, Count: 4}}),
	}
	if _, err := timed.Run(p, [][]algos.Schedule{stuck}); err == nil || !strings.Contains(err.Error(), "deadlock") {
		t.Errorf("two ranks receiving first: %v", err)
	}
	mc := []algos.Schedule{algos.Single([]algos.Op{{RecvFrom: algos.NoPeer, SendTo: algos.McastPeer(2, 0), Src: algos.Input, Count: 4}}), algos.Single(nil)}
	if _, err := timed.Run(p, [][]algos.Schedule{mc}); err == nil || !strings.Contains(err.Error(), "not modelled") && !strings.Contains(err.Error(), "only ranks") {
		t.Errorf("a multicast send: %v", err)
	}
}
