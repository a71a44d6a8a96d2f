package algos_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
)

// TestTreeAllReduceLanes: the root has one lane per tree, every other rank
// two; PostOp only at the root; every Op of a lane shares one Fan; the
// row's Peers are exactly the tree links, both ways, on the tree's
// connection index.
func TestTreeAllReduceLanes(t *testing.T) {
	row := algos.Lookup(algos.Tree, algos.AllReduce)
	for _, topo := range []*algos.Topo{algos.FlatTopo(1), algos.FlatTopo(2), algos.FlatTopo(7), algos.BlockTopo(3, 4)} {
		part := algos.Part{Offset: 1, Count: 40, Chunk: 3}
		for r := range topo.NRanks {
			s := algos.TreeAllReduce(r, topo, part)
			if topo.NRanks == 1 {
				if len(s.Lanes) != 1 || len(s.Lanes[0].Ops) != 1 || s.Lanes[0].Ops[0].Name() != "copy" || !s.Lanes[0].Ops[0].PostOp {
					t.Errorf("one rank: %v, want one copy with postOp", s.Lanes)
				}
				if p := row.Peers(&algos.Args{Rank: r, Topo: topo}); p != nil {
					t.Errorf("one rank: peers %v, want none", p)
				}
				continue
			}
			nodes := algos.DoubleTree(topo, r)
			var wantLanes int
			var wantPeers []algos.Link
			for tr, nd := range nodes {
				wantLanes += 2
				if nd.Up == algos.NoPeer {
					wantLanes--
				} else {
					wantPeers = append(wantPeers, algos.Link{Peer: nd.Up, Conn: uint8(tr), Send: true}, algos.Link{Peer: nd.Up, Conn: uint8(tr)})
				}
				for _, c := range nd.Down {
					wantPeers = append(wantPeers, algos.Link{Peer: c, Conn: uint8(tr), Send: true}, algos.Link{Peer: c, Conn: uint8(tr)})
				}
			}
			if len(s.Lanes) != wantLanes {
				t.Errorf("hosts %v rank %d: %d lanes, want %d", topo.Hosts, r, len(s.Lanes), wantLanes)
			}
			for li, lane := range s.Lanes {
				for _, op := range lane.Ops {
					root := op.Name() == "recvReduceCopySend"
					if op.PostOp != root || op.Fan != lane.Ops[0].Fan {
						t.Errorf("hosts %v rank %d lane %d: op %v: want postOp only at the root, one Fan per lane", topo.Hosts, r, li, op)
					}
				}
			}
			got := row.Peers(&algos.Args{Rank: r, Topo: topo})
			sortLinks := func(ls []algos.Link) {
				slices.SortFunc(ls, func(a, b algos.Link) int { return strings.Compare(a.String(), b.String()) })
			}
			sortLinks(got)
			sortLinks(wantPeers)
			if diff := cmp.Diff(wantPeers, got); diff != "" {
				t.Errorf("hosts %v rank %d peers (-want +got):\n%s", topo.Hosts, r, diff)
			}
		}
	}
}

// TestTreeAllReduceStages names the primitives of the lanes of a rank that
// is a leaf of tree 0 and inner in tree 1 (rank 1 of 4: tree 0 is
// 0 → 2 → {1, 3}, tree 1 is 3 → 1 → {2, 0}) and of the root of tree 0.
func TestTreeAllReduceStages(t *testing.T) {
	topo := algos.FlatTopo(4)
	part := algos.Part{Count: 4, Chunk: 1}
	names := func(s algos.Schedule) [][]string {
		var out [][]string
		for _, l := range s.Lanes {
			var ns []string
			for _, op := range l.Ops {
				ns = append(ns, fmt.Sprintf("%s@%d", op.Name(), op.Conn))
			}
			out = append(out, ns)
		}
		return out
	}
	for _, tc := range []struct {
		rank int
		want [][]string
	}{
		{1, [][]string{
			{"send@0", "send@0"}, {"recv@0", "recv@0"},
			{"recvReduceSend@1", "recvReduceSend@1"}, {"recvCopySend@1", "recvCopySend@1"},
		}},
		{0, [][]string{
			{"recvReduceCopySend@0", "recvReduceCopySend@0"},
			{"send@1", "send@1"}, {"recv@1", "recv@1"},
		}},
	} {
		if diff := cmp.Diff(tc.want, names(algos.TreeAllReduce(tc.rank, topo, part))); diff != "" {
			t.Errorf("rank %d lanes (-want +got):\n%s", tc.rank, diff)
		}
	}
}

// TestTreeLL128Chunk is NCCL's Tree/LL128 shrink loop (calcCollChunking):
// nsteps = 1 + log2i(hosts) + ppn/10; halve the chunk while the bytes per
// NCCL channel give fewer than nsteps·64/ppn chunks and it is above 128 KiB,
// then while fewer than nsteps·16/ppn and above 32 KiB. Each of our
// channels runs both trees: 2 NCCL channels. The LL128 chunk starts at
// 576000 bytes (one 614400-byte step, 15 of every 16 words payload).
func TestTreeLL128Chunk(t *testing.T) {
	row := algos.Lookup(algos.Tree, algos.AllReduce)
	ll128 := protocols.LL128.Payload(protocols.LL128.DefaultBuffSize() / protocols.NSteps)
	uneven := algos.NewTopo([]int{0, 0, 1}) // 2 hosts, ppn 1.5
	for _, tc := range []struct {
		name      string
		topo      *algos.Topo
		proto     protocols.Proto
		bytes     int64
		channels  int
		elem      int
		align     int64
		want      int64
		rationale string
	}{
		{"2x1 1MiB", algos.FlatTopo(2), protocols.LL128, 1 << 20, 1, 1, 1, 18000, "nsteps 2.1: 0,1,3 < 134.4 then 7,14 < 33.6"},
		{"2x1 empty", algos.FlatTopo(2), protocols.LL128, 0, 1, 1, 1, 18000, "the floor of both loops"},
		{"4x1 1GiB", algos.FlatTopo(4), protocols.LL128, 1 << 30, 1, 1, 1, 576000, "932 chunks per channel >= 198.4"},
		{"4x1 200MB", algos.FlatTopo(4), protocols.LL128, 200_000_000, 1, 1, 1, 288000, "173 < 198.4, then 347"},
		{"4x1 198 chunks", algos.FlatTopo(4), protocols.LL128, 199*1152000 - 1, 1, 1, 1, 288000, "198 < 198.4"},
		{"4x1 199 chunks", algos.FlatTopo(4), protocols.LL128, 199 * 1152000, 1, 1, 1, 576000, "199 >= 198.4"},
		{"4x1 200MB 2 channels", algos.FlatTopo(4), protocols.LL128, 200_000_000, 2, 1, 1, 144000, "4 NCCL channels: 86, 173 < 198.4, then 347"},
		{"4x1 second loop", algos.FlatTopo(4), protocols.LL128, 4_000_000, 1, 1, 1, 36000, "down to 72000; 27 < 49.6, then 55"},
		{"2x4 64MiB", algos.BlockTopo(2, 4), protocols.LL128, 64 << 20, 1, 1, 1, 576000, "ppn 4: nsteps 2.4, 58 >= 38.4"},
		{"2x1 64MiB", algos.FlatTopo(2), protocols.LL128, 64 << 20, 1, 1, 1, 144000, "ppn 1: 58, 116 < 134.4, then 233"},
		{"3x1 log2i rounds down", algos.FlatTopo(3), protocols.LL128, 170 * 1152000, 1, 1, 1, 576000, "nsteps 2.1 (not 3.1): 170 >= 134.4"},
		{"ppn 1.5 91 chunks", uneven, protocols.LL128, 91 * 1152000, 1, 1, 1, 288000, "nsteps 2.15: 91 < 91.73"},
		{"ppn 1.5 92 chunks", uneven, protocols.LL128, 92 * 1152000, 1, 1, 1, 576000, "92 >= 91.73"},
		{"int32", algos.FlatTopo(2), protocols.LL128, 0, 1, 4, 4, 4500, "18000 bytes"},
		{"float64 align 2", algos.FlatTopo(2), protocols.LL128, 0, 1, 8, 2, 2250, "18000 bytes"},
		{"Simple", algos.FlatTopo(2), protocols.Simple, 0, 1, 4, 4, 131072, "one 512 KiB step, no shrink"},
		{"LL", algos.FlatTopo(2), protocols.LL, 0, 1, 4, 4, 8192, "half of a 64 KiB step, no shrink"},
	} {
		payload := ll128
		if tc.proto != protocols.LL128 {
			payload = tc.proto.Payload(tc.proto.DefaultBuffSize() / protocols.NSteps)
		}
		got := row.ChunkFor(&algos.ChunkArgs{Proto: tc.proto, Geometry: row.Geometry[tc.proto], StepPayload: payload,
			ElemSize: tc.elem, Align: tc.align, Bytes: tc.bytes, NChannels: tc.channels, Topo: tc.topo})
		if got != tc.want {
			t.Errorf("%s: chunk %d, want %d (%s)", tc.name, got, tc.want, tc.rationale)
		}
	}
}

func TestTreeTableRow(t *testing.T) {
	for c := range algos.NumColls {
		row := algos.Lookup(algos.Tree, algos.Coll(c))
		if (row != nil) != (algos.Coll(c) == algos.AllReduce) {
			t.Errorf("Lookup(Tree, %v) = %v: tree does AllReduce only", algos.Coll(c), row)
		}
	}
	row := algos.Lookup(algos.Tree, algos.AllReduce)
	for p := range protocols.NumProtos {
		if g := row.Geometry[p]; g != (algos.Geometry{ChunkSteps: 1, SliceSteps: 1}) || !row.Runs(protocols.Proto(p)) {
			t.Errorf("%v: geometry %+v, want one step per chunk and slice", protocols.Proto(p), g)
		}
	}
	if !row.WritesOutputOnce {
		t.Error("WritesOutputOnce is false; the tree writes every output element once")
	}
}

func TestTreePanicsOnBadArguments(t *testing.T) {
	good := algos.Part{Count: 4, Chunk: 2}
	topo := algos.FlatTopo(4)
	tests := []panicCase{
		{"topo", func() { algos.TreeAllReduce(0, nil, good) }, "tree all-reduce: no topology"},
		{"rank", func() { algos.TreeAllReduce(4, topo, good) }, "tree all-reduce: rank 4: must be in [0, 4)"},
		{"chunk", func() { algos.TreeAllReduce(0, topo, algos.Part{Count: 4}) }, "part chunk 0: must be at least 1"},
		{"count", func() { algos.TreeAllReduce(0, topo, algos.Part{Count: -1, Chunk: 1}) }, "part count -1: must be at least 0"},
		{"offset", func() { algos.TreeAllReduce(0, topo, algos.Part{Offset: -1, Chunk: 1}) }, "part offset -1: must be at least 0"},
		{"align", func() { algos.TreeAllReduce(0, topo, algos.Part{Chunk: 1, Align: -4}) }, "part align -4: must be at least 0"},
		{"overflow", func() { algos.TreeAllReduce(0, topo, algos.Part{Offset: 1 << 62, Count: 1 << 62, Chunk: 1}) }, "end overflows int64"},
	}
	checkPanics(t, tests)
}
