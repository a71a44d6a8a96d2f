package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
)

// Header is what the lines above the table say about the run.
type Header struct {
	Program      string // "all_reduce_perf": nccl-tests' binary name
	Version      string // printed after "nccl-tests version"
	NCCLHeaders  int    // NCCL_VERSION_CODE of the API the runtime follows
	NCCLLibrary  int    // the same for the library actually running
	NThreads     int    // -t
	NGpus        int    // -g
	MinBytes     int64  // -b after validation
	MaxBytes     int64  // -e after validation
	StepBytes    int64  // -i
	StepFactor   int64  // -f
	WarmupIters  int    // -w
	Iters        int    // -n
	AggIters     int    // -m
	Check        int    // -c
	Graph        int    // -G (always 0 here)
	Unalign      int    // -u
	Blocking     int    // -z
	ParallelInit bool   // -p 1
}

// Format selects the optional columns and the number style of the table.
type Format struct {
	Legacy      bool // pre-2.17 / rccl-tests numbers: %6.2f bandwidths, %5g #wrong
	CPUTime     bool // -C: the time column is headed "cputime"
	Timestamps  bool // -S: a timestamp ends every row
	PerIter     bool // -I: i_min i_max i_p99 i_cv% after each half
	PerIterSkip int  // -K, quoted in the header
	// Algo is -A (rccl-tests' --output_algo_proto_channels): algo, proto
	// and nchannels columns after the in-place half, before -S's timestamp.
	Algo bool
	// AllToAllVSummary is NCCL_TESTS_ALLTOALLV_PRINT_SUMMARY: alltoallv's
	// per-rank lines after each row (VolumeLines).
	AllToAllVSummary bool
}

// Footer is what the lines below the table say.
type Footer struct {
	Program     string
	OutOfBounds int     // see bench.Summary
	AvgBusBW    float64 // see bench.Summary
	MinBW       float64 // NCCL_TESTS_MIN_BW in GB/s; checked when MinBWSet
	MinBWSet    bool
	Memory      *Memory // -M, nil otherwise
	Error       string  // the last runtime error, "" when none
}

// Memory is the -M line, in bytes, for the process that prints.
type Memory struct {
	Init       int64 // what creating the communicators kept: live Go heap and stacks, and shared memory mapped
	User       int64 // send, receive and expected-value buffers cc-perf allocated
	Collective int64 // further growth while the collectives ran
}

// MinBWFailed reports whether the average bus bandwidth misses the
// NCCL_TESTS_MIN_BW gate (nccl-tests fails below 90% of the value).
func (f Footer) MinBWFailed() bool { return f.MinBWSet && f.AvgBusBW < f.MinBW*0.9 }

// timestampLayout is nccl-tests' "%Y-%m-%d %H:%M:%S".
const timestampLayout = "2006-01-02 15:04:05"

// Text writes the nccl-tests table to W. Its methods are called in run order:
// Start, Devices, Columns, then RowStart/RowDone for every row, then End.
// Write errors are kept and returned by Err.
type Text struct {
	W    io.Writer
	Fmt  Format
	err  error
	open bool // a row was started and not finished
}

func (t *Text) printf(format string, args ...any) {
	if t.err == nil {
		_, t.err = fmt.Fprintf(t.W, format, args...)
	}
}

func (t *Text) print(s string) {
	if t.err == nil {
		_, t.err = io.WriteString(t.W, s)
	}
}

// Err returns the first write error.
func (t *Text) Err() error { return t.err }

// Start writes the header lines up to the "#" before the device listing.
func (t *Text) Start(h Header) {
	t.printf("# nccl-tests version %s nccl-headers=%d nccl-library=%d\n", h.Version, h.NCCLHeaders, h.NCCLLibrary)
	t.printf("# Collective test starting: %s\n", h.Program)
	step, kind := h.StepBytes, "bytes"
	if h.StepFactor > 1 {
		step, kind = h.StepFactor, "factor"
	}
	t.printf("# nThread %d nGpus %d minBytes %d maxBytes %d step: %d(%s) warmup iters: %d iters: %d agg iters: %d validation: %d graph: %d unalign: %d\n",
		h.NThreads, h.NGpus, h.MinBytes, h.MaxBytes, step, kind, h.WarmupIters, h.Iters, h.AggIters, h.Check, h.Graph, h.Unalign)
	switch h.Blocking {
	case 1:
		t.print("# Blocking Enabled: wait and barrier after each inner iteration (-m) \n")
	case 2:
		t.print("# Blocking Enabled: wait after each inner iteration (-m), no barrier \n")
	case 3:
		t.print("# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes barrier \n")
	}
	if t.Fmt.PerIter {
		t.print("# Per-Iteration Report: wall-clock timing; i_* uses max over ranks")
		if t.Fmt.PerIterSkip > 0 {
			t.printf("; summary skips first %d iterations", t.Fmt.PerIterSkip)
		}
		t.print(" \n")
	}
	if h.ParallelInit {
		t.print("# Parallel Init Enabled: ranks create their communicators concurrently \n")
	}
	t.print("#\n")
}

// DeviceLine is one "# Using devices" line (with its newline).
func DeviceLine(d bench.Device) string {
	host, _, _ := strings.Cut(d.Host, ".")
	return fmt.Sprintf("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s\n",
		d.Rank, d.Group, d.Pid, host, d.Device, d.CPUs, d.Model)
}

// Devices writes the device listing, one line per rank in rank order.
func (t *Text) Devices(ds []bench.Device) {
	t.print("# Using devices\n")
	for _, d := range ds {
		t.print(DeviceLine(d))
	}
}

// MaxBytesReduced writes nccl-tests' line saying that memory lowered -e to
// maxBytes (common.cu), between Devices and Columns.
func (t *Text) MaxBytesReduced(maxBytes int64) {
	t.printf("#\n# Reducing maxBytes to %d due to memory limitation\n", maxBytes)
}

// Columns writes the "#" line and the column header.
func (t *Text) Columns() {
	t.print("#\n")
	for _, l := range columnHeader(t.Fmt) {
		t.print(l)
	}
}

func columnHeader(f Format) []string {
	timeStr := "time"
	if f.CPUTime {
		timeStr = "cputime"
	}
	tsPad, tsLbl, tsFmt := 0, "", ""
	if f.Timestamps {
		tsPad, tsLbl, tsFmt = 19, "timestamp", "%Y-%m-%d %H:%M:%S"
	}
	algoNames, algoUnits := "", ""
	if f.Algo {
		algoNames, algoUnits = algoCols("algo", "proto", "nchannels"), algoCols("", "", "")
	}
	blank := fmt.Sprintf("# %10s  %12s  %8s  %6s  %6s", "", "", "", "", "")
	names := fmt.Sprintf("# %10s  %12s  %8s  %6s  %6s", "size", "count", "type", "redop", "root")
	units := fmt.Sprintf("# %10s  %12s  %8s  %6s  %6s", "(B)", "(elements)", "", "", "")
	switch {
	case f.Legacy:
		return []string{
			blank + "           out-of-place                       in-place          \n",
			names + fmt.Sprintf("  %7s  %6s  %6s %6s  %7s  %6s  %6s %6s", timeStr, "algbw", "busbw", "#wrong", timeStr, "algbw", "busbw", "#wrong") + algoNames + "\n",
			units + fmt.Sprintf("  %7s  %6s  %6s  %5s  %7s  %6s  %6s  %5s", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "") + algoUnits + "\n",
		}
	case f.PerIter:
		half := func(a, b, c, d, e, f, g, h string) string {
			return fmt.Sprintf("  %7s  %6s  %6s  %6s  %7s  %7s  %7s  %7s", a, b, c, d, e, f, g, h)
		}
		return []string{
			blank + "              out-of-place (+ per-iteration)                                in-place (+ per-iteration)\n",
			names + half(timeStr, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%") +
				half(timeStr, "algbw", "busbw", "#wrong", "i_min", "i_max", "i_p99", "i_cv%") + algoNames + " " + pad(tsLbl, tsPad) + "\n",
			units + half("(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)") +
				half("(us)", "(GB/s)", "(GB/s)", "", "(us)", "(us)", "(us)", "(%)") + algoUnits + " " + pad(tsFmt, tsPad) + "\n",
		}
	}
	return []string{
		blank + "           out-of-place                       in-place          \n",
		names + fmt.Sprintf("  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s%s %s\n", timeStr, "algbw", "busbw", "#wrong", timeStr, "algbw", "busbw", "#wrong", algoNames, pad(tsLbl, tsPad)),
		units + fmt.Sprintf("  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s%s %s\n", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", algoUnits, pad(tsFmt, tsPad)),
	}
}

// RowStart writes the start of a row (size, count, type, redop, root) before
// the row is measured, as nccl-tests does, so a hang shows where it is.
func (t *Text) RowStart(r bench.Result) {
	t.print(Preamble(r))
	t.open = true
}

// RowDone writes the rest of the row started by RowStart, and the
// alltoallv summary asked for.
func (t *Text) RowDone(r bench.Result) {
	t.print(Body(r, t.Fmt))
	t.open = false
	if t.Fmt.AllToAllVSummary && r.Volumes != nil {
		t.print(VolumeLines(r))
	}
}

// Abort ends a started row, if any, and writes msg, what stopped the run,
// with "# " before each of its lines, so that a parser skipping '#' lines
// never reads it as data. The footer is not written then, as in nccl-tests.
func (t *Text) Abort(msg string) {
	if t.open {
		t.print("\n")
		t.open = false
	}
	for _, line := range strings.Split(strings.TrimRight(msg, "\n"), "\n") {
		t.printf("# %s\n", line)
	}
}

// Preamble is the first five columns of a row.
func Preamble(r bench.Result) string {
	return fmt.Sprintf("%12d  %12d  %8s  %6s  %6d", r.Bytes, r.Count, r.Type, r.RedOp, r.Root)
}

// Body is the rest of a row after its preamble, newline included.
func Body(r bench.Result, f Format) string {
	var b strings.Builder
	for _, h := range []bench.Half{r.OutOfPlace, r.InPlace} {
		b.WriteString(half(h, f))
		if f.PerIter {
			b.WriteString(iterColumns(h.Iter))
		}
	}
	if f.Algo {
		b.WriteString(algoColumns(r))
	}
	if f.Timestamps {
		b.WriteString(pad(r.Time.Format(timestampLayout), 21))
	}
	b.WriteString("\n")
	return b.String()
}

// algoCols lays out the three -A columns: algorithm (NCCL's name, e.g.
// "Ring", "CTRing"), protocol ("LL", "LL128", "Simple") and channels.
func algoCols(algo, proto, channels string) string {
	return fmt.Sprintf("  %8s  %6s  %9s", algo, proto, channels)
}

// algoColumns is the -A columns of a row: what the timed calls ran, "N/A"
// where nothing was recorded (collectives made of point-to-point calls). A
// value the two halves disagree on prints as "out-of-place|in-place"; the
// tuner decides on the call's size alone, so they agree in practice.
func algoColumns(r bench.Result) string {
	col := func(get func(bench.Ran) string) string {
		v := [2]string{"N/A", "N/A"}
		for i, h := range []bench.Half{r.OutOfPlace, r.InPlace} {
			if h.Ran != nil {
				v[i] = get(*h.Ran)
			}
		}
		if v[0] == v[1] {
			return v[0]
		}
		return v[0] + "|" + v[1]
	}
	return algoCols(
		col(func(x bench.Ran) string { return x.Algo.String() }),
		col(func(x bench.Ran) string { return x.Proto.String() }),
		col(func(x bench.Ran) string { return strconv.Itoa(x.Channels) }))
}

func half(h bench.Half, f Format) string {
	if f.Legacy {
		if !h.Checked {
			return fmt.Sprintf("  %7s  %s  %s  %5s", legacyTimeStr(h.TimeUS), cf(h.AlgBW, 6, 2), cf(h.BusBW, 6, 2), "N/A")
		}
		return fmt.Sprintf("  %7s  %s  %s  %s", legacyTimeStr(h.TimeUS), cf(h.AlgBW, 6, 2), cf(h.BusBW, 6, 2), cg(float64(h.Wrong), 5))
	}
	s := fmt.Sprintf("  %7s  %6s  %6s", floatStr(h.TimeUS, 7), floatStr(h.AlgBW, 6), floatStr(h.BusBW, 6))
	if !h.Checked {
		return s + "    N/A"
	}
	return s + "  " + cg(float64(h.Wrong), 6)
}

func iterColumns(s *bench.IterStats) string {
	if s == nil {
		s = &bench.IterStats{}
	}
	return fmt.Sprintf("  %7s  %7s  %7s  %7s", floatStr(s.Min, 7), floatStr(s.Max, 7), floatStr(s.P99, 7), floatStr(s.CVPct, 7))
}

// End writes the footer.
func (t *Text) End(f Footer) {
	oob := "OK"
	if f.OutOfBounds != 0 {
		oob = "FAILED"
	}
	t.printf("# %-20s : %d %s\n", "Out of bounds values", f.OutOfBounds, oob)
	gate := ""
	if f.MinBWSet {
		gate = "OK"
		if f.MinBWFailed() {
			gate = "FAILED"
		}
	}
	t.printf("# %-20s : %s %s\n", "Avg bus bandwidth", cg(f.AvgBusBW, 0), gate)
	t.print("#\n")
	t.printf("# Collective test concluded: %s\n", f.Program)
	if m := f.Memory; m != nil {
		t.printf("# %-20s : Initialization %s | User-Allocated %s | Collective %s | Total  %s\n", "Host memory usage",
			memString(m.Init), memString(m.User), memString(m.Collective), memString(m.Init+m.User+m.Collective))
	}
	t.print("#\n")
	if f.Error != "" {
		t.printf("# error: %s\n", f.Error)
	} else {
		t.print("\n")
	}
}

// memString is nccl-tests' getMemString: B, KB, MB or GB (powers of 1024)
// with 2 decimals below 10, 1 below 100, else none.
func memString(n int64) string {
	v, unit := float64(n), "B"
	a := v
	if a < 0 {
		a = -a
	}
	switch {
	case a >= 1<<30:
		v, unit = v/(1<<30), "GB"
	case a >= 1<<20:
		v, unit = v/(1<<20), "MB"
	case a >= 1<<10:
		v, unit = v/(1<<10), "KB"
	}
	a = v
	if a < 0 {
		a = -a
	}
	prec := 0
	switch {
	case a < 10:
		prec = 2
	case a < 100:
		prec = 1
	}
	return cf(v, 0, prec) + " " + unit
}

// Timestamp formats t as -S prints it.
func Timestamp(t time.Time) string { return t.Format(timestampLayout) }
