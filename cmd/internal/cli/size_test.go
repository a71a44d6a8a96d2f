package cli

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"8", 8},
		{"0", 0},
		{"1K", 1024},
		{"1k", 1024},
		{"0.5M", 512 << 10},
		{"1G", 1 << 30},
		{"1g", 1 << 30},
		{"32M", 32 << 20},
		{"256M", 256 << 20},
		{"0.3K", 307}, // truncated like nccl-tests' (size_t) cast
		{" 2 K ", 2048},
		{"1GB", 1 << 30},
		{"1GiB", 1 << 30},
		{"1e3", 1000},
		{".5K", 512},
		{"5.", 5},
		{"1024G", 1 << 40},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, nil", tt.in, got, err, tt.want)
		}
	}
}

func TestParseSizeErrors(t *testing.T) {
	for _, in := range []string{"", "1X", "K", "-5", "+5", "1KK", "1T", "0x10", "nan", "inf", "1..2", "1e", "1e+", "2 G B x", "1Kfoo", "8B", "1e30G"} {
		got, err := ParseSize(in)
		if err == nil {
			t.Errorf("ParseSize(%q) = %d, nil; want an error", in, got)
			continue
		}
		if !strings.Contains(err.Error(), strconvQuote(in)) {
			t.Errorf("ParseSize(%q) error %q does not name the value", in, err)
		}
	}
}

func strconvQuote(s string) string { return `"` + s + `"` }

func TestSizeFlagValue(t *testing.T) {
	var z Size
	if err := z.Set("0.5M"); err != nil {
		t.Fatal(err)
	}
	if got, want := z.String(), "524288"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if err := z.Set("1X"); err == nil {
		t.Error("Set(1X) = nil, want error")
	}
	if got, want := int64(z), int64(524288); got != want {
		t.Errorf("a failed Set changed the value to %d, want %d", got, want)
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"8", "1K", "0.5M", "1G", "1X", "", "1e3", " 2 k", "1GiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseSize(s)
		if err != nil {
			return
		}
		if v < 0 || v > MaxSize {
			t.Fatalf("ParseSize(%q) = %d, outside [0, %d]", s, v, MaxSize)
		}
	})
}
