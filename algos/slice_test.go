package algos

import "testing"

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
