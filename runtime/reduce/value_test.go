package reduce

import (
	"math"
	"testing"
)

func TestEncodeDecode(t *testing.T) {
	for _, tc := range []struct {
		t    DataType
		in   float64
		want float64
	}{
		{Int8, -3, -3}, {Int8, 130, -126}, {Uint8, 255, 255}, {Int32, -7.9, -7},
		{Uint32, 4e9, 4e9}, {Int64, -1 << 40, -1 << 40}, {Uint64, 12345, 12345},
		{Float16, 1.0 / 3, 0.333251953125}, {Float16, 65520, math.Inf(1)}, {Float32, 0.1, float64(float32(0.1))},
		{Float64, 0.1, 0.1}, {Bfloat16, 1.0 / 3, 0.333984375}, {Float8e4m3, 1000, 448},
		{Float8e4m3, 3.5, 3.5}, {Float8e5m2, 7, 7}, {Float8e5m2, 1e6, math.Inf(1)},
	} {
		b := make([]byte, 8)
		Encode(tc.t, b, tc.in)
		if got := Decode(tc.t, b); got != tc.want {
			t.Errorf("%s: Decode(Encode(%v)) = %v, want %v", tc.t, tc.in, got, tc.want)
		}
	}
}

// TestEncodeSmallIntegersExact: every type holds the small integers the
// runtime's tests use, exactly.
func TestEncodeSmallIntegersExact(t *testing.T) {
	for _, dt := range DataTypes() {
		for v := -8.0; v <= 8; v++ {
			if v < 0 && (dt == Uint8 || dt == Uint32 || dt == Uint64) {
				continue
			}
			b := make([]byte, 8)
			Encode(dt, b, v)
			if got := Decode(dt, b); got != v {
				t.Errorf("%s: %v round-trips to %v", dt, v, got)
			}
		}
	}
}
