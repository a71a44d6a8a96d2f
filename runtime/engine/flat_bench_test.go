package engine

import (
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// soloArea is a FlatArea of two ranks whose second rank never writes: its
// slots hold zeros and Await returns at once.
type soloArea struct{ inline [2][2][]byte }

func newSoloArea() *soloArea {
	a := &soloArea{}
	for q := range a.inline {
		for r := range a.inline[q] {
			a.inline[q][r] = make([]byte, 56)
		}
	}
	return a
}

func (a *soloArea) Stages(k uint64, _ bool) [][]byte { return a.inline[k%2][:] }
func (a *soloArea) InlineBytes() int                 { return 56 }
func (a *soloArea) Post(uint64)                      {}
func (a *soloArea) Await(uint64) error               { return nil }

// BenchmarkFlat8B is a FlatProgram's run of an 8 B all-reduce of 2 ranks
// in the inline bytes, in place, with nothing to wait for.
func BenchmarkFlat8B(b *testing.B) {
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
	prog, err := CompileFlat(plans, FlatCall{Elem: 4, Inline: true, Overlap: true}, true)
	if err != nil {
		b.Fatal(err)
	}
	var seq uint64
	area := newSoloArea()
	b.ReportAllocs()
	for b.Loop() {
		if err := prog.Run(area, &seq, buf, buf, fn); err != nil {
			b.Fatal(err)
		}
	}
}
