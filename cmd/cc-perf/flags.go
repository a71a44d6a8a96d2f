package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
	"github.com/seed-760dd1f1/cc/cmd/internal/cli"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
	"github.com/spf13/pflag"
)

// flags holds every command-line flag of a collective subcommand, with
// nccl-tests v2.19 names, shorthands and defaults.
type flags struct {
	nthreads, ngpus            int
	minBytes, maxBytes, step   cli.Size
	stepFactor                 int
	iters, agg, warmup, cycles int
	parallelInit, check        int
	ops                        opList
	types                      typeList
	root                       rootFlag
	blocking, streamNull       int
	timeout, graph             int
	cpuTime, timestamps        int
	average, localRegister     int
	ctaPolicy                  string // -x: cta_policy (integer) or rccl-tests' output file
	devImpl, devCTA            int
	memory, unalign            int
	runtimeStats               int // --runtime_stats
	perIter, perIterSkip       int
	outputFile, outputFormat   string
	rcclOutput                 string // -X: current rccl-tests' result file
	legacy                     bool
	showAlgo                   int // -A, rccl-tests' --output_algo_proto_channels
}

func defaultFlags() flags {
	return flags{
		nthreads: 1, ngpus: 1,
		minBytes: 32 << 20, maxBytes: 32 << 20, step: 1 << 20, stepFactor: 1,
		iters: 20, agg: 1, warmup: 1, cycles: 1, check: 1,
		ops:   opList{names: "sum", ops: []reduce.Op{reduce.Sum}},
		types: typeList{names: "float", types: []reduce.DataType{reduce.Float32}},
		root:  rootFlag{set: "0"}, average: 1, devCTA: defaultDeviceCTAs,
	}
}

// defaultDeviceCTAs is nccl-tests' default -V (device_cta_count).
const defaultDeviceCTAs = 16

// intFlag is an integer flag read like strtol(s, NULL, 0) (0x.. hex and 0..
// octal work) and checked against [min, max].
type intFlag struct {
	p        *int
	min, max int
}

func (f intFlag) Set(s string) error {
	v, err := strconv.ParseInt(strings.TrimSpace(s), 0, 64)
	if err != nil {
		return fmt.Errorf("not an integer (allowed %s)", f.allowed())
	}
	if v < int64(f.min) || v > int64(f.max) {
		return fmt.Errorf("out of range (allowed %s)", f.allowed())
	}
	*f.p = int(v)
	return nil
}

func (f intFlag) allowed() string {
	switch {
	case f.max-f.min <= 3:
		vals := make([]string, 0, 4)
		for v := f.min; v <= f.max; v++ {
			vals = append(vals, strconv.Itoa(v))
		}
		return strings.Join(vals, ", ")
	case f.max >= 1<<30:
		return fmt.Sprintf("%d or more", f.min)
	}
	return fmt.Sprintf("%d..%d", f.min, f.max)
}

func (f intFlag) String() string {
	if f.p == nil {
		return "0"
	}
	return strconv.Itoa(*f.p)
}
func (f intFlag) Type() string { return "int" }

// opList is -o: an op name or "all".
type opList struct {
	names string
	ops   []reduce.Op
}

func (l *opList) Set(s string) error {
	if strings.EqualFold(s, "all") {
		l.names, l.ops = "all", reduce.Ops()
		return nil
	}
	op, err := reduce.ParseOp(s)
	if err != nil {
		return fmt.Errorf("%w, or all", err)
	}
	l.names, l.ops = s, []reduce.Op{op}
	return nil
}
func (l *opList) String() string { return l.names }
func (l *opList) Type() string   { return "op" }

// typeList is -d: a data type name or "all".
type typeList struct {
	names string
	types []reduce.DataType
}

func (l *typeList) Set(s string) error {
	if strings.EqualFold(s, "all") {
		l.names, l.types = "all", reduce.DataTypes()
		return nil
	}
	t, err := reduce.ParseDataType(s)
	if err != nil {
		return fmt.Errorf("%w, or all", err)
	}
	l.names, l.types = s, []reduce.DataType{t}
	return nil
}
func (l *typeList) String() string { return l.names }
func (l *typeList) Type() string   { return "type" }

// rootFlag is -r: a rank, or -1 / "all" for every rank in turn. The range
// is checked once the rank count is known.
type rootFlag struct {
	set  string
	rank int
}

func (r *rootFlag) Set(s string) error {
	if strings.EqualFold(s, "all") {
		r.set, r.rank = s, -1
		return nil
	}
	v, err := strconv.ParseInt(strings.TrimSpace(s), 0, 32)
	if err != nil || v < -1 {
		return fmt.Errorf("want a rank (0 .. ranks-1), or -1 or all for every rank")
	}
	r.set, r.rank = s, int(v)
	return nil
}
func (r *rootFlag) String() string { return r.set }
func (r *rootFlag) Type() string   { return "root" }

// ignoredRoot is -r of the collectives without a root: any value is
// accepted and ignored, as nccl-tests does (they run with root -1), so one
// command line fits every benchmark.
type ignoredRoot struct{ set string }

func (r *ignoredRoot) Set(s string) error { r.set = s; return nil }
func (r *ignoredRoot) String() string     { return r.set }
func (r *ignoredRoot) Type() string       { return "root" }

const unlimited = 1 << 40

// register adds every flag of coll's subcommand to fs. The help text of a
// GPU-only flag says what it does here.
func (f *flags) register(fs *pflag.FlagSet, coll *bench.Coll) {
	i := func(p *int, name, short string, min, max int, usage string) {
		fs.VarP(intFlag{p, min, max}, name, short, usage)
	}
	i(&f.nthreads, "nthreads", "t", 1, 1024, "threads per process: each runs -g ranks (ranks = processes x threads x gpus)")
	i(&f.ngpus, "ngpus", "g", 1, 1024, `"GPUs" per thread: here, more ranks per thread, each a goroutine with its own communicator`)
	fs.VarP(&f.minBytes, "minbytes", "b", "smallest message size: bytes, or with a K, M or G suffix (powers of 1024)")
	fs.VarP(&f.maxBytes, "maxbytes", "e", "largest message size (same syntax as -b); lowered, as nccl-tests does, when the buffers would not fit in memory")
	fs.VarP(&f.step, "stepbytes", "i", "size increment when -f is 1 or 0")
	i(&f.stepFactor, "stepfactor", "f", 0, 1<<20, "size multiplier between rows (1 or 0: add -i instead)")
	i(&f.iters, "iters", "n", 1, unlimited, "timed iterations per row")
	i(&f.agg, "agg_iters", "m", 1, 1<<20, "calls per iteration, aggregated between GroupStart and GroupEnd")
	i(&f.warmup, "warmup_iters", "w", 0, unlimited, "warmup iterations for each size class (min, 2 x min, ... max)")
	i(&f.cycles, "run_cycles", "N", 0, unlimited, "run and print the sweep this many times (0 = until interrupted; SIGUSR1 ends the run after the current sweep, exit 0)")
	i(&f.parallelInit, "parallel_init", "p", 0, 1, "0/1: print nccl-tests' parallel-init line; communicators are always created concurrently here")
	i(&f.check, "check", "c", 0, 1<<20, "data checks per measurement (0 = no check: #wrong prints N/A)")
	fs.VarP(&f.ops, "op", "o", "reduction: sum, prod, max, min, avg, mulsum, or all")
	fs.VarP(&f.types, "datatype", "d", "data type: int8, uint8, int32, uint32, int64, uint64, half, float, double, bfloat16, f8e4m3, f8e5m2, or all")
	if coll.Rooted {
		fs.VarP(&f.root, "root", "r", "root rank: a rank, or -1 or all for every rank")
	} else {
		fs.VarP(&ignoredRoot{set: f.root.set}, "root", "r", "ignored: "+coll.Name+" has no root (any value is accepted, as in nccl-tests)")
	}
	i(&f.blocking, "blocking", "z", 0, 3, "0: calls back to back; 1: barrier after each call (after each -m group); 2: no barrier (calls already complete on return); 3: barrier after each iteration, not timed")
	i(&f.streamNull, "stream_null", "y", 0, 1, "GPU only (CUDA NULL stream): must be 0")
	i(&f.timeout, "timeout", "T", 0, unlimited, "seconds joining the job, a warmup or a measurement may take before every rank of the job is aborted (exit 4); 0 = no limit")
	i(&f.graph, "cudagraph", "G", 0, unlimited, "GPU only (CUDA graph launches): must be 0")
	i(&f.cpuTime, "report_cputime", "C", 0, 1, "1: head the time column cputime; calls complete before they return here, so it is the same time")
	i(&f.timestamps, "report_timestamps", "S", 0, 1, "1: end every row with a timestamp")
	fs.StringVarP(&f.outputFile, "output_file", "J", "", "write results to this file row by row: .json (nccl-tests JSON v3) or .csv (the old rccl-tests CSV); never overwrites (tries FILE.0, FILE.1, ...)")
	i(&f.average, "average", "a", 0, 3, "time reported from every rank's: 0 rank 0, 1 mean, 2 min, 3 max")
	i(&f.localRegister, "local_register", "R", 0, 2, "buffer registration: 1 allocates the send/recv buffers with comm.MemAlloc and registers them (NVLS then reads peers' buffers in place); 2 (GPU symmetric memory) is refused")
	fs.StringVarP(&f.ctaPolicy, "cta_policy", "x", "", "GPU only as an integer (NCCL CTA policy: 0 or -1, the defaults, are accepted); any other value (or a number with -Z and no -X) is the old rccl-tests' -x FILE, a result file like -J's")
	i(&f.devImpl, "device_implementation", "D", 0, 1<<20, "GPU only (device-side kernels): must be 0")
	i(&f.devCTA, "device_cta_count", "V", 1, 128, "GPU only (CTAs of -D): must be 16, the default")
	i(&f.memory, "memory", "M", 0, 1, "1: report host memory in the footer: what the communicators kept at init (live heap and stacks, shared memory mapped), the buffers, the growth during the collectives")
	i(&f.unalign, "unalign", "u", 0, 1<<20, "start buffers this many elements past an aligned address")
	i(&f.perIter, "per_iter_timing", "I", 0, 1, "1: add i_min i_max i_p99 i_cv% columns (per-iteration times, slowest rank)")
	i(&f.perIterSkip, "per_iter_skip", "K", 0, unlimited, "leave the first K iterations out of the -I statistics")
	fs.StringVarP(&f.outputFormat, "rccl_output_format", "Z", "", "csv or json: the format of -X's file (json without -Z); without -X, of -J's or -x's file (the old rccl-tests' CSV, or nccl-tests JSON), whose extension says it otherwise")
	fs.StringVarP(&f.rcclOutput, "rccl_output_file", "X", "", "current rccl-tests' result file, in -Z's format: one record per half row, written row by row; never overwrites (tries FILE.0, FILE.1, ...)")
	i(&f.showAlgo, "output_algo_proto_channels", "A", 0, 1, "1: add algo proto nchannels columns after the in-place half: how the runtime ran the timed calls (rccl-tests' -A; N/A for collectives made of point-to-point calls)")
	i(&f.runtimeStats, "runtime_stats", "", 0, 1, "1: after each sweep, every process writes one line to stderr: its pid, goroutines, Go heap in use and live heap after a collection (what scripts/soak.sh watches)")
	fs.BoolVar(&f.legacy, "legacy-format", false, "print numbers in the pre-2.17 nccl-tests / rccl-tests style (%6.2f bandwidths, %5g #wrong)")
	// nccl-tests' other long name of -M, and the old rccl-tests' of -Z.
	i(&f.memory, "memory_report", "", 0, 1, "same as --memory")
	_ = fs.MarkHidden("memory_report")
	fs.StringVar(&f.outputFormat, "output_format", "", "same as --rccl_output_format")
	_ = fs.MarkHidden("output_format")
}
