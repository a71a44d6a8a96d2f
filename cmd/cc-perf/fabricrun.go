package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/fabric"
	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/fabric/measure"
	"github.com/seed-760dd1f1/cc/cmd/internal/cli"
	"github.com/seed-760dd1f1/cc/runtime/comm"
)

// fabricRun joins the job, one rank per host, and runs cc-perf fabric on
// it (fabricJob).
func fabricRun(ctx context.Context, fc *fabricConfig, e *env) error {
	params, id, nranks, err := discover(e, 1, 1)
	if err != nil {
		return err
	}
	if nranks < 2 {
		return usagef("fabric needs at least 2 hosts, one rank on each; this job has %d rank: launch it as ccrun --hostfile HOSTS -N 1 cc-perf fabric (or srun --ntasks-per-node 1)", nranks)
	}
	comms, err := initComms(ctx, id, 1, nranks, params, 0)
	if err != nil {
		return failed(err, nil)
	}
	defer closeComms(comms)
	return fabricJob(ctx, comms[0], fc, e)
}

// fabricRun0 is rank 0's view of a run in progress.
type fabricRun0 struct {
	fc          *fabricConfig
	e           *env
	hosts       []fabric.Host
	unreachable []string
	started     time.Time
	rec         fabric.Record // the -J document so far
	// progress counts the rounds on a terminal (the quick and bisect
	// schedules add rounds as they learn, so it has no total).
	progress *progress
}

// fabricJob runs cc-perf fabric on c, this rank's communicator of the
// whole job: check the job (one rank per host) and rank 0's files, measure
// rank 0's plan, and on rank 0 judge, print and write.
func fabricJob(ctx context.Context, c *comm.Comm, fc *fabricConfig, e *env) error {
	if dup := measure.DuplicateHosts(c); len(dup) > 0 {
		return usagef("several ranks on one host: %s: launch one rank per host (ccrun -N 1 or --npernode 1, srun --ntasks-per-node 1)", strings.Join(dup, "; "))
	}
	hosts, err := measure.Hosts(c)
	if err != nil {
		return failed(err, nil)
	}
	var r0 *fabricRun0
	o := fc.measure
	refusal := ""
	if c.Rank() == 0 {
		r0 = &fabricRun0{fc: fc, e: e, hosts: hosts, unreachable: unreachableHosts(e.lookup), started: time.Now()}
		plan, err := r0.prepare()
		if err != nil {
			refusal = err.Error()
		}
		o.Plan = plan
	}
	refusal, err = measure.Share(c, refusal)
	if err != nil {
		return failed(err, nil)
	}
	if refusal != "" {
		if c.Rank() == 0 {
			return usagef("%s", refusal)
		}
		return usagef("rank 0 refused the run: %s", refusal)
	}
	var onRound func(fabric.Round, *measure.Result) error
	if r0 != nil {
		r0.header()
		r0.progress = newProgress(e, "fabric: rounds", -1, 0)
		onRound = r0.round
	}
	res, err := measure.Run(ctx, c, len(hosts), o, onRound)
	if r0 != nil {
		r0.progress.done()
	}
	if err != nil {
		var exit *cli.ExitError
		if errors.As(err, &exit) {
			return err
		}
		return failed(err, nil)
	}
	if r0 == nil {
		return nil
	}
	return r0.finish(res)
}

// unreachableHosts reads CC_UNREACHABLE_HOSTS.
func unreachableHosts(lookup func(string) (string, bool)) []string {
	v, _ := lookup(envUnreachable)
	var out []string
	for _, h := range strings.Split(v, ",") {
		if h = strings.TrimSpace(h); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// prepare completes the configuration with what only rank 0 knows (the
// baseline file, the seed) and checks it against the hosts and the output
// files; the plan to run.
func (r *fabricRun0) prepare() (measure.Planner, error) {
	fc := r.fc
	if fc.baselinePath != "" {
		data, err := r.e.readFile(fc.baselinePath)
		if err != nil {
			return nil, fmt.Errorf("--baseline %s: %v", fc.baselinePath, unwrapPath(err))
		}
		b, err := fabric.ParseBaseline(fc.baselinePath, data)
		if err != nil {
			return nil, err
		}
		fc.cfg.Baseline = b
	}
	if !fc.seedSet {
		fc.cfg.Seed = r.started.UnixNano()
	}
	if err := fc.cfg.Validate(len(r.hosts)); err != nil {
		return nil, err
	}
	if err := fc.cfg.CheckBaseline(r.hosts); err != nil {
		return nil, err
	}
	for _, f := range []struct{ flag, path string }{{"-J/--json", fc.json}, {"--exclude-file", fc.excludeFile},
		{"--good-hostfile", fc.goodHostfile}, {"--save-baseline", fc.saveBaseline}} {
		if f.path == "" {
			continue
		}
		if err := probeWritable(f.path); err != nil {
			return nil, fmt.Errorf("%s %q: %v", f.flag, f.path, err)
		}
	}
	p, err := fabric.NewPlan(fc.cfg, len(r.hosts))
	if err != nil {
		return nil, err
	}
	r.rec = fabric.Record{Version: fabric.RecordVersion, CCVersion: cli.Version(), Started: r.started.UTC().Format(time.RFC3339),
		Args: r.e.args, Config: fc.cfg, Hosts: r.hosts, Unreachable: r.unreachable}
	return &cutPlan{plan: p, k: fc.cfg.MaxConcurrent}, nil
}

// cutPlan is a plan whose rounds are cut to --max-concurrent tests.
type cutPlan struct {
	plan  *fabric.Plan
	k     int
	queue []fabric.Round
}

// Next implements measure.Planner.
func (p *cutPlan) Next(done []fabric.Measurement) (fabric.Round, bool) {
	if len(p.queue) == 0 {
		r, ok := p.plan.Next(done)
		if !ok {
			return fabric.Round{}, false
		}
		p.queue = fabric.SplitRound(r, p.k)
	}
	r := p.queue[0]
	p.queue = p.queue[1:]
	return r, true
}

// header prints what the run is about to measure.
func (r *fabricRun0) header() {
	cfg := r.fc.cfg
	w := r.e.stdout
	names := make([]string, len(r.hosts))
	for i, h := range r.hosts {
		names[i] = h.Name
	}
	lat := "none"
	if cfg.LatSize > 0 {
		lat = fmt.Sprintf("%d B", cfg.LatSize)
	}
	fmt.Fprintf(w, "# cc-perf fabric: %d hosts, schedule %s, op %s, size %d B, latency size %s, seed %d\n",
		len(r.hosts), cfg.Schedule, cfg.Op, cfg.Size, lat, cfg.Seed)
	fmt.Fprintf(w, "#  hosts: %s\n", strings.Join(names, " "))
	if len(r.unreachable) > 0 {
		fmt.Fprintf(w, "#  unreachable: %s\n", strings.Join(r.unreachable, " "))
	}
}

// round reports a measured round: a progress line on stderr and the -J
// file rewritten with every round so far.
func (r *fabricRun0) round(rd fabric.Round, res *measure.Result) error {
	r.rec.Add(rd, res.Measurements[len(res.Measurements)-len(rd.Tests):])
	r.rec.Counters = res.Counters
	if err := r.writeJSON(); err != nil {
		return err
	}
	r.progress.hide()
	fmt.Fprintln(r.e.stderr, fabric.ProgressLine(r.hosts, rd, res.Measurements)) // the round is on disk
	r.progress.add(1)
	return nil
}

// writeJSON rewrites the -J file (none: nothing) with the record so far.
func (r *fabricRun0) writeJSON() error {
	if r.fc.json == "" {
		return nil
	}
	data, err := r.rec.Marshal()
	if err != nil {
		return cli.Errorf(exitInternal, "-J/--json: %w", err)
	}
	if err := writeAtomic(r.fc.json, data); err != nil {
		return cli.Errorf(exitSystem, "-J/--json %q: %w", r.fc.json, err)
	}
	return nil
}

// finish judges the run, prints the table and writes the files.
func (r *fabricRun0) finish(res *measure.Result) error {
	cfg := r.fc.cfg
	v := fabric.Judge(r.hosts, r.unreachable, res.Measurements, res.Counters, cfg)
	w := r.e.stdout
	if err := fabric.WriteTable(w, r.hosts, res.Measurements, v); err != nil {
		return cli.Errorf(exitSystem, "write the table: %w", err)
	}
	elapsed := time.Since(r.started).Seconds()
	fmt.Fprintf(w, "# elapsed %.1f s\n", elapsed)
	r.rec.Finish(v, elapsed)
	if err := r.writeJSON(); err != nil {
		return err
	}
	if p := r.fc.excludeFile; p != "" {
		if err := writeAtomic(p, fabric.ExcludeList(v)); err != nil {
			return cli.Errorf(exitSystem, "--exclude-file %q: %w", p, err)
		}
	}
	if p := r.fc.goodHostfile; p != "" {
		if err := writeAtomic(p, fabric.GoodHostfile(r.hosts, v)); err != nil {
			return cli.Errorf(exitSystem, "--good-hostfile %q: %w", p, err)
		}
	}
	if p := r.fc.saveBaseline; p != "" {
		b := fabric.NewBaseline(r.hosts, v, cfg)
		b.Created = time.Now().UTC().Format(time.RFC3339)
		data, err := b.Marshal()
		if err != nil {
			return cli.Errorf(exitInternal, "--save-baseline: %w", err)
		}
		if err := writeAtomic(p, data); err != nil {
			return cli.Errorf(exitSystem, "--save-baseline %q: %w", p, err)
		}
	}
	if v.Fail {
		return cli.Errorf(exitFabric, "%s", v.Summary)
	}
	return nil
}
