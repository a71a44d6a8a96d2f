package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/report"
	"github.com/seed-760dd1f1/cc/cmd/internal/cli"
	"github.com/seed-760dd1f1/cc/runtime/bootstrap"
	"github.com/seed-760dd1f1/cc/runtime/comm"
	"github.com/seed-760dd1f1/cc/runtime/tune"
)

// tuneRun runs one cc-perf tune: join or create the ranks, sweep, and on
// the process of rank 0 report, write --config and apply --check.
func tuneRun(ctx context.Context, tc *tuneConfig, e *env) error {
	o := &tc.o
	j, err := joinSweep(ctx, e, tc.nthreads, tc.ngpus, o.MaxBytes, []*bench.Coll{o.Coll}, o.Root, o.Channels, o.Timeout)
	if err != nil {
		return err
	}
	defer j.close()
	id, nranks, comms, bcomms := j.id, j.nranks, j.comms, j.bcomms

	if id.Rank != 0 { // every process sweeps; only rank 0's reports
		if err := bench.Tune(ctx, bcomms, *o, nil); err != nil {
			return failed(err, nil)
		}
		return nil
	}
	rec := newTuneRecorder("tune "+o.Coll.Name, e)
	runErr := bench.Tune(ctx, bcomms, *o, rec)
	rec.endProgress()

	nhosts := countHosts(comms[0])
	h := report.TuneHeader{Coll: o.Coll.Name, NRanks: nranks, NHosts: nhosts, Type: o.Type.String(), Root: -1,
		Reps: o.Reps, Iters: o.Iters, Warmup: o.Warmup, Detail: tc.all}
	if o.Coll.Reduces {
		h.Op = bench.OpName(o.Op)
	}
	if o.Coll.Rooted {
		h.Root = o.Root
	}
	if runErr == nil || len(rec.rows) > 0 {
		if err := report.WriteTune(e.stdout, h, rec.configs, rec.rows); err != nil {
			return cli.Errorf(exitSystem, "write the table: %w", err)
		}
	}
	if runErr != nil {
		return failed(runErr, nil)
	}

	s := report.SummarizeTune(rec.rows)
	if s.Wrong > 0 {
		return cli.Errorf(exitResults, "wrong data: %d wrong elements, first in %s; no tuner config written", s.Wrong, s.FirstWrong)
	}
	if tc.configPath != "" {
		kind, _ := o.Coll.Func()
		cfg := tunerConfig(tc.configPath, kind, rec.rows, nhosts, nranks)
		comments := []string{
			fmt.Sprintf("written by cc-perf tune %s on %s", o.Coll.Name, time.Now().Format("2006-01-02 15:04:05 MST")),
			"command: " + shellJoin(e.args),
			fmt.Sprintf("job: %d ranks on %s, %s; %d repetitions of %d iterations per configuration",
				nranks, plural(nhosts, "host"), strings.TrimSpace(h.Type+" "+h.Op), o.Reps, o.Iters),
			fmt.Sprintf("regret <= %.2f at %d of %d sizes; worst %.2f at %d B",
				report.GoodRegret, s.Good, s.Sizes, s.Worst, s.WorstBytes),
			"each row: the fastest configuration measured at that size (bytes: the larger of send and receive bytes)",
		}
		var b bytes.Buffer
		if err := cfg.Write(&b, comments...); err != nil {
			return cli.Errorf(exitInternal, "tuner config: %w", err)
		}
		if err := writeAtomic(tc.configPath, b.Bytes()); err != nil {
			return cli.Errorf(exitSystem, "--config %q: %w", tc.configPath, err)
		}
		fmt.Fprintf(e.stdout, "# tuner config: %s (%d rows; NCCL_TUNER_CONFIG_FILE=%s makes the runtime pick them)\n", tc.configPath, len(cfg.Rows), tc.configPath)
	}
	if tc.check {
		if err := checkRegret(s); err != nil {
			fmt.Fprintf(e.stdout, "# check: FAILED\n")
			return cli.WithCode(exitResults, err)
		}
		fmt.Fprintf(e.stdout, "# check: passed (regret <= %.2f at >= %.0f%% of sizes, < %g everywhere)\n", report.GoodRegret, 100*checkFraction, checkWorst)
	}
	return nil
}

// sweepJob is this process's ranks of a cc-perf tune or calibrate job.
type sweepJob struct {
	id     bootstrap.Identity
	nranks int
	comms  []*comm.Comm
	bcomms []bench.Communicator // comms, as bench sees them
}

func (j *sweepJob) close() { closeComms(j.comms) }

// joinSweep joins (or, without a launcher, creates) the job's ranks for
// sweeps of colls up to maxBytes with root (rooted collectives) on the
// given channel counts, after checking that the job can run them: the
// rank count, the root, the memory of this process's buffers, and channel
// counts the communicators have (Force would quietly cap one above).
// timeout (-T; 0: none) bounds the join as it bounds cc-perf's (initComms).
func joinSweep(ctx context.Context, e *env, nthreads, ngpus int, maxBytes int64, colls []*bench.Coll, root int, channels []int, timeout time.Duration) (*sweepJob, error) {
	params, id, nranks, err := discover(e, nthreads, ngpus)
	if err != nil {
		return nil, err
	}
	perProc := nthreads * ngpus
	for _, c := range colls {
		if err := c.CheckRanks(nranks); err != nil {
			return nil, usagef("%v", err)
		}
		if c.Rooted && root >= nranks {
			return nil, usagef("-r/--root %d with %d ranks: want 0..%d", root, nranks, nranks-1)
		}
		if err := checkMemory(bench.Options{Coll: c, MaxBytes: maxBytes, Check: 1}, perProc, e.readFile); err != nil {
			return nil, err
		}
	}
	comms, err := initComms(ctx, id, perProc, nranks, params, timeout)
	if err != nil {
		return nil, failed(err, nil)
	}
	j := &sweepJob{id: id, nranks: nranks, comms: comms, bcomms: make([]bench.Communicator, len(comms))}
	for i, c := range comms {
		j.bcomms[i] = benchComm{Comm: c, job: c}
	}
	for _, ch := range channels {
		if nc := comms[0].NChannels(); ch > nc {
			j.close()
			return nil, usagef("--channels %d: the communicators have %d channel(s) (one per two cores, 1 to 4, or NCCL_MIN_NCHANNELS/NCCL_MAX_NCHANNELS/NCCL_NCHANNELS): want 1..%d or auto", ch, nc, nc)
		}
	}
	return j, nil
}

// checkRegret is --check: nil when the automatic pick is within GoodRegret
// of the best at checkFraction of the sizes and below checkWorst at every
// size, else an error saying what missed.
func checkRegret(s report.TuneSummary) error {
	var why []string
	if f := s.GoodFraction(); f < checkFraction {
		why = append(why, fmt.Sprintf("regret <= %.2f at %d of %d sizes (%.0f%%), want >= %.0f%%",
			report.GoodRegret, s.Good, s.Sizes, 100*f, 100*checkFraction))
	}
	if s.Worst >= checkWorst {
		why = append(why, fmt.Sprintf("regret %.2f at %d B, want < %g at every size", s.Worst, s.WorstBytes, checkWorst))
	}
	if len(why) == 0 {
		return nil
	}
	return fmt.Errorf("--check failed: %s", strings.Join(why, "; "))
}

// tunerConfig makes one tuner config row per measured size: exactly its
// bytes, the algorithm, protocol and channels that won it (Winner), for jobs of
// nnodes hosts and nranks ranks only (a tuning measured on one shape says
// nothing about another).
func tunerConfig(path string, kind algos.Coll, rows []bench.TuneRow, nnodes, nranks int) *tune.Config {
	cfg := &tune.Config{Path: path}
	for _, r := range rows {
		best := r.Winner().Ran
		cfg.Rows = append(cfg.Rows, tune.ConfigRow{
			Coll: kind, MinBytes: r.Bytes, MaxBytes: r.Bytes,
			Algo: best.Algo, Proto: best.Proto, Channels: best.Channels,
			NNodes: nnodes, NRanks: nranks, PipeOps: -1, RegBuff: -1,
		})
	}
	return cfg
}

// countHosts is the number of hosts of c's job, as the runtime counts
// them (by host identity).
func countHosts(c *comm.Comm) int {
	hosts := map[string]bool{}
	for _, p := range c.Peers() {
		hosts[p.HostID] = true
	}
	return max(len(hosts), 1)
}

// tuneRecorder keeps rank 0's rows and draws the progress line.
type tuneRecorder struct {
	what     string
	configs  []bench.Config
	rows     []bench.TuneRow
	progress *progress // nil: no line
	e        *env
	started  bool // progress was made (or found unwanted)
}

// newTuneRecorder is rank 0's recorder of a sweep called what ("tune
// all_reduce", "calibrate all_gather"), with a progress line when e wants
// one (wantProgress).
func newTuneRecorder(what string, e *env) *tuneRecorder {
	return &tuneRecorder{what: what, e: e}
}

func (r *tuneRecorder) Begin(c []bench.Config) { r.configs = c }
func (r *tuneRecorder) Row(row bench.TuneRow)  { r.rows = append(r.rows, row) }

// Progress draws the line: measurements done of the whole sweep, the size
// being measured, elapsed time and estimate.
func (r *tuneRecorder) Progress(p bench.TuneProgress) {
	if !r.started { // tune runs long by nature: the line shows from the start
		r.started = true
		r.progress = newProgress(r.e, "", p.Sizes*p.Steps, 0)
	}
	if r.progress == nil {
		return
	}
	warm := "" // the count is of measurements; warmups come before each size's first
	if p.Step == 0 {
		warm = ", warmup"
	}
	r.progress.set((p.Size-1)*p.Steps+p.Step, fmt.Sprintf("%s: size %d/%d (%d B)%s", r.what, p.Size, p.Sizes, p.Bytes, warm))
}

// endProgress erases the progress line.
func (r *tuneRecorder) endProgress() { r.progress.done() }

// probeWritable checks that a file can be created next to path (before a
// sweep that may take long), creating nothing that stays.
func probeWritable(path string) error {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("is a directory")
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".cc-perf-probe-*")
	if err != nil {
		return unwrapPath(err)
	}
	f.Close()
	return os.Remove(f.Name())
}

// writeAtomic replaces path with data in one step (a temporary file renamed
// over it), so a reader never sees half a file.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".cc-perf-tune-*")
	if err != nil {
		return unwrapPath(err)
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return unwrapPath(err)
	}
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		return unwrapPath(err)
	}
	if err := f.Close(); err != nil {
		return unwrapPath(err)
	}
	return unwrapPath(os.Rename(f.Name(), path))
}

// unwrapPath drops the *PathError or *LinkError around err (its path is a
// temporary file's) and keeps the reason.
func unwrapPath(err error) error {
	var pe *os.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return pe.Err
	case errors.As(err, &le):
		return le.Err
	}
	return err
}

// shellJoin quotes args for a comment line a shell could run again.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`;&|<>()*?[]#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		q[i] = a
	}
	return strings.Join(q, " ")
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
