// Package fuzzcheck holds the checks the fuzz targets of the wire decoders
// share, beyond "does not panic":
//
//   - an error a stranger's bytes cause is one line (it goes to a log or to
//     the user as one line, and must not let the sender forge more);
//   - a decoder asks for memory only as its bytes arrive: a length field
//     that claims a megabyte, followed by four bytes, must not cost a
//     megabyte.
//
// The second is measured without a clock or the allocator's statistics: a
// Reader records the largest buffer a decoder hands to Read. A decoder that
// allocates a claimed length before the bytes exist reads into that buffer,
// so its size shows; one that grows with what arrives asks for little more
// than it has been given.
//
//	r := fuzzcheck.NewReader(input)
//	msg, err := decode(r)
//	r.Bounded(t, 64<<10) // no read of more than 64 KiB beyond twice what arrived
//	fuzzcheck.OneLine(t, err)
package fuzzcheck

import (
	"io"
	"strings"
	"testing"
)

// OneLine fails t if err's text spans lines or is empty. A nil err passes.
func OneLine(t testing.TB, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if msg := err.Error(); msg == "" || strings.ContainsAny(msg, "\n\r") {
		t.Fatalf("error is not one line: %q", msg)
	}
}

// Reader serves a fixed input and records the largest buffer it was asked
// to fill and how many bytes it delivered. With Chunk > 0 it delivers at
// most Chunk bytes a call, as a socket may.
type Reader struct {
	b         []byte
	Chunk     int
	delivered int
	largest   int
}

// NewReader returns a Reader of b.
func NewReader(b []byte) *Reader { return &Reader{b: b} }

// Read implements io.Reader.
func (r *Reader) Read(p []byte) (int, error) {
	r.largest = max(r.largest, len(p))
	if len(r.b) == 0 {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := len(p)
	if r.Chunk > 0 {
		n = min(n, r.Chunk)
	}
	n = copy(p[:n], r.b)
	r.b = r.b[n:]
	r.delivered += n
	return n, nil
}

// Delivered is the number of bytes read so far.
func (r *Reader) Delivered() int { return r.delivered }

// Largest is the largest buffer Read was given.
func (r *Reader) Largest() int { return r.largest }

// Bounded fails t if some Read was given a buffer larger than eager bytes
// plus twice what had been delivered in all (a buffer that doubles as
// bytes arrive stays under that).
func (r *Reader) Bounded(t testing.TB, eager int) {
	t.Helper()
	if limit := eager + 2*r.delivered; r.largest > limit {
		t.Fatalf("a read into a buffer of %d bytes when %d bytes had arrived (at most %d + 2x%d expected): memory claimed before the bytes exist",
			r.largest, r.delivered, eager, r.delivered)
	}
}
