package algos

// SliceElems is NCCL's slice size for an Op of nelem elements
// (prims_simple.h): at least 1/slicePerChunk of the Op, rounded up to 16
// elements, and at least 1/32 of a full slice; never more than a full slice.
// g is the row's geometry for the protocol, stepPayload the payload bytes of
// one FIFO slot and esize the bytes of one element.
//
// It is the one definition of slicing: the engine (runtime/engine) cuts
// every Op with it and the timed simulator replays the same cuts, so that
// the two cannot drift apart. Example, Simple ring (4 chunk steps, 2 slice
// steps) with 512 KiB slots of float32: a full slice is 262144 elements; an
// Op of 300000 elements gets slices of divUp(300000, 32)*16 = 150000.
func SliceElems(g Geometry, stepPayload int, nelem int64, esize int) int64 {
	stepElems := int64(stepPayload / esize)
	full := stepElems * int64(g.SliceSteps)
	slicePerChunk := int64(g.ChunkSteps / g.SliceSteps)
	s := (nelem + 16*slicePerChunk - 1) / (16 * slicePerChunk) * 16
	if m := full / 32; s < m {
		s = m
	}
	if s > full {
		s = full
	}
	if s < 1 {
		s = 1
	}
	return s
}

// NumSlices is the number of slices SliceElems cuts an Op of nelem elements
// into (0 for an empty Op).
func NumSlices(g Geometry, stepPayload int, nelem int64, esize int) int64 {
	if nelem <= 0 {
		return 0
	}
	s := SliceElems(g, stepPayload, nelem, esize)
	return (nelem + s - 1) / s
}
