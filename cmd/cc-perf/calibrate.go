package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/report"
	"github.com/seed-760dd1f1/cc/cmd/internal/cli"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
	"github.com/seed-760dd1f1/cc/runtime/tune"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// cc-perf calibrate: measure every entry of the collectives the tuner
// chooses for, fit the constants of this job's link class (tune.Fit) and
// write them, with the other classes from a base, as a CC_TUNE_FILE.

// calibrated are the collectives a calibration measures: all three
// carry the ring (all-reduce twice the steps of the others, which
// separates latency per step from latency per call), the tree and CTRING
// run all-reduce, PAT the other two.
var calibrated = []string{"all_reduce", "reduce_scatter", "all_gather"}

// calibrateFlags are the flags of cc-perf calibrate.
type calibrateFlags struct {
	nthreads, ngpus     int
	minBytes, maxBytes  cli.Size
	stepFactor          int
	iters, warmup, reps int
	timeout             int
	sharedCores         int
	channels            channelList
	output, base        string
	all                 bool
}

func defaultCalibrateFlags() calibrateFlags {
	return calibrateFlags{nthreads: 1, ngpus: 1, minBytes: 8, maxBytes: 16 << 20, stepFactor: 8, iters: 5, warmup: 2, reps: 5}
}

func (f *calibrateFlags) register(fs *pflag.FlagSet) {
	i := func(p *int, name, short string, min, max int, usage string) {
		fs.VarP(intFlag{p, min, max}, name, short, usage)
	}
	fs.StringVarP(&f.output, "output", "o", "", "write the fitted constants to this file (JSON; give it to the runtime as CC_TUNE_FILE)")
	fs.StringVar(&f.base, "base", "", "constants file the other link classes come from (default: rank 0's CC_TUNE_FILE, else the built-in constants)")
	i(&f.nthreads, "nthreads", "t", 1, 1024, "threads per process: each runs -g ranks (ranks = processes x threads x gpus)")
	i(&f.ngpus, "ngpus", "g", 1, 1024, "ranks per thread, each a goroutine with its own communicator")
	fs.VarP(&f.minBytes, "minbytes", "b", fmt.Sprintf("smallest message size (latencies come from sizes <= %d B)", tune.SmallBytes))
	fs.VarP(&f.maxBytes, "maxbytes", "e", fmt.Sprintf("largest message size (bandwidths come from sizes >= %d B)", tune.LargeBytes))
	i(&f.stepFactor, "stepfactor", "f", 2, 1<<20, "size multiplier between measured sizes")
	i(&f.iters, "iters", "n", 1, unlimited, "timed iterations per measurement")
	i(&f.warmup, "warmup_iters", "w", 0, unlimited, "untimed calls of every configuration at every size before its first measurement")
	i(&f.reps, "reps", "", 1, 1<<20, "measurements of every configuration at every size, interleaved in a shuffled order")
	fs.Var(&f.channels, "channels", "channel counts to measure every entry with, comma-separated, 1..64 (default: 1 and the communicators' count)")
	i(&f.timeout, "timeout", "T", 0, unlimited, "seconds joining the job, a warmup or a measurement may take before every rank of the job is aborted (exit 4); 0 = no limit")
	i(&f.sharedCores, "shared-cores", "", 0, 1<<20, "the job's hosts share this many cores (namespaces or VMs of one machine) and its ranks, one per host, outnumber them: fit only the net class's alpha_cpu, on a base calibrated with a core per rank (0 = a full calibration)")
	fs.BoolVar(&f.all, "all", false, "also print every measurement with the model's predictions before and after the fit")
}

// calibrateConfig is a validated cc-perf calibrate run.
type calibrateConfig struct {
	sweep           bench.TuneOptions // Coll unset: each of calibrated in turn
	nthreads, ngpus int
	output          string
	base            *tune.Consts // nil: the communicators' own
	all             bool
	sharedCores     int // not 0: fit alpha_cpu alone (tune.FitCPU)
}

func (f *calibrateFlags) validate() (*calibrateConfig, error) {
	if f.output == "" {
		return nil, usagef("calibrate: missing -o/--output FILE: where to write the fitted constants")
	}
	if err := probeWritable(f.output); err != nil {
		return nil, usagef("-o/--output %q: %v", f.output, err)
	}
	min, max := int64(f.minBytes), int64(f.maxBytes)
	if err := checkSweep(min, max, 0, int64(f.stepFactor)); err != nil {
		return nil, err
	}
	largest := int64(0)
	bench.Sizes(min, max, 0, int64(f.stepFactor), func(size int64) bool {
		largest = size
		return true
	})
	if f.sharedCores > 0 && min > tune.SmallBytes {
		return nil, usagef("-b %d: --shared-cores fits latencies: the sizes measured must reach <= %d B", min, tune.SmallBytes)
	}
	if f.sharedCores == 0 && (min > tune.SmallBytes || largest < tune.LargeBytes) {
		return nil, usagef("-b %d -e %d -f %d: the sizes measured must reach <= %d B (latencies) and >= %d B (bandwidths); the largest is %d B",
			min, max, f.stepFactor, tune.SmallBytes, tune.LargeBytes, largest)
	}
	for _, ch := range f.channels.counts {
		if ch == 0 {
			return nil, usagef("--channels auto: calibrate measures given channel counts: want numbers, 1..64")
		}
	}
	c := &calibrateConfig{
		sweep: bench.TuneOptions{Type: reduce.Float32, Op: reduce.Sum,
			MinBytes: min, MaxBytes: max, StepFactor: int64(f.stepFactor),
			Iters: f.iters, Warmup: f.warmup, Reps: f.reps, Channels: f.channels.counts,
			Timeout: time.Duration(f.timeout) * time.Second},
		nthreads: f.nthreads, ngpus: f.ngpus, output: f.output, all: f.all, sharedCores: f.sharedCores,
	}
	if f.base != "" {
		b, err := tune.LoadConsts(f.base)
		if err != nil {
			return nil, usagef("--base: %v", err)
		}
		c.base = b
	}
	return c, nil
}

const calibrateLong = `cc-perf calibrate measures the runtime on this job and fits the tuner's
constants for the job's link class: shm (the ranks share one host, at most
one rank per core), shm-busy (more ranks than cores) or net (the job spans
hosts). It times every (algorithm, protocol) entry of all_reduce,
reduce_scatter and all_gather forced on every rank, at sizes -b..-e (x -f),
on 1 channel and on the communicators' count, interleaved as cc-perf tune
does, and fits (medians over the samples that feed each constant):

  beta, beta_max  the ring's bus bandwidth per channel and on all channels,
                  from sizes >= 1 MiB
  alpha           the ring's latency per step, from sizes <= 4 KiB
  efficiency      each other algorithm's bandwidth against the ring's
  algo_lat        each other algorithm's latency per call (PAT: op_cost,
                  per step of its program)

It writes them to -o with the other classes and gamma from --base (default:
the runtime's constants, i.e. rank 0's CC_TUNE_FILE or the built-in ones),
so calibrating each class in turn builds one file:

  ccrun -np 2 cc-perf calibrate -o cc-tune.json
  CC_TUNE_FILE=cc-tune.json ccrun -np 4 --oversubscribe cc-perf calibrate -o cc-tune.json
  CC_TUNE_FILE=cc-tune.json ccrun --hostfile hosts -np 2 cc-perf calibrate -o cc-tune.json
  CC_TUNE_FILE=cc-tune.json ccrun -np 2 cc-perf tune all_reduce --check

--shared-cores N is for hosts that share one machine's N cores (the
testbed's network namespaces, VMs): on a job of one rank per host with more
ranks R than N, it fits only the net class's alpha_cpu, what a step adds
per rank per core beyond one (a step takes alpha + alpha_cpu x (R/N - 1)),
from the ring's all-reduce calls of 1..4 KiB, against a --base whose net
class was calibrated with a core per rank; everything else is copied from
the base. cc-perf predict --shared-cores charges it to the cores; the tuner
does not read it. scripts/predict-check.sh does both calibrations:

  ccrun -H tb1,tb2 -np 2 cc-perf calibrate -o c.json
  ccrun -H tb1,tb2,tb3,tb4 -np 4 -x NCCL_ALGO=Ring cc-perf calibrate \
      --shared-cores 2 --base c.json -b 8 -e 4K -o c.json

Only rank 0 prints and writes. Exit status as cc-perf tune: 0 ok; 2 system
error; 3 runtime error or nothing to fit; 4 timeout (-T); 6 invalid usage;
7 wrong data (no file written).`

func newCalibrateCmd(e *env) *cobra.Command {
	f := defaultCalibrateFlags()
	cmd := &cobra.Command{
		Use:   "calibrate -o FILE [flags]",
		Short: "measure this job and fit the tuner's constants for its link class (CC_TUNE_FILE)",
		Long:  calibrateLong,
		Args:  onlyFlags("calibrate"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.validate()
			if err != nil {
				return err
			}
			return calibrateRun(cmd.Context(), c, e)
		},
	}
	cmd.Flags().SortFlags = false
	f.register(cmd.Flags())
	return cmd
}

// calibrateRun joins the job, sweeps each collective of calibrated, and on
// rank 0's process fits, reports and writes the constants.
func calibrateRun(ctx context.Context, c *calibrateConfig, e *env) error {
	var colls []*bench.Coll
	for _, name := range calibrated {
		coll, _ := bench.Lookup(name)
		colls = append(colls, coll)
	}
	j, err := joinSweep(ctx, e, c.nthreads, c.ngpus, c.sweep.MaxBytes, colls, 0, c.sweep.Channels, c.sweep.Timeout)
	if err != nil {
		return err
	}
	defer j.close()
	if n := c.sharedCores; n > 0 {
		if hosts := countHosts(j.comms[0]); hosts != j.nranks || j.nranks <= n {
			return cli.Errorf(exitUsage, "--shared-cores %d: %d ranks on %s: alpha_cpu is fitted on a job of one rank per host with more ranks than the %d cores", n, j.nranks, plural(hosts, "host"), n)
		}
	}
	o := c.sweep
	if len(o.Channels) == 0 {
		o.Channels = []int{1}
		if nc := j.comms[0].NChannels(); nc > 1 {
			o.Channels = append(o.Channels, nc)
		}
	}
	var samples []tune.Sample
	var wrong []string
	for _, coll := range colls {
		o.Coll = coll
		var rec *tuneRecorder
		var brec bench.TuneRecorder // nil, not a nil *tuneRecorder, off rank 0
		if j.id.Rank == 0 {
			rec = newTuneRecorder("calibrate "+coll.Name, e)
			brec = rec
		}
		err := bench.Tune(ctx, j.bcomms, o, brec)
		if rec != nil {
			rec.endProgress()
		}
		if err != nil {
			return failed(err, nil)
		}
		if rec == nil {
			continue
		}
		kind, _ := coll.Func()
		for _, r := range rec.rows {
			for _, m := range r.Configs {
				if m.Wrong > 0 {
					wrong = append(wrong, fmt.Sprintf("%s %s at %d B", coll.Name, m.Config, r.Bytes))
				}
				if m.Config.Auto {
					continue
				}
				samples = append(samples, tune.Sample{Coll: kind, Algo: m.Ran.Algo, Proto: m.Ran.Proto,
					Channels: m.Ran.Channels, Bytes: r.Bytes, TimeUS: m.TimeUS})
			}
		}
	}
	if j.id.Rank != 0 {
		return nil
	}
	if len(wrong) > 0 {
		return cli.Errorf(exitResults, "wrong data in %s; no constants written", strings.Join(wrong, ", "))
	}

	model := j.comms[0].Model()
	base := c.base
	if base == nil {
		base = model.Consts()
	}
	host, _ := os.Hostname()
	nhosts := countHosts(j.comms[0])
	source := fmt.Sprintf("cc-perf calibrate on %s, %s: %d ranks on %s (%d cores here), channels %v, %d-%d B",
		host, time.Now().UTC().Format("2006-01-02 15:04 UTC"), j.nranks, plural(nhosts, "host"), runtime.NumCPU(),
		o.Channels, o.MinBytes, o.MaxBytes)
	fit := tune.Fit
	if c.sharedCores > 0 {
		source += fmt.Sprintf(", on %d shared cores", c.sharedCores)
		fit = func(base *tune.Consts, m *tune.Model, ss []tune.Sample, source string) (*tune.Consts, *tune.Fitted, error) {
			return tune.FitCPU(base, m, ss, c.sharedCores, source)
		}
	}
	fitted, f, err := fit(base, model, samples, source)
	if err != nil {
		return cli.Errorf(exitRuntime, "calibrate: %w", err)
	}
	fitted.Source = "cc-perf calibrate (classes: see each class's source)"
	data, err := json.MarshalIndent(fitted, "", "  ")
	if err != nil {
		return cli.Errorf(exitInternal, "calibrate: %w", err)
	}
	if err := writeAtomic(c.output, append(data, '\n')); err != nil {
		return cli.Errorf(exitSystem, "-o/--output %q: %w", c.output, err)
	}
	var b bytes.Buffer
	h := report.CalibrationHeader{NRanks: j.nranks, NHosts: nhosts, Colls: calibrated, Channels: o.Channels,
		MinBytes: o.MinBytes, MaxBytes: o.MaxBytes, Factor: o.StepFactor, Reps: o.Reps, Iters: o.Iters,
		Base: base.Source, Detail: c.all, SharedCores: c.sharedCores}
	before, after := model.With(base), model.With(fitted)
	for _, s := range samples {
		h.Samples = append(h.Samples, report.Predicted{Sample: s,
			Before: before.Time(s.Coll, s.Algo, s.Proto, s.Bytes, s.Channels),
			After:  after.Time(s.Coll, s.Algo, s.Proto, s.Bytes, s.Channels)})
	}
	if err := report.WriteCalibration(&b, h, f); err != nil {
		return cli.Errorf(exitInternal, "calibrate: %w", err)
	}
	what := fmt.Sprintf("class %s fitted, the others from the base", f.Class)
	if c.sharedCores > 0 {
		what = fmt.Sprintf("class %s's alpha_cpu fitted, the rest from the base", f.Class)
	}
	fmt.Fprintf(&b, "# constants: %s (%s); use: CC_TUNE_FILE=%s\n", c.output, what, c.output)
	_, err = e.stdout.Write(b.Bytes())
	return err
}
