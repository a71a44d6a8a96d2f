package tcp

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/fuzzcheck"
)

// fuzzStepBytes is the FIFO slot of the fuzzed receiver: small, so that
// the fuzzer reaches full slices.
const fuzzStepBytes = 64

// sentStream is what a real SendConn writes for slices of the given
// sizes, in steps (sizes[i] bytes in nsteps[i] slots), over one socket.
func sentStream(tb testing.TB, sizes, nsteps []int) []byte {
	tb.Helper()
	a, b := net.Pipe()
	got := make(chan []byte, 1)
	go func() {
		all, _ := io.ReadAll(b)
		got <- all
	}()
	s := newSendConn([]net.Conn{a}, fuzzStepBytes, "fuzz seed", nil)
	for i, n := range sizes {
		buf, err := s.Acquire(nsteps[i])
		if err != nil {
			tb.Fatal(err)
		}
		for j := range n {
			buf[j] = byte(i*31 + j)
		}
		if err := s.Post(n); err != nil {
			tb.Fatal(err)
		}
	}
	if err := s.Flush(); err != nil {
		tb.Fatal(err)
	}
	s.Close()
	return <-got
}

// FuzzRecvFrames feeds a receiver one socket's bytes, consuming each frame
// as the engine would. No header panics it or makes it wait for ever (a
// frame that can never fit its FIFO is an error); every accepted frame's
// payload is the bytes that followed its header, landed in the slots the
// header names, and its header re-encodes to the bytes read; errors are
// one line; the receiver reads no more than a frame's slots ahead of the
// bytes.
func FuzzRecvFrames(f *testing.F) {
	f.Add(sentStream(f, []int{10, 0, 100, 256, 512}, []int{1, 1, 2, 4, 8}))
	f.Add(sentStream(f, []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}))
	f.Add(sentStream(f, []int{3, 64, 7, 128}, []int{1, 1, 2, 2}))
	var h [headerSize]byte
	putHeader(&h, 64, 3, 6, 0) // a slice that would wrap the FIFO's end
	f.Add(h[:])
	putHeader(&h, 8, 1, 1<<40, 0) // a step the FIFO can never reach
	f.Add(append(h[:], make([]byte, 8)...))
	putHeader(&h, 1<<31, 8, 0, 0) // more bytes than the slots hold
	f.Add(h[:])
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		c := &RecvConn{proto: protocols.Simple, r: newRing(fuzzStepBytes), peer: "fuzz"}
		rd := fuzzcheck.NewReader(stream)
		rd.Chunk = 5
		var hdr [headerSize]byte
		pad := make([]byte, frameAlign)
		for want := uint64(0); ; want++ {
			if _, err := io.ReadFull(rd, hdr[:]); err != nil {
				return
			}
			from := rd.Delivered()
			err := c.readPayload(hdr[:], want, rd, pad)
			rd.Bounded(t, protocols.NSteps*fuzzStepBytes)
			if err != nil {
				fuzzcheck.OneLine(t, err)
				return
			}
			e := c.r.ent[want%protocols.NSteps]
			var again [headerSize]byte
			putHeader(&again, e.size, e.nsteps, e.step, e.seq)
			if !e.valid || !e.done || e.seq != want || again != hdr {
				t.Fatalf("frame %d: header %x accepted as %+v, which encodes as %x", want, hdr, e, again)
			}
			if got, sent := c.r.slot(e.step, e.nsteps)[:e.size], stream[from:from+e.size]; !bytes.Equal(got, sent) {
				t.Fatalf("frame %d: payload %x landed as %x", want, sent, got)
			}
			c.release()
		}
	})
}

// TestSentStreamAccepted: every frame a real sender writes is accepted, so
// the fuzzer's seeds reach past the header checks.
func TestSentStreamAccepted(t *testing.T) {
	sizes, nsteps := []int{10, 0, 100, 256, 512, 1, 64}, []int{1, 1, 2, 4, 8, 1, 1}
	stream := sentStream(t, sizes, nsteps)
	c := &RecvConn{proto: protocols.Simple, r: newRing(fuzzStepBytes), peer: "fuzz"}
	rd := bytes.NewReader(stream)
	var hdr [headerSize]byte
	pad := make([]byte, frameAlign)
	for i := range sizes {
		if _, err := io.ReadFull(rd, hdr[:]); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if err := c.readPayload(hdr[:], uint64(i), rd, pad); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if e := c.r.ent[i%protocols.NSteps]; e.size != sizes[i] || e.nsteps != nsteps[i] {
			t.Errorf("frame %d: %d bytes in %d steps, want %d in %d", i, e.size, e.nsteps, sizes[i], nsteps[i])
		}
		c.release()
	}
	if n := rd.Len(); n != 0 {
		t.Errorf("%d bytes after the last frame", n)
	}
}

// TestBadHeaderFailsReceive: over a socket, a header that wraps the FIFO's
// end or can never fit it fails the connection with a protocol error,
// reported once, where the first panicked the rank and the second hung it.
func TestBadHeaderFailsReceive(t *testing.T) {
	for _, tc := range []struct {
		name         string
		size, nsteps int
		step         uint64
		dirty        bool // a byte of the header's unused part set
	}{
		{"wraps the FIFO's end", 3 * fuzzStepBytes, 3, 6, false},
		{"beyond the FIFO window", 1, 1, 9, false},
		{"overflows", 8, 8, 1<<64 - 8, false},
		{"unused header bytes", 8, 1, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := net.Pipe()
			reported := make(chan error, 2)
			r := newRecvConn(protocols.Simple, []net.Conn{b}, fuzzStepBytes, "peer", func(err error) { reported <- err }, 0, nil)
			defer r.Close()
			var stream []byte
			var h [headerSize]byte
			putHeader(&h, 1, 1, 0, 0)
			stream = append(append(stream, h[:]...), 'a')
			stream = append(stream, zeroPad[:padOf(1)]...)
			putHeader(&h, tc.size, tc.nsteps, tc.step, 1)
			if tc.dirty {
				h[headerUsed] = 0xff
			}
			stream = append(append(stream, h[:]...), make([]byte, tc.size+padOf(tc.size))...)
			go func() {
				a.Write(stream) // fails once the receiver has closed: it stopped reading
				a.Close()
			}()
			got, err := r.Wait(1, 1)
			if err != nil || string(got) != "a" {
				t.Fatalf("first frame: %q, %v", got, err)
			}
			r.Release()
			_, err = r.Wait(tc.nsteps, tc.size)
			if err == nil || !strings.Contains(err.Error(), "protocol error") {
				t.Fatalf("second frame: %v, want a protocol error", err)
			}
			if rep := <-reported; rep != err {
				t.Errorf("reported %v, Wait returned %v", rep, err)
			}
		})
	}
}

// TestFramesAligned: every sender writes frames whose header starts and
// whose payload starts at a multiple of 64 bytes of the stream, with zero
// padding after payloads of any size, over a socket (raw writev for LL and
// LL128) and over a pipe (plain writes); a receiver reads them back.
func TestFramesAligned(t *testing.T) {
	sizes := []int{1, 10, 0, 63, 64, 65, 100, 1000, 7}
	for _, p := range []protocols.Proto{protocols.Simple, protocols.LL, protocols.LL128} {
		for _, kind := range []string{"tcp", "pipe"} {
			t.Run(p.String()+"/"+kind, func(t *testing.T) {
				var a, b net.Conn
				if kind == "pipe" {
					a, b = net.Pipe()
				} else {
					l, err := net.Listen("tcp", "127.0.0.1:0")
					if err != nil {
						t.Fatal(err)
					}
					defer l.Close()
					if a, err = net.Dial("tcp", l.Addr().String()); err != nil {
						t.Fatal(err)
					}
					if b, err = l.Accept(); err != nil {
						t.Fatal(err)
					}
				}
				got := make(chan []byte, 1)
				go func() {
					all, _ := io.ReadAll(b)
					got <- all
				}()
				const stepBytes = 4096
				var s interface {
					Acquire(int) ([]byte, error)
					Post(int) error
					Close() error
				}
				if p == protocols.Simple {
					s = newSendConn([]net.Conn{a}, stepBytes, "peer", nil)
				} else {
					s = newEagerSendConn(p, []net.Conn{a}, stepBytes, "peer", nil)
				}
				for i, n := range sizes {
					buf, err := s.Acquire(1)
					if err != nil {
						t.Fatal(err)
					}
					for j := range n {
						buf[j] = byte(i + j + 1)
					}
					if err := s.Post(n); err != nil {
						t.Fatal(err)
					}
				}
				if ss, ok := s.(*SendConn); ok {
					if err := ss.Flush(); err != nil {
						t.Fatal(err)
					}
				}
				s.Close()
				stream := <-got
				off := 0
				for i, n := range sizes {
					if off%frameAlign != 0 || off+headerSize > len(stream) {
						t.Fatalf("frame %d at byte %d of %d", i, off, len(stream))
					}
					hdr := stream[off : off+headerSize]
					if size := int(binary.LittleEndian.Uint32(hdr)); size != n || !reservedZero(hdr) {
						t.Fatalf("frame %d: header %x, want size %d and zeros after byte %d", i, hdr, n, headerUsed)
					}
					pay := stream[off+headerSize:]
					for j := range n {
						if pay[j] != byte(i+j+1) {
							t.Fatalf("frame %d: payload byte %d is %d, want %d", i, j, pay[j], byte(i+j+1))
						}
					}
					end := off + headerSize + n + padOf(n)
					if end%frameAlign != 0 || end > len(stream) || !bytes.Equal(stream[off+headerSize+n:end], make([]byte, padOf(n))) {
						t.Fatalf("frame %d (%d bytes): padding to byte %d of %d is not %d zeros", i, n, end, len(stream), padOf(n))
					}
					off = end
				}
				if off != len(stream) {
					t.Errorf("%d bytes after the last frame", len(stream)-off)
				}
			})
		}
	}
}
