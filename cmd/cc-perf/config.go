package main

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/report"
	"github.com/seed-760dd1f1/cc/cmd/internal/cli"
)

// Exit statuses, as nccl-tests' testResult_t, except that invalid usage
// always exits 6 (nccl-tests exits 0 on an unknown flag and -1 on a bad size).
const (
	exitInternal = 1 // a bug
	exitSystem   = 2 // the system failed us: memory, files (nccl-tests: CUDA error)
	exitRuntime  = 3 // the runtime reported an error (nccl-tests: NCCL error)
	exitTimeout  = 4 // -T expired
	exitUsage    = 6 // invalid flags, environment or rank count
	exitResults  = 7 // wrong data, or NCCL_TESTS_MIN_BW not met
	exitFabric   = 8 // cc-perf fabric: a host, link or fabric verdict failed
)

// Version is what the header's "nccl-tests version" field says: the
// nccl-tests release whose output cc-perf reproduces, marked as ours.
const Version = "2.19.6+cc"

// NCCLVersionCode is the NCCL_VERSION_CODE the header's nccl-headers and
// nccl-library fields and the JSON's nccl_version report: NCCL 2.30.7, the
// release whose API and semantics runtime/comm follows.
const NCCLVersionCode = 23007

// config is a validated run: everything the flags and environment say
// before any rank exists.
type config struct {
	bench        bench.Options
	header       report.Header
	format       report.Format
	outputs      []output // result files
	ranksPerProc int      // -t x -g
	memory       bool     // -M
	runtimeStats bool     // --runtime_stats
	minBW        float64  // NCCL_TESTS_MIN_BW
	minBWSet     bool
	deviceBase   int        // NCCL_TESTS_DEVICE, -1 when unset
	split        *splitRule // NCCL_TESTS_SPLIT[_MASK], nil for one group
}

func usagef(format string, args ...any) error { return cli.Errorf(exitUsage, format, args...) }

// config validates the flags for coll, whose header and footer name it
// program; lookup reads the environment, readFile the files it names.
func (f *flags) config(coll *bench.Coll, program string, lookup func(string) (string, bool), readFile func(string) ([]byte, error)) (*config, error) {
	if err := f.gpuOnly(); err != nil {
		return nil, err
	}
	min, max, step, factor := int64(f.minBytes), int64(f.maxBytes), int64(f.step), int64(f.stepFactor)
	if err := checkSweep(min, max, step, factor); err != nil {
		return nil, err
	}
	if f.perIter == 1 && f.perIterSkip >= f.iters {
		return nil, usagef("-K/--per_iter_skip %d leaves none of the %d iterations (-n) for -I: want -K < -n", f.perIterSkip, f.iters)
	}
	if f.legacy && (f.perIter == 1 || f.timestamps == 1) {
		return nil, usagef("--legacy-format has no -I or -S columns: drop one of them")
	}
	split, err := parseSplit(lookup)
	if err != nil {
		return nil, err
	}
	c := &config{
		split:        split,
		ranksPerProc: f.nthreads * f.ngpus,
		memory:       f.memory == 1,
		runtimeStats: f.runtimeStats == 1,
		deviceBase:   -1,
	}
	if s, ok := lookup("NCCL_TESTS_MIN_BW"); ok {
		v, set, err := minBandwidth(s)
		if err != nil {
			return nil, err
		}
		c.minBW, c.minBWSet = v, set
	}
	if s, ok := lookup("NCCL_TESTS_DEVICE"); ok {
		v, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || v < 0 {
			return nil, usagef("NCCL_TESTS_DEVICE=%q: want a device index >= 0", s)
		}
		c.deviceBase = v
	}
	if err := f.outputConfig(c); err != nil {
		return nil, err
	}
	var traffic *bench.Traffic
	summary := false
	if coll.Name == "alltoallv" {
		var err error
		if traffic, summary, err = alltoallvEnv(lookup, readFile); err != nil {
			return nil, err
		}
		if traffic.Matrix != nil && min != max {
			return nil, usagef("-b/--minbytes %d and -e/--maxbytes %d differ: with %s the bytes come from the matrix, not the sweep: give -b and -e the same size",
				min, max, envMatrixFile)
		}
	}
	c.bench = bench.Options{
		Coll: coll, Types: f.types.types, Ops: f.ops.ops, Root: f.root.rank,
		MinBytes: min, MaxBytes: max, StepBytes: step, StepFactor: factor,
		Iters: f.iters, Warmup: f.warmup, Agg: f.agg, Cycles: f.cycles, Check: f.check, Unalign: f.unalign,
		Blocking: f.blocking, Average: f.average,
		PerIter: f.perIter == 1, PerIterSkip: f.perIterSkip,
		Timeout:  time.Duration(f.timeout) * time.Second,
		ShowAlgo: f.showAlgo == 1,
		Register: f.localRegister == 1,
		Traffic:  traffic,
	}
	c.header = report.Header{
		Program: program, Version: Version, NCCLHeaders: NCCLVersionCode, NCCLLibrary: NCCLVersionCode,
		NThreads: f.nthreads, NGpus: f.ngpus, MinBytes: min, MaxBytes: max, StepBytes: step, StepFactor: factor,
		WarmupIters: f.warmup, Iters: f.iters, AggIters: f.agg, Check: f.check, Graph: f.graph, Unalign: f.unalign,
		Blocking: f.blocking, ParallelInit: f.parallelInit == 1,
	}
	c.format = report.Format{
		Legacy: f.legacy, CPUTime: f.cpuTime == 1, Timestamps: f.timestamps == 1,
		PerIter: f.perIter == 1, PerIterSkip: f.perIterSkip, Algo: f.showAlgo == 1,
		AllToAllVSummary: summary,
	}
	return c, nil
}

// minBandwidth reads NCCL_TESTS_MIN_BW as nccl-tests does (atof; -1 means
// no check, common.cu): set is false for -1; an empty value is 0, a check
// every run passes. Other negative or non-finite numbers and text that is
// not a number are errors (nccl-tests' atof would read them as a check that
// always passes, or as 0).
func minBandwidth(s string) (v float64, set bool, err error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, true, nil
	}
	v, err = strconv.ParseFloat(t, 64)
	switch {
	case err == nil && v == -1:
		return 0, false, nil
	case err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0):
		return 0, false, usagef("NCCL_TESTS_MIN_BW=%q: want a bandwidth in GB/s (a number >= 0), or -1 for no check", s)
	}
	return v, true, nil
}

// output is a result file to write.
type output struct {
	path string
	kind report.Kind
	flag string // the flag that names it, for messages: "-J/--output_file"
}

// checkSweep rejects a -b -e -i -f sweep that is empty or never ends.
func checkSweep(min, max, step, factor int64) error {
	if min > max {
		return usagef("-b/--minbytes %d is larger than -e/--maxbytes %d: want minbytes <= maxbytes", min, max)
	}
	if factor <= 1 && step == 0 && min < max {
		return usagef("-i/--stepbytes 0 with -f/--stepfactor %d never reaches -e/--maxbytes: want -i > 0, or -f >= 2", factor)
	}
	if factor > 1 && min == 0 && max > 0 {
		return usagef("-b/--minbytes 0 with -f/--stepfactor %d never grows: want -b >= 1, or -f 1 with -i", factor)
	}
	return nil
}

// gpuOnly rejects the flags that only mean something on GPUs, saying why,
// unless they have nccl-tests' default values, which command lines copied
// from GPU runs spell out: -y 0, -G 0, -R 0 (or 1: registration is real), -D 0, -V 16, -x 0 (NCCL's
// default CTA policy) or -1 (nccl-tests' "do not set").
func (f *flags) gpuOnly() error {
	gpu := func(format string, args ...any) error {
		return cli.Errorf(exitUsage, format, args...)
	}
	switch {
	case f.streamNull != 0:
		return gpu("-y/--stream_null %d: there are no CUDA streams here (every call runs on its rank's goroutine and is complete when it returns): use 0", f.streamNull)
	case f.graph != 0:
		return gpu("-G/--cudagraph %d: CUDA graphs do not exist on CPUs; -n repeats calls: use 0", f.graph)
	case f.localRegister == 2:
		return gpu("-R/--local_register 2: symmetric memory windows are a GPU feature: use 0 or 1 (comm.MemAlloc + Register)")
	case f.devImpl != 0:
		return gpu("-D/--device_implementation %d: device-side kernels are GPU only: use 0", f.devImpl)
	case f.devCTA != defaultDeviceCTAs:
		return gpu("-V/--device_cta_count %d: there are no CTAs on CPUs (and no -D): use %d or leave it unset", f.devCTA, defaultDeviceCTAs)
	}
	if f.ctaPolicy != "" && f.xFile() == "" {
		if v, _ := strconv.ParseInt(strings.TrimSpace(f.ctaPolicy), 0, 64); v != 0 && v != -1 {
			return gpu("-x/--cta_policy %s: there are no CTAs on CPUs: use 0 or leave it unset; the old rccl-tests' -x FILE names a result file (-Z csv|json)", f.ctaPolicy)
		}
	}
	return nil
}

// xFile is -x's value when it is the old rccl-tests' result file rather
// than --cta_policy: not an integer, or an integer given with -Z and no -X
// (a file named 2 is still a file); "" otherwise.
func (f *flags) xFile() string {
	if f.ctaPolicy == "" {
		return ""
	}
	if _, err := strconv.ParseInt(strings.TrimSpace(f.ctaPolicy), 0, 64); err != nil || f.outputFormat != "" && f.rcclOutput == "" {
		return f.ctaPolicy
	}
	return ""
}

// outputConfig settles the result files: current rccl-tests' -X, in -Z's
// format (JSON without -Z), and -J (or the old rccl-tests' -x FILE), as
// nccl-tests JSON or the old rccl-tests CSV, by its extension or, without
// -X, by -Z.
func (f *flags) outputConfig(c *config) error {
	format := strings.ToLower(f.outputFormat)
	if format != "" && format != "json" && format != "csv" {
		return usagef("-Z/--rccl_output_format %q: allowed json, csv", f.outputFormat)
	}
	file, x := f.outputFile, f.xFile()
	if x != "" {
		if file != "" && file != x {
			return usagef("two output files: -J %q and -x %q: give one", file, x)
		}
		file = x
	}
	if f.rcclOutput != "" {
		if f.rcclOutput == file {
			return usagef("-X/--rccl_output_file and -J/--output_file name the same file %q: give two names, or one flag", file)
		}
		kind := report.KindReporterJSON
		if format == "csv" {
			kind = report.KindReporterCSV
		}
		c.outputs = append(c.outputs, output{f.rcclOutput, kind, "-X/--rccl_output_file"})
		format = "" // -Z is -X's
	}
	switch {
	case file == "" && format != "":
		return usagef("-Z/--rccl_output_format %s without a file: give -X FILE (or -J FILE, or the old rccl-tests' -x FILE)", f.outputFormat)
	case file == "":
		return nil
	case format == "json":
		c.outputs = append(c.outputs, output{file, report.KindJSON, "-J/--output_file"})
	case format == "csv":
		c.outputs = append(c.outputs, output{file, report.KindCSV, "-J/--output_file"})
	default:
		k, ok := report.KindOf(file)
		if !ok {
			hint := " (or give -Z json|csv)"
			if f.rcclOutput != "" {
				hint = " (-Z gives -X's format)"
			}
			return usagef("-J/--output_file %q: the format comes from the extension, want .json or .csv%s", file, hint)
		}
		c.outputs = append(c.outputs, output{file, k, "-J/--output_file"})
	}
	return nil
}

// checkRanks validates what depends on the job's rank count.
func (c *config) checkRanks(nranks int) error {
	o := &c.bench
	if c.split != nil {
		return c.split.checkGroups(o, nranks)
	}
	if err := o.Coll.CheckRanks(nranks); err != nil {
		return usagef("%v", err)
	}
	if o.Coll.Rooted && o.Root >= nranks {
		return usagef("-r/--root %d with %d ranks: want 0..%d, or -1 or all for every rank", o.Root, nranks, nranks-1)
	}
	return checkTraffic(o.Traffic, nranks, o.MaxBytes)
}
