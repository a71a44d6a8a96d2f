package bench

import (
	"errors"
	"fmt"
)

// alltoallv is nccl-tests v2.19.6's alltoallv_perf (src/alltoallv.cu): every
// rank sends each peer its own number of bytes, one group of a Send and a
// Recv per peer that has data, each peer's part packed right after the
// previous peer's in the send and the receive buffer. Who sends whom how
// much is the traffic matrix, bytes(i, j) from rank i to rank j, aligned
// down to 16 bytes:
//
//   - generated (the default): the swept size gives the per-peer count
//     (count/n, aligned as for alltoall), so each rank spreads total = count
//     x n x elt bytes over its peers by distance d = (j - i + n) mod n:
//     bytes = (1-spread) x total/n + spread x d x total/(n(n-1)/2). With 4
//     ranks and 1920 bytes, spread 1 gives distances 0 1 2 3 the bytes 0 320
//     640 960; spread 0 gives 480 each. Every rank sends and receives the
//     same total.
//   - a matrix file (NCCL_TESTS_ALLTOALLV_MATRIX_FILE): the bytes are the
//     file's, whatever the swept size (nccl-tests wants -b = -e then); the
//     count column prints 0.
//
// A row's size is the most bytes any rank sends or receives, and algbw is
// that over the time; busbw is algbw x (n-1)/n. The in-place half sends from
// a copy of the receive buffer (see stageInPlace) and is not checked, as
// nccl-tests does not check it.

// Traffic is alltoallv's traffic matrix.
type Traffic struct {
	// Spread is the generated matrix's distance weighting
	// (NCCL_TESTS_ALLTOALLV_SPREAD), 0 (every peer the same) to 1 (peers in
	// proportion to their distance).
	Spread float64
	// Matrix, when set, is the matrix instead of the generated one.
	Matrix *Matrix
}

// DefaultTraffic is nccl-tests' default matrix: generated, spread 1.
var DefaultTraffic = Traffic{Spread: 1}

// Matrix is a traffic matrix read from a file (ParseMatrix).
type Matrix struct {
	Name  string    // the file, for messages
	Scale float64   // the factor applied to every value (NCCL_TESTS_ALLTOALLV_MATRIX_SCALE)
	Bytes [][]int64 // Bytes[i][j]: rank i to rank j, scaled, aligned down to 16; square
}

// Dim is the number of rows (and columns) of m.
func (m *Matrix) Dim() int { return len(m.Bytes) }

// Counts is nccl-tests' AlltoAllvGetCollByteCount for the sweep's count of
// elt-byte elements over n ranks: Param is the per-peer count (0 for a
// matrix file), Send and Recv the most elements any rank sends and
// receives. The in-place offsets are 0.
func (t Traffic) Counts(count, elt int64, n int) Counts {
	param := int64(0)
	if t.Matrix == nil {
		param = perRank(count, elt, int64(n))
	}
	send, recv := t.totals(param, elt, n)
	var c Counts
	c.Param = param
	for r := range n {
		c.Send, c.Recv = max(c.Send, send[r]/elt), max(c.Recv, recv[r]/elt)
	}
	return c
}

// peerBytes returns bytes(i, j) for a call whose per-peer count is param
// elements of elt bytes over n ranks.
func (t Traffic) peerBytes(param, elt int64, n int) func(i, j int) int64 {
	if m := t.Matrix; m != nil {
		return func(i, j int) int64 { return m.Bytes[i][j] }
	}
	byDistance := t.distanceWeighted(param*int64(n)*elt, n)
	return func(i, j int) int64 { return byDistance[(j-i+n)%n] }
}

// distanceWeighted is the generated matrix's bytes to a peer at each
// distance (nccl-tests' AlltoAllvGetPeerBytesDistanceWeighted, same
// floating-point steps), when each rank spreads total bytes.
func (t Traffic) distanceWeighted(total int64, n int) []int64 {
	out := make([]int64, n)
	if n == 1 {
		out[0] = total &^ 15
		return out
	}
	sumDistances := float64(int64(n) * int64(n-1) / 2)
	uniform := float64(total) / float64(n)
	for d := range out {
		dist := float64(d) * float64(total) / sumDistances
		out[d] = int64((1-t.Spread)*uniform+t.Spread*dist) &^ 15
	}
	return out
}

// totals is the bytes every rank sends and receives. Every value of the
// matrix is a multiple of 16, so dividing a total by elt counts elements
// exactly.
func (t Traffic) totals(param, elt int64, n int) (send, recv []int64) {
	send, recv = make([]int64, n), make([]int64, n)
	bytes := t.peerBytes(param, elt, n)
	if t.Matrix == nil { // every rank the same: one row suffices
		for j := range n {
			send[0] += bytes(0, j)
		}
		for r := range n {
			send[r], recv[r] = send[0], send[0]
		}
		return send, recv
	}
	for i := range n {
		for j := range n {
			send[i] += bytes(i, j)
			recv[j] += bytes(i, j)
		}
	}
	return send, recv
}

// Check returns an error when t cannot run on n ranks with buffers of
// maxBytes: a matrix smaller than n x n, or a rank sending or receiving
// more than maxBytes (Need). The generated matrix always fits.
func (t Traffic) Check(n int, maxBytes int64) error {
	m := t.Matrix
	if m == nil {
		return nil
	}
	if m.Dim() < n {
		return fmt.Errorf("the traffic matrix of %s is %dx%d, smaller than the %d ranks", m.Name, m.Dim(), m.Dim(), n)
	}
	if need := t.Need(n); need > maxBytes {
		return fmt.Errorf("the traffic matrix of %s moves %d bytes on one rank, more than the %d bytes of the buffers", m.Name, need, maxBytes)
	}
	return nil
}

// Need is the buffer size a matrix needs on n ranks: the most bytes any
// rank sends or receives (0 for the generated matrix, which fits any size).
func (t Traffic) Need(n int) int64 {
	if t.Matrix == nil {
		return 0
	}
	send, recv := t.totals(0, 1, n)
	var need int64
	for r := range n {
		need = max(need, send[r], recv[r])
	}
	return need
}

// Volumes is what every rank of an alltoallv row sends and receives, as
// NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY reports it.
type Volumes struct {
	Matrix     *Matrix // nil: generated
	Spread     float64 // generated: Traffic.Spread
	TotalBytes int64   // generated: the bytes each rank spreads, count x n x elt
	Send, Recv []int64 // bytes, per rank
}

// volumes is the Volumes of a row with per-peer count param.
func (t Traffic) volumes(param, elt int64, n int) *Volumes {
	v := &Volumes{Matrix: t.Matrix, Spread: t.Spread}
	if t.Matrix == nil {
		v.TotalBytes = param * int64(n) * elt
	}
	v.Send, v.Recv = t.totals(param, elt, n)
	return v
}

// vplan is one rank's part of an alltoallv call, in elements: what it sends
// each peer and receives from each, and where, in each peer's send buffer,
// the part it receives starts (the peer's bytes to the ranks before it).
type vplan struct {
	send, recv, srcOffset []int64
}

func (t Traffic) plan(param, elt int64, n, me int) vplan {
	bytes := t.peerBytes(param, elt, n)
	p := vplan{send: make([]int64, n), recv: make([]int64, n), srcOffset: make([]int64, n)}
	for peer := range n {
		p.send[peer] = bytes(me, peer) / elt
		p.recv[peer] = bytes(peer, me) / elt
		for k := range me {
			p.srcOffset[peer] += bytes(peer, k) / elt
		}
	}
	return p
}

// traffic is o's alltoallv matrix.
func (o *Options) traffic() Traffic {
	if o.Traffic == nil {
		return DefaultTraffic
	}
	return *o.Traffic
}

// allToAllV is nccl-tests' AlltoAllvRunColl: one group of a Send and a
// Recv per peer that has data, each peer's part right after the previous
// one's.
func (k *rank) allToAllV(send, recv []byte) error {
	elt := k.elt
	var err error
	var sent, received int64
	k.c.GroupStart()
	for peer := range k.n {
		if c := k.vplan.send[peer]; c > 0 {
			err = errors.Join(err, k.c.Send(send[sent*elt:(sent+c)*elt], int(c), k.dt, peer))
			sent += c
		}
		if c := k.vplan.recv[peer]; c > 0 {
			err = errors.Join(err, k.c.Recv(recv[received*elt:(received+c)*elt], int(c), k.dt, peer))
			received += c
		}
	}
	return errors.Join(err, k.c.GroupEnd())
}

// expectAllToAllV writes into exp what this rank receives: every source's
// part of its own input, in source order, then zeros up to the end of exp
// (the receive buffer is as long as the largest any rank receives).
func (k *rank) expectAllToAllV(g *Gen, exp []byte) {
	clear(exp)
	var off int64
	for src, c := range k.vplan.recv {
		g.Fill(exp[off*k.elt:(off+c)*k.elt], src, k.vplan.srcOffset[src])
		off += c
	}
}
