package engine

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// TestFlatProgramSkipsOwnPut: a 2-rank reduce-scatter out of place leaves the
// slot block only its own rank reads (FlatPut.Own) untouched and reads its
// own elements from Input; in place, or with a pre-op (premulsum), it
// copies the block into the slot as before. Rank 1 is simulated: its slot
// holds 1.0 in every element and Await returns at once.
func TestFlatProgramSkipsOwnPut(t *testing.T) {
	var row *algos.Algorithm
	for i := range algos.Algorithms {
		if r := &algos.Algorithms[i]; r.Algo == algos.OneShot && r.Coll == algos.ReduceScatter {
			row = r
		}
	}
	const count = 4 // elements per block; rank 0's block is 0
	f32 := func(vs ...float32) []byte {
		b := make([]byte, 4*len(vs))
		for i, v := range vs {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		return b
	}
	for _, tc := range []struct {
		name    string
		op      reduce.Op
		inPlace bool
		skip    bool
		want    []byte // rank 0's result: its block 0 (pre-op: times 3) plus rank 1's 1.0s
	}{
		{"out-of-place sum", reduce.Sum, false, true, f32(3, 4, 5, 6)},
		{"in-place sum", reduce.Sum, true, false, f32(3, 4, 5, 6)},
		{"out-of-place premulsum", reduce.PreMulSum, false, false, f32(7, 10, 13, 16)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fn, err := reduce.NewFunc(reduce.Float32, tc.op, 2, 3)
			if err != nil {
				t.Fatal(err)
			}
			in := f32(2, 3, 4, 5, 20, 30, 40, 50) // block 0, block 1
			out := make([]byte, 4*count)
			if tc.inPlace {
				out = in[:4*count]
			}
			area := &slotArea{}
			const poison = 0xEE
			for q := range area.slots {
				for r := range area.slots[q] {
					area.slots[q][r] = make([]byte, 4*2*count)
					for i := range area.slots[q][r] {
						area.slots[q][r][i] = poison
					}
				}
				copy(area.slots[q][1], f32(1, 1, 1, 1, 1, 1, 1, 1))
			}
			plans := row.Flat.Plans(algos.FlatArgs{Coll: algos.ReduceScatter, Rank: 0, NRanks: 2, Count: count}, 2*count)
			prog, err := CompileFlat(plans, FlatCall{Rank: 0, Elem: 4, Pre: fn.HasPre(), Overlap: tc.inPlace}, true)
			if err != nil {
				t.Fatal(err)
			}
			var seq uint64
			if err := prog.Run(area, &seq, in, out, fn); err != nil {
				t.Fatal(err)
			}
			own := area.slots[seq%2][0][:4*count]
			if untouched := bytes.Count(own, []byte{poison}) == len(own); untouched != tc.skip {
				t.Errorf("own block of the slot untouched: %v, want %v", untouched, tc.skip)
			}
			if other := area.slots[seq%2][0][4*count:]; bytes.Contains(other, []byte{poison}) {
				t.Errorf("block 1 of the slot, which rank 1 reads, was not written: % x", other)
			}
			if !bytes.Equal(out, tc.want) {
				t.Errorf("result % x, want % x", out, tc.want)
			}
		})
	}
}

// slotArea is a FlatArea of two ranks with slots as the test sets them;
// Post and Await do nothing.
type slotArea struct{ slots [2][2][]byte }

func (a *slotArea) Stages(k uint64, _ bool) [][]byte { return a.slots[k%2][:] }
func (a *slotArea) InlineBytes() int                 { return 0 }
func (a *slotArea) Post(uint64)                      {}
func (a *slotArea) Await(uint64) error               { return nil }
