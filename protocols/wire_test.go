package protocols

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

func TestWireBytes(t *testing.T) {
	tests := []struct {
		p    Proto
		n    int
		want int
	}{
		{LL, 0, 0}, {LL, 1, 16}, {LL, 8, 16}, {LL, 9, 32}, {LL, 20, 48},
		{LL128, 0, 0}, {LL128, 1, 128}, {LL128, 120, 128}, {LL128, 121, 256},
		{Simple, 0, 0}, {Simple, 7, 7},
	}
	for _, tt := range tests {
		if got := WireBytes(tt.p, tt.n); got != tt.want {
			t.Errorf("WireBytes(%v, %d) = %d, want %d", tt.p, tt.n, got, tt.want)
		}
	}
}

// TestWireCatchesWrongFlags: a line whose flag is not the step's is an
// error naming the line.
func TestWireCatchesWrongFlags(t *testing.T) {
	src := randomBytes(3, 300)
	for _, tt := range []struct {
		p         Proto
		stale     string // DecodeWire's error with flag 6 for lines of flag 5
		corrupted string // ... after the last line's flag is corrupted
	}{
		{LL, "LL line 0 has flags 5/5, want 6", "LL line 37 has flags 5/2147483653, want 5"},
		{LL128, "LL128 line 0 has flag 5, want 6", "LL128 line 2 has flag 9223372036854775813, want 5"},
	} {
		wire := make([]byte, WireBytes(tt.p, len(src)))
		EncodeWire(tt.p, wire, src, 5)
		dst := make([]byte, len(src))
		if err := DecodeWire(tt.p, dst, wire, len(src), 5); err != nil || !bytes.Equal(dst, src) {
			t.Fatalf("%v: round trip: %v, equal %v", tt.p, err, bytes.Equal(dst, src))
		}
		if err := DecodeWire(tt.p, dst, wire, len(src), 6); err == nil || err.Error() != tt.stale {
			t.Errorf("%v: decode with a stale flag = %v, want %q", tt.p, err, tt.stale)
		}
		wire[len(wire)-1] ^= 0x80 // the last line's flag (LL: flag2's top byte)
		if err := DecodeWire(tt.p, dst, wire, len(src), 5); err == nil || err.Error() != tt.corrupted {
			t.Errorf("%v: decode with a corrupted flag = %v, want %q", tt.p, err, tt.corrupted)
		}
	}
}

// FuzzWireMatchesWords checks the stream form against the word form of the
// same line format: EncodeWire writes the little-endian image of the words
// LLEncode and LL128Encode store, each form decodes the other's lines, and
// both round-trip the payload.
func FuzzWireMatchesWords(f *testing.F) {
	f.Add([]byte{}, uint64(1))
	f.Add([]byte{1, 2, 3}, uint64(7))
	f.Add(randomBytes(1, 121), uint64(1<<32+5))
	f.Add(randomBytes(2, 1000), uint64(1<<64-1))
	f.Fuzz(func(t *testing.T, src []byte, flag uint64) {
		n := len(src)
		for _, p := range []Proto{LL, LL128, Simple} {
			wire := make([]byte, WireBytes(p, n))
			EncodeWire(p, wire, src, flag)
			dst := make([]byte, n)
			if err := DecodeWire(p, dst, wire, n, flag); err != nil || !bytes.Equal(dst, src) {
				t.Fatalf("%v, %d bytes: stream round trip: %v, equal %v", p, n, err, bytes.Equal(dst, src))
			}
			if p == Simple {
				if !bytes.Equal(wire, src) {
					t.Fatalf("Simple, %d bytes: stream form is not the payload", n)
				}
				continue
			}
			if n > 0 && DecodeWire(p, dst, wire, n, flag+1) == nil {
				t.Fatalf("%v, %d bytes: decode with flag %d accepted lines of flag %d", p, n, flag+1, flag)
			}

			// The word form of the same payload has the same image.
			words := make([]uint64, len(wire)/8)
			if p == LL {
				LLEncode(words, src, uint32(flag))
			} else {
				LL128Encode(words, src, flag)
			}
			if img := leImage(words); !bytes.Equal(img, wire) {
				t.Fatalf("%v, %d bytes, flag %#x: stream form\n%x\nwant the image of the words\n%x", p, n, flag, wire, img)
			}

			// The word decoder reads lines the stream encoder wrote.
			for i := range words {
				words[i] = binary.LittleEndian.Uint64(wire[8*i:])
			}
			clear(dst)
			var got int
			if p == LL {
				got = LLDecode(dst, words, uint32(flag))
			} else {
				got = LL128Decode(dst, words, flag)
			}
			if got != n || !bytes.Equal(dst, src) {
				t.Fatalf("%v, %d bytes: word decode of the stream form = %d bytes, equal %v", p, n, got, bytes.Equal(dst, src))
			}
		}
	})
}

// leImage is the little-endian byte image of words.
func leImage(words []uint64) []byte {
	b := make([]byte, 8*len(words))
	for i, w := range words {
		binary.LittleEndian.PutUint64(b[8*i:], w)
	}
	return b
}

// randomBytes is n reproducible bytes from seed.
func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 0))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}
