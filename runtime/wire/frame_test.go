package wire

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/seed-760dd1f1/cc/runtime/fuzzcheck"
)

var testJob = Job{ID: "job-42", Secret: []byte("s3cret")}

func testNonce() [NonceSize]byte {
	var n [NonceSize]byte
	for i := range n {
		n[i] = byte(i * 7)
	}
	return n
}

func TestHelloRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		job  Job
		h    Hello
	}{
		{"bootstrap", testJob, Hello{Kind: KindBootstrap, Rank: 3}},
		{"data", testJob, Hello{Kind: KindData, Rank: 1023, Channel: 31, Index: 7}},
		{"collnet", testJob, Hello{Kind: KindCollNet, Rank: 6, Channel: 2}},
		{"negative fields", testJob, Hello{Kind: KindData, Rank: -1, Channel: -2, Index: -3}},
		{"empty secret", Job{ID: "j"}, Hello{Kind: KindBootstrap}},
		{"empty job", Job{}, Hello{Kind: KindBootstrap}},
		{"max job id", Job{ID: strings.Repeat("x", MaxJobIDLen), Secret: []byte{0}}, Hello{Kind: KindData, Rank: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := EncodeHello(tc.job, tc.h, testNonce())
			if err != nil {
				t.Fatalf("EncodeHello: %v", err)
			}
			got, err := DecodeHello(f[:], tc.job)
			if err != nil {
				t.Fatalf("DecodeHello: %v", err)
			}
			if diff := cmp.Diff(tc.h, got); diff != "" {
				t.Errorf("hello mismatch (-want +got):\n%s", diff)
			}
			ack := EncodeAck(tc.job, f[:])
			if err := VerifyAck(ack[:], tc.job, f[:]); err != nil {
				t.Errorf("VerifyAck: %v", err)
			}
		})
	}
}

func TestEncodeHelloRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		job  Job
		h    Hello
		want string
	}{
		{"long job id", Job{ID: strings.Repeat("x", MaxJobIDLen+1)}, Hello{Kind: KindData}, "at most 64"},
		{"zero kind", testJob, Hello{}, "kind(0)"},
		{"unknown kind", testJob, Hello{Kind: 9}, "kind(9)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := EncodeHello(tc.job, tc.h, testNonce())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestDecodeHelloRejects(t *testing.T) {
	good, err := EncodeHello(testJob, Hello{Kind: KindData, Rank: 2, Channel: 1}, testNonce())
	if err != nil {
		t.Fatal(err)
	}
	mutate := func(f func(b []byte) []byte) []byte {
		b := append([]byte(nil), good[:]...)
		return f(b)
	}
	badKind, _ := EncodeHello(testJob, Hello{Kind: KindData}, testNonce())
	badKind[offKind] = 7
	copy(badKind[offMAC:], mac(testJob.Secret, badKind[:offMAC]))
	for _, tc := range []struct {
		name  string
		frame []byte
		job   Job
		want  error
	}{
		{"empty", nil, testJob, ErrTruncated},
		{"truncated", good[:HelloSize-1], testJob, ErrTruncated},
		{"too long", append(good[:], 0), testJob, ErrMalformed},
		{"magic", mutate(func(b []byte) []byte { b[0] = 'C'; return b }), testJob, ErrMagic},
		{"http", []byte("GET / HTTP/1.1\r\n" + strings.Repeat("x", HelloSize-16)), testJob, ErrMagic},
		{"version", mutate(func(b []byte) []byte { b[offVersion+1] = byte(Version + 1); return b }), testJob, ErrVersion},
		{"job length", mutate(func(b []byte) []byte { b[offJobLen] = 65; return b }), testJob, ErrMalformed},
		{"job padding", mutate(func(b []byte) []byte { b[offRank-1] = 1; return b }), testJob, ErrMalformed},
		{"other job", good[:], Job{ID: "job-43", Secret: testJob.Secret}, ErrJob},
		{"other secret", good[:], Job{ID: testJob.ID, Secret: []byte("s3cret!")}, ErrMAC},
		{"no secret", good[:], Job{ID: testJob.ID}, ErrMAC},
		{"rank flipped", mutate(func(b []byte) []byte { b[offRank+3] ^= 1; return b }), testJob, ErrMAC},
		{"nonce flipped", mutate(func(b []byte) []byte { b[offNonce] ^= 0x80; return b }), testJob, ErrMAC},
		{"mac flipped", mutate(func(b []byte) []byte { b[HelloSize-1] ^= 1; return b }), testJob, ErrMAC},
		{"kind with valid mac", badKind[:], testJob, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeHello(tc.frame, tc.job)
			if !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// Every single-byte change anywhere in a valid hello must be rejected.
func TestDecodeHelloEveryByteMatters(t *testing.T) {
	good, err := EncodeHello(testJob, Hello{Kind: KindBootstrap, Rank: 1}, testNonce())
	if err != nil {
		t.Fatal(err)
	}
	for i := range good {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			b := good
			b[i] ^= x
			if h, err := DecodeHello(b[:], testJob); err == nil {
				t.Fatalf("byte %d ^ %#x accepted as %+v", i, x, h)
			}
		}
	}
}

func TestVerifyAckRejects(t *testing.T) {
	hello, err := EncodeHello(testJob, Hello{Kind: KindData}, testNonce())
	if err != nil {
		t.Fatal(err)
	}
	good := EncodeAck(testJob, hello[:])
	other := hello
	other[offNonce] ^= 1 // another connection's hello: its ack must not be accepted here
	replayed := EncodeAck(testJob, other[:])
	wrongSecret := EncodeAck(Job{ID: testJob.ID, Secret: []byte("guess")}, hello[:])
	flipped := good
	flipped[offAckMAC+5] ^= 4
	reserved := good
	reserved[offVersion+2] = 1
	badMagic := good
	badMagic[0] = 'x'
	for _, tc := range []struct {
		name  string
		frame []byte
		want  error
	}{
		{"short", good[:AckSize-1], ErrTruncated},
		{"magic", badMagic[:], ErrMagic},
		{"replayed", replayed[:], ErrMAC},
		{"wrong secret", wrongSecret[:], ErrMAC},
		{"flipped", flipped[:], ErrMAC},
		{"reserved", reserved[:], ErrMAC},
		{"a hello is not an ack", hello[:AckSize], ErrMagic},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := VerifyAck(tc.frame, testJob, hello[:]); !errors.Is(err, tc.want) {
				t.Errorf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[Kind]string{KindBootstrap: "bootstrap", KindData: "data", KindCollNet: "collnet", 0: "kind(0)", 200: "kind(200)"} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}

// FuzzHelloDecode: DecodeHello never panics, and whatever it accepts is exactly the frame
// EncodeHello produces for the decoded fields and the frame's nonce, which carries a MAC
// made with the job secret.
func FuzzHelloDecode(f *testing.F) {
	good, err := EncodeHello(testJob, Hello{Kind: KindData, Rank: 4, Channel: 2, Index: 1}, testNonce())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good[:])
	f.Add(good[:HelloSize-1])
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"))
	f.Add([]byte{})
	b := good
	b[offRank] ^= 1
	f.Add(b[:])
	f.Fuzz(func(t *testing.T, frame []byte) {
		h, err := DecodeHello(frame, testJob)
		if err != nil {
			fuzzcheck.OneLine(t, err)
			return
		}
		var nonce [NonceSize]byte
		copy(nonce[:], frame[offNonce:offMAC])
		want, err := EncodeHello(testJob, h, nonce)
		if err != nil {
			t.Fatalf("accepted %+v, which cannot be encoded: %v", h, err)
		}
		if string(want[:]) != string(frame) {
			t.Fatalf("accepted a frame that differs from its canonical encoding:\n got %x\nwant %x", frame, want)
		}
	})
}
