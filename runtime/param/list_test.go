package param

import (
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
)

// algoRows spells a whole NCCL_ALGO matrix: one set per Coll, and which rows
// are forced.
type algoRows struct {
	rows   [algos.NumColls]AlgoSet
	forced [algos.NumColls]bool
}

func algoSet(as ...algos.Algo) AlgoSet {
	var s AlgoSet
	for _, a := range as {
		s |= 1 << a
	}
	return s
}

func protoSet(ps ...protocols.Proto) ProtoSet {
	var s ProtoSet
	for _, p := range ps {
		s |= 1 << p
	}
	return s
}

func gotAlgoRows(m AlgoMatrix) algoRows {
	var r algoRows
	for f := range algos.Coll(algos.NumColls) {
		r.rows[f], r.forced[f] = m.For(f), m.Forced(f)
	}
	return r
}

func TestParseAlgoListExamples(t *testing.T) {
	ringCND := algoSet(algos.Ring, algos.CollNetDirect)
	all := [algos.NumColls]bool{true, true, true, true, true}
	tests := []struct {
		in   string
		want algoRows
	}{
		// NCCL env.rst: ring and collnetdirect for every function, then tree
		// and collnetdirect for allreduce and ring for broadcast.
		{"ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring", algoRows{
			rows:   [algos.NumColls]AlgoSet{algoSet(algos.Ring), ringCND, ringCND, ringCND, algoSet(algos.Tree, algos.CollNetDirect)},
			forced: all,
		}},
		// NCCL env.rst: everything but tree for allreduce; other rows untouched.
		{"allreduce:^tree", algoRows{
			rows:   [algos.NumColls]AlgoSet{AllAlgos, AllAlgos, AllAlgos, AllAlgos, AllAlgos &^ algoSet(algos.Tree)},
			forced: [algos.NumColls]bool{algos.AllReduce: true},
		}},
		{"RING", algoRows{
			rows:   [algos.NumColls]AlgoSet{algoSet(algos.Ring), algoSet(algos.Ring), algoSet(algos.Ring), algoSet(algos.Ring), algoSet(algos.Ring)},
			forced: all,
		}},
		{"allreduce:ctring;reducescatter:ring,pat", algoRows{
			rows:   [algos.NumColls]AlgoSet{AllAlgos, AllAlgos, AllAlgos, algoSet(algos.Ring, algos.PAT), algoSet(algos.CTRing)},
			forced: [algos.NumColls]bool{algos.ReduceScatter: true, algos.AllReduce: true},
		}},
		// A later entry for the same function replaces the earlier row.
		{"allreduce:tree;AllReduce:nvls, nvlstree", algoRows{
			rows:   [algos.NumColls]AlgoSet{AllAlgos, AllAlgos, AllAlgos, AllAlgos, algoSet(algos.NVLS, algos.NVLSTree)},
			forced: [algos.NumColls]bool{algos.AllReduce: true},
		}},
		{"^ring,tree;broadcast:collnetchain", algoRows{
			rows: [algos.NumColls]AlgoSet{algoSet(algos.CollNetChain),
				AllAlgos &^ algoSet(algos.Ring, algos.Tree), AllAlgos &^ algoSet(algos.Ring, algos.Tree),
				AllAlgos &^ algoSet(algos.Ring, algos.Tree), AllAlgos &^ algoSet(algos.Ring, algos.Tree)},
			forced: all,
		}},
	}
	for _, tt := range tests {
		m, err := ParseAlgoList(tt.in)
		if err != nil {
			t.Errorf("ParseAlgoList(%q): %v", tt.in, err)
			continue
		}
		if got := gotAlgoRows(m); got != tt.want {
			t.Errorf("ParseAlgoList(%q)\n got  %v\n want %v", tt.in, got, tt.want)
		}
		if !m.Set || m.Raw != tt.in {
			t.Errorf("ParseAlgoList(%q): Set=%v Raw=%q, want true and the input", tt.in, m.Set, m.Raw)
		}
	}
}

func TestParseProtoListExamples(t *testing.T) {
	llSimple := protoSet(protocols.LL, protocols.Simple)
	ll128 := protoSet(protocols.LL128)
	tests := []struct {
		in     string
		rows   [algos.NumColls]ProtoSet
		forced [algos.NumColls]bool
	}{
		// NCCL env.rst: LL and Simple everywhere, everything but LL for allreduce.
		{"LL,Simple;allreduce:^LL", [algos.NumColls]ProtoSet{llSimple, llSimple, llSimple, llSimple, protoSet(protocols.LL128, protocols.Simple)},
			[algos.NumColls]bool{true, true, true, true, true}},
		// NCCL env.rst: everything but LL128, only LL128 for allreduce.
		{"^LL128;allreduce:LL128", [algos.NumColls]ProtoSet{llSimple, llSimple, llSimple, llSimple, ll128},
			[algos.NumColls]bool{true, true, true, true, true}},
		// NCCL's unit tests (test/unit ParseListTest).
		{"^LL,Simple;BROADCAST:Simple", [algos.NumColls]ProtoSet{protoSet(protocols.Simple), ll128, ll128, ll128, ll128},
			[algos.NumColls]bool{true, true, true, true, true}},
		{"broadcast:^Simple;reduce:Simple,LL", [algos.NumColls]ProtoSet{protoSet(protocols.LL, protocols.LL128), llSimple, AllProtos, AllProtos, AllProtos},
			[algos.NumColls]bool{algos.Broadcast: true, algos.Reduce: true}},
		{"simple", [algos.NumColls]ProtoSet{4, 4, 4, 4, 4}, [algos.NumColls]bool{true, true, true, true, true}},
	}
	for _, tt := range tests {
		m, err := ParseProtoList(tt.in)
		if err != nil {
			t.Errorf("ParseProtoList(%q): %v", tt.in, err)
			continue
		}
		for f := range algos.Coll(algos.NumColls) {
			if got, want := m.For(f), tt.rows[f]; got != want {
				t.Errorf("ParseProtoList(%q).For(%v) = %q, want %q", tt.in, f, got, want)
			}
			if got, want := m.Forced(f), tt.forced[f]; got != want {
				t.Errorf("ParseProtoList(%q).Forced(%v) = %v, want %v", tt.in, f, got, want)
			}
		}
	}
}

func TestParseListErrors(t *testing.T) {
	tests := []struct {
		in, proto string // exactly one is set
		want      []string
	}{
		{in: "FOO", want: []string{`unknown algorithm "FOO"`, "tree, ring, collnetdirect, collnetchain, nvls, nvlstree, pat, ctring"}},
		{in: "ring,", want: []string{"empty algorithm"}},
		{in: "ring,,tree", want: []string{"empty algorithm"}},
		{in: "^", want: []string{"names no algorithm after '^'"}},
		{in: "allreduce:^", want: []string{"names no algorithm after '^'"}},
		{in: "allreduce:", want: []string{"empty algorithm"}},
		{in: "ring;", want: []string{"empty entry 2"}},
		{in: ";ring", want: []string{"empty entry 1"}},
		{in: "ring;tree", want: []string{`entry "tree" has no function prefix`}},
		{in: "allreduce:tree;ring", want: []string{`entry "ring" has no function prefix`}},
		{in: "allgather:ring:tree", want: []string{"more than one ':'"}},
		{in: "all_reduce:ring", want: []string{`unknown function prefix "all_reduce"`, "broadcast, reduce, allgather, reducescatter, allreduce"}},
		{in: ":ring", want: []string{`unknown function prefix ""`}},
		{in: "allreduce:ring^", want: []string{`unknown algorithm "ring^"`}},
		{in: "allreduce:^tree,ring,collnetdirect,collnetchain,nvls,nvlstree,pat,ctring,oneshot,recdbl,rabenseifner,hierrecdbl,cma", want: []string{"no algorithm left for allreduce"}},
		{proto: "^", want: []string{"names no protocol after '^'"}},
		{proto: "LL;simple", want: []string{`entry "simple" has no function prefix`}},
		{proto: "allreduce:LL128;LL,Simple", want: []string{`entry "LL,Simple" has no function prefix`}},
		{proto: "ll129", want: []string{`unknown protocol "ll129"`, "ll, ll128, simple"}},
		{proto: "^ll,ll128,simple", want: []string{"no protocol left for broadcast"}},
	}
	for _, tt := range tests {
		var err error
		in := tt.in
		if tt.proto != "" {
			in = tt.proto
			_, err = ParseProtoList(in)
		} else {
			_, err = ParseAlgoList(in)
		}
		if err == nil {
			t.Errorf("parse %q: got no error, want one containing %q", in, tt.want)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("parse %q: got error %q, want it to contain %q", in, err, w)
			}
		}
	}
}

func TestUnsetMatrixAllowsEverything(t *testing.T) {
	var a AlgoMatrix
	var p ProtoMatrix
	for f := range algos.Coll(algos.NumColls) {
		if a.For(f) != AllAlgos || a.Forced(f) {
			t.Errorf("zero AlgoMatrix.For(%v) = %q forced=%v, want all and not forced", f, a.For(f), a.Forced(f))
		}
		if p.For(f) != AllProtos || p.Forced(f) {
			t.Errorf("zero ProtoMatrix.For(%v) = %q forced=%v, want all and not forced", f, p.For(f), p.Forced(f))
		}
	}
	m, err := ParseAlgoList("")
	if err != nil || m.Set {
		t.Errorf(`ParseAlgoList("") = Set %v, err %v; want unset, nil`, m.Set, err)
	}
}

func TestNamesAndStrings(t *testing.T) {
	tests := []struct{ got, want string }{
		{algos.AllReduce.String(), "AllReduce"},
		{algos.CollNetDirect.String(), "CollNetDirect"},
		{protocols.LL128.String(), "LL128"},
		{algoSet(algos.Tree, algos.PAT).String(), "tree,pat"},
		{AllProtos.String(), "ll,ll128,simple"},
		{algos.Coll(9).String(), "Coll(9)"},
		{mustAlgo(t, "ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring").String(),
			"broadcast:ring;reduce:ring,collnetdirect;allgather:ring,collnetdirect;reducescatter:ring,collnetdirect;allreduce:tree,collnetdirect"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
	if got := algoSet(algos.Ring, algos.PAT).Algos(); len(got) != 2 || got[0] != algos.Ring || got[1] != algos.PAT {
		t.Errorf("Algos() = %v, want [Ring PAT]", got)
	}
	if got := AllProtos.Len(); got != 3 {
		t.Errorf("AllProtos.Len() = %d, want 3", got)
	}
}

// TestTokens pins the grammar's tokens: the lower-case names of the shared
// vocabulary, in its order (bit i of a row is token i).
func TestTokens(t *testing.T) {
	for _, tt := range []struct {
		name string
		got  []string
		want string
	}{
		{"function", funcTokens, "broadcast reduce allgather reducescatter allreduce"},
		{"algorithm", algoSpec.tokens, "tree ring collnetdirect collnetchain nvls nvlstree pat ctring oneshot recdbl rabenseifner hierrecdbl cma"},
		{"protocol", protoSpec.tokens, "ll ll128 simple"},
	} {
		if got := strings.Join(tt.got, " "); got != tt.want {
			t.Errorf("%s tokens = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func mustAlgo(t *testing.T, s string) AlgoMatrix {
	t.Helper()
	m, err := ParseAlgoList(s)
	if err != nil {
		t.Fatalf("ParseAlgoList(%q): %v", s, err)
	}
	return m
}
