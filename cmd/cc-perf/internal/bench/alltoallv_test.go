package bench

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/seed-760dd1f1/cc/runtime/fuzzcheck"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// TestDistanceWeighted restates nccl-tests' generated matrix: to distance d,
// (1-spread) x total/n + spread x d x total/(n(n-1)/2), aligned down to 16.
func TestDistanceWeighted(t *testing.T) {
	tests := []struct {
		spread float64
		total  int64
		n      int
		want   []int64
	}{
		{1, 1920, 4, []int64{0, 320, 640, 960}},
		{0, 1920, 4, []int64{480, 480, 480, 480}},
		{0.5, 1920, 4, []int64{240, 400, 560, 720}},
		{1, 1000, 4, []int64{0, 160, 320, 496}}, // 166.7, 333.3, 500 aligned down
		{1, 1000, 1, []int64{992}},
		{1, 0, 3, []int64{0, 0, 0}},
	}
	for _, tt := range tests {
		got := Traffic{Spread: tt.spread}.distanceWeighted(tt.total, tt.n)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("spread %v, %d bytes over %d ranks (-want +got):\n%s", tt.spread, tt.total, tt.n, diff)
		}
	}
}

func TestParseMatrix(t *testing.T) {
	m, err := ParseMatrix("m.txt", []byte("100  200  150\n\n 50\t100 75 \r\n300 150 200"), 1)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int64{{96, 192, 144}, {48, 96, 64}, {288, 144, 192}}
	if diff := cmp.Diff(want, m.Bytes); diff != "" || m.Dim() != 3 || m.Name != "m.txt" {
		t.Errorf("ParseMatrix: dim %d name %q, bytes (-want +got):\n%s", m.Dim(), m.Name, diff)
	}
	if m, err := ParseMatrix("m.txt", []byte("1e3 16.9\n0x1p5 2048\n"), 2.5); err != nil || fmt.Sprint(m.Bytes) != "[[2496 32] [80 5120]]" {
		t.Errorf("scaled: %v, %v; want [[2496 32] [80 5120]]", m, err)
	}

	for _, tt := range []struct {
		data  string
		scale float64
		want  string
	}{
		{"", 1, "m.txt: no values: want a square matrix"},
		{"\n \n", 1, "m.txt: no values"},
		{"1 2\n3 4 5\n", 1, "m.txt:2: a row of 3, want 2 values as on line 1"},
		{"\n1 2 3\n4 5 6\n", 1, "m.txt: 2 rows of 3 values: want a square matrix"},
		{"1 2\n3 x\n", 1, `m.txt:2: column 2: "x" is not a number of bytes (want a number >= 0)`},
		{"1 -2\n3 4\n", 1, `m.txt:1: column 2: "-2" is not a number of bytes`},
		{"1 nan\n3 4\n", 1, `"nan" is not a number of bytes`},
		{"1 inf\n3 4\n", 1, `"inf" is not a number of bytes`},
		{"1 2\n3 0x10\n", 1, `"0x10" is not a number of bytes`},
		{"1 2\n3 1e300\n", 1, "m.txt:2: column 2: 1e300 bytes x scale 1 = 1e+300 bytes: want at most 1125899906842624"},
		{"1", -1, "m.txt: scale -1: want a finite number >= 0"},
	} {
		m, err := ParseMatrix("m.txt", []byte(tt.data), tt.scale)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseMatrix(%q, scale %v) = %v, %v; want one line containing %q", tt.data, tt.scale, m, err, tt.want)
		}
	}
}

// FuzzParseMatrix: the parser never panics or fails with more than one
// line naming the file, what it accepts is a square matrix of non-negative
// multiples of 16, and that matrix written out reads back as itself.
func FuzzParseMatrix(f *testing.F) {
	for _, s := range []string{"100 200\n50 100\n", "1", "", "1 2\n3", "1e3 -1\n2 2", "0x1p4 1\n1 1\n", "nan"} {
		f.Add(s, 1.0)
	}
	f.Add("16 32\n48 64", 0.5)
	f.Fuzz(func(t *testing.T, data string, scale float64) {
		m, err := ParseMatrix("f", []byte(data), scale)
		if err != nil {
			fuzzcheck.OneLine(t, err)
			if !strings.HasPrefix(err.Error(), "f:") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		// Written out, the scaled matrix reads back as itself at scale 1.
		var text strings.Builder
		for _, row := range m.Bytes {
			for j, v := range row {
				if j > 0 {
					text.WriteByte(' ')
				}
				text.WriteString(strconv.FormatInt(v, 10))
			}
			text.WriteByte('\n')
		}
		if back, err := ParseMatrix("g", []byte(text.String()), 1); err != nil || !reflect.DeepEqual(back.Bytes, m.Bytes) {
			t.Fatalf("%q x %v: the matrix written out reads back as %v, %v", data, scale, back, err)
		}
		for _, row := range m.Bytes {
			if len(row) != m.Dim() {
				t.Fatalf("%q: row of %d in a %d-row matrix", data, len(row), m.Dim())
			}
			for _, v := range row {
				if v < 0 || v%16 != 0 || v > maxMatrixBytes {
					t.Fatalf("%q x %v: value %d", data, scale, v)
				}
			}
		}
	})
}

// matrix3 is a 3-rank matrix with empty pairs, traffic to self and uneven
// totals: rank 1 sends 640 bytes, rank 2 receives 672.
func matrix3() *Matrix {
	return &Matrix{Name: "m.txt", Scale: 1, Bytes: [][]int64{
		{0, 96, 160},
		{320, 64, 256},
		{16, 0, 256},
	}}
}

func TestTrafficCheck(t *testing.T) {
	tr := Traffic{Matrix: matrix3()}
	if got := tr.Need(3); got != 672 {
		t.Errorf("Need(3) = %d, want 672 (rank 2 receives 160+256+256)", got)
	}
	if got := tr.Need(2); got != 384 {
		t.Errorf("Need(2) = %d, want 384 (rank 1 sends 320+64)", got)
	}
	if err := tr.Check(3, 672); err != nil {
		t.Errorf("Check(3, 672) = %v", err)
	}
	for _, tt := range []struct {
		n        int
		maxBytes int64
		want     string
	}{
		{4, 1 << 20, "the traffic matrix of m.txt is 3x3, smaller than the 4 ranks"},
		{3, 671, "the traffic matrix of m.txt moves 672 bytes on one rank, more than the 671 bytes of the buffers"},
	} {
		if err := tr.Check(tt.n, tt.maxBytes); err == nil || err.Error() != tt.want {
			t.Errorf("Check(%d, %d) = %v, want %q", tt.n, tt.maxBytes, err, tt.want)
		}
	}
	if err := DefaultTraffic.Check(64, 0); err != nil || DefaultTraffic.Need(64) != 0 {
		t.Errorf("the generated matrix: Check = %v, Need = %d; want nil, 0", err, DefaultTraffic.Need(64))
	}
}

// TestRunAllToAllVMatrix runs a matrix file's traffic on 3 ranks of the
// fake with every data type: every out-of-place half right, the in-place
// half unchecked, the row's size the most bytes a rank moves, count 0, and
// every rank's volumes.
func TestRunAllToAllVMatrix(t *testing.T) {
	c, _ := Lookup("alltoallv")
	o := smallOptions(c)
	o.Traffic = &Traffic{Matrix: matrix3()}
	o.MinBytes, o.MaxBytes, o.Unalign = 1024, 1024, 1
	rec, sum, err := runFake(t, 3, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.rows) != len(reduce.DataTypes()) || sum.OutOfBounds != 0 {
		t.Fatalf("%d rows, %d out of bounds; want one per type, 0", len(rec.rows), sum.OutOfBounds)
	}
	for _, r := range rec.rows {
		if r.Bytes != 672 || r.Count != 0 || r.RedOp != "none" || r.Root != -1 {
			t.Errorf("%s: size %d count %d op %q root %d; want 672 0 none -1", r.Type, r.Bytes, r.Count, r.RedOp, r.Root)
		}
		if !r.OutOfPlace.Checked || r.OutOfPlace.Wrong != 0 || r.InPlace.Checked {
			t.Errorf("%s: out of place checked %v wrong %d, in place checked %v", r.Type, r.OutOfPlace.Checked, r.OutOfPlace.Wrong, r.InPlace.Checked)
		}
		v := r.Volumes
		if v == nil || fmt.Sprint(v.Send, v.Recv) != "[256 640 272] [336 160 672]" || v.Matrix != o.Traffic.Matrix {
			t.Errorf("%s: volumes %+v, want send [256 640 272] recv [336 160 672]", r.Type, v)
		}
		if alg := r.OutOfPlace.TimeUS * r.OutOfPlace.AlgBW * 1e3; alg < 671.9 || alg > 672.1 {
			t.Errorf("%s: algbw x time = %v bytes, want the size, 672", r.Type, alg)
		}
	}
}

// TestRunAllToAllVSpread: the generated matrix with spread 0 and 0.3 on 4
// ranks, and a corrupted element caught out of place.
func TestRunAllToAllVSpread(t *testing.T) {
	c, _ := Lookup("alltoallv")
	for _, spread := range []float64{0, 0.3} {
		o := smallOptions(c)
		o.Traffic = &Traffic{Spread: spread}
		o.Types = []reduce.DataType{reduce.Int8, reduce.Float64}
		rec, sum, err := runFake(t, 4, o, nil)
		if err != nil || sum.OutOfBounds != 0 || len(rec.rows) != 2*4 {
			t.Fatalf("spread %v: %d rows, %d out of bounds, %v", spread, len(rec.rows), sum.OutOfBounds, err)
		}
		last := rec.rows[len(rec.rows)-1] // 1000 bytes of double: count 125/4 aligned to 30, each rank spreads 960
		if v := last.Volumes; last.Count != 30 || v.TotalBytes != 960 || v.Spread != spread || v.Send[3] != last.Bytes {
			t.Errorf("spread %v: count %d size %d volumes %+v", spread, last.Count, last.Bytes, v)
		}
	}

	o := smallOptions(c)
	o.Types, o.MinBytes, o.MaxBytes = []reduce.DataType{reduce.Float32}, 256, 256
	rec, sum, err := runFake(t, 2, o, func(j *fakeJob) {
		j.corrupt = func(rank, call int, out []byte) {
			if rank == 0 && len(out) >= 64 {
				out[len(out)-1] ^= 0x40
			}
		}
	})
	if err != nil || len(rec.rows) != 1 || rec.rows[0].OutOfPlace.Wrong == 0 || sum.OutOfBounds != 1 {
		t.Errorf("corrupted: rows %+v, out of bounds %d, %v; want wrong elements out of place, 1 out of bounds", rec.rows, sum.OutOfBounds, err)
	}
}

// TestRunAllToAllVTooSmall: a matrix larger than the buffers, or smaller
// than the job, stops Run before any call.
func TestRunAllToAllVTooSmall(t *testing.T) {
	c, _ := Lookup("alltoallv")
	o := smallOptions(c)
	o.Traffic = &Traffic{Matrix: matrix3()}
	o.MinBytes, o.MaxBytes = 512, 512
	if _, _, err := runFake(t, 3, o, nil); err == nil || !strings.Contains(err.Error(), "moves 672 bytes") {
		t.Errorf("-e 512: %v, want the matrix's 672 bytes", err)
	}
	o.MinBytes, o.MaxBytes = 1024, 1024
	if _, _, err := runFake(t, 4, o, nil); err == nil || !strings.Contains(err.Error(), "3x3, smaller than the 4 ranks") {
		t.Errorf("4 ranks: %v, want the matrix too small", err)
	}
}
