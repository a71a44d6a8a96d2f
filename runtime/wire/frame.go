package wire

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// Version is the handshake version this build speaks; a server rejects any other.
// Version 2 added the machine (boot id) to the bootstrap's rank information.
// Version 3 added the CPUs a rank may run on (RankInfo.CPUs).
// Version 4 changed the TCP transport's data frames (64-byte headers,
// payloads padded to 64 bytes) and the settings every rank sends at Init
// (whether its machine has a core per rank), which the handshake's
// version guards too.
const Version uint16 = 4

// MaxJobIDLen is the longest job id a frame carries.
const MaxJobIDLen = 64

// NonceSize is the length of the client's random nonce.
const NonceSize = 16

// Frame sizes. The hello is
//
//	off  len  field
//	  0    8  magic "cc-hello"
//	  8    2  version, big endian
//	 10    1  kind
//	 11    1  job id length (0..64)
//	 12   64  job id, zero padded
//	 76    4  rank, big endian int32
//	 80    4  channel
//	 84    4  index
//	 88   16  nonce
//	104   32  HMAC-SHA256(secret, bytes 0..103)
//	136       total
//
// and the ack is
//
//	off  len  field
//	  0    8  magic "cc-ack\x00\x00"
//	  8    2  version
//	 10    2  reserved, zero
//	 12   32  HMAC-SHA256(secret, ack bytes 0..11 followed by the whole 136-byte hello)
//	 44       total
const (
	HelloSize = 136
	AckSize   = 44
)

const (
	offVersion = 8
	offKind    = 10
	offJobLen  = 11
	offJob     = 12
	offRank    = offJob + MaxJobIDLen // 76
	offChannel = offRank + 4          // 80
	offIndex   = offChannel + 4       // 84
	offNonce   = offIndex + 4         // 88
	offMAC     = offNonce + NonceSize // 104

	offAckMAC = 12
)

var (
	helloMagic = [8]byte{'c', 'c', '-', 'h', 'e', 'l', 'l', 'o'}
	ackMagic   = [8]byte{'c', 'c', '-', 'a', 'c', 'k', 0, 0}
)

// Sentinel errors; every error from this package wraps one of them, with the details.
var (
	ErrTruncated = errors.New("truncated frame")
	ErrMagic     = errors.New("bad magic")
	ErrVersion   = errors.New("unsupported handshake version")
	ErrJob       = errors.New("job id mismatch")
	ErrMAC       = errors.New("authenticator mismatch (different job secret)")
	ErrMalformed = errors.New("malformed frame")
)

// Kind says what a connection is for.
type Kind uint8

// Connection kinds.
const (
	KindBootstrap Kind = 1 // a rank's lifeline to the bootstrap root
	KindData      Kind = 2 // a data stream between two ranks
	KindCollNet   Kind = 3 // a head's stream to the CollNet aggregation server
)

// String returns "bootstrap", "data" or "kind(N)".
func (k Kind) String() string {
	switch k {
	case KindBootstrap:
		return "bootstrap"
	case KindData:
		return "data"
	case KindCollNet:
		return "collnet"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

func (k Kind) valid() bool { return k == KindBootstrap || k == KindData || k == KindCollNet }

// Job identifies one run. Both ends of a connection must agree on both fields.
//
// ID is at most MaxJobIDLen bytes. Secret keys the HMAC; it may be empty, in which case the
// authenticator proves only that the dialler knows ID (see the package doc).
type Job struct {
	ID     string
	Secret []byte
}

// Validate reports whether the job can be put in a frame.
func (j Job) Validate() error {
	if len(j.ID) > MaxJobIDLen {
		return fmt.Errorf("job id %q is %d bytes, at most %d allowed", j.ID, len(j.ID), MaxJobIDLen)
	}
	return nil
}

// Hello says who is dialling and for which stream.
type Hello struct {
	Kind    Kind
	Rank    int32 // the dialling rank
	Channel int32 // data channel, 0 for bootstrap
	Index   int32 // stream index within the channel (NCCL_NSOCKS_PERTHREAD x NTHREADS), 0 for bootstrap
}

// EncodeHello builds the hello frame for job and h with the given nonce.
func EncodeHello(job Job, h Hello, nonce [NonceSize]byte) ([HelloSize]byte, error) {
	var f [HelloSize]byte
	if err := job.Validate(); err != nil {
		return f, err
	}
	if !h.Kind.valid() {
		return f, fmt.Errorf("%w: %s, want %s, %s or %s", ErrMalformed, h.Kind, KindBootstrap, KindData, KindCollNet)
	}
	copy(f[:], helloMagic[:])
	binary.BigEndian.PutUint16(f[offVersion:], Version)
	f[offKind] = byte(h.Kind)
	f[offJobLen] = byte(len(job.ID))
	copy(f[offJob:offRank], job.ID)
	binary.BigEndian.PutUint32(f[offRank:], uint32(h.Rank))
	binary.BigEndian.PutUint32(f[offChannel:], uint32(h.Channel))
	binary.BigEndian.PutUint32(f[offIndex:], uint32(h.Index))
	copy(f[offNonce:offMAC], nonce[:])
	copy(f[offMAC:], mac(job.Secret, f[:offMAC]))
	return f, nil
}

// CheckMagic reports whether prefix (the first bytes of a frame, any length up to 8) could
// start a hello; servers use it to drop garbage before waiting for a whole frame.
func CheckMagic(prefix []byte) error {
	n := min(len(prefix), len(helloMagic))
	if !bytes.Equal(prefix[:n], helloMagic[:n]) {
		return fmt.Errorf("%w: got %q, want %q", ErrMagic, prefix[:n], helloMagic[:])
	}
	return nil
}

// DecodeHello checks a hello frame against job and returns its fields. It checks, in
// order: length, magic, version, job id, MAC, kind; a frame is accepted only if it is
// byte for byte what EncodeHello would produce for the returned Hello and its nonce.
func DecodeHello(frame []byte, job Job) (Hello, error) {
	if len(frame) < HelloSize {
		return Hello{}, fmt.Errorf("%w: hello is %d bytes, want %d", ErrTruncated, len(frame), HelloSize)
	}
	if len(frame) > HelloSize {
		return Hello{}, fmt.Errorf("%w: hello is %d bytes, want %d", ErrMalformed, len(frame), HelloSize)
	}
	if err := CheckMagic(frame[:len(helloMagic)]); err != nil {
		return Hello{}, err
	}
	if v := binary.BigEndian.Uint16(frame[offVersion:]); v != Version {
		return Hello{}, fmt.Errorf("%w: peer speaks version %d, this build speaks %d", ErrVersion, v, Version)
	}
	n := int(frame[offJobLen])
	if n > MaxJobIDLen {
		return Hello{}, fmt.Errorf("%w: job id length %d, at most %d allowed", ErrMalformed, n, MaxJobIDLen)
	}
	if !allZero(frame[offJob+n : offRank]) {
		return Hello{}, fmt.Errorf("%w: job id padding is not zero", ErrMalformed)
	}
	if got := frame[offJob : offJob+n]; string(got) != job.ID {
		return Hello{}, fmt.Errorf("%w: peer is in job %q, this is job %q", ErrJob, got, job.ID)
	}
	if !hmac.Equal(frame[offMAC:], mac(job.Secret, frame[:offMAC])) {
		return Hello{}, ErrMAC
	}
	h := Hello{
		Kind:    Kind(frame[offKind]),
		Rank:    int32(binary.BigEndian.Uint32(frame[offRank:])),
		Channel: int32(binary.BigEndian.Uint32(frame[offChannel:])),
		Index:   int32(binary.BigEndian.Uint32(frame[offIndex:])),
	}
	if !h.Kind.valid() {
		return Hello{}, fmt.Errorf("%w: %s, want %s, %s or %s", ErrMalformed, h.Kind, KindBootstrap, KindData, KindCollNet)
	}
	return h, nil
}

// EncodeAck builds the server's acknowledgement of hello (the exact frame it accepted).
func EncodeAck(job Job, hello []byte) [AckSize]byte {
	var f [AckSize]byte
	copy(f[:], ackMagic[:])
	binary.BigEndian.PutUint16(f[offVersion:], Version)
	copy(f[offAckMAC:], mac(job.Secret, f[:offAckMAC], hello))
	return f
}

// VerifyAck checks the server's acknowledgement of the hello the client sent.
func VerifyAck(frame []byte, job Job, hello []byte) error {
	if len(frame) != AckSize {
		return fmt.Errorf("%w: ack is %d bytes, want %d", ErrTruncated, len(frame), AckSize)
	}
	if !bytes.Equal(frame[:len(ackMagic)], ackMagic[:]) {
		return fmt.Errorf("%w: ack starts %q, want %q", ErrMagic, frame[:len(ackMagic)], ackMagic[:])
	}
	if v := binary.BigEndian.Uint16(frame[offVersion:]); v != Version {
		return fmt.Errorf("%w: server speaks version %d, this build speaks %d", ErrVersion, v, Version)
	}
	want := EncodeAck(job, hello)
	if !hmac.Equal(frame, want[:]) {
		return fmt.Errorf("%w: the server's ack does not prove it knows the secret", ErrMAC)
	}
	return nil
}

func mac(secret []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, secret)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
