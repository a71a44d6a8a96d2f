package tune

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
)

// exampleConf holds the rows of NCCL's example file
// (NVIDIA/nccl ext-tuner/example/nccl_tuner.conf), retyped, on the same
// lines, with comments of our own in between.
const exampleConf = `# rows of NCCL's ext-tuner example, retyped
# collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff

# one node, small allreduce, registered buffers
allreduce,0,65536,tree,simple,2,1,-1,-1,1

# 4 nodes, 32 ranks, one pipelined op, unregistered
allreduce,65537,1048576,ring,simple,4,4,32,1,0

# any topology, large
allreduce,1048577,4294967295,ring,ll128,-1,-1,-1,4,-1

# broadcast
broadcast,0,32768,tree,simple,-1,1,-1,-1,1

broadcast,32769,4294967295,ring,simple,2,-1,-1,1,0

# eight fields: numPipeOps and regBuff match anything
allgather,0,4294967295,ring,simple,4,2,-1

reducescatter,0,131072,tree,simple,2,1,-1,1,1
reducescatter,131073,4294967295,ring,simple,-1,-1,-1,2,0

reduce,0,4294967295,tree,simple,-1,-1,-1
`

// row builds a ConfigRow; the arguments follow the columns.
func row(coll algos.Coll, lo, hi int64, algo algos.Algo, proto protocols.Proto, ch, nodes, ranks, pipe, reg, line int) ConfigRow {
	return ConfigRow{Coll: coll, MinBytes: lo, MaxBytes: hi, Algo: algo, Proto: proto,
		Channels: ch, NNodes: nodes, NRanks: ranks, PipeOps: pipe, RegBuff: reg, Line: line}
}

const u32 = 4294967295

func TestParsePluginExample(t *testing.T) {
	c, err := ParseConfig("nccl_tuner.conf", []byte(exampleConf))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{Path: "nccl_tuner.conf", Rows: []ConfigRow{
		row(algos.AllReduce, 0, 65536, algos.Tree, protocols.Simple, 2, 1, -1, -1, 1, 5),
		row(algos.AllReduce, 65537, 1048576, algos.Ring, protocols.Simple, 4, 4, 32, 1, 0, 8),
		row(algos.AllReduce, 1048577, u32, algos.Ring, protocols.LL128, -1, -1, -1, 4, -1, 11),
		row(algos.Broadcast, 0, 32768, algos.Tree, protocols.Simple, -1, 1, -1, -1, 1, 14),
		row(algos.Broadcast, 32769, u32, algos.Ring, protocols.Simple, 2, -1, -1, 1, 0, 16),
		row(algos.AllGather, 0, u32, algos.Ring, protocols.Simple, 4, 2, -1, -1, -1, 19),
		row(algos.ReduceScatter, 0, 131072, algos.Tree, protocols.Simple, 2, 1, -1, 1, 1, 21),
		row(algos.ReduceScatter, 131073, u32, algos.Ring, protocols.Simple, -1, -1, -1, 2, 0, 22),
		row(algos.Reduce, 0, u32, algos.Tree, protocols.Simple, -1, -1, -1, -1, -1, 24),
	}}
	if d := cmp.Diff(want, c); d != "" {
		t.Errorf("ParseConfig(example) (-want +got):\n%s", d)
	}
}

func TestParseLayoutAndNames(t *testing.T) {
	text := "\r\n" + // 1: blank, CRLF
		"   \t\r\n" + // 2: spaces only
		"  # indented comment\r\n" + // 3
		"#\n" + // 4
		"Collective_Type,MIN_BYTES,max_bytes,algorithm,protocol,channels,nnodes,nranks\n" + // 5: header, skipped
		" AllReduce , 0 ,\t10, NVLS_Tree ,LL128 , 64,1,8 ,1 , 0 \r\n" + // 6
		"ALLGATHER,5,5,CollNet_Direct,ll,1,-1,-1,-1\n" + // 7: nine fields
		"reducescatter,+7,0007,PAT,Simple,-1,2,16\n" + // 8
		"allreduce,0,9223372036854775807,ctring,-1,-1,-1,-1\n" + // 9
		"broadcast,1,2,-1,ll,3,-1,-1\n" + // 10
		"reduce,0,0,collnet_chain,simple,-1,-1,-1,-1,-1\n" + // 11
		"allreduce,0,1,nvls,simple,-1,-1,-1" // 12: no final newline
	c, err := ParseConfig("x.conf", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := []ConfigRow{
		row(algos.AllReduce, 0, 10, algos.NVLSTree, protocols.LL128, 64, 1, 8, 1, 0, 6),
		row(algos.AllGather, 5, 5, algos.CollNetDirect, protocols.LL, 1, -1, -1, -1, -1, 7),
		row(algos.ReduceScatter, 7, 7, algos.PAT, protocols.Simple, -1, 2, 16, -1, -1, 8),
		row(algos.AllReduce, 0, math.MaxInt64, algos.CTRing, KeepProto, -1, -1, -1, -1, -1, 9),
		row(algos.Broadcast, 1, 2, KeepAlgo, protocols.LL, 3, -1, -1, -1, -1, 10),
		row(algos.Reduce, 0, 0, algos.CollNetChain, protocols.Simple, -1, -1, -1, -1, -1, 11),
		row(algos.AllReduce, 0, 1, algos.NVLS, protocols.Simple, -1, -1, -1, -1, -1, 12),
	}
	if d := cmp.Diff(want, c.Rows); d != "" {
		t.Errorf("rows (-want +got):\n%s", d)
	}
}

func TestParseEmpty(t *testing.T) {
	for _, text := range []string{"", "\n", "# only a comment\n\n"} {
		c, err := ParseConfig("e.conf", []byte(text))
		if err != nil {
			t.Errorf("ParseConfig(%q): %v", text, err)
			continue
		}
		if c.Path != "e.conf" || len(c.Rows) != 0 {
			t.Errorf("ParseConfig(%q) = %+v, want no rows", text, c)
		}
	}
}

func TestParseErrors(t *testing.T) {
	const good = "allreduce,0,10,ring,simple,-1,-1,-1\n"
	const cols = "collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff"
	tests := []struct {
		name, bad, want string
	}{
		{"7 fields", "allreduce,0,10,ring,simple,-1,-1",
			`7 fields in "allreduce,0,10,ring,simple,-1,-1", want 8 to 10: ` + cols},
		{"11 fields", "allreduce,0,10,ring,simple,-1,-1,-1,-1,-1,-1",
			`11 fields in "allreduce,0,10,ring,simple,-1,-1,-1,-1,-1,-1", want 8 to 10: ` + cols},
		{"one field", "allreduce",
			`1 fields in "allreduce", want 8 to 10: ` + cols},
		{"collective", "allgatherv,0,10,ring,simple,-1,-1,-1",
			`collective_type "allgatherv" unknown, want one of broadcast, reduce, allgather, reducescatter, allreduce`},
		{"collective -1", "-1,0,10,ring,simple,-1,-1,-1",
			`collective_type "-1" unknown, want one of broadcast, reduce, allgather, reducescatter, allreduce`},
		{"algorithm", "allreduce,0,10,rings,simple,-1,-1,-1",
			`algorithm "rings" unknown, want -1 (keep the model's) or one of tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree, pat, ctring, oneshot, recdbl, rabenseifner, hierrecdbl, cma`},
		{"algorithm quoted", `allreduce,0,10,"ring",simple,-1,-1,-1`,
			`algorithm "\"ring\"" unknown, want -1 (keep the model's) or one of tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree, pat, ctring, oneshot, recdbl, rabenseifner, hierrecdbl, cma`},
		{"protocol", "allreduce,0,10,ring,ll64,-1,-1,-1",
			`protocol "ll64" unknown, want -1 (keep the model's) or one of ll, ll128, simple`},
		{"min_bytes word", "allreduce,abc,10,ring,simple,-1,-1,-1",
			`min_bytes "abc" invalid, want an integer 0..9223372036854775807`},
		{"min_bytes -1", "allreduce,-1,10,ring,simple,-1,-1,-1",
			`min_bytes "-1" invalid, want an integer 0..9223372036854775807`},
		{"max_bytes -1", "allreduce,0,-1,ring,simple,-1,-1,-1",
			`max_bytes "-1" invalid, want an integer 0..9223372036854775807`},
		{"max_bytes too big", "allreduce,0,18446744073709551615,ring,simple,-1,-1,-1",
			`max_bytes "18446744073709551615" invalid, want an integer 0..9223372036854775807`},
		{"max_bytes hex", "allreduce,0,0x10,ring,simple,-1,-1,-1",
			`max_bytes "0x10" invalid, want an integer 0..9223372036854775807`},
		{"min > max", "allreduce,11,10,ring,simple,-1,-1,-1",
			`min_bytes 11 > max_bytes 10, want min_bytes <= max_bytes`},
		{"channels 0", "allreduce,0,10,ring,simple,0,-1,-1",
			`channels "0" invalid, want -1 (keep the default) or 1..64`},
		{"channels 65", "allreduce,0,10,ring,simple,65,-1,-1",
			`channels "65" invalid, want -1 (keep the default) or 1..64`},
		{"channels -2", "allreduce,0,10,ring,simple,-2,-1,-1",
			`channels "-2" invalid, want -1 (keep the default) or 1..64`},
		{"nNodes 0", "allreduce,0,10,ring,simple,-1,0,-1",
			`nNodes "0" invalid, want -1 (any) or 1..2147483647`},
		{"nNodes -2", "allreduce,0,10,ring,simple,-1,-2,-1",
			`nNodes "-2" invalid, want -1 (any) or 1..2147483647`},
		{"nRanks word", "allreduce,0,10,ring,simple,-1,-1,abc",
			`nRanks "abc" invalid, want -1 (any) or 1..2147483647`},
		{"nRanks too big", "allreduce,0,10,ring,simple,-1,-1,2147483648",
			`nRanks "2147483648" invalid, want -1 (any) or 1..2147483647`},
		{"nRanks with comment", "allreduce,0,10,ring,simple,-1,-1,-1 # any",
			`nRanks "-1 # any" invalid, want -1 (any) or 1..2147483647`},
		{"numPipeOps 0", "allreduce,0,10,ring,simple,-1,-1,-1,0",
			`numPipeOps "0" invalid, want -1 (any) or 1..2147483647`},
		{"regBuff 2", "allreduce,0,10,ring,simple,-1,-1,-1,-1,2",
			`regBuff "2" invalid, want -1 (any), 0 or 1`},
		{"regBuff -2", "allreduce,0,10,ring,simple,-1,-1,-1,-1,-2",
			`regBuff "-2" invalid, want -1 (any), 0 or 1`},
		{"empty field", "allreduce,0,,ring,simple,-1,-1,-1",
			`max_bytes "" invalid, want an integer 0..9223372036854775807`},
		{"trailing comma", "allreduce,0,10,ring,simple,-1,-1,-1,",
			`numPipeOps "" invalid, want -1 (any) or 1..2147483647`},
		{"partial header", "collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,ranks",
			`collective_type "collective_type" unknown, want one of broadcast, reduce, allgather, reducescatter, allreduce`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The bad row is on line 4, after a comment, a blank line and a good row.
			text := "# c\n\n" + good + tt.bad + "\n" + good
			c, err := ParseConfig("dir/bad.conf", []byte(text))
			if err == nil {
				t.Fatalf("ParseConfig accepted %q: %+v", tt.bad, c)
			}
			if c != nil {
				t.Errorf("ParseConfig returned %+v with its error", c)
			}
			if got, want := err.Error(), "dir/bad.conf:4: "+tt.want; got != want {
				t.Errorf("error\n got %s\nwant %s", got, want)
			}
		})
	}
}

func TestLookup(t *testing.T) {
	c, err := ParseConfig("l.conf", []byte(`
allreduce,100,200,tree,simple,2,1,-1
allreduce,100,200,ring,simple,4,-1,8
allreduce,150,300,ring,ll,-1,-1,-1
allreduce,0,99,nvls,ll128,-1,-1,-1,4
allreduce,0,99,pat,ll128,-1,-1,-1,-1,1
allreduce,0,99,collnet_chain,ll128,-1,-1,-1,1,0
broadcast,0,0,ctring,-1,-1,-1,-1
reduce,0,9223372036854775807,-1,ll,-1,2,16
`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		coll          algos.Coll
		nbytes        int64
		nodes, ranks  int
		wantLine      int // 0: no row
		wantAlgoProto string
	}{
		{algos.AllReduce, 100, 1, 8, 2, "Tree/Simple"}, // min inclusive; first of two covering rows
		{algos.AllReduce, 200, 1, 4, 2, "Tree/Simple"}, // max inclusive
		{algos.AllReduce, 99, 1, 8, 7, "CollNetChain/LL128"},
		{algos.AllReduce, 150, 2, 8, 3, "Ring/Simple"}, // nNodes 1 misses, nRanks 8 matches
		{algos.AllReduce, 150, 2, 16, 4, "Ring/LL"},    // both miss: the wildcard row
		{algos.AllReduce, 201, 1, 8, 4, "Ring/LL"},     // just past the first two rows' max
		{algos.AllReduce, 300, 3, 3, 4, "Ring/LL"},
		{algos.AllReduce, 301, 1, 8, 0, ""},
		{algos.AllReduce, -1, 1, 8, 0, ""},
		{algos.Broadcast, 0, 1, 2, 8, "CTRing/Proto(255)"},
		{algos.Broadcast, 1, 1, 2, 0, ""},
		{algos.Reduce, math.MaxInt64, 2, 16, 9, "Algo(-1)/LL"},
		{algos.Reduce, 0, 2, 15, 0, ""},
		{algos.Reduce, 0, 1, 16, 0, ""},
		{algos.AllGather, 150, 1, 8, 0, ""},
		{algos.ReduceScatter, 150, 1, 8, 0, ""},
	}
	for _, tt := range tests {
		r, ok := c.Lookup(tt.coll, tt.nbytes, tt.nodes, tt.ranks)
		if ok != (tt.wantLine != 0) || r.Line != tt.wantLine {
			t.Errorf("Lookup(%v, %d, %d, %d) = line %d, %v; want line %d",
				tt.coll, tt.nbytes, tt.nodes, tt.ranks, r.Line, ok, tt.wantLine)
			continue
		}
		if !ok {
			if r != (ConfigRow{}) {
				t.Errorf("Lookup(%v, %d, %d, %d) missed but returned %+v", tt.coll, tt.nbytes, tt.nodes, tt.ranks, r)
			}
			continue
		}
		if got := r.Algo.String() + "/" + r.Proto.String(); got != tt.wantAlgoProto {
			t.Errorf("Lookup(%v, %d, %d, %d) = %s, want %s", tt.coll, tt.nbytes, tt.nodes, tt.ranks, got, tt.wantAlgoProto)
		}
		if !r.Covers(tt.coll, tt.nbytes, tt.nodes, tt.ranks) {
			t.Errorf("row of line %d does not Cover what Lookup matched it to", r.Line)
		}
	}

	var nilConfig *Config
	if r, ok := nilConfig.Lookup(algos.AllReduce, 0, 1, 1); ok {
		t.Errorf("nil Config Lookup = %+v, true", r)
	}
}

// TestCoversPipeOpsRegBuff: we launch one collective at a time on
// unregistered buffers, so numPipeOps must be -1 or 1 and regBuff -1 or 0.
func TestCoversPipeOpsRegBuff(t *testing.T) {
	for _, tt := range []struct {
		pipe, reg int
		want      bool
	}{
		{-1, -1, true}, {1, -1, true}, {-1, 0, true}, {1, 0, true},
		{2, -1, false}, {4, 0, false}, {-1, 1, false}, {1, 1, false},
	} {
		r := row(algos.AllReduce, 0, 10, algos.Ring, protocols.Simple, -1, -1, -1, tt.pipe, tt.reg, 1)
		if got := r.Covers(algos.AllReduce, 5, 1, 1); got != tt.want {
			t.Errorf("numPipeOps %d regBuff %d: Covers = %v, want %v", tt.pipe, tt.reg, got, tt.want)
		}
	}
}

func TestWriteGolden(t *testing.T) {
	c := &Config{Rows: []ConfigRow{
		row(algos.AllReduce, 0, 65536, algos.NVLSTree, protocols.LL128, 2, 1, -1, -1, 1, 0),
		row(algos.ReduceScatter, 7, math.MaxInt64, KeepAlgo, KeepProto, -1, -1, 8, 1, 0, 0),
		row(algos.Broadcast, 1, 1, algos.CTRing, protocols.LL, 64, 2, 16, -1, -1, 0),
	}}
	var b bytes.Buffer
	if err := c.Write(&b, "made by a test", "two\nlines\r\n\nend  "); err != nil {
		t.Fatal(err)
	}
	want := `# NCCL tuner config (NCCL_TUNER_CONFIG_FILE), the format of NCCL's ext-tuner example plugin
# collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff
# made by a test
# two
# lines
#
# end
allreduce,0,65536,nvls_tree,ll128,2,1,-1,-1,1
reducescatter,7,9223372036854775807,-1,-1,-1,-1,8,1,0
broadcast,1,1,ctring,ll,64,2,16,-1,-1
`
	if d := cmp.Diff(want, b.String()); d != "" {
		t.Errorf("Write (-want +got):\n%s", d)
	}
}

func TestWriteRoundTrip(t *testing.T) {
	var rows []ConfigRow
	for coll := range algos.NumColls {
		for algo := KeepAlgo; int(algo) < algos.NumAlgos; algo++ {
			for _, proto := range []protocols.Proto{protocols.LL, protocols.LL128, protocols.Simple, KeepProto} {
				n := len(rows)
				rows = append(rows, row(algos.Coll(coll), int64(n), int64(n)*1000+7, algo, proto,
					[]int{-1, 1, 64}[n%3], []int{-1, 1, 5}[n%3], []int{-1, 8, 1 << 20}[n%3],
					[]int{-1, 1, 4}[n%3], []int{-1, 0, 1}[n%3], 0))
			}
		}
	}
	c := &Config{Path: "orig.conf", Rows: rows}
	var b bytes.Buffer
	if err := c.Write(&b, "round trip"); err != nil {
		t.Fatal(err)
	}
	back, err := ParseConfig("back.conf", b.Bytes())
	if err != nil {
		t.Fatalf("reading back what Write wrote: %v\n%s", err, b.String())
	}
	if d := cmp.Diff(rows, back.Rows, cmpopts.IgnoreFields(ConfigRow{}, "Line")); d != "" {
		t.Errorf("round trip (-wrote +read):\n%s", d)
	}
	// Two header lines and one comment line come first.
	for i, r := range back.Rows {
		if r.Line != i+4 {
			t.Errorf("row %d read from line %d, want %d", i, r.Line, i+4)
			break
		}
	}
}

func TestWriteRefusesBadRows(t *testing.T) {
	good := row(algos.AllReduce, 0, 10, algos.Ring, protocols.Simple, -1, -1, -1, -1, -1, 3)
	tests := []struct {
		name string
		edit func(*ConfigRow)
		want string
	}{
		{"coll", func(r *ConfigRow) { r.Coll = 5 }, "collective Coll(5) unknown"},
		{"negative min", func(r *ConfigRow) { r.MinBytes = -1 }, "sizes -1..10 invalid, want 0 <= min_bytes <= max_bytes"},
		{"min > max", func(r *ConfigRow) { r.MinBytes = 11 }, "sizes 11..10 invalid, want 0 <= min_bytes <= max_bytes"},
		{"algo", func(r *ConfigRow) { r.Algo = -2 }, "algorithm Algo(-2) unknown"},
		{"algo high", func(r *ConfigRow) { r.Algo = algos.Algo(algos.NumAlgos) }, fmt.Sprintf("algorithm Algo(%d) unknown", algos.NumAlgos)},
		{"proto", func(r *ConfigRow) { r.Proto = 3 }, "protocol Proto(3) unknown"},
		{"channels", func(r *ConfigRow) { r.Channels = 0 }, "channels 0 invalid, want -1 (keep the default) or 1..64"},
		{"nNodes", func(r *ConfigRow) { r.NNodes = 0 }, "nNodes 0 invalid, want -1 (any) or 1..2147483647"},
		{"nRanks", func(r *ConfigRow) { r.NRanks = -3 }, "nRanks -3 invalid, want -1 (any) or 1..2147483647"},
		{"pipeOps", func(r *ConfigRow) { r.PipeOps = 0 }, "numPipeOps 0 invalid, want -1 (any) or 1..2147483647"},
		{"regBuff", func(r *ConfigRow) { r.RegBuff = 2 }, "regBuff 2 invalid, want -1 (any), 0 or 1"},
	}
	for _, tt := range tests {
		bad := good
		tt.edit(&bad)
		c := &Config{Path: "w.conf", Rows: []ConfigRow{good, bad}}
		var b bytes.Buffer
		err := c.Write(&b)
		if err == nil {
			t.Errorf("%s: Write accepted %+v", tt.name, bad)
			continue
		}
		if want := "tuner config w.conf: row 1 (line 3): " + tt.want; err.Error() != want {
			t.Errorf("%s: error\n got %s\nwant %s", tt.name, err, want)
		}
		if b.Len() != 0 {
			t.Errorf("%s: Write wrote %q before failing", tt.name, b.String())
		}
	}
}

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "tuner.conf")
	if err := os.WriteFile(path, []byte(exampleConf), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ParseConfig(path, []byte(exampleConf))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, c); d != "" {
		t.Errorf("LoadConfig (-want +got):\n%s", d)
	}

	if err := os.WriteFile(path, []byte("allreduce,0,10,ring,simple,0,-1,-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(path); err == nil || !strings.HasPrefix(err.Error(), path+":1: channels \"0\"") {
		t.Errorf("LoadConfig(bad file) error = %v, want it to name %s:1", err, path)
	}

	missing := filepath.Join(dir, "missing.conf")
	if _, err := LoadConfig(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadConfig(missing) error = %v, want fs.ErrNotExist", err)
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(exampleConf))
	f.Add([]byte("allreduce,0,10,ring,simple,-1,-1,-1\n"))
	f.Add([]byte(" Reduce ,+0,0,-1,-1,64,1,1,1,0\r\n#x\n"))
	f.Add([]byte("collective_type,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks\n"))
	f.Add([]byte("allreduce,5,4,ring,simple,-1,-1,-1"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig("f.conf", data)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "f.conf:") || strings.ContainsAny(msg, "\n\r") {
				t.Fatalf("error not one line naming f.conf:line: %q", msg)
			}
			return
		}
		var b bytes.Buffer
		if err := c.Write(&b, "fuzz"); err != nil {
			t.Fatalf("Write of a parsed config: %v", err)
		}
		back, err := ParseConfig("f.conf", b.Bytes())
		if err != nil {
			t.Fatalf("reading back Write's output: %v\n%s", err, b.String())
		}
		if d := cmp.Diff(c.Rows, back.Rows, cmpopts.IgnoreFields(ConfigRow{}, "Line"), cmpopts.EquateEmpty()); d != "" {
			t.Fatalf("round trip (-parsed +read back):\n%s", d)
		}
		var b2 bytes.Buffer
		if err := back.Write(&b2, "fuzz"); err != nil || !bytes.Equal(b.Bytes(), b2.Bytes()) {
			t.Fatalf("second Write differs (err %v):\n%s\n---\n%s", err, b.String(), b2.String())
		}
	})
}
