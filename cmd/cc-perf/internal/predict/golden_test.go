package predict

import (
	"flag"
	"fmt"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/algos/sim/timed"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.txt from this build's replays")

// goldenCases are the topologies and what-ifs whose every predicted time
// testdata/golden.txt holds, bit for bit: 16 to 64 ranks, ring, tree and
// the other modelled rows, three protocols, with and without links, core
// pools, a leaf/spine fabric, what-ifs, the fold and the extrapolation.
func goldenCases() map[string]*Config {
	sizes := func(lo, hi int64) []int64 {
		var s []int64
		for b := lo; b <= hi; b *= 4 {
			s = append(s, b)
		}
		return s
	}
	ringTree := []algos.Algo{algos.Ring, algos.Tree}
	cs := map[string]*Config{}
	add := func(name string, f func(c *Config)) {
		c := base()
		c.Sizes = sizes(8, 4<<20)
		c.Algos = ringTree
		f(c)
		cs[name] = c
	}
	add("4x4 unlimited", func(c *Config) { c.Hosts, c.PPN = 4, 4 })
	add("8x4 every row", func(c *Config) { c.Hosts, c.PPN, c.Algos = 8, 4, nil })
	add("8x4 1gbit 2 cores", func(c *Config) {
		c.Hosts, c.PPN, c.LinkRate, c.LinkLatency, c.Cores = 8, 4, 0.125, 5000, 2
	})
	add("8x8 leaf/spine", func(c *Config) {
		c.Hosts, c.PPN, c.LinkRate, c.Sizes = 8, 8, 1.25, sizes(8, 1<<20)
		c.Fabric = &timed.LeafSpine{HostsPerLeaf: 2, Oversub: 2}
	})
	add("16x2 what-ifs", func(c *Config) {
		c.Hosts, c.PPN, c.LinkRate = 16, 2, 1.25
		c.SlowHosts = []SlowHost{{Host: 3, Factor: 2}}
		c.SlowLinks = []timed.SlowLink{{A: 1, B: 2, Factor: 4}}
		c.LateStarts = []LateStart{{Rank: 5, Ns: 10000}}
	})
	add("8x2 shared cores", func(c *Config) { c.Hosts, c.PPN, c.SharedCores, c.LinkRate = 8, 2, 2, 0.125 })
	add("16x2 fold and extrapolate", func(c *Config) {
		c.Hosts, c.PPN, c.LinkRate, c.MaxTransfers = 16, 2, 1.25, 20000
		c.Sizes = sizes(1<<20, 16<<20)
	})
	return cs
}

// TestGolden requires every predicted time, bound, bottleneck and
// transfer count of goldenCases to be what testdata/golden.txt holds, to
// the bit: a change that makes the simulator cheaper must not move a
// single event (go test -run Golden -update rewrites it).
func TestGolden(t *testing.T) {
	cs := goldenCases()
	var b strings.Builder
	for _, name := range []string{"4x4 unlimited", "8x4 every row", "8x4 1gbit 2 cores", "8x8 leaf/spine",
		"16x2 what-ifs", "8x2 shared cores", "16x2 fold and extrapolate"} {
		c := cs[name]
		if c == nil {
			t.Fatalf("no case %q", name)
		}
		rows, err := Run(c)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, r := range rows {
			for _, e := range r.Entries {
				fmt.Fprintf(&b, "%s|%d|%s/%s|%016x|%016x|%016x|%d|%s|%s\n", name, r.Bytes, e.Algo, e.Proto,
					math.Float64bits(e.TimeUS), math.Float64bits(e.BoundUS), math.Float64bits(e.Busy), e.Transfers, e.Bottleneck, e.Shortcut)
			}
		}
	}
	const file = "testdata/golden.txt"
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	got, wl := strings.Split(b.String(), "\n"), strings.Split(string(want), "\n")
	if len(got) != len(wl) {
		t.Errorf("%d lines, golden has %d", len(got), len(wl))
	}
	bad := 0
	for i := range min(len(got), len(wl)) {
		if got[i] != wl[i] {
			if bad < 10 {
				t.Errorf("line %d:\n\tgot  %s\n\twant %s", i+1, got[i], wl[i])
			}
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d lines differ", bad, len(wl))
	}
}
