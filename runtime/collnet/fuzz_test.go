package collnet

import (
	"testing"

	"github.com/seed-760dd1f1/cc/runtime/fuzzcheck"
)

// FuzzAck: any answer a head reads decodes to a text that fits an ack, or
// to a one-line error; the text re-encodes to an ack that decodes to it.
func FuzzAck(f *testing.F) {
	for _, msg := range []string{"", "descriptor mismatch: host 1 (rank 3) has count 8, host 0 (rank 0) has 4"} {
		b := encodeAck(msg)
		f.Add(b[:])
	}
	f.Add([]byte("CCNA\x01\xff\xff"))
	f.Fuzz(func(t *testing.T, b []byte) {
		msg, err := decodeAck(b)
		if err != nil {
			fuzzcheck.OneLine(t, err)
			return
		}
		if len(msg) > maxAckText {
			t.Fatalf("ack text of %d bytes, at most %d fit", len(msg), maxAckText)
		}
		again := encodeAck(msg)
		if back, err := decodeAck(again[:]); err != nil || back != msg {
			t.Fatalf("ack text %q re-encodes to one that decodes to %q, %v", msg, back, err)
		}
	})
}
