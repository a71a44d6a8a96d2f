package tune

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
)

var update = flag.Bool("update", false, "rewrite testdata/decisions.golden from the model")

// fullMask is every entry the table has, with PAT enabled as NCCL's auto
// setting does (every rank alone on its host).
func fullMask(topo *algos.Topo) Mask {
	var m Mask
	for _, row := range algos.Algorithms {
		if row.Algo == algos.PAT && topo.MaxPerHost() > 1 {
			continue
		}
		for _, p := range row.Protos() {
			m[row.Coll][row.Algo][p] = true
		}
	}
	return m
}

// fixedConsts is the fixed calibration the decisions are checked against
// (testdata/consts.json: the built-in constants when the golden file was
// made), so that recalibrating the built-in constants changes no test.
func fixedConsts(t testing.TB) *Consts {
	t.Helper()
	c, err := LoadConsts(filepath.Join("testdata", "consts.json"))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// decisionLines are the model's decisions with the fixed constants for
// every collective, sizes 8 B..1 GiB (x4), 2..1024 ranks on 1..64 hosts.
func decisionLines(c *Consts) []string {
	var lines []string
	for _, shape := range [][2]int{{2, 1}, {2, 2}, {4, 1}, {4, 2}, {4, 4}, {8, 1}, {8, 4}, {8, 8}, {16, 2}, {16, 16},
		{64, 8}, {64, 64}, {128, 16}, {256, 64}, {1024, 64}} {
		n, hosts := shape[0], shape[1]
		topo := algos.BlockTopo(hosts, n/hosts)
		m := New(c, topo, fullMask(topo), nil, false)
		for coll := range algos.Coll(algos.NumColls) {
			for size := int64(8); size <= 1<<30; size *= 4 {
				best, next := m.Decide(coll, size, 1, -1)
				lines = append(lines, fmt.Sprintf("%-13s n=%-4d hosts=%-2d %10d B -> %s/%s (%.1f us; next %s)",
					coll, n, hosts, size, best.Algo, best.Proto, best.Time, next))
			}
		}
	}
	return lines
}

// TestDecisionsGolden: the decisions for a fixed calibration
// (testdata/consts.json) are those in testdata/decisions.golden (go test
// -run TestDecisionsGolden -update rewrites it; review the diff).
func TestDecisionsGolden(t *testing.T) {
	got := strings.Join(decisionLines(fixedConsts(t)), "\n") + "\n"
	path := filepath.Join("testdata", "decisions.golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if !bytes.Equal([]byte(got), want) {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("decision %d differs:\n got  %s\n want %s", i, gl[i], wl[i])
			}
		}
		t.Fatalf("%d decisions, golden has %d", len(gl), len(wl))
	}
}

// TestDecideIsArgmin: Decide returns the smallest Time over the mask, ties
// to the lower (algorithm, protocol), and the runner-up is the second.
func TestDecideIsArgmin(t *testing.T) {
	for _, shape := range [][2]int{{2, 2}, {4, 1}, {8, 4}, {16, 16}} {
		topo := algos.BlockTopo(shape[1], shape[0]/shape[1])
		m := New(fixedConsts(t), topo, fullMask(topo), nil, false)
		for coll := range algos.Coll(algos.NumColls) {
			for size := int64(1); size <= 1<<30; size *= 2 {
				var times []Choice
				for a := range algos.Algo(algos.NumAlgos) {
					for p := range protocols.Proto(protocols.NumProtos) {
						if tm := m.Time(coll, a, p, size, 1); tm >= 0 {
							times = append(times, Choice{Algo: a, Proto: p, Channels: 1, Time: tm})
						}
					}
				}
				want, second := times[0], Choice{Time: -1}
				for _, c := range times[1:] {
					if c.Time < want.Time {
						want, second = c, want
					} else if second.Time < 0 || c.Time < second.Time {
						second = c
					}
				}
				best, next := m.Decide(coll, size, 1, -1)
				if best != want || next != second {
					t.Fatalf("%s n=%d %d B: Decide = %v, %v; want %v, %v", coll, shape[0], size, best, next, want, second)
				}
			}
		}
	}
}

// TestMask: NCCL_ALGO=tree (a mask with only the tree) leaves the tree for
// all-reduce and nothing for all-gather; PAT is not chosen where its mask
// entry is off even when it would be fastest.
func TestMask(t *testing.T) {
	topo := algos.FlatTopo(8)
	var m Mask
	for p := range protocols.Proto(protocols.NumProtos) {
		m[algos.AllReduce][algos.Tree][p] = true
	}
	model := New(fixedConsts(t), topo, m, nil, false)
	if best, _ := model.Decide(algos.AllReduce, 1<<20, 1, -1); best.Algo != algos.Tree {
		t.Errorf("AllReduce with only the tree allowed ran %v", best)
	}
	if best, _ := model.Decide(algos.AllGather, 1<<20, 1, -1); best.Time >= 0 {
		t.Errorf("AllGather with nothing allowed got %v, want none", best)
	}
	full := fullMask(topo)
	withPAT := New(fixedConsts(t), topo, full, nil, false)
	best, _ := withPAT.Decide(algos.ReduceScatter, 64, 1, -1)
	full[algos.ReduceScatter][algos.PAT][protocols.Simple] = false
	without := New(fixedConsts(t), topo, full, nil, false)
	other, _ := without.Decide(algos.ReduceScatter, 64, 1, -1)
	if other.Algo == algos.PAT || (best.Algo == algos.PAT && other == best) {
		t.Errorf("PAT masked off: got %v (with PAT: %v)", other, best)
	}
}

// TestConfigOverrides: a config row covering a size replaces the model's
// choice (with its channels), a row naming an entry that may not run is
// skipped, and -1 fields take the model's best among the rest.
func TestConfigOverrides(t *testing.T) {
	topo := algos.FlatTopo(4)
	cfg, err := ParseConfig("t.conf", []byte(
		"allreduce,0,1000,tree,ll,2,-1,-1\n"+
			"allreduce,1001,2000,pat,simple,-1,-1,-1\n"+ // PAT cannot all-reduce: skipped
			"allreduce,1001,2000,ring,-1,-1,-1,-1\n"))
	if err != nil {
		t.Fatal(err)
	}
	m := New(fixedConsts(t), topo, fullMask(topo), cfg, false)
	if got, _ := m.Decide(algos.AllReduce, 512, 1, -1); got.Algo != algos.Tree || got.Proto != protocols.LL || got.Channels != 2 || got.Line != 1 {
		t.Errorf("512 B: %+v, want Tree/LL on 2 channels from line 1", got)
	}
	got, _ := m.Decide(algos.AllReduce, 1500, 1, -1)
	want, _ := m.argmin(algos.AllReduce, 1500, 1, -1, algos.Ring, KeepProto)
	if got.Algo != algos.Ring || got.Proto != want.Proto || got.Line != 3 {
		t.Errorf("1500 B: %+v, want the ring's best protocol %v from line 3", got, want.Proto)
	}
	if got, _ := m.Decide(algos.AllReduce, 5000, 1, -1); got.Line != 0 {
		t.Errorf("5000 B: %+v, want the model's choice (no row covers it)", got)
	}
}
