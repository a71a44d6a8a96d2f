package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// maskTimes replaces the time, algbw and busbw values of current
// rccl-tests records (CSV fields or JSON values, std::to_string's %f) by T,
// A and B, which vary from run to run, after checking their form.
func maskTimes(t *testing.T, file string) string {
	t.Helper()
	num := `(\d+\.\d{6})`
	csv := regexp.MustCompile(`,` + num + `,` + num + `,` + num + `,"`)
	js := regexp.MustCompile(`"time":` + num + `, "algBw":` + num + `, "busBw":` + num)
	out := csv.ReplaceAllString(file, `,T,A,B,"`)
	out = js.ReplaceAllString(out, `"time":T, "algBw":A, "busBw":B`)
	if strings.Count(out, "T,A,B") == 0 && strings.Count(out, `"time":T`) == 0 {
		t.Fatalf("no records with %%f times in\n%s", file)
	}
	return out
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRCCLOutputFiles runs -X with -Z csv and -Z json (and without -Z:
// JSON) next to -J: each file is current rccl-tests' Reporter file for the
// run (times masked), one record per half row and per sweep (-N 2), and
// -J's nccl-tests JSON is written too.
func TestRCCLOutputFiles(t *testing.T) {
	dir := t.TempDir()
	base := []string{"cc-perf", "alltoall", "-t", "2", "-b", "1K", "-e", "2K", "-f", "2", "-n", "1", "-w", "0", "-N", "2"}
	csvPath := filepath.Join(dir, "r.csv")
	r := runCmd(t, nil, append(base, "-X", csvPath, "-Z", "csv", "-J", filepath.Join(dir, "r.json"))...)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if !strings.HasPrefix(r.stdout, "# Writing CSV output to "+csvPath+"\n# Writing JSON output to "+filepath.Join(dir, "r.json")+"\n") {
		t.Errorf("stdout starts %q", r.stdout[:min(len(r.stdout), 200)])
	}
	const wantCSV = `numCycle,collective,gpus,size,type,redop,inplace,time,algbw,busbw,#wrong
0,"AlltoAll",2,1024,"float","none",0,T,A,B,"0"
0,"AlltoAll",2,1024,"float","none",1,T,A,B,"N/A"
0,"AlltoAll",2,2048,"float","none",0,T,A,B,"0"
0,"AlltoAll",2,2048,"float","none",1,T,A,B,"N/A"
1,"AlltoAll",2,1024,"float","none",0,T,A,B,"0"
1,"AlltoAll",2,1024,"float","none",1,T,A,B,"N/A"
1,"AlltoAll",2,2048,"float","none",0,T,A,B,"0"
1,"AlltoAll",2,2048,"float","none",1,T,A,B,"N/A"
`
	if got := maskTimes(t, readFile(t, csvPath)); got != wantCSV {
		t.Errorf("-X -Z csv file:\n%s\nwant\n%s", got, wantCSV)
	}
	var doc struct {
		Results []any `json:"results"`
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, "r.json"))), &doc); err != nil || len(doc.Results) != 4 {
		t.Errorf("-J file: %d results, %v", len(doc.Results), err)
	}

	const wantJSON = `[
{"numCycle":0, "name":"AlltoAllv", "gpus":2, "size":1024, "type":"float", "redop":"none", "inPlace":0, "time":T, "algBw":A, "busBw":B, "wrong":"0"},
{"numCycle":0, "name":"AlltoAllv", "gpus":2, "size":1024, "type":"float", "redop":"none", "inPlace":1, "time":T, "algBw":A, "busBw":B, "wrong":"N/A"}
]
`
	for _, z := range [][]string{{"-Z", "json"}, {"--rccl_output_format", "json"}, nil} {
		path := filepath.Join(t.TempDir(), "r")
		args := append([]string{"cc-perf", "alltoallv", "-t", "2", "-b", "1K", "-e", "1K", "-n", "1", "--rccl_output_file", path}, z...)
		if r := runCmd(t, nil, args...); r.code != 0 || !strings.HasPrefix(r.stdout, "# Writing JSON output to "+path+"\n") {
			t.Fatalf("%v: exit %d, %q", z, r.code, r.stderr)
		}
		if got := maskTimes(t, readFile(t, path)); got != wantJSON {
			t.Errorf("%v: -X file:\n%s\nwant\n%s", z, got, wantJSON)
		}
	}
}

// TestRCCLOutputProcesses: in a job of two processes of two ranks, the -X
// CSV has rccl-tests' MPI-build columns: nodes 1, ranks and ranksPerNode
// the processes, gpusPerRank the ranks of each.
func TestRCCLOutputProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.csv")
	runProcs(t, 2, func(rank int, env []string) result {
		args := []string{"cc-perf", "all_gather", "-t", "2", "-b", "4K", "-e", "4K", "-n", "1", "-w", "0", "-Z", "csv"}
		if rank == 0 {
			args = append(args, "-X", path) // only rank 0's process writes; another path must not be touched
		} else {
			args = append(args, "-X", path+".other")
		}
		return runCmd(t, env, args...)
	})
	const want = `numCycle,collective,nodes,ranks,ranksPerNode,gpusPerRank,size,type,redop,inplace,time,algbw,busbw,#wrong
0,"AllGather",1,2,2,2,4096,"float","none",0,T,A,B,"0"
0,"AllGather",1,2,2,2,4096,"float","none",1,T,A,B,"0"
`
	if got := maskTimes(t, readFile(t, path)); got != want {
		t.Errorf("-X file of 2 processes:\n%s\nwant\n%s", got, want)
	}
	if _, err := os.Stat(path + ".other"); err == nil {
		t.Error("process 1 created its -X file")
	}
}

// TestRCCLOutputBad: -Z and -X misuse is one line and exit 6, and leaves
// no file behind (a -J file created before an unwritable -X is removed).
func TestRCCLOutputBad(t *testing.T) {
	dir := t.TempDir()
	same := filepath.Join(dir, "r.json")
	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"bad format", []string{"-X", filepath.Join(dir, "r"), "-Z", "xml"}, []string{"-Z/--rccl_output_format", `"xml"`, "json, csv"}},
		{"format without file", []string{"-Z", "csv"}, []string{"-Z/--rccl_output_format csv without a file", "-X FILE"}},
		{"same file", []string{"-X", same, "-J", same}, []string{"-X/--rccl_output_file", "-J/--output_file", "same file"}},
		{"unwritable", []string{"-J", same, "-X", filepath.Join(dir, "no", "dir", "r.csv")}, []string{"-X/--rccl_output_file", "no/dir/r.csv"}},
		{"-J without extension", []string{"-X", filepath.Join(dir, "r.csv"), "-Z", "csv", "-J", filepath.Join(dir, "r")}, []string{"-J/--output_file", "extension", "-Z gives -X's format"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"cc-perf", "all_reduce", "-b", "8", "-e", "8", "-n", "1"}, tt.args...)
			checkOneLineError(t, runCmd(t, nil, args...), 6, tt.want)
		})
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files left behind: %v", entries)
	}
}

// TestOldRCCLOutputFlags: the old rccl-tests' spellings keep their file:
// -x FILE with -Z, and --output_format with --output_file (-J).
func TestOldRCCLOutputFlags(t *testing.T) {
	for _, flags := range [][]string{{"-Z", "csv", "-x", "o1"}, {"--output_format", "csv", "--output_file", "o2"}, {"-x", "o3.csv"}} {
		path := filepath.Join(t.TempDir(), flags[len(flags)-1])
		args := append([]string{"cc-perf", "alltoall", "-t", "2", "-b", "1K", "-e", "1K", "-n", "1"}, flags[:len(flags)-1]...)
		if r := runCmd(t, nil, append(args, path)...); r.code != 0 {
			t.Fatalf("%v: exit %d, %q", flags, r.code, r.stderr)
		}
		if got := readFile(t, path); !strings.HasPrefix(got, "collective, nodes, ranks, rankspernode, gpusperrank, size,") {
			t.Errorf("%v: file starts %q, want the old rccl-tests CSV", flags, got[:min(len(got), 60)])
		}
	}
	// -x as a number is --cta_policy, with -X taking -Z.
	path := filepath.Join(t.TempDir(), "r.csv")
	if r := runCmd(t, nil, "cc-perf", "alltoall", "-t", "2", "-b", "1K", "-e", "1K", "-n", "1", "-x", "0", "-Z", "csv", "-X", path); r.code != 0 ||
		!strings.HasPrefix(readFile(t, path), "numCycle,") {
		t.Errorf("-x 0 -Z csv -X: exit %d, %q", r.code, r.stderr)
	}
}
