package algos

import (
	"testing"

	"github.com/seed-760dd1f1/cc/protocols"
)

func TestSliceElems(t *testing.T) {
	// 512 KiB slots of float32: 131072 elements a slot; ring Simple: 4
	// chunk steps, 2 slice steps (NCCL prims_simple.h arithmetic).
	ring := Geometry{ChunkSteps: 4, SliceSteps: 2}
	pipe := Geometry{ChunkSteps: 1, SliceSteps: 1}
	for _, tc := range []struct {
		g          Geometry
		nelem      int64
		want, nsli int64
	}{
		{ring, 524288, 262144, 2}, // a full chunk: two full slices
		{ring, 1000, 8192, 1},     // small: at least 1/32 of a full slice
		{ring, 300000, 150000, 2}, // divUp(300000, 32)*16
		{ring, 1 << 30, 262144, 4096},
		{pipe, 131072, 131072, 1},
		{pipe, 100, 4096, 1},
		{pipe, 0, 4096, 0},
	} {
		if got := SliceElems(tc.g, 512<<10, tc.nelem, 4); got != tc.want {
			t.Errorf("SliceElems(%+v, nelem %d) = %d, want %d", tc.g, tc.nelem, got, tc.want)
		}
		if got := NumSlices(tc.g, 512<<10, tc.nelem, 4); got != tc.nsli {
			t.Errorf("NumSlices(%+v, nelem %d) = %d, want %d", tc.g, tc.nelem, got, tc.nsli)
		}
	}
}

// TestFramedChunk: over frames (TCP) LL128's chunk halves while it is
// larger than a channel's share of one rank's block, down to
// FramedMinChunk; large calls, shared memory and the other protocols keep
// the step.
func TestFramedChunk(t *testing.T) {
	const step = 144000 // LL128's payload per step of protocols.LL128NetBuffSize
	for _, tc := range []struct {
		proto  protocols.Proto
		framed bool
		n, nch int
		bytes  int64
		want   int64 // bytes
	}{
		{protocols.LL128, true, 2, 1, 128 << 10, 36000}, // 64 KiB each: 2 frames, as LL's 32 KiB slots
		{protocols.LL128, true, 2, 1, 256 << 10, 72000}, // 128 KiB each: 2 frames
		{protocols.LL128, true, 2, 1, 1 << 20, step},    // 512 KiB each: 4 frames of a step
		{protocols.LL128, true, 2, 2, 512 << 10, 72000}, // per channel 128 KiB each
		{protocols.LL128, true, 8, 1, 1 << 20, 72000},   // 128 KiB each
		{protocols.LL128, true, 8, 1, 8 << 20, step},    // 1 MiB each
		{protocols.LL128, true, 2, 1, 8, 36000},         // never under FramedMinChunk
		{protocols.LL128, false, 2, 1, 128 << 10, step}, // shared memory: lines pipeline
		{protocols.LL, true, 2, 1, 128 << 10, step},     // only LL128 shrinks
		{protocols.Simple, true, 2, 1, 128 << 10, step},
	} {
		c := &ChunkArgs{Proto: tc.proto, Geometry: Geometry{ChunkSteps: 1, SliceSteps: 1}, StepPayload: step,
			ElemSize: 1, Align: 1, Bytes: tc.bytes, NChannels: tc.nch, Topo: FlatTopo(tc.n), Framed: tc.framed}
		if got := DefaultChunk(c); got != tc.want {
			t.Errorf("%s framed %v, %d ranks, %d channels, %d bytes: chunk %d bytes, want %d", tc.proto, tc.framed, tc.n, tc.nch, tc.bytes, got, tc.want)
		}
	}
}

// TestFramedLinks: LL128's chunks are cut for TCP frames only where ranks
// talk TCP and every rank of the machine has a core.
func TestFramedLinks(t *testing.T) {
	for _, tc := range []struct {
		tcp          bool
		ranks, cores int
		want         bool
	}{
		{true, 1, 2, true},
		{true, 2, 2, true},
		{true, 4, 2, false}, // 4 testbed hosts on 2 cores
		{false, 1, 8, false},
	} {
		if got := FramedLinks(tc.tcp, tc.ranks, tc.cores); got != tc.want {
			t.Errorf("FramedLinks(tcp %v, %d ranks, %d cores) = %v, want %v", tc.tcp, tc.ranks, tc.cores, got, tc.want)
		}
	}
}
