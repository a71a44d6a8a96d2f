package fuzzcheck

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// recorder is a testing.TB that records a failure instead of stopping the test.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Fatalf(string, ...any) { r.failed = true }

func TestOneLine(t *testing.T) {
	for _, tt := range []struct {
		err  error
		fail bool
	}{
		{nil, false}, {errors.New("one line"), false}, {errors.New("two\nlines"), true},
		{errors.New("carriage\rreturn"), true}, {errors.New(""), true},
	} {
		r := &recorder{TB: t}
		OneLine(r, tt.err)
		if r.failed != tt.fail {
			t.Errorf("OneLine(%q) failed = %v, want %v", tt.err, r.failed, tt.fail)
		}
	}
}

// TestBounded: a reader that allocates a claimed length up front fails the
// check; one that grows with the bytes passes.
func TestBounded(t *testing.T) {
	in := []byte("four")
	eager := NewReader(in)
	io.ReadFull(eager, make([]byte, 1<<20))
	r := &recorder{TB: t}
	eager.Bounded(r, 64<<10)
	if !r.failed || eager.Largest() != 1<<20 || eager.Delivered() != 4 {
		t.Errorf("a 1 MiB buffer for 4 bytes: failed %v, largest %d, delivered %d", r.failed, eager.Largest(), eager.Delivered())
	}

	grown := NewReader(bytes.Repeat(in, 1000))
	grown.Chunk = 7
	var b bytes.Buffer
	if n, err := io.CopyN(&b, grown, 1<<20); n != 4000 || err != io.EOF {
		t.Errorf("CopyN: %d bytes, %v; want 4000, EOF", n, err)
	}
	r = &recorder{TB: t}
	grown.Bounded(r, 512)
	if r.failed || !bytes.Equal(b.Bytes(), bytes.Repeat(in, 1000)) {
		t.Errorf("a growing buffer: failed %v (largest %d of %d delivered), read %d bytes", r.failed, grown.Largest(), grown.Delivered(), b.Len())
	}
}
