package report

import (
	"math"
	"testing"
)

// The wanted strings below are what glibc printf prints for the same format
// and value (checked with printf(1)).
func TestFloatStr(t *testing.T) {
	tests := []struct {
		v     float64
		width int
		want  string
	}{
		{10.123, 7, "  10.12"},
		{0, 6, "  0.00"},
		{9999.994, 7, "9999.99"},
		{12345.6, 7, "12345.6"},
		{99999.96, 7, " 100000"},
		{1234567.8, 7, "1234568"},
		{12345678.9, 7, "1.2e+07"},
		{261.99, 6, "261.99"},
		{1234.56, 6, "1234.6"},
		{123456.7, 6, "123457"},
		{1234567.1, 6, " 1e+06"},
		{0.004, 6, "  0.00"},
		{math.NaN(), 7, "    nan"},
		{math.Inf(1), 6, "   inf"},
	}
	for _, tt := range tests {
		if got := floatStr(tt.v, tt.width); got != tt.want {
			t.Errorf("floatStr(%v, %d) = %q, want %q", tt.v, tt.width, got, tt.want)
		}
	}
}

func TestCG(t *testing.T) {
	tests := []struct {
		v     float64
		width int
		want  string
	}{
		{0, 6, "     0"},
		{12, 6, "    12"},
		{1234567, 6, "1.23457e+06"},
		{273.886, 0, "273.886"},
		{0.515158, 0, "0.515158"},
		{1e6, 0, "1e+06"},
		{100, 0, "100"},
		{0.0001, 0, "0.0001"},
		{1e-5, 0, "1e-05"},
		{math.NaN(), 0, "nan"},
		{math.Copysign(math.NaN(), -1), 0, "-nan"},
	}
	for _, tt := range tests {
		if got := cg(tt.v, tt.width); got != tt.want {
			t.Errorf("cg(%v, %d) = %q, want %q", tt.v, tt.width, got, tt.want)
		}
	}
}

func TestLegacyTimeStr(t *testing.T) {
	for _, tt := range []struct {
		us   float64
		want string
	}{{23456.7, "  23457"}, {512.34, "  512.3"}, {10.126, "  10.13"}, {99.999, " 100.00"}} {
		if got := legacyTimeStr(tt.us); got != tt.want {
			t.Errorf("legacyTimeStr(%v) = %q, want %q", tt.us, got, tt.want)
		}
	}
}
