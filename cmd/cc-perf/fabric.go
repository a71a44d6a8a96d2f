package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/fabric"
	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/fabric/measure"
	"github.com/seed-760dd1f1/cc/cmd/internal/cli"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// cc-perf fabric: cluster acceptance in one job (issue 21). The flags make
// a fabric.Config (the judge's) and measure.Options (the runner's);
// fabricRun joins the job and runs them.

// envUnreachable names the hosts the launcher could not reach
// (ccrun --skip-unreachable), comma-separated: the report lists them.
const envUnreachable = "CC_UNREACHABLE_HOSTS"

// fabricFlags are the flags of cc-perf fabric.
type fabricFlags struct {
	schedule, op                     string
	size, latSize                    cli.Size
	pairTime, pairTimeout            time.Duration
	itersMin, itersMax               int
	maxConcurrent, rounds, confirm   int
	seed                             int64
	tolerance, zmax, madFloor, latTo float64
	latFloor                         time.Duration
	baseline, saveBaseline           string
	expect                           bandwidth
	check, counters                  bool
	json, excludeFile, goodHostfile  string
}

func defaultFabricFlags() fabricFlags {
	d := fabric.DefaultConfig()
	return fabricFlags{
		schedule: d.Schedule, op: d.Op, size: cli.Size(d.Size), latSize: cli.Size(d.LatSize),
		pairTime: 2 * time.Second, pairTimeout: 30 * time.Second, itersMin: 1, itersMax: 50,
		maxConcurrent: d.MaxConcurrent, rounds: d.Rounds, confirm: d.Confirm,
		tolerance: d.Tolerance, zmax: d.ZMax, madFloor: d.MADFloor, latTo: d.LatTolerance,
		latFloor: time.Duration(d.LatFloorUS * float64(time.Microsecond)),
	}
}

func (f *fabricFlags) register(fs *pflag.FlagSet) {
	i := func(p *int, name string, min, max int, usage string) {
		fs.Var(intFlag{p, min, max}, name, usage)
	}
	fs.StringVar(&f.schedule, "schedule", f.schedule, "which hosts meet in which round: "+strings.Join(fabric.Schedules, ", "))
	fs.StringVar(&f.op, "op", f.op, "what a pair runs: "+strings.Join(fabric.Ops, ", "))
	fs.Var(&f.size, "size", "bandwidth size: bytes per direction, with an optional K, M or G suffix (powers of 1024)")
	fs.Var(&f.latSize, "lat-size", "latency size (same syntax; 0 skips the latency tests)")
	fs.DurationVar(&f.pairTime, "pair-time", f.pairTime, "time a test may spend iterating at each size, after 1 warm-up call")
	i(&f.itersMin, "iters-min", 1, unlimited, "timed iterations per test and size, at least")
	i(&f.itersMax, "iters-max", 1, unlimited, "timed iterations per test and size, at most")
	fs.DurationVar(&f.pairTimeout, "pair-timeout", f.pairTimeout, "a test not finished by then has its own communicator aborted and ends timeout; the run goes on (0: no limit)")
	i(&f.maxConcurrent, "max-concurrent", 0, unlimited, "tests at once per round (0: all of the round; 1: one at a time)")
	i(&f.rounds, "rounds", 1, unlimited, "rounds of --schedule random")
	fs.Int64Var(&f.seed, "seed", 0, "seed of --schedule random (default: a fresh one, printed and recorded)")
	fs.Float64Var(&f.tolerance, "tolerance", f.tolerance, "a bandwidth ratio below 1 - tolerance is slow; in (0,1)")
	fs.Float64Var(&f.zmax, "zmax", f.zmax, "a slow host's modified z is below -zmax")
	fs.Float64Var(&f.madFloor, "mad-floor", f.madFloor, "floor of the hosts' median absolute deviation, a fraction of the reference")
	fs.Float64Var(&f.latTo, "lat-tolerance", f.latTo, "a latency ratio above 1 + lat-tolerance is slow")
	fs.DurationVar(&f.latFloor, "lat-floor", f.latFloor, "latencies below this are never reported")
	i(&f.confirm, "confirm", 0, unlimited, "known-good partners each suspect is retested with")
	fs.StringVar(&f.baseline, "baseline", "", "reference from a --save-baseline file (default: the fleet median of this run)")
	fs.Var(&f.expect, "expect", "reference pair bandwidth in GB/s: 1.2, or 0.8G, 800M (decimal units)")
	fs.BoolVarP(&f.check, "check", "c", false, "check every received byte: a wrong one fails the test (error)")
	fs.BoolVar(&f.counters, "counters", false, "read each host's TCP retransmits and interface errors and drops around every round")
	fs.StringVarP(&f.json, "json", "J", "", "write the results as JSON to this file, rewritten after every round")
	fs.StringVar(&f.excludeFile, "exclude-file", "", "write the flagged hosts to this file, one per line")
	fs.StringVar(&f.goodHostfile, "good-hostfile", "", "write a hostfile of the hosts that passed to this file")
	fs.StringVar(&f.saveBaseline, "save-baseline", "", "write this run's reference to this file, for --baseline")
}

// fabricConfig is a validated cc-perf fabric run, before the job is known.
type fabricConfig struct {
	cfg     fabric.Config
	measure measure.Options // Plan unset
	seedSet bool            // --seed given
	// Files: rank 0 reads and writes them.
	baselinePath, json, excludeFile, goodHostfile, saveBaseline string
}

// validate checks what the flags say alone; seedSet says whether --seed
// was given. The host count and the files come later (fabricRun).
func (f *fabricFlags) validate(seedSet bool) (*fabricConfig, error) {
	cfg := fabric.DefaultConfig()
	cfg.Schedule, cfg.Op = f.schedule, f.op
	cfg.Rounds, cfg.Seed, cfg.Confirm, cfg.MaxConcurrent = f.rounds, f.seed, f.confirm, f.maxConcurrent
	cfg.Tolerance, cfg.ZMax, cfg.MADFloor = f.tolerance, f.zmax, f.madFloor
	cfg.LatTolerance, cfg.LatFloorUS = f.latTo, float64(f.latFloor)/float64(time.Microsecond)
	cfg.Expect = float64(f.expect)
	cfg.Size, cfg.LatSize = int64(f.size), int64(f.latSize)
	// Every check that needs no host count: Validate with two hosts.
	if err := cfg.Validate(2); err != nil {
		return nil, usagef("%v", err)
	}
	switch {
	case f.itersMin > f.itersMax:
		return nil, usagef("--iters-min %d is above --iters-max %d: want min <= max", f.itersMin, f.itersMax)
	case f.pairTime < 0:
		return nil, usagef("--pair-time %s: want a duration >= 0", f.pairTime)
	case f.pairTimeout < 0:
		return nil, usagef("--pair-timeout %s: want a duration >= 0 (0: no limit)", f.pairTimeout)
	case f.latFloor < 0:
		return nil, usagef("--lat-floor %s: want a duration >= 0", f.latFloor)
	case f.expect > 0 && f.baseline != "":
		return nil, usagef("--expect %s and --baseline %s: give one reference, not both", f.expect.String(), f.baseline)
	case cfg.Size > math.MaxInt32 || cfg.LatSize > math.MaxInt32:
		return nil, usagef("--size %d, --lat-size %d: want at most %d bytes", cfg.Size, cfg.LatSize, math.MaxInt32)
	}
	return &fabricConfig{
		cfg: cfg,
		measure: measure.Options{Size: cfg.Size, LatSize: cfg.LatSize, PairTime: f.pairTime,
			ItersMin: f.itersMin, ItersMax: f.itersMax, PairTimeout: f.pairTimeout,
			Check: f.check, Counters: f.counters, Op: cfg.Op},
		seedSet:      seedSet,
		baselinePath: f.baseline, json: f.json, excludeFile: f.excludeFile,
		goodHostfile: f.goodHostfile, saveBaseline: f.saveBaseline,
	}, nil
}

// bandwidth is --expect: GB/s, from "1.2", "0.8G", "800M", "1.2GB/s".
type bandwidth float64

func (b *bandwidth) Set(s string) error {
	t := strings.TrimSpace(s)
	for _, suf := range []string{"B/s", "b/s", "/s", "B"} {
		t = strings.TrimSuffix(t, suf)
	}
	scale := 1.0 // GB/s
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'k', 'K':
			scale = 1e-6
		case 'm', 'M':
			scale = 1e-3
		case 'g', 'G':
			scale = 1
		case 't', 'T':
			scale = 1e3
		}
		if scale != 1 || t[n-1] == 'g' || t[n-1] == 'G' {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return fmt.Errorf("want a bandwidth > 0 in GB/s: 1.2, or with a K, M, G or T suffix (decimal), e.g. 0.8G or 800M")
	}
	*b = bandwidth(v * scale)
	return nil
}

func (b *bandwidth) String() string {
	if *b == 0 {
		return "0"
	}
	return strconv.FormatFloat(float64(*b), 'g', -1, 64) + "G"
}

func (b *bandwidth) Type() string { return "GB/s" }

const fabricLong = `cc-perf fabric accepts a cluster in one job: one rank per host, rounds of
disjoint pairs (each pair its own communicator, comm.Split), a bidirectional
exchange per pair at --size and --lat-size, then a verdict per host, per
direction and per link, against this run's fleet median, --expect or
--baseline.

  ccrun --hostfile hosts -N 1 cc-perf fabric
  ccrun --hostfile hosts -N 1 --skip-unreachable cc-perf fabric --schedule full -J fabric.json
  srun -N 8 --ntasks-per-node 1 cc-perf fabric --exclude-file bad-hosts.txt

Schedules: quick (neighbour pairs in 2 rounds, 3 for an odd count, then each
suspect retested with --confirm known-good partners), full (every pair once,
N-1 rounds), directed (i sends to i+t, N-1 rounds: transmit and receive
judged apart), random (--rounds, --seed), bisect (all hosts, then halves).

Rank 0 prints a header, one progress line per round on stderr, the host
table and "# elapsed". Hosts the launcher could not reach arrive in
CC_UNREACHABLE_HOSTS (ccrun --skip-unreachable sets it) and are listed as
unreachable.

Exit status: 0 pass; 2 system error (files); 3 runtime error (a host died:
the -J file holds every finished round); 6 invalid usage (fewer than 2
hosts, several ranks on one host, a bad flag or baseline); 8 a host, link or
fabric verdict failed; 128+n on signal n.`

func newFabricCmd(e *env) *cobra.Command {
	f := defaultFabricFlags()
	cmd := &cobra.Command{
		Use:   "fabric [flags]",
		Short: "accept a cluster: name the slow or lossy host, direction or link, in one job",
		Long:  fabricLong,
		Args:  onlyFlags("fabric"),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cli.BindFlags(cmd.Flags(), e.viper, envPrefix); err != nil {
				return cli.WithCode(exitUsage, err)
			}
			c, err := f.validate(cmd.Flags().Changed("seed"))
			if err != nil {
				return err
			}
			return fabricRun(cmd.Context(), c, e)
		},
	}
	cmd.Flags().SortFlags = false
	f.register(cmd.Flags())
	return cmd
}
