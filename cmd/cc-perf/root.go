package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
	"github.com/seed-760dd1f1/cc/cmd/internal/cli"
	"github.com/spf13/cobra"
	"github.com/spf13/viper"
)

// envPrefix prefixes the environment variables that fill unset flags:
// CC_PERF_ITERS=5 is -n 5, CC_PERF_LEGACY_FORMAT=1 is --legacy-format.
const envPrefix = "CC_PERF"

// env is what a run gets from its process.
type env struct {
	args     []string // the command line, program first (recorded in -J files)
	environ  []string
	lookup   func(string) (string, bool)
	stdout   io.Writer
	stderr   io.Writer
	viper    *viper.Viper // the binary's one viper instance
	readFile func(string) ([]byte, error)
	// isTerminal reports whether a stream is a terminal (tune's progress
	// line); nil means never.
	isTerminal func(io.Writer) bool
	// hostname names the host in the device lines; nil means os.Hostname.
	hostname func() (string, error)
	// progress is --progress: auto, always or never (see wantProgress).
	progress string
	// now is the clock of progress lines; nil means time.Now.
	now func() time.Time
}

// run is the whole program (see cli.RunFunc).
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	return execute(ctx, newEnv(args, environ, stdout, stderr))
}

// newEnv is the env of a process with this command line, environment and
// streams.
func newEnv(args, environ []string, stdout, stderr io.Writer) *env {
	return &env{
		args: args, environ: environ, lookup: cli.Lookup(environ),
		stdout: stdout, stderr: stderr,
		viper:      cli.NewViper(envPrefix, environ),
		readFile:   os.ReadFile,
		isTerminal: cli.IsTerminal,
	}
}

// execute runs the command line e.args with e's streams and environment.
func execute(ctx context.Context, e *env) int {
	args := e.args
	argv := args[1:]
	prog := filepath.Base(args[0])
	if c := collOfProgram(prog); c != nil {
		argv = append([]string{c.Name}, argv...)
	}
	cmd := newRoot(e)
	cmd.SetArgs(argv)
	return cli.Fail(e.stderr, "cc-perf", cmd.ExecuteContext(ctx))
}

// isProgramOf reports whether prog is the nccl-tests binary name of
// benchmark name, with any suffix (all_reduce_perf, all_reduce_perf_mpi), so
// a symlink works as the binary.
func isProgramOf(prog, name string) bool { return strings.HasPrefix(prog, name+"_perf") }

// collOfProgram recognises nccl-tests' binary names (isProgramOf).
func collOfProgram(prog string) *bench.Coll {
	for _, c := range bench.Collectives {
		if isProgramOf(prog, c.Name) {
			return c
		}
	}
	return nil
}

// program is what the header and footer call the benchmark of c: the
// invoked name when it is c's nccl-tests binary name, as nccl-tests prints
// basename(argv[0]) (all_reduce_perf_mpi), else c's binary name.
func (e *env) program(c *bench.Coll) string {
	if len(e.args) > 0 {
		if prog := filepath.Base(e.args[0]); isProgramOf(prog, c.Name) {
			return prog
		}
	}
	return c.Name + "_perf"
}

func collNames() string {
	names := make([]string, len(bench.Collectives))
	for i, c := range bench.Collectives {
		names[i] = c.Name
	}
	return strings.Join(names, ", ")
}

const rootLong = `cc-perf measures cc's collectives the way nccl-tests does: same subcommands,
flags, table, bandwidth formulas, data check and exit statuses.

  cc-perf all_reduce -b 8 -e 128M -f 2            one process, one rank
  cc-perf all_reduce -t 4 -b 8 -e 64M -f 2 -c 1   four ranks in one process
  ccrun -np 8 cc-perf all_reduce -b 8 -e 1G -f 2  eight processes

Each subcommand is also reachable as <name>_perf, or by invoking the binary
through a symlink named like an nccl-tests binary (all_reduce_perf ...).

  cc-perf tune all_reduce -t 2 -b 8 -e 64M -f 4   the tuner's picks against
                                                  every algorithm and protocol
                                                  (cc-perf tune -h)
  cc-perf plot ar.json -o ar.svg                  busbw against size (plot -h)
  cc-perf report ar.json tune.txt -o report.html  one offline HTML page`

func newRoot(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:           "cc-perf <collective> [flags]",
		Short:         "nccl-tests-compatible benchmarks of cc's collectives",
		Long:          rootLong,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("missing collective: want one of %s (cc-perf -h for help)", collNames())
			}
			return usagef("unknown collective %q: want one of %s", args[0], collNames())
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	if e.progress == "" {
		e.progress = progressAuto
	}
	root.PersistentFlags().Var(progressFlag{&e.progress}, "progress",
		"a progress line on stderr for long runs (rank 0): auto (on a terminal, not under CI), always, or never")
	root.SetOut(e.stdout)
	root.SetErr(e.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cli.WithCode(exitUsage, err) })
	for _, c := range bench.Collectives {
		root.AddCommand(newCollCmd(c, e))
	}
	root.AddCommand(newTuneCmd(e))
	root.AddCommand(newCalibrateCmd(e))
	root.AddCommand(newFabricCmd(e))
	root.AddCommand(newPredictCmd(e))
	root.AddCommand(newPlotCmd(e))
	root.AddCommand(newReportCmd(e))
	return root
}

func newCollCmd(c *bench.Coll, e *env) *cobra.Command {
	f := defaultFlags()
	cmd := &cobra.Command{
		Use:     c.Name + " [flags]",
		Aliases: []string{c.Name + "_perf"},
		Short:   "benchmark " + c.Name + " (nccl-tests' " + c.Name + "_perf)",
		Long:    collLong(c),
		Args:    onlyFlags(c.Name),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cli.BindFlags(cmd.Flags(), e.viper, envPrefix); err != nil {
				return cli.WithCode(exitUsage, err)
			}
			cfg, err := f.config(c, e.program(c), e.lookup, e.readFile)
			if err != nil {
				return err
			}
			return perf(cmd.Context(), cfg, e)
		},
	}
	cmd.Flags().SortFlags = false
	f.register(cmd.Flags(), c)
	return cmd
}

// onlyFlags refuses positional arguments of the subcommand called name.
func onlyFlags(name string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usagef("unexpected argument %q: %s takes only flags", args[0], name)
		}
		return nil
	}
}

// collEnv is the environment only c reads, for its help.
func collEnv(c *bench.Coll) string {
	if c.Name != "alltoallv" {
		return ""
	}
	return `

alltoallv's traffic matrix: each rank spreads the swept size over its peers,
more to farther ranks (NCCL_TESTS_ALLTOALLV_SPREAD=0..1: 0 the same to every
peer, 1 the default: in proportion to the distance), or the matrix of
NCCL_TESTS_ALLTOALLV_MATRIX_FILE (bytes, row i what rank i sends each rank;
scaled by NCCL_TESTS_ALLTOALLV_MATRIX_SCALE; -b and -e equal and at least the
most bytes a rank sends or receives). NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY=1
prints every rank's bytes and bandwidth after each row.`
}

func collLong(c *bench.Coll) string {
	return fmt.Sprintf(`Benchmark %[1]s like nccl-tests' %[1]s_perf: for each data type (-d), op (-o)
and root (-r), sweep sizes from -b to -e, timing -n iterations out of place and
in place, and check the data -c times.

Ranks: processes x -t x -g, each rank a goroutine with its own communicator.
Under ccrun, mpirun, srun or torchrun every process joins the job through the
runtime's bootstrap (it never runs alone when the launcher says the job has
several ranks).

Environment: NCCL_* configure the runtime; NCCL_TESTS_MIN_BW=<GB/s> fails the run
(exit 7) when the average bus bandwidth is below 90%% of it (-1: no check;
empty: 0); NCCL_TESTS_DEVICE
offsets the printed device numbers; NCCL_TESTS_SPLIT="AND|OR|MOD|DIV <n>" or
NCCL_TESTS_SPLIT_MASK=<hex> split the ranks into groups (color = rank op n, or
rank & mask) that each run the collective on their own communicator, as
nccl-tests does; %[2]s_<FLAG> fills a flag not given on the
command line (%[2]s_ITERS=5, %[2]s_LEGACY_FORMAT=1).%[3]s

GPU-only flags (-y, -G, -R, -D, -V, -x as a number) exit 6, saying why, unless
given nccl-tests' defaults (-y 0 -G 0 -R 0 -D 0 -V 16 -x 0).

Exit status: 0 ok; 2 system error (memory, files); 3 runtime error; 4 timeout
(-T); 6 invalid usage; 7 wrong data or NCCL_TESTS_MIN_BW not
met; 128+n on signal n.`, c.Name, envPrefix, collEnv(c))
}
