package bench

import (
	"testing"

	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// TestRows: Options.Rows is the number of rows Run records, for rooted and
// unrooted collectives, several types, ops, roots and cycles.
func TestRows(t *testing.T) {
	for _, tt := range []struct {
		coll   string
		n      int
		adjust func(*Options)
	}{
		{"all_reduce", 2, func(*Options) {}},
		{"all_reduce", 3, func(o *Options) {
			o.Types = []reduce.DataType{reduce.Float32, reduce.Int32}
			o.Ops = []reduce.Op{reduce.Sum, reduce.Max}
		}},
		{"broadcast", 3, func(o *Options) { o.Root = -1 }},
		{"reduce", 2, func(o *Options) { o.Root = -1; o.Ops = []reduce.Op{reduce.Sum, reduce.Min} }},
		{"all_gather", 2, func(o *Options) { o.Cycles = 2; o.StepFactor = 1; o.StepBytes = 256 }},
		{"alltoall", 4, func(o *Options) { o.Ops = []reduce.Op{reduce.Sum, reduce.Max} }},
	} {
		c, ok := Lookup(tt.coll)
		if !ok {
			t.Fatalf("no collective %s", tt.coll)
		}
		o := smallOptions(c)
		tt.adjust(&o)
		rec, _, err := runFake(t, tt.n, o, nil)
		if err != nil {
			t.Fatalf("%s: %v", tt.coll, err)
		}
		if got, want := o.Rows(tt.n), len(rec.rows); got != want || want == 0 {
			t.Errorf("%s on %d ranks: Rows() = %d, Run recorded %d rows", tt.coll, tt.n, got, want)
		}
	}
	if got := (Options{Cycles: 0}).Rows(2); got != -1 {
		t.Errorf("Rows with -N 0 = %d, want -1 (unknown)", got)
	}
}
