package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/report"
	"github.com/seed-760dd1f1/cc/cmd/internal/cli"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// cc-perf tune <collective>: the sweep of bench.Tune, its report, a tuner
// config file (--config) and a gate (--check). The flags that also exist on
// the nccl-tests subcommands mean the same here; CC_PERF_* variables fill
// only those subcommands' flags (--check means something else here).

// The --check gate: the automatic pick is within GoodRegret of the best at
// checkFraction of the sizes at least, and below checkWorst everywhere.
const (
	checkFraction = 0.9
	checkWorst    = 2.0
)

// tuneFlags holds the flags of cc-perf tune <collective>.
type tuneFlags struct {
	nthreads, ngpus          int
	minBytes, maxBytes, step cli.Size
	stepFactor               int
	iters, warmup, reps      int
	ops                      opList
	types                    typeList
	root                     rootFlag
	timeout                  int
	channels                 channelList
	config                   string
	check, all               bool
}

func defaultTuneFlags() tuneFlags {
	d := defaultFlags()
	return tuneFlags{
		nthreads: d.nthreads, ngpus: d.ngpus,
		minBytes: d.minBytes, maxBytes: d.maxBytes, step: d.step, stepFactor: d.stepFactor,
		iters: d.iters, warmup: d.warmup, reps: 3,
		ops: d.ops, types: d.types, root: d.root,
	}
}

func (f *tuneFlags) register(fs *pflag.FlagSet) {
	i := func(p *int, name, short string, min, max int, usage string) {
		fs.VarP(intFlag{p, min, max}, name, short, usage)
	}
	i(&f.nthreads, "nthreads", "t", 1, 1024, "threads per process: each runs -g ranks (ranks = processes x threads x gpus)")
	i(&f.ngpus, "ngpus", "g", 1, 1024, "ranks per thread, each a goroutine with its own communicator")
	fs.VarP(&f.minBytes, "minbytes", "b", "smallest message size: bytes, or with a K, M or G suffix (powers of 1024)")
	fs.VarP(&f.maxBytes, "maxbytes", "e", "largest message size (same syntax as -b)")
	fs.VarP(&f.step, "stepbytes", "i", "size increment when -f is 1 or 0")
	i(&f.stepFactor, "stepfactor", "f", 0, 1<<20, "size multiplier between rows (1 or 0: add -i instead)")
	i(&f.iters, "iters", "n", 1, unlimited, "timed iterations per measurement")
	i(&f.warmup, "warmup_iters", "w", 0, unlimited, "untimed calls of every configuration at every size before its first measurement")
	i(&f.reps, "reps", "", 1, 1<<20, "measurements of every configuration at every size, interleaved in a shuffled order")
	fs.Var(&f.channels, "channels", `channel counts to force every entry with, comma-separated: 1..64, or auto for the communicator's choice`)
	fs.VarP(&f.ops, "op", "o", "reduction: sum, prod, max, min, avg, mulsum")
	fs.VarP(&f.types, "datatype", "d", "data type: int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, f8e4m3, f8e5m2")
	fs.VarP(&f.root, "root", "r", "root rank of broadcast and reduce")
	i(&f.timeout, "timeout", "T", 0, unlimited, "seconds joining the job, a warmup or a measurement may take before every rank of the job is aborted (exit 4); 0 = no limit")
	fs.StringVar(&f.config, "config", "", "write a tuner config file (NCCL_TUNER_CONFIG_FILE) whose rows make the runtime pick the best configuration at each size")
	fs.BoolVar(&f.all, "all", false, "also print every configuration's time at every size, before the summary table")
	fs.BoolVar(&f.check, "check", false, fmt.Sprintf("exit 7 unless regret (auto time / best time) <= %.2f at >= %.0f%% of the sizes and < %g at every size",
		report.GoodRegret, 100*checkFraction, checkWorst))
}

// channelList is --channels: channel counts, 0 ("auto") for the
// communicator's choice.
type channelList struct {
	set    string
	counts []int
}

func (l *channelList) Set(s string) error {
	var counts []int
	seen := map[int]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		ch := 0
		if !strings.EqualFold(f, "auto") {
			v, err := strconv.Atoi(f)
			if err != nil || v < 1 || v > 64 {
				return fmt.Errorf("%q is not a channel count: want 1..64 or auto, comma-separated", f)
			}
			ch = v
		}
		if seen[ch] {
			return fmt.Errorf("%q is given twice", f)
		}
		seen[ch] = true
		counts = append(counts, ch)
	}
	l.set, l.counts = s, counts
	return nil
}

func (l *channelList) String() string {
	if l.set == "" {
		return "auto"
	}
	return l.set
}
func (l *channelList) Type() string { return "list" }

// tuneConfig is a validated cc-perf tune run.
type tuneConfig struct {
	o               bench.TuneOptions
	nthreads, ngpus int
	configPath      string // --config, "" for none
	check, all      bool
}

// validate checks the flags for coll.
func (f *tuneFlags) validate(coll *bench.Coll) (*tuneConfig, error) {
	min, max, step, factor := int64(f.minBytes), int64(f.maxBytes), int64(f.step), int64(f.stepFactor)
	if err := checkSweep(min, max, step, factor); err != nil {
		return nil, err
	}
	if len(f.types.types) != 1 {
		return nil, usagef("-d/--datatype all: tune measures one data type; give one")
	}
	if len(f.ops.ops) != 1 {
		return nil, usagef("-o/--op all: tune measures one op; give one")
	}
	if f.root.rank < 0 {
		return nil, usagef("-r/--root %s: tune measures one root; give a rank", f.root.set)
	}
	if f.config != "" {
		if err := probeWritable(f.config); err != nil {
			return nil, usagef("--config %q: %v", f.config, err)
		}
	}
	op := f.ops.ops[0]
	if !coll.Reduces {
		op = reduce.Sum // unused by the collective
	}
	return &tuneConfig{
		o: bench.TuneOptions{
			Coll: coll, Type: f.types.types[0], Op: op, Root: f.root.rank,
			MinBytes: min, MaxBytes: max, StepBytes: step, StepFactor: factor,
			Iters: f.iters, Warmup: f.warmup, Reps: f.reps, Channels: f.channels.counts,
			Timeout: time.Duration(f.timeout) * time.Second,
		},
		nthreads: f.nthreads, ngpus: f.ngpus,
		configPath: f.config, check: f.check, all: f.all,
	}, nil
}

// tunable is every collective whose algorithm the tuner chooses.
func tunable() []*bench.Coll {
	var out []*bench.Coll
	for _, c := range bench.Collectives {
		if _, ok := c.Func(); ok {
			out = append(out, c)
		}
	}
	return out
}

func tunableNames() string {
	var names []string
	for _, c := range tunable() {
		names = append(names, c.Name)
	}
	return strings.Join(names, ", ")
}

const tuneLong = `cc-perf tune measures, at every size of the -b/-e/-f sweep, the runtime's own
choice of algorithm, protocol and channels ("auto") against every (algorithm,
protocol) entry the collective may run with here (NCCL_ALGO, NCCL_PROTO and
NCCL_PAT_ENABLE applied), forced on every rank, and prints per size the fastest
configuration, the automatic one, and the regret: auto's time / the best time.

  cc-perf tune all_reduce -t 2 -b 8 -e 64M -f 4
  ccrun -np 4 cc-perf tune all_gather -b 8 -e 256M -f 4 --reps 5 --config tuner.conf
  NCCL_TUNER_CONFIG_FILE=tuner.conf ccrun -np 4 cc-perf all_gather -b 8 -e 256M -f 4 -A 1`

func newTuneCmd(e *env) *cobra.Command {
	return collParentCmd("tune", "compare the tuner's choices with every algorithm and protocol, per size", tuneLong,
		func(c *bench.Coll) *cobra.Command { return newTuneCollCmd(c, e) })
}

// collParentCmd is a command whose subcommands are the tuned collectives
// (cc-perf tune, cc-perf predict): verb <collective>, each made by sub.
func collParentCmd(verb, short, long string, sub func(c *bench.Coll) *cobra.Command) *cobra.Command {
	cmd := &cobra.Command{
		Use:   verb + " <collective> [flags]",
		Short: short,
		Long:  long + "\n\nCollectives: " + tunableNames() + ".",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("%s: missing collective: want one of %s (cc-perf %s -h for help)", verb, tunableNames(), verb)
			}
			if c, ok := bench.Lookup(args[0]); ok {
				return usagef("%s %s: %s is made of point-to-point calls, whose algorithm the tuner does not choose: want one of %s", verb, args[0], c.Name, tunableNames())
			}
			return usagef("%s: unknown collective %q: want one of %s", verb, args[0], tunableNames())
		},
	}
	for _, c := range tunable() {
		cmd.AddCommand(sub(c))
	}
	return cmd
}

func newTuneCollCmd(c *bench.Coll, e *env) *cobra.Command {
	f := defaultTuneFlags()
	cmd := &cobra.Command{
		Use:     c.Name + " [flags]",
		Aliases: []string{c.Name + "_perf"},
		Short:   "tune " + c.Name,
		Long: tuneLong + fmt.Sprintf(`

Configurations: auto, then each entry with each --channels count. At every
size each is warmed up (-w calls), then measured --reps times (-n iterations
each, a data check after each), all measurements interleaved in an order
shuffled per size and repetition with a fixed seed, the same on every rank.
A configuration's time is the median of its reps x iters per-iteration times,
each the slowest rank's; configurations that ran the same algorithm, protocol
and channels (auto and the entry it picked) have their samples pooled, so
the regret is 1 when auto picked the fastest. When the fastest ran something
else, a confirmation round measures auto and it again, alone, --reps times
each, alternating: the summary's best, times and regret come from that round
(the fastest of many noisy medians is biased low), and auto wins the row when
the candidate is no faster there. Wrong data in any configuration
fails the run (exit 7) and no --config file is written. Only rank 0 prints; a
progress line goes to stderr when it is a terminal.

--config FILE writes one row per size covering exactly its bytes (NCCL's
nBytes: the larger of send and receive bytes), naming the algorithm,
protocol and channels that won, for this job's nodes and ranks;
give it to the runtime as NCCL_TUNER_CONFIG_FILE.

Exit status: 0 ok; 2 system error; 3 runtime error; 4 timeout (-T); 6 invalid
usage; 7 wrong data, or --check failed (%.0f%% of sizes within regret %.2f,
every size below %g).`, 100*checkFraction, report.GoodRegret, checkWorst),
		Args: onlyFlags("tune " + c.Name),
		RunE: func(cmd *cobra.Command, _ []string) error {
			tc, err := f.validate(c)
			if err != nil {
				return err
			}
			return tuneRun(cmd.Context(), tc, e)
		},
	}
	cmd.Flags().SortFlags = false
	f.register(cmd.Flags())
	return cmd
}
