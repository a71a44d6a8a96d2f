package report

import (
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
)

// TestAllToAllVLine pins one alltoallv row against nccl-tests' formats
// worked by hand: 1 MiB of float over 4 ranks spread by distance gives
// ranks 174752, 349520 and 524288 bytes at distances 1-3 (1048576 x d/6,
// aligned down to 16), so the size is 1048560 and the count 65536; at
// 123.45 us algbw is 1048560 / 123.45e-6 = 8.49 GB/s and busbw x 3/4 = 6.37;
// the in-place half is N/A.
func TestAllToAllVLine(t *testing.T) {
	c, _ := bench.Lookup("alltoallv")
	cn := bench.DefaultTraffic.Counts(1<<20/4, 4, 4)
	r := bench.Result{Bytes: cn.Bytes(4), Count: cn.Param, Type: "float", RedOp: c.OpColumn("sum"), Root: -1}
	for _, h := range []struct {
		half *bench.Half
		us   float64
	}{{&r.OutOfPlace, 123.45}, {&r.InPlace, 130}} {
		h.half.TimeUS = h.us
		h.half.AlgBW, h.half.BusBW = c.Bandwidth(cn, 4, 4, h.us/1e6)
	}
	r.OutOfPlace.Checked = true
	const want = "     1048560         65536     float    none      -1   123.45    8.49    6.37       0   130.00    8.07    6.05    N/A\n"
	if got := Preamble(r) + Body(r, Format{}); got != want {
		t.Errorf("alltoallv row\n got %q\nwant %q", got, want)
	}
}

// TestVolumeLinesGolden pins NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY's lines
// after a generated and a matrix row.
func TestVolumeLinesGolden(t *testing.T) {
	c, _ := bench.Lookup("alltoallv")
	rs := rows(c, 4, "float", -1)[2:] // 1 MiB and 128 MiB
	rs[0].Volumes = &bench.Volumes{Spread: 1, TotalBytes: 1 << 20,
		Send: []int64{1048560, 1048560, 1048560, 1048560}, Recv: []int64{1048560, 1048560, 1048560, 1048560}}
	m := &bench.Matrix{Name: "m.txt", Scale: 0.5, Bytes: [][]int64{{0, 96, 160}, {320, 64, 256}, {16, 0, 256}}}
	rs[1].Volumes = &bench.Volumes{Matrix: m, Send: []int64{256, 640, 272}, Recv: []int64{336, 160, 672}}
	rs[1].Bytes, rs[1].Count = 672, 0
	for i, h := range []*bench.Half{&rs[1].OutOfPlace, &rs[1].InPlace} {
		h.TimeUS = 12.5 + float64(i)/2
		h.AlgBW, h.BusBW = c.Bandwidth(bench.Counts{Send: 168, Recv: 168}, 4, 3, h.TimeUS/1e6)
	}
	out := render(Format{AllToAllVSummary: true}, header("alltoallv_perf"), devices(4), rs, Footer{Program: "alltoallv_perf", AvgBusBW: avgBus(rs)})
	golden(t, "alltoallv_summary.txt", out)
	for _, want := range []string{
		"# NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY: mode=generated nranks=4 total_bytes=1048576 spread=1.000 time_usec=359.40\n",
		"# NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY: mode=matrix nranks=3 matrix_dim=3 scale=0.500 time_usec=12.50\n",
		"#   rank=2 send_bytes=272 recv_bytes=672 alg_bw=0.05 bus_bw=0.04\n", // 672 B / 12.5 us = 0.054 GB/s, x 2/3
		"#   rank=1 send_bytes=640 recv_bytes=160 alg_bw=0.05 bus_bw=0.03\n", // 640 B / 13 us = 0.049 GB/s, x 2/3
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no line %q", want)
		}
	}
	if plain := render(Format{}, header("alltoallv_perf"), devices(4), rs, Footer{}); strings.Contains(string(plain), "SUMMARY") {
		t.Error("summary lines without Format.AllToAllVSummary")
	}
}
