package report

import (
	"fmt"
	"strings"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
)

// VolumeLines is nccl-tests' NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY block of an
// alltoallv row (alltoallv.cu, AlltoAllvPrintRankBandwidths), once per half,
// out of place first: what the matrix was, the half's time, then every
// rank's bytes and bandwidth (algbw = the larger of its send and receive
// bytes over the time, busbw = algbw x (n-1)/n). nccl-tests prints the block
// inside the row, between its columns; here it follows the row, so that the
// row stays whole on one line. "" for a row without volumes.
func VolumeLines(r bench.Result) string {
	v := r.Volumes
	if v == nil {
		return ""
	}
	n := len(v.Send)
	var b strings.Builder
	for _, h := range []bench.Half{r.OutOfPlace, r.InPlace} {
		sec := h.TimeUS / 1e6
		if m := v.Matrix; m != nil {
			fmt.Fprintf(&b, "# NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY: mode=matrix nranks=%d matrix_dim=%d scale=%.3f time_usec=%.2f\n",
				n, m.Dim(), m.Scale, h.TimeUS)
		} else {
			fmt.Fprintf(&b, "# NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY: mode=generated nranks=%d total_bytes=%d spread=%.3f time_usec=%.2f\n",
				n, v.TotalBytes, v.Spread, h.TimeUS)
		}
		for rank := range n {
			alg := float64(max(v.Send[rank], v.Recv[rank])) / 1e9 / sec
			bus := alg * float64(n-1) / float64(n)
			fmt.Fprintf(&b, "#   rank=%d send_bytes=%d recv_bytes=%d alg_bw=%.2f bus_bw=%.2f\n",
				rank, v.Send[rank], v.Recv[rank], alg, bus)
		}
	}
	return b.String()
}
