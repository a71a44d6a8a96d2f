package engine

import (
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// soloArea is a FlatArea of two ranks whose second rank never writes: its
// slots hold zeros and Await returns at once.
type soloArea struct{ inline [2][2][56]byte }

func (a *soloArea) Slot(r int, k uint64) []byte   { return a.inline[k%2][r][:] }
func (a *soloArea) Inline(r int, k uint64) []byte { return a.inline[k%2][r][:] }
func (a *soloArea) InlineBytes() int              { return 56 }
func (a *soloArea) Post(uint64)                   {}
func (a *soloArea) Await(uint64) error            { return nil }

// BenchmarkRunFlat8B is RunFlat's code for an 8 B all-reduce of 2 ranks
// in the inline bytes, with nothing to wait for.
func BenchmarkRunFlat8B(b *testing.B) {
	var row *algos.Algorithm
	for i := range algos.Algorithms {
		if r := &algos.Algorithms[i]; r.Algo == algos.OneShot && r.Coll == algos.AllReduce {
			row = r
		}
	}
	fn, err := reduce.NewFunc(reduce.Float32, reduce.Sum, 2, 0)
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 8)
	plans := row.Flat.Plans(algos.FlatArgs{Coll: algos.AllReduce, NRanks: 2, Count: 2}, 1024)
	t := FlatTask{Plans: plans, In: buf, Out: buf, Type: reduce.Float32, Fn: fn, Inline: true}
	var seq uint64
	area := &soloArea{}
	b.ReportAllocs()
	for b.Loop() {
		if err := RunFlat(area, &seq, &t); err != nil {
			b.Fatal(err)
		}
	}
}
