package protocols

import "testing"

func TestProtoTable(t *testing.T) {
	tests := []struct {
		p                        Proto
		name                     string
		buff, line, linePay, grn int
		stepPayload              int // Payload(DefaultBuffSize()/8)
	}{
		{Simple, "Simple", 4194304, 1, 1, 512, 524288},
		{LL, "LL", 524288, 16, 8, 16, 32768},
		{LL128, "LL128", 4915200, 128, 120, 1920, 576000},
	}
	for _, tt := range tests {
		if got := tt.p.String(); got != tt.name {
			t.Errorf("String() = %q, want %q", got, tt.name)
		}
		if got := tt.p.DefaultBuffSize(); got != tt.buff {
			t.Errorf("%v.DefaultBuffSize() = %d, want %d", tt.p, got, tt.buff)
		}
		if got := tt.p.LineBytes(); got != tt.line {
			t.Errorf("%v.LineBytes() = %d, want %d", tt.p, got, tt.line)
		}
		if got := tt.p.LinePayload(); got != tt.linePay {
			t.Errorf("%v.LinePayload() = %d, want %d", tt.p, got, tt.linePay)
		}
		if got := tt.p.Grain(); got != tt.grn {
			t.Errorf("%v.Grain() = %d, want %d", tt.p, got, tt.grn)
		}
		if got := tt.p.Payload(tt.buff / 8); got != tt.stepPayload {
			t.Errorf("%v.Payload(%d) = %d, want %d", tt.p, tt.buff/8, got, tt.stepPayload)
		}
		if !tt.p.Valid() {
			t.Errorf("%v.Valid() = false", tt.p)
		}
	}
	if p := Proto(3); p.Valid() || p.String() != "Proto(3)" || p.Payload(4096) != 0 || p.DefaultBuffSize() != 0 || p.Grain() != 0 {
		t.Errorf("Proto(3): valid %v, name %q, payload %d, buff %d, grain %d; want false, Proto(3), 0, 0, 0",
			p.Valid(), p.String(), p.Payload(4096), p.DefaultBuffSize(), p.Grain())
	}
}

func TestPayloadWholeLines(t *testing.T) {
	tests := []struct {
		p         Proto
		stepBytes int
		want      int
	}{
		{Simple, 1, 1},
		{Simple, 0, 0},
		{Simple, -5, 0},
		{LL, 15, 0},
		{LL, 16, 8},
		{LL, 31, 8},
		{LL, 100, 48},
		{LL128, 127, 0},
		{LL128, 128, 120},
		{LL128, 1000, 7 * 120},
	}
	for _, tt := range tests {
		if got := tt.p.Payload(tt.stepBytes); got != tt.want {
			t.Errorf("%v.Payload(%d) = %d, want %d", tt.p, tt.stepBytes, got, tt.want)
		}
	}
}

func TestLines(t *testing.T) {
	tests := []struct {
		p    Proto
		n    int
		want int
	}{
		{LL, 0, 0}, {LL, 1, 1}, {LL, 8, 1}, {LL, 9, 2},
		{LL128, 0, 0}, {LL128, 1, 1}, {LL128, 120, 1}, {LL128, 121, 2}, {LL128, 240, 2},
		{Simple, 7, 7},
	}
	for _, tt := range tests {
		if got := tt.p.Lines(tt.n); got != tt.want {
			t.Errorf("%v.Lines(%d) = %d, want %d", tt.p, tt.n, got, tt.want)
		}
	}
}
