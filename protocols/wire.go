package protocols

import (
	"encoding/binary"
	"fmt"
)

// The stream form of the line formats: what a byte stream (the TCP
// transport) carries. A line travels as the little-endian image of its
// words, flags included, exactly the bytes the word form leaves in memory
// on a little-endian machine:
//
//	LL     16 bytes: data1 flag1 data2 flag2, 4 bytes each
//	LL128  128 bytes: 120 payload bytes, then the 8-byte flag
//	Simple the payload itself
//
// A stream is ordered, so the flags do not signal readiness there; the
// receiver checks them against the step to catch a peer that runs another
// protocol or step. The fuzz test FuzzWireMatchesWords keeps this form and
// the word form (LLEncode, LL128Encode) the same format.

// WireBytes is the size of n payload bytes of protocol p in the stream
// form: whole lines, flags included. For example WireBytes(LL, 20) = 3
// lines x 16 = 48, WireBytes(LL128, 121) = 2 lines x 128 = 256, and
// WireBytes(Simple, n) = n.
func WireBytes(p Proto, n int) int { return p.Lines(n) * p.LineBytes() }

// EncodeWire writes payload src into wire as lines of protocol p carrying
// flag (LL uses its low 32 bits). The last line's unused payload bytes are
// zero. wire must hold WireBytes(p, len(src)) bytes. For Simple it copies.
func EncodeWire(p Proto, wire, src []byte, flag uint64) {
	switch p {
	case LL:
		f := uint32(flag)
		var b [LLLinePayload]byte
		for l := 0; l*LLLinePayload < len(src); l++ {
			clear(b[:])
			copy(b[:], src[l*LLLinePayload:])
			line := wire[l*LLLineBytes:][:LLLineBytes]
			binary.LittleEndian.PutUint64(line[0:], LLWord(binary.LittleEndian.Uint32(b[0:]), f))
			binary.LittleEndian.PutUint64(line[8:], LLWord(binary.LittleEndian.Uint32(b[4:]), f))
		}
	case LL128:
		for l := 0; l*LL128LinePayload < len(src); l++ {
			line := wire[l*LL128LineBytes:][:LL128LineBytes]
			k := copy(line[:LL128LinePayload], src[l*LL128LinePayload:])
			clear(line[k:LL128LinePayload])
			binary.LittleEndian.PutUint64(line[LL128LinePayload:], flag)
		}
	default:
		copy(wire, src)
	}
}

// DecodeWire reads n payload bytes of protocol p from wire (WireBytes(p, n)
// bytes of lines) into dst[:n], checking that every line carries flag (LL:
// its low 32 bits, in both halves). The error names the first line that does
// not; dst may then be partly written. For Simple it copies.
func DecodeWire(p Proto, dst, wire []byte, n int, flag uint64) error {
	switch p {
	case LL:
		f := uint32(flag)
		var b [LLLinePayload]byte
		for l := 0; l*LLLinePayload < n; l++ {
			line := wire[l*LLLineBytes:][:LLLineBytes]
			d1, f1 := LLSplit(binary.LittleEndian.Uint64(line[0:]))
			d2, f2 := LLSplit(binary.LittleEndian.Uint64(line[8:]))
			if f1 != f || f2 != f {
				return fmt.Errorf("LL line %d has flags %d/%d, want %d", l, f1, f2, f)
			}
			binary.LittleEndian.PutUint32(b[0:], d1)
			binary.LittleEndian.PutUint32(b[4:], d2)
			copy(dst[l*LLLinePayload:n], b[:])
		}
	case LL128:
		for l := 0; l*LL128LinePayload < n; l++ {
			line := wire[l*LL128LineBytes:][:LL128LineBytes]
			if got := binary.LittleEndian.Uint64(line[LL128LinePayload:]); got != flag {
				return fmt.Errorf("LL128 line %d has flag %d, want %d", l, got, flag)
			}
			copy(dst[l*LL128LinePayload:n], line[:LL128LinePayload])
		}
	default:
		copy(dst[:n], wire[:n])
	}
	return nil
}
