package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/report"
	"github.com/seed-760dd1f1/cc/cmd/internal/cli"
	"github.com/seed-760dd1f1/cc/runtime/bootstrap"
	"github.com/seed-760dd1f1/cc/runtime/comm"
	"github.com/seed-760dd1f1/cc/runtime/param"
)

// benchComm is a rank's communicators as bench sees them: the one the
// collectives are measured on (embedded: its group's with NCCL_TESTS_SPLIT,
// else the job's) and the job's, for bench's bookkeeping.
type benchComm struct {
	*comm.Comm
	job *comm.Comm
}

// Control returns the job communicator's control view (comm.Control).
func (c benchComm) Control() bench.Control { return c.job.Control() }

// Abort aborts both communicators, so that the failure reaches the rank's
// group and the whole job.
func (c benchComm) Abort(cause error) {
	c.Comm.Abort(cause)
	if c.job != c.Comm {
		c.job.Abort(cause)
	}
}

var _ bench.Communicator = benchComm{}

// AllocRegistered implements bench.Registrar (-R 1): size bytes from
// comm.MemAlloc, registered with the measured communicator, as nccl-tests
// takes its buffers from ncclMemAlloc and registers them with
// ncclCommRegister.
func (c benchComm) AllocRegistered(size int64) ([]byte, func() error, error) {
	buf, err := comm.MemAlloc(int(size))
	if err != nil {
		return nil, nil, err
	}
	h, err := c.Comm.Register(buf)
	if err != nil {
		return nil, nil, errors.Join(err, comm.MemFree(buf))
	}
	return buf, func() error { return errors.Join(c.Comm.Deregister(h), comm.MemFree(buf)) }, nil
}

// perf runs one benchmark: join or create the ranks, measure, report.
func perf(ctx context.Context, cfg *config, e *env) error {
	stopRequested, release := sweepStopSignal()
	defer release()
	params, id, nranks, err := discover(e, cfg.header.NThreads, cfg.header.NGpus)
	if err != nil {
		return err
	}
	if err := cfg.checkRanks(nranks); err != nil {
		return err
	}

	var rec *recorder
	if id.Rank == 0 { // this process holds global rank 0 and reports
		if rec, err = newRecorder(cfg, e, nranks, time.Now()); err != nil {
			return err
		}
		defer rec.close()
	}

	var held0 heldMemory
	if cfg.memory {
		held0 = readHeldMemory(e.readFile)
	}
	comms, err := initComms(ctx, id, cfg.ranksPerProc, nranks, params, cfg.bench.Timeout)
	if err != nil {
		return failed(err, rec)
	}
	defer closeComms(comms)
	groups, err := splitComms(ctx, comms, cfg.split)
	if err != nil {
		return failed(err, rec)
	}
	defer closeComms(groups) // before comms: deferred calls run last first
	var initBytes int64      // -M: what the communicators hold once created
	if cfg.memory {
		initBytes = readHeldMemory(e.readFile).growth(held0)
	}
	sys1 := memSys()

	facts := hostFactsOf(e.hostname)
	localRank := max(id.LocalRank, 0)
	devices := make([]bench.Device, len(comms))
	bcomms := make([]bench.Communicator, len(comms))
	for i, c := range comms {
		dev := localRank*cfg.ranksPerProc + i
		if cfg.deviceBase >= 0 {
			dev = cfg.deviceBase + i
		}
		devices[i] = bench.Device{Rank: c.Rank(), Pid: pid(), Host: facts.host, Device: dev, CPUs: facts.cpus, Model: facts.model}
		bcomms[i] = benchComm{Comm: c, job: c}
		if groups != nil {
			devices[i].Group = cfg.split.color(c.Rank())
			bcomms[i] = benchComm{Comm: groups[i], job: c}
		}
	}

	// As nccl-tests, lower -e (and -b) to what every rank's memory holds
	// rather than refuse it.
	o := cfg.bench
	fit, err := bench.AgreeMaxBytes(ctx, bcomms, o, rankBudget(e.readFile, cfg.ranksPerProc))
	if err != nil {
		return failed(err, rec)
	}
	if fit < o.MaxBytes {
		o.MaxBytes, o.MinBytes = fit, min(o.MinBytes, fit)
		if rec != nil {
			rec.reduced, rec.maxBytes = true, fit
		}
	}
	o.Now = time.Now
	o.StopRequested = stopRequested
	if cfg.runtimeStats {
		o.Swept = runtimeStats(e.stderr, comms[0].Rank())
	}
	var brec bench.Recorder
	if rec != nil {
		rec.progress = newProgress(e, o.Coll.Name, o.Rows(nranks), sweepProgressDelay)
		brec = rec
	}
	sum, err := bench.Run(ctx, bcomms, devices, o, brec)
	if err != nil {
		return failed(err, rec)
	}

	ft := report.Footer{
		Program: cfg.header.Program, OutOfBounds: sum.OutOfBounds, AvgBusBW: sum.AvgBusBW,
		MinBW: cfg.minBW, MinBWSet: cfg.minBWSet,
	}
	if cfg.memory {
		user := bench.BufferBytes(o) * int64(len(comms))
		ft.Memory = &report.Memory{Init: initBytes, User: user, Collective: max(memSys()-sys1-user, 0)}
	}
	if rec != nil {
		if err := rec.end(ft); err != nil {
			return err
		}
	}
	if sum.OutOfBounds > 0 || ft.MinBWFailed() {
		return cli.Silent(exitResults)
	}
	return nil
}

// discover reads the runtime's settings and this process's place in the
// job, which runs nthreads x ngpus ranks per process, and returns the job's
// rank count.
func discover(e *env, nthreads, ngpus int) (*param.Params, bootstrap.Identity, int, error) {
	params, err := param.Load(e.lookup)
	if err != nil {
		return nil, bootstrap.Identity{}, 0, cli.WithCode(exitUsage, err)
	}
	id, err := bootstrap.Discover(e.lookup)
	if err != nil {
		return nil, id, 0, cli.WithCode(exitUsage, err)
	}
	launched := id.NRanks > 1 || id.RootAddr != ""
	if launched && strings.HasPrefix(id.Source, "ccrun") && nthreads*ngpus > 1 {
		return nil, id, 0, usagef("-t %d -g %d under ccrun: ccrun's root expects one rank per process; use ccrun -np for more ranks", nthreads, ngpus)
	}
	return params, id, id.NRanks * nthreads * ngpus, nil
}

// joinPhase is what a -T timeout while the ranks are being created says was
// running.
const joinPhase = "joining the job"

// initComms creates this process's ranks: all of them in-process without a
// launcher, else ranks proc x perProc + i of the launcher's job (global rank
// 0 hosts the bootstrap root when the launcher does not). A timeout (-T; 0:
// none) bounds it all, bootstrap and connection set-up: the error then
// carries a *bench.TimeoutError and, where the bootstrap root said, the
// ranks that never joined (see failed).
func initComms(ctx context.Context, id bootstrap.Identity, perProc, nranks int, p *param.Params, timeout time.Duration) ([]*comm.Comm, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, timeout, &bench.TimeoutError{Rank: id.Rank * perProc, Timeout: timeout, Phase: joinPhase})
		defer cancel()
	}
	if id.NRanks <= 1 && id.RootAddr == "" {
		return comm.InitLocal(ctx, perProc, p)
	}
	comms := make([]*comm.Comm, perProc)
	errs := make([]error, perProc)
	var wg sync.WaitGroup
	for i := range comms {
		rank := id.Rank*perProc + i
		wg.Add(1)
		go func() {
			defer wg.Done()
			comms[i], errs[i] = comm.Init(ctx, comm.Options{
				Rank: rank, NRanks: nranks, RootAddr: id.RootAddr,
				HostRoot: id.HostRoot && rank == 0, Job: id.Job, Params: p,
			})
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range comms {
			if c != nil {
				c.Abort(err)
				c.Close()
			}
		}
		return nil, err
	}
	return comms, nil
}

// splitComms gives each of this process's ranks (comms) the communicator
// of its group, comm.Split with the rank's color and the rank as key (so a
// group's ranks keep the job's order); nil without a split. On failure it
// aborts comms, so that the failure reaches every process of the job.
func splitComms(ctx context.Context, comms []*comm.Comm, split *splitRule) ([]*comm.Comm, error) {
	if split == nil {
		return nil, nil
	}
	groups := make([]*comm.Comm, len(comms))
	errs := make([]error, len(comms))
	var wg sync.WaitGroup
	for i, c := range comms {
		wg.Go(func() { groups[i], errs[i] = c.Split(ctx, split.color(c.Rank()), c.Rank()) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for i, c := range comms {
			c.Abort(err)
			if groups[i] != nil {
				groups[i].Abort(err)
				groups[i].Close()
			}
		}
		return nil, err
	}
	return groups, nil
}

// closeComms closes every local rank at once: Close waits for every rank.
func closeComms(comms []*comm.Comm) {
	var wg sync.WaitGroup
	for _, c := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Close()
		}()
	}
	wg.Wait()
}

// rankBudget is the memory the buffers of each of this process's perProc
// ranks may use: the available memory (availableMemory) less a reserve for
// the runtime and everything else, shared equally. The reserve is nccl-tests'
// 1 GiB per 16 GiB of memory, at most 4 GiB (common.cu), made proportional
// (a 16th) so that small hosts keep most of theirs: 32 GiB available leave
// 30 GiB of buffers, 512 MiB leave 480 MiB. No limit when the available
// memory cannot be read.
func rankBudget(readFile func(string) ([]byte, error), perProc int) int64 {
	avail, ok := availableMemory(readFile)
	if !ok {
		return math.MaxInt64
	}
	return (avail - min(avail/16, 4<<30)) / int64(perProc)
}

// checkMemory refuses a -e that the buffers of this process's perProc ranks
// cannot fit in (cc-perf tune, whose sweep is not lowered).
func checkMemory(o bench.Options, perProc int, readFile func(string) ([]byte, error)) error {
	avail, ok := availableMemory(readFile)
	if !ok {
		return nil
	}
	need := bench.BufferBytes(o) * int64(perProc)
	if need > avail {
		return usagef("-e/--maxbytes %d needs %s of buffers for the %d rank(s) of this process, but %s of memory is available: lower -e (or -t, -g, -c)",
			o.MaxBytes, gib(need), perProc, gib(avail))
	}
	return nil
}

func gib(n int64) string { return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)) }

// recorder is rank 0's report: the table on stdout and the result files
// (-J, -X), each written as the run goes (it is bench's Recorder), then
// ended by end or by failed.
type recorder struct {
	text     *report.Text
	files    []resultFile
	closed   bool
	reduced  bool      // memory lowered -e to maxBytes
	maxBytes int64     // -e after AgreeMaxBytes
	progress *progress // rows done of the sweep on stderr; nil: none
}

// resultFile is a result file and the writer of its format.
type resultFile struct {
	report.ResultFile
	out *report.Output
}

// newRecorder creates the result files, if any, names them on stdout and
// starts the table. A file that cannot be created is an error, and the
// files created before it are removed.
func newRecorder(cfg *config, e *env, nranks int, start time.Time) (*recorder, error) {
	r := &recorder{text: &report.Text{W: e.stdout, Fmt: cfg.format}}
	for _, o := range cfg.outputs {
		out, err := report.Create(o.path)
		if err != nil {
			for _, f := range r.files {
				f.out.Remove()
			}
			return nil, usagef("%s: %v", o.flag, err)
		}
		f := resultFile{out: out}
		switch o.kind {
		case report.KindCSV:
			f.ResultFile = report.NewCSV(out, cfg.bench.Coll.Name, nranks, cfg.header.NGpus)
		case report.KindReporterCSV, report.KindReporterJSON:
			f.ResultFile = report.NewReporter(out, o.kind == report.KindReporterCSV, cfg.bench.Coll.TestName, nranks/cfg.ranksPerProc, cfg.ranksPerProc)
		default:
			f.ResultFile = report.NewJSON(out, cfg.header, cfg.format, e.args, redact(e.environ), start)
		}
		r.files = append(r.files, f)
	}
	for i, o := range cfg.outputs {
		kind := "JSON"
		if o.kind == report.KindCSV || o.kind == report.KindReporterCSV {
			kind = "CSV"
		}
		fmt.Fprintf(e.stdout, "# Writing %s output to %s\n", kind, r.files[i].out.Path)
	}
	r.text.Start(cfg.header)
	return r, nil
}

// Begin is bench.Recorder's.
func (r *recorder) Begin(ds []bench.Device) {
	r.text.Devices(ds)
	if r.reduced {
		r.text.MaxBytesReduced(r.maxBytes)
	}
	r.text.Columns()
	for _, f := range r.files {
		f.Devices(ds)
	}
}

// RowStart is bench.Recorder's.
// The progress line is erased first: the row's first columns go to the
// same terminal while it is measured.
func (r *recorder) RowStart(res bench.Result) {
	r.progress.hide()
	r.text.RowStart(res)
}

// RowDone is bench.Recorder's.
func (r *recorder) RowDone(res bench.Result) {
	r.text.RowDone(res)
	for _, f := range r.files {
		f.Row(res)
	}
	r.progress.add(1)
}

// end writes the footer of a finished run and closes the files; the error
// is the first write error (exit 2).
func (r *recorder) end(ft report.Footer) error {
	r.progress.done()
	r.text.End(ft)
	var ferr error
	for _, f := range r.files {
		f.End(ft, time.Now())
		if err := f.Err(); err != nil && ferr == nil {
			ferr = fmt.Errorf("write %s: %w", f.out.Path, err)
		}
	}
	if err := r.close(); err != nil && ferr == nil {
		ferr = err
	}
	if err := r.text.Err(); err != nil {
		return cli.Errorf(exitSystem, "write the table: %w", err)
	}
	if ferr != nil {
		return cli.WithCode(exitSystem, ferr)
	}
	return nil
}

// abort ends the table and the files with what stopped the run, one line
// per message.
func (r *recorder) abort(msg []string) {
	r.progress.done()
	r.text.Abort(strings.Join(msg, "\n"))
	for _, f := range r.files {
		f.Abort(msg, time.Now())
	}
}

// close closes the files; later calls do nothing. The error is the first
// file's that failed to close, naming it.
func (r *recorder) close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	r.progress.done()
	var first error
	for _, f := range r.files {
		if err := f.out.Close(); err != nil && first == nil {
			first = fmt.Errorf("write %s: %w", f.out.Path, err)
		}
	}
	return first
}

// redact hides the values of environment variables that look like secrets
// (ccrun's CC_JOB_SECRET, tokens, passwords, keys) before the environment is
// recorded in a -J file, which people share.
func redact(environ []string) []string {
	out := make([]string, len(environ))
	for i, kv := range environ {
		k, _, ok := strings.Cut(kv, "=")
		u := strings.ToUpper(k)
		if ok && (strings.Contains(u, "SECRET") || strings.Contains(u, "TOKEN") || strings.Contains(u, "PASSWORD") ||
			strings.Contains(u, "PASSWD") || strings.HasSuffix(u, "_KEY") || strings.Contains(u, "CREDENTIAL")) {
			kv = k + "=<redacted>"
		}
		out[i] = kv
	}
	return out
}

// sweepStopSignal returns bench.Options.StopRequested for SIGUSR1, which
// ends a run of several sweeps (-N 0, -N above 1) after the current one,
// footer and exit status as if it had been the last (ccrun, mpirun and
// srun forward SIGUSR1 to every rank). Until release, SIGUSR1 no longer
// kills the process: a one-sweep run goes on to its end. requested may be
// called by every rank's goroutine at once.
func sweepStopSignal() (requested func() bool, release func()) {
	var got atomic.Bool
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGUSR1)
	return func() bool {
			select {
			case <-ch:
				got.Store(true)
			default:
			}
			return got.Load()
		}, func() {
			signal.Stop(ch)
		}
}
