package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestPredictGolden: the table and the winner table of two predictions,
// against golden files (go test -run TestPredictGolden -update rewrites
// them; review the diff).
func TestPredictGolden(t *testing.T) {
	for _, tc := range []struct {
		golden string
		args   []string
	}{
		{"predict_ring_tree_1gbit.txt", []string{"predict", "all_reduce", "--hosts", "4", "--link", "1gbit,50us", "-b", "4K", "-e", "4M", "-f", "16", "-A", "1", "--algo", "ring,tree"}},
		{"predict_allgather_whatif.txt", []string{"predict", "all_gather", "--hosts", "4", "--ranks-per-host", "2", "--link", "100mbit", "-b", "64K", "-e", "1M", "-f", "4",
			"--slow-link", "0-1=4", "--late-start", "3=200us", "--slow-host", "2=1.5", "--cores", "1"}},
		{"predict_tree_burst.txt", []string{"predict", "all_reduce", "--hosts", "4", "--link", "1gbit", "--burst", "128K", "-b", "64K", "-e", "4M", "-f", "4", "--algo", "ring,tree", "--proto", "Simple", "--shared-cores", "2"}},
	} {
		res := runCmd(t, nil, append([]string{"cc-perf"}, tc.args...)...)
		if res.code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, res.code, res.stderr)
		}
		path := filepath.Join("testdata", tc.golden)
		if *update {
			if err := os.WriteFile(path, []byte(res.stdout), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if res.stdout != string(want) {
			t.Errorf("%v:\ngot:\n%s\nwant (%s):\n%s", tc.args, res.stdout, path, want)
		}
	}
}

func TestPredictJSON(t *testing.T) {
	out := filepath.Join(t.TempDir(), "p.json")
	res := runCmd(t, nil, "cc-perf", "predict", "reduce_scatter", "--hosts", "3", "-b", "96K", "-e", "96K", "-J", out)
	if res.code != 0 {
		t.Fatalf("exit %d: %s", res.code, res.stderr)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Results []struct {
			Size      int64   `json:"size"`
			Time      float64 `json:"time"`
			BusBW     float64 `json:"busbw"`
			Predicted bool    `json:"predicted"`
			Entries   []struct {
				Algo string `json:"algo"`
			} `json:"entries"`
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Results) != 1 || doc.Results[0].Size != 96<<10 || !doc.Results[0].Predicted || doc.Results[0].Time <= 0 || doc.Results[0].BusBW <= 0 || len(doc.Results[0].Entries) == 0 {
		t.Errorf("-J document: %s", b)
	}
}

// TestPredictBadInput: the bad inputs, each a one-line error
// before anything runs, exit 6, nothing on stdout.
func TestPredictBadInput(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "tuner.conf")
	if err := os.WriteFile(other, []byte("allreduce,0,65536,ring,simple,2,-1,-1,-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"no hosts", []string{"all_reduce"}, []string{"--hosts is required"}},
		{"nvls across hosts", []string{"all_reduce", "--hosts", "2", "--algo", "nvls"}, []string{"--algo NVLS", "NVLS runs inside one host and the job spans 2 hosts"}},
		{"nvls one host", []string{"all_reduce", "--hosts", "1", "--ranks-per-host", "4", "--algo", "nvls"}, []string{"--algo NVLS", "not modelled"}},
		{"pat 2 ranks a host", []string{"all_gather", "--hosts", "2", "--ranks-per-host", "2", "--algo", "pat"}, []string{"--algo PAT", "PAT runs only with one rank per host"}},
		{"pat", []string{"all_gather", "--hosts", "2", "--algo", "pat"}, []string{"--algo PAT", "not modelled"}},
		{"too many ranks", []string{"all_reduce", "--hosts", "512", "--ranks-per-host", "8", "-b", "1G", "-e", "1G", "--algo", "ctring"}, []string{"4096 ranks", "above the exact replay's bound"}},
		{"constants of another format", []string{"all_reduce", "--hosts", "2", "--consts", other}, []string{"--consts", "not a constants file"}},
		{"below an element", []string{"all_reduce", "--hosts", "2", "-b", "2", "-e", "2"}, []string{"size 2 bytes", "4-byte element"}},
		{"bad link", []string{"all_reduce", "--hosts", "2", "--link", "fast"}, []string{`--link "fast"`, "gbit"}},
		{"slow link without rate", []string{"all_reduce", "--hosts", "2", "--slow-link", "0-1=2"}, []string{"--slow-link 0-1=2", "gives none"}},
		{"burst without rate", []string{"all_reduce", "--hosts", "2", "--burst", "128K"}, []string{"--burst", "gives none"}},
		{"bad burst size", []string{"all_reduce", "--hosts", "2", "--link", "1gbit", "--burst", "lots"}, []string{`--burst "lots"`, `size "lots"`, "128K"}},
		{"burst peak below the rate", []string{"all_reduce", "--hosts", "2", "--link", "1gbit", "--burst", "128K,100mbit"}, []string{"--burst 131072 bytes at 100Mbit/s", "above the link's 1Gbit/s"}},
		{"bad burst rate", []string{"all_reduce", "--hosts", "2", "--link", "1gbit", "--burst", "128K,fast"}, []string{`--burst "128K,fast"`, `rate "fast"`}},
		{"bad slow host", []string{"all_reduce", "--hosts", "2", "--slow-host", "x"}, []string{`--slow-host "x"`, "K=FACTOR"}},
		{"unknown algo", []string{"all_reduce", "--hosts", "2", "--algo", "star"}, []string{`"star" is not an algorithm`}},
		{"one rank", []string{"all_reduce", "--hosts", "1"}, []string{"want at least 2 ranks"}},
		{"unknown collective", []string{"allreduce"}, []string{`"allreduce"`, "all_reduce"}},
	} {
		res := runCmd(t, nil, append([]string{"cc-perf", "predict"}, tc.args...)...)
		msg := strings.TrimSpace(res.stderr)
		if res.code != 6 || res.stdout != "" || strings.Contains(msg, "\n") {
			t.Errorf("%s: exit %d, stdout %q, stderr %q: want exit 6, one line, no output", tc.name, res.code, res.stdout, res.stderr)
		}
		for _, w := range tc.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q does not say %q", tc.name, msg, w)
			}
		}
	}
}
