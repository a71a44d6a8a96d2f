package algos_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// ringGoldenFile holds one SHA-256 per (collective, nranks, part, root) of
// every rank's ring schedule, recorded before the schedule model grew fan
// lists, lanes and connection indices (main at 6509434). The ring must not
// change when other algorithms arrive: a different hash is a changed ring.
const ringGoldenFile = "testdata/ring_schedules.sha256"

// ringGoldenParts are the part shapes hashed: offset, count, chunk, align.
var ringGoldenParts = []algos.Part{
	{Offset: 0, Count: 0, Chunk: 4},
	{Offset: 0, Count: 1, Chunk: 4, Align: 4},
	{Offset: 3, Count: 17, Chunk: 2, Align: 1},
	{Offset: 0, Count: 1009, Chunk: 16, Align: 4},
	{Offset: 128, Count: 4096, Chunk: 512, Align: 4},
	{Offset: 0, Count: 100003, Chunk: 1 << 13, Align: 2},
}

// ringHashes computes the golden lines: "coll n=.. part=.. root=.. sha256".
func ringHashes(t *testing.T) []string {
	t.Helper()
	var lines []string
	for _, coll := range []string{"allreduce", "reducescatter", "allgather", "broadcast", "reduce"} {
		for n := 1; n <= 16; n++ {
			for pi, p := range ringGoldenParts {
				roots := []int{0}
				if coll == "broadcast" || coll == "reduce" {
					roots = []int{0, n / 2, n - 1}
				}
				for _, root := range roots {
					h := sha256.New()
					for r := 0; r < n; r++ {
						var ops []algos.Op
						block := p.Offset + p.Count
						switch coll {
						case "allreduce":
							ops = algos.RingAllReduce(r, n, p)
						case "reducescatter":
							ops = algos.RingReduceScatter(r, n, block, p)
						case "allgather":
							ops = algos.RingAllGather(r, n, block, p)
						case "broadcast":
							ops = algos.RingBroadcast(r, n, root, p)
						case "reduce":
							ops = algos.RingReduce(r, n, root, p)
						}
						fmt.Fprintf(h, "rank %d: %d ops\n", r, len(ops))
						for _, o := range ops {
							hashOp(t, h, o)
						}
					}
					lines = append(lines, fmt.Sprintf("%s n=%d part=%d root=%d %x", coll, n, pi, root, h.Sum(nil)))
				}
			}
		}
	}
	return lines
}

// hashOp writes the fields a ring Op had before the schedule model grew:
// a ring Op must leave every newer field at its zero value.
func hashOp(t *testing.T, h interface{ Write([]byte) (int, error) }, o algos.Op) {
	t.Helper()
	var b [8]byte
	for _, v := range []int64{int64(o.RecvFrom), int64(o.SendTo), int64(o.Src), o.SrcOff, int64(o.Dst), o.DstOff, o.Count, b2i(o.Reduce), b2i(o.PostOp)} {
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		h.Write(b[:])
	}
	if o != (algos.Op{RecvFrom: o.RecvFrom, SendTo: o.SendTo, Src: o.Src, SrcOff: o.SrcOff, Dst: o.Dst, DstOff: o.DstOff,
		Count: o.Count, Reduce: o.Reduce, PostOp: o.PostOp}) {
		t.Fatalf("ring op %v sets a field the ring never used", o)
	}
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// TestRingSchedulesUnchanged compares every ring schedule with the hashes
// recorded before the schedule model changed.
func TestRingSchedulesUnchanged(t *testing.T) {
	got := ringHashes(t)
	if *update {
		if err := os.MkdirAll(filepath.Dir(ringGoldenFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(ringGoldenFile, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Open(ringGoldenFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var want []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		want = append(want, sc.Text())
	}
	if len(got) != len(want) {
		t.Fatalf("%d ring schedules hashed, golden file has %d", len(got), len(want))
	}
	bad := 0
	for i := range got {
		if got[i] != want[i] {
			if bad < 10 {
				t.Errorf("changed ring schedule:\n got %s\nwant %s", got[i], want[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d ring schedules changed", bad, len(got))
	}
}
