package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/report"
	"github.com/seed-760dd1f1/cc/cmd/internal/cli"
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/tune"
)

// tuneRow is one parsed row of the tune table.
type tuneRow struct {
	bytes          int64
	best, auto     string
	bestUS, autoUS float64
	busbw, regret  float64
	wrong          int64
	fields         []string
}

// parseTune returns the table rows of cc-perf tune's output.
func parseTune(t *testing.T, out string) []tuneRow {
	t.Helper()
	var rows []tuneRow
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		if strings.HasPrefix(l, "#") || len(f) == 0 || f[0] == "size" {
			continue
		}
		if len(f) != 9 {
			t.Fatalf("%d fields in tune row %q, want 9", len(f), l)
		}
		num := func(s string) float64 {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatalf("%q in %q: %v", s, l, err)
			}
			return v
		}
		rows = append(rows, tuneRow{bytes: int64(num(f[0])), best: f[2], bestUS: num(f[3]), busbw: num(f[4]),
			auto: f[5], autoUS: num(f[6]), regret: num(f[7]), wrong: int64(num(f[8])), fields: f})
	}
	return rows
}

// ranColumns maps each data row's size to its -A columns (algo proto
// nchannels) in an nccl-tests table.
func ranColumns(t *testing.T, out string) map[int64]string {
	t.Helper()
	m := map[int64]string{}
	for _, f := range parseTable(t, out).rows {
		size, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || len(f) != 16 {
			t.Fatalf("row %q: want 16 fields starting with the size", f)
		}
		m[size] = strings.Join(f[13:], " ")
	}
	return m
}

// configColumns is a tuner config row as the -A columns print it.
func configColumns(r tune.ConfigRow) string {
	return fmt.Sprintf("%s %s %d", r.Algo, r.Proto, r.Channels)
}

// TestTuneConfigSteersRuntime is cc-perf tune end to end on 2 ranks for
// every tunable collective: one table row per size with a regret of at
// least 1 and correct data; --config writes one row per size that
// tune.LoadConfig reads; and that file, given back to the runtime as
// NCCL_TUNER_CONFIG_FILE, makes a cc-perf -A run report, at every size,
// exactly the algorithm, protocol and channels of its row.
func TestTuneConfigSteersRuntime(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		coll  string
		env   []string
		extra []string
	}{
		// Two channels, so that channel counts differ between entries.
		{"all_reduce", []string{"NCCL_NCHANNELS=2"}, []string{"--channels", "auto,1"}},
		{"reduce_scatter", nil, nil},
		{"all_gather", nil, nil},
		{"broadcast", nil, []string{"-r", "1"}},
		{"reduce", nil, []string{"-r", "1"}},
	}
	sweep := []string{"-t", "2", "-b", "1K", "-e", "64K", "-f", "8"}
	sizes := []int64{1024, 8192, 65536}
	for _, tt := range tests {
		t.Run(tt.coll, func(t *testing.T) {
			path := filepath.Join(dir, tt.coll+".conf")
			args := append(append([]string{"cc-perf", "tune", tt.coll}, sweep...), "-n", "2", "--reps", "2", "--config", path)
			r := runCmd(t, tt.env, append(args, tt.extra...)...)
			if r.code != 0 {
				t.Fatalf("tune: exit %d, stderr %q\n%s", r.code, r.stderr, r.stdout)
			}
			rows := parseTune(t, r.stdout)
			if len(rows) != len(sizes) {
				t.Fatalf("%d rows, want one per size %v:\n%s", len(rows), sizes, r.stdout)
			}
			for i, row := range rows {
				if row.bytes != sizes[i] || row.regret < 1 || row.wrong != 0 || row.bestUS > row.autoUS || row.busbw < 0 {
					t.Errorf("row %q: want size %d, regret >= 1, best <= auto, #wrong 0", row.fields, sizes[i])
				}
			}
			for _, w := range []string{"# wrong data: none\n", "# tuner config: " + path + " (3 rows;"} {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("output lacks %q:\n%s", w, r.stdout)
				}
			}

			cfg, err := tune.LoadConfig(path)
			if err != nil {
				t.Fatalf("the written config does not load: %v", err)
			}
			c, _ := bench.Lookup(tt.coll)
			kind, _ := c.Func()
			if len(cfg.Rows) != len(sizes) {
				t.Fatalf("%d config rows, want %d", len(cfg.Rows), len(sizes))
			}
			for i, row := range cfg.Rows {
				if row.Coll != kind || row.MinBytes != sizes[i] || row.MaxBytes != sizes[i] || row.NNodes != 1 || row.NRanks != 2 || row.Channels < 1 {
					t.Errorf("config row %+v, want %s %d..%d on 1 node, 2 ranks", row, kind, sizes[i], sizes[i])
				}
				if got := rows[i].best; got != fmt.Sprintf("%s/%s/%d", row.Algo, row.Proto, row.Channels) {
					t.Errorf("size %d: table's best %s, config row %+v", sizes[i], got, row)
				}
			}

			env := append([]string{"NCCL_TUNER_CONFIG_FILE=" + path}, tt.env...)
			args = append(append([]string{"cc-perf", tt.coll}, sweep...), "-n", "2", "-A", "1")
			if c.Rooted {
				args = append(args, "-r", "1")
			}
			r = runCmd(t, env, args...)
			if r.code != 0 {
				t.Fatalf("%s with the config: exit %d, stderr %q", tt.coll, r.code, r.stderr)
			}
			ran := ranColumns(t, r.stdout)
			if len(ran) != len(sizes) {
				t.Fatalf("%d rows, want %d:\n%s", len(ran), len(sizes), r.stdout)
			}
			for _, row := range cfg.Rows {
				if got, want := ran[row.MinBytes], configColumns(row); got != want {
					t.Errorf("size %d ran %q, the config says %q", row.MinBytes, got, want)
				}
			}
		})
	}
}

// TestTuneHandWrittenConfig: rows tunerConfig makes for picks the tuner
// would not make itself steer the runtime too (the measured sweep above
// may well agree with the tuner everywhere).
func TestTuneHandWrittenConfig(t *testing.T) {
	picks := []bench.Ran{
		{Algo: algos.Tree, Proto: protocols.LL, Channels: 2},
		{Algo: algos.CTRing, Proto: protocols.Simple, Channels: 1},
		{Algo: algos.Ring, Proto: protocols.LL, Channels: 2},
		{Algo: algos.Tree, Proto: protocols.LL128, Channels: 1},
	}
	var rows []bench.TuneRow
	for i, size := range []int64{64, 1024, 16384, 262144} {
		rows = append(rows, bench.TuneRow{Bytes: size, Count: size / 4, Configs: []bench.Measured{{Config: bench.Config{Auto: true}, Ran: picks[i]}}})
	}
	path := filepath.Join(t.TempDir(), "hand.conf")
	var b bytes.Buffer
	if err := tunerConfig(path, algos.AllReduce, rows, 1, 2).Write(&b, "test"); err != nil {
		t.Fatal(err)
	}
	if err := writeAtomic(path, b.Bytes()); err != nil {
		t.Fatal(err)
	}
	r := runCmd(t, []string{"NCCL_TUNER_CONFIG_FILE=" + path, "NCCL_NCHANNELS=2"},
		"cc-perf", "all_reduce", "-t", "2", "-b", "64", "-e", "256K", "-f", "16", "-n", "1", "-A", "1")
	if r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	got := ranColumns(t, r.stdout)
	want := map[int64]string{64: "Tree LL 2", 1024: "CTRing Simple 1", 16384: "Ring LL 2", 262144: "Tree LL128 1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("what ran (-config +ran):\n%s", diff)
	}

	// A config for another job shape (4 ranks) steers nothing: the tuner's
	// own picks run.
	b.Reset()
	if err := tunerConfig(path, algos.AllReduce, rows, 1, 4).Write(&b); err != nil {
		t.Fatal(err)
	}
	if err := writeAtomic(path, b.Bytes()); err != nil {
		t.Fatal(err)
	}
	r = runCmd(t, []string{"NCCL_TUNER_CONFIG_FILE=" + path, "NCCL_NCHANNELS=2"},
		"cc-perf", "all_reduce", "-t", "2", "-b", "64", "-e", "256K", "-f", "16", "-n", "1", "-A", "1")
	if got := ranColumns(t, r.stdout); cmp.Equal(want, got) {
		t.Errorf("a config for 4 ranks steered a 2-rank job: %v", got)
	}
}

// TestTuneBadInput: a one-line error naming the flag and what is allowed,
// exit 6, nothing on stdout.
func TestTuneBadInput(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"no collective", []string{"tune"}, []string{"missing collective", "all_reduce", "reduce_scatter"}},
		{"unknown", []string{"tune", "allreduce"}, []string{`"allreduce"`, "all_gather"}},
		{"point to point", []string{"tune", "alltoall"}, []string{"alltoall", "point-to-point", "all_reduce"}},
		{"all types", []string{"tune", "all_reduce", "-d", "all"}, []string{"-d/--datatype all", "one data type"}},
		{"all ops", []string{"tune", "all_reduce", "-o", "all"}, []string{"-o/--op all"}},
		{"all roots", []string{"tune", "broadcast", "-r", "all"}, []string{"-r/--root all", "one root"}},
		{"root out of range", []string{"tune", "reduce", "-t", "2", "-r", "5", "-b", "8", "-e", "8"}, []string{"-r/--root 5 with 2 ranks", "0..1"}},
		{"zero reps", []string{"tune", "all_reduce", "--reps", "0"}, []string{"--reps", `"0"`, "1..1048576"}},
		{"bad channels", []string{"tune", "all_reduce", "--channels", "0"}, []string{"--channels", `"0"`, "1..64 or auto"}},
		{"repeated channels", []string{"tune", "all_reduce", "--channels", "1,auto,1"}, []string{"--channels", "given twice"}},
		{"more channels than there are", []string{"tune", "all_reduce", "-t", "2", "-b", "8", "-e", "8", "--channels", "64"}, []string{"--channels 64", "channel(s)"}},
		{"unwritable config", []string{"tune", "all_reduce", "--config", filepath.Join(dir, "no", "dir", "t.conf")}, []string{"--config", "t.conf"}},
		{"config is a directory", []string{"tune", "all_reduce", "--config", dir}, []string{"--config", "is a directory"}},
		{"bad sweep", []string{"tune", "all_reduce", "-b", "2G", "-e", "1G"}, []string{"-b/--minbytes 2147483648"}},
		{"stray argument", []string{"tune", "all_reduce", "extra"}, []string{`"extra"`}},
		{"unknown flag", []string{"tune", "all_reduce", "-A", "1"}, []string{"-A"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkOneLineError(t, runCmd(t, nil, append([]string{"cc-perf"}, tt.args...)...), exitUsage, tt.want)
		})
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("files left behind: %v", entries)
	}
}

// TestTuneLauncher runs tune as two "processes" of one rank each (torchrun's
// variables): both sweep, only rank 0's process prints and writes --config.
func TestTuneLauncher(t *testing.T) {
	port := freePort(t)
	dir := t.TempDir()
	outs := make([]result, 2)
	var wg sync.WaitGroup
	for rank := 0; rank < 2; rank++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			env := []string{"RANK=" + strconv.Itoa(rank), "WORLD_SIZE=2", "LOCAL_RANK=" + strconv.Itoa(rank), "LOCAL_WORLD_SIZE=2",
				"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + strconv.Itoa(port-1)}
			outs[rank] = runCmd(t, env, "cc-perf", "tune", "all_gather", "-b", "1K", "-e", "4K", "-f", "4", "-n", "2", "--reps", "1",
				"--config", filepath.Join(dir, fmt.Sprintf("rank%d.conf", rank)))
		}()
	}
	wg.Wait()
	for rank, r := range outs {
		if r.code != 0 {
			t.Fatalf("process %d: exit %d, stderr %q", rank, r.code, r.stderr)
		}
	}
	if outs[1].stdout != "" || outs[1].stderr != "" {
		t.Errorf("process 1 printed %q / %q, want nothing", outs[1].stdout, outs[1].stderr)
	}
	if rows := parseTune(t, outs[0].stdout); len(rows) != 2 || !strings.Contains(outs[0].stdout, "2 ranks on 1 host") {
		t.Errorf("process 0: %d rows, want 2:\n%s", len(rows), outs[0].stdout)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "rank0.conf" {
		t.Errorf("files %v, want rank0.conf only", entries)
	}
}

// TestTuneProgress: on a terminal, rank 0 redraws one progress line on
// stderr (what runs, measurements done of all, elapsed and estimate) and
// erases it at the end; elsewhere stderr stays empty (see the tests above).
func TestTuneProgress(t *testing.T) {
	var out, errb bytes.Buffer
	environ := append([]string(nil), baseEnv...)
	e := &env{
		args:    []string{"cc-perf", "tune", "reduce_scatter", "-t", "2", "-b", "1K", "-e", "2K", "-f", "2", "-n", "1", "--reps", "2"},
		environ: environ, lookup: cli.Lookup(environ), stdout: &out, stderr: &errb,
		viper: cli.NewViper(envPrefix, environ), readFile: os.ReadFile,
		isTerminal: func(w io.Writer) bool { return w == &errb },
	}
	if code := execute(context.Background(), e); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	s := errb.String()
	// 5 configurations (auto, the ring's three protocols, OneShot) x 2
	// repetitions, and room for a confirmation round of 2 x 2: 14
	// measurements per size, 28 in all; the first round's last at size 2
	// is the 24th (a confirmation round runs or not as the times fall).
	for _, w := range []string{"\rtune reduce_scatter: size 1/2 (1024 B), warmup   0% |",
		"| (0/28) [0s:",
		"\rtune reduce_scatter: size 2/2 (2048 B)  85% |",
		"| (24/28) ["} {
		if !strings.Contains(s, w) {
			t.Errorf("stderr lacks %q: %q", w, s)
		}
	}
	if !regexp.MustCompile(`\r +\r$`).MatchString(s) || strings.Contains(s, "\n") {
		t.Errorf("stderr does not end by erasing the progress line: ...%q", s[max(0, len(s)-400):])
	}
}

func TestCheckRegret(t *testing.T) {
	for _, tt := range []struct {
		s    report.TuneSummary
		want string // "" for a pass
	}{
		{report.TuneSummary{Sizes: 10, Good: 9, Worst: 1.9, WorstBytes: 64}, ""},
		{report.TuneSummary{Sizes: 10, Good: 10, Worst: 1.1}, ""},
		{report.TuneSummary{}, ""},
		{report.TuneSummary{Sizes: 10, Good: 8, Worst: 1.5, WorstBytes: 64}, "regret <= 1.25 at 8 of 10 sizes (80%), want >= 90%"},
		{report.TuneSummary{Sizes: 10, Good: 9, Worst: 2, WorstBytes: 4096}, "regret 2.00 at 4096 B, want < 2 at every size"},
		{report.TuneSummary{Sizes: 2, Good: 1, Worst: 3, WorstBytes: 8}, "(50%), want >= 90%; regret 3.00 at 8 B"},
	} {
		err := checkRegret(tt.s)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("checkRegret(%+v) = %v, want a pass", tt.s, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("checkRegret(%+v) = %v, want an error with %q", tt.s, err, tt.want)
		}
	}
}

func TestChannelList(t *testing.T) {
	var l channelList
	if err := l.Set("auto, 2,1"); err != nil || !cmp.Equal(l.counts, []int{0, 2, 1}) {
		t.Errorf("Set(auto, 2,1) = %v, counts %v", err, l.counts)
	}
	for _, bad := range []string{"", "0", "65", "x", "2,2", "auto,AUTO"} {
		if err := (&channelList{}).Set(bad); err == nil {
			t.Errorf("Set(%q): nil error", bad)
		}
	}
}

func TestShellJoin(t *testing.T) {
	got := shellJoin([]string{"cc-perf", "tune", "all_reduce", "--config", "my file.conf", "it's"})
	if want := `cc-perf tune all_reduce --config 'my file.conf' 'it'\''s'`; got != want {
		t.Errorf("shellJoin = %s, want %s", got, want)
	}
}

func TestTuneHelp(t *testing.T) {
	r := runCmd(t, nil, "cc-perf", "tune", "all_reduce", "-h")
	if r.code != 0 {
		t.Fatalf("-h exit %d, stderr %q", r.code, r.stderr)
	}
	for _, w := range []string{"--reps", "--channels", "--config", "--check", "--all", "-b, --minbytes", "NCCL_TUNER_CONFIG_FILE", "Exit status"} {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("help does not mention %q", w)
		}
	}
	if r := runCmd(t, nil, "cc-perf", "-h"); !strings.Contains(r.stdout, "tune") {
		t.Errorf("cc-perf -h does not list tune:\n%s", r.stdout)
	}
}
