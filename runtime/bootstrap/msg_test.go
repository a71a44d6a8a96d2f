package bootstrap

import (
	"bytes"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/seed-760dd1f1/cc/runtime/fuzzcheck"
)

func payload(t testing.TB, msg []byte) []byte {
	t.Helper()
	typ, p, err := readMsg(bytes.NewReader(msg), 1<<21)
	if err != nil || typ == 0 {
		t.Fatalf("readMsg: %v", err)
	}
	return p
}

func TestMessagesRoundTrip(t *testing.T) {
	peers := []RankInfo{info(0), info(1), {Rank: 2, Pid: -1}}
	if got, err := decodeWelcome(payload(t, encodeWelcome(peers)), 3); err != nil || !cmp.Equal(got, peers) {
		t.Errorf("welcome: %v, %v", got, err)
	}
	if n, ri, err := decodeJoin(payload(t, encodeJoin(9, info(4))), 4); err != nil || n != 9 || ri != info(4) {
		t.Errorf("join: %d %+v %v", n, ri, err)
	}
	if rnd, o, d, err := decodeGather(payload(t, encodeGather(77, opBarrier, []byte("xy")))); err != nil || rnd != 77 || o != opBarrier || string(d) != "xy" {
		t.Errorf("gather: %d %s %q %v", rnd, o, d, err)
	}
	parts := [][]byte{[]byte("a"), {}, []byte("ccc")}
	if rnd, got, err := decodeGathered(payload(t, encodeGathered(5, parts)), 3); err != nil || rnd != 5 || !bytes.Equal(bytes.Join(got, nil), []byte("accc")) || len(got[1]) != 0 {
		t.Errorf("gathered: %d %q %v", rnd, got, err)
	}
	re := &RankError{Rank: 2, Host: "h", Pid: 3, How: LeftEarly, Cause: "why"}
	if got, err := decodeAborted(payload(t, encodeAborted(re)), 3); err != nil || *got != *re {
		t.Errorf("aborted: %+v %v", got, err)
	}
	if s, err := decodeText(payload(t, encodeText(msgReject, "no")), "reason"); err != nil || s != "no" {
		t.Errorf("reject: %q %v", s, err)
	}
	joined := []RankInfo{{Rank: 0, Host: "a"}, {Rank: 2, Host: ""}}
	if got, err := decodeRollCall(payload(t, encodeRollCall(joined)), 3); err != nil || !cmp.Equal(got, joined) {
		t.Errorf("roll call: %+v %v", got, err)
	}
}

func TestMessageRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		msg  []byte
	}{
		{"unknown type", []byte{10, 0, 0, 0, 0, 0, 0, 0}},
		{"zero type", []byte{0, 0, 0, 0, 0, 0, 0, 0}},
		{"reserved", []byte{1, 0, 1, 0, 0, 0, 0, 0}},
		{"over the cap", []byte{4, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff}},
	} {
		if _, _, err := readMsg(bytes.NewReader(tc.msg), 1<<20); !errors.Is(err, errProtocol) {
			t.Errorf("%s: got %v, want a protocol error", tc.name, err)
		}
	}
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"welcome count", func() error { _, err := decodeWelcome(payload(t, encodeWelcome([]RankInfo{info(0)})), 2); return err }()},
		{"welcome order", func() error {
			_, err := decodeWelcome(payload(t, encodeWelcome([]RankInfo{info(1), info(0)})), 2)
			return err
		}()},
		{"gathered count", func() error { _, _, err := decodeGathered(payload(t, encodeGathered(0, [][]byte{nil})), 2); return err }()},
		{"gather op", func() error { _, _, _, err := decodeGather(payload(t, encodeGather(0, 9, nil))); return err }()},
		{"aborted rank", func() error {
			_, err := decodeAborted(payload(t, encodeAborted(&RankError{Rank: 5, How: Lost})), 2)
			return err
		}()},
		{"aborted how", func() error {
			_, err := decodeAborted(payload(t, encodeAborted(&RankError{Rank: 0, How: 9})), 2)
			return err
		}()},
		{"trailing bytes", func() error {
			_, err := decodeText(append(payload(t, encodeText(msgAbort, "x")), 0), "cause")
			return err
		}()},
		{"short", func() error { _, _, _, err := decodeGather([]byte{1, 2, 3}); return err }()},
		{"roll call count", func() error {
			_, err := decodeRollCall(payload(t, encodeRollCall([]RankInfo{{Rank: 0}, {Rank: 1}})), 1)
			return err
		}()},
		{"roll call order", func() error {
			_, err := decodeRollCall(payload(t, encodeRollCall([]RankInfo{{Rank: 1}, {Rank: 1}})), 3)
			return err
		}()},
		{"roll call range", func() error {
			_, err := decodeRollCall(payload(t, encodeRollCall([]RankInfo{{Rank: 3}})), 3)
			return err
		}()},
	} {
		if !errors.Is(tc.err, errProtocol) {
			t.Errorf("%s: got %v, want a protocol error", tc.name, tc.err)
		}
	}
}

// FuzzMessages: no decoder panics or allocates past its cap or ahead of the bytes that
// arrived, errors are one line, and whatever a decoder accepts re-encodes to the same bytes.
func FuzzMessages(f *testing.F) {
	for _, m := range [][]byte{
		encodeJoin(3, info(1)), encodeWelcome([]RankInfo{info(0), info(1), info(2)}),
		encodeGather(1, opAllGather, []byte("abc")), encodeGathered(2, [][]byte{{1}, {2}, {3}}),
		encodeAborted(&RankError{Rank: 1, Host: "h", Pid: 2, How: Lost, Cause: "c"}),
		encodeText(msgReject, "r"), encodeMsg(msgLeave, nil), encodeRollCall([]RankInfo{{Rank: 0, Host: "h"}, {Rank: 2}}),
	} {
		f.Add(m)
	}
	f.Add([]byte{byte(msgGathered), 0, 0, 0, 0, 0x30, 0, 0, 1, 2, 3}) // claims 3 MiB, holds 3 bytes
	const nranks = 3
	f.Fuzz(func(t *testing.T, msg []byte) {
		rd := fuzzcheck.NewReader(msg)
		rd.Chunk = 4096
		typ, p, err := readMsg(rd, maxFromRoot(nranks))
		rd.Bounded(t, eagerAlloc)
		if err != nil {
			fuzzcheck.OneLine(t, err)
			return
		}
		if len(p) > len(msg) {
			t.Fatalf("payload of %d bytes from a %d-byte message", len(p), len(msg))
		}
		var again []byte
		switch typ {
		case msgJoin:
			var n int
			var ri RankInfo
			if n, ri, err = decodeJoin(p, 1); err == nil {
				again = encodeJoin(n, ri)
			}
		case msgWelcome:
			var peers []RankInfo
			if peers, err = decodeWelcome(p, nranks); err == nil {
				again = encodeWelcome(peers)
			}
		case msgGather:
			var rnd uint64
			var o op
			var d []byte
			if rnd, o, d, err = decodeGather(p); err == nil {
				again = encodeGather(rnd, o, d)
			}
		case msgGathered:
			var rnd uint64
			var parts [][]byte
			if rnd, parts, err = decodeGathered(p, nranks); err == nil {
				again = encodeGathered(rnd, parts)
			}
		case msgAborted:
			var re *RankError
			if re, err = decodeAborted(p, nranks); err == nil {
				again = encodeAborted(re)
			}
		case msgRollCall:
			var joined []RankInfo
			if joined, err = decodeRollCall(p, nranks); err == nil {
				again = encodeRollCall(joined)
			}
		case msgReject, msgAbort:
			var text string
			if text, err = decodeText(p, "text"); err == nil {
				again = encodeText(typ, text)
			}
		}
		fuzzcheck.OneLine(t, err)
		if again != nil && !bytes.Equal(again, msg[:headerSize+len(p)]) {
			t.Fatalf("%s re-encodes differently:\n got %x\nwant %x", typ, again, msg[:headerSize+len(p)])
		}
	})
}
