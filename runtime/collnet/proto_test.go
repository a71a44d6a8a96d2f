package collnet

import (
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/runtime/fuzzcheck"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var (
	testJoin = Join{Comm: "job-1", Rank: 5, NNodes: 4, Node: 2, Rail: 1, Channel: 3, StepBytes: 1 << 19}
	testDesc = Desc{Seq: 7, Coll: algos.AllReduce, Type: reduce.Float32, Op: reduce.Sum, NNodes: 4, NHeads: 2,
		Count: 1000, Part: algos.Part{Offset: 500, Count: 500, Chunk: 128, Align: 4}, ChunkSteps: 1, SliceSteps: 1}
)

func TestJoinRoundTrip(t *testing.T) {
	b, err := testJoin.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeJoin(b[:])
	if err != nil || got != testJoin {
		t.Errorf("DecodeJoin(Encode(%+v)) = %+v, %v", testJoin, got, err)
	}
}

func TestJoinRejects(t *testing.T) {
	for name, j := range map[string]Join{
		"host beyond hosts": {Comm: "j", NNodes: 2, Node: 2, StepBytes: 1024},
		"too many hosts":    {Comm: "j", NNodes: algos.MaxFan + 1, StepBytes: 1024},
		"rail 8":            {Comm: "j", NNodes: 1, Rail: 8, StepBytes: 1024},
		"tiny slots":        {Comm: "j", NNodes: 1, StepBytes: 64},
	} {
		if _, err := j.Encode(); err == nil {
			t.Errorf("%s: Encode(%+v) succeeded", name, j)
		}
	}
	b, _ := testJoin.Encode()
	b[0] = 'X'
	if _, err := DecodeJoin(b[:]); err == nil {
		t.Error("a join record with a bad magic decoded")
	}
}

func TestDescRoundTripAndDiffer(t *testing.T) {
	b := testDesc.Encode()
	got, err := DecodeDesc(b[:])
	if err != nil || got != testDesc {
		t.Fatalf("DecodeDesc(Encode(%+v)) = %+v, %v", testDesc, got, err)
	}
	other := testDesc
	other.Part.Count++
	if f, a, b := testDesc.differ(other); f != "part" || a == b {
		t.Errorf("differ: %q %q %q, want the part", f, a, b)
	}
	if f, _, _ := testDesc.differ(testDesc); f != "" {
		t.Errorf("differ of equal descriptors: %q", f)
	}
	avg := testDesc
	avg.Op = reduce.Avg
	if b := avg.Encode(); func() error { _, err := DecodeDesc(b[:]); return err }() == nil {
		t.Error("a descriptor with avg decoded: the server reduces with sum")
	}
}

func TestAck(t *testing.T) {
	for _, msg := range []string{"", "descriptor mismatch: host 1 has count 3", string(make([]byte, 500))} {
		b := encodeAck(msg)
		got, err := decodeAck(b[:])
		want := msg
		if len(want) > maxAckText {
			want = want[:maxAckText]
		}
		if err != nil || got != want {
			t.Errorf("ack %q: got %q, %v", msg, got, err)
		}
	}
}

// FuzzDecode: no input panics a decoder, and whatever decodes encodes
// back to the same bytes.
func FuzzDecode(f *testing.F) {
	jb, _ := testJoin.Encode()
	db := testDesc.Encode()
	f.Add(jb[:])
	f.Add(db[:])
	f.Fuzz(func(t *testing.T, b []byte) {
		_, jerr := DecodeJoin(b)
		_, derr := DecodeDesc(b)
		fuzzcheck.OneLine(t, jerr)
		fuzzcheck.OneLine(t, derr)
		if j, err := DecodeJoin(b); err == nil {
			if e, err := j.Encode(); err != nil || string(e[:]) != string(b) {
				t.Errorf("join %+v does not encode back to its record", j)
			}
		}
		if d, err := DecodeDesc(b); err == nil {
			if e := d.Encode(); string(e[:]) != string(b) {
				t.Errorf("descriptor %+v does not encode back to its record", d)
			}
		}
		decodeAck(b)
	})
}
