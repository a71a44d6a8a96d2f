package main

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/algos/sim/timed"
	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/predict"
	"github.com/seed-760dd1f1/cc/cmd/internal/cli"
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/tune"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// cc-perf predict <collective>: the flags make a predict.Config; the core
// replays the schedules; this file prints what it found.

// predictFlags are the flags of cc-perf predict <collective>.
type predictFlags struct {
	hosts, ppn, cores, shared int
	minBytes, maxBytes        cli.Size
	stepFactor, root, showAlg int
	link, consts, algo, proto string
	json, leafSpine, burst    string
	slowHosts, slowLinks      []string
	lateStarts                []string
	maxTransfers              int64
	mtu                       int
}

func defaultPredictFlags() predictFlags {
	return predictFlags{ppn: 1, mtu: 1500, minBytes: 8, maxBytes: 128 << 20, stepFactor: 2, maxTransfers: predict.DefaultMaxTransfers}
}

func (f *predictFlags) register(fs *pflag.FlagSet) {
	i := func(p *int, name, short string, min, max int, usage string) {
		fs.VarP(intFlag{p, min, max}, name, short, usage)
	}
	i(&f.hosts, "hosts", "", 1, 1<<20, "hosts in the cluster (required)")
	i(&f.ppn, "ranks-per-host", "", 1, 1024, "ranks on each host, numbered host by host")
	fs.StringVar(&f.link, "link", "", "each host's NIC: RATE[,LATENCY], tc units (100mbit, 1gbit, 25gbit; 12.5mbps is bytes) and a latency added to every hop between hosts (50us, 1ms); default unlimited: the calibration's transport alone")
	i(&f.mtu, "mtu", "", 0, predict.MaxMTU, fmt.Sprintf("the links' MTU: --link's rate counts Ethernet frames (as tc's shapers do), of which TCP's payload gets (MTU-52)/(MTU+14+33) at this MTU (0.936 at 1500: headers, and the ACKs of what a host receives); 0: --link's rate is payload. %d..%d or 0", predict.MinMTU, predict.MaxMTU))
	fs.StringVar(&f.burst, "burst", "", "each host link's token bucket, as a shaper (tc's tbf) or a cloud's egress limit has: SIZE[,RATE], SIZE bytes (-b's syntax) an idle link may send at up to RATE (--link's units; default 10 x the link's rate) before it falls back to its rate (needs --link)")
	fs.StringVar(&f.consts, "consts", "", "calibration constants (cc-perf calibrate's file, the CC_TUNE_FILE format); default CC_TUNE_FILE, else the built-in constants")
	fs.StringVar(&f.algo, "algo", "", "algorithms to replay, comma-separated (ring, tree, ctring, recdbl, rabenseifner); default every modelled one the tuner may pick")
	fs.StringVar(&f.proto, "proto", "", "protocols, comma-separated (LL, LL128, Simple); default all")
	fs.VarP(&f.minBytes, "minbytes", "b", "smallest message size: bytes, or with a K, M or G suffix (powers of 1024)")
	fs.VarP(&f.maxBytes, "maxbytes", "e", "largest message size (same syntax as -b)")
	i(&f.stepFactor, "stepfactor", "f", 2, 1<<20, "size multiplier between rows")
	i(&f.root, "root", "r", 0, 1<<30, "root rank of broadcast and reduce")
	i(&f.showAlg, "output_algo_proto_channels", "A", 0, 1, "1: add the algo proto nchannels columns of the tuner's pick")
	fs.StringVarP(&f.json, "output_file", "J", "", "also write the prediction as JSON to this file")
	i(&f.cores, "cores", "", 0, 1<<16, "cores per host, shared by its ranks' CPU stages (0: as many as its ranks)")
	i(&f.shared, "shared-cores", "", 0, 1<<16, "cores shared by every host (hosts on one machine, as the testbed's); overrides --cores")
	fs.StringArrayVar(&f.slowHosts, "slow-host", nil, "what-if: host K's CPU stages FACTOR times slower: K=FACTOR (repeatable)")
	fs.StringArrayVar(&f.slowLinks, "slow-link", nil, "what-if: flows between hosts A and B at the link rate / FACTOR: A-B=FACTOR (repeatable; needs --link)")
	fs.StringArrayVar(&f.lateStarts, "late-start", nil, "what-if: rank R starts every call late by a duration: R=DURATION (200us; repeatable)")
	fs.StringVar(&f.leafSpine, "leaf-spine", "", "a two-level fabric: HOSTS_PER_LEAF:OVERSUBSCRIPTION (16:4), each leaf's spine link hosts x rate / oversubscription (needs --link)")
	fs.Int64Var(&f.maxTransfers, "max-transfers", f.maxTransfers, "refuse a replay estimated above this many slice transfers")
}

const predictLong = `cc-perf predict replays cc's own schedules (the Ops the engine runs, cut into
the engine's slices, with NCCL's 8-slot credits) on a simulated clock, for a
cluster given by --hosts, --ranks-per-host and --link, priced by the tuner's
calibration constants (--consts). It prints the nccl-tests table of the
tuner's pick at every size (the #wrong column reads sim), the tuner's
closed-form time and the resource that saturates beside it, then the fastest
algorithm per size with its margin over the runner-up (tie: within 10%).
Nothing is run on the network: it is a prediction.

  cc-perf predict all_reduce --hosts 8 --link 1gbit,50us -b 64K -e 64M -f 4
  cc-perf predict all_reduce --hosts 8 --link 1gbit --slow-link 2-3=4 -A 1

Not modelled (refused by --algo, with the runtime's reason where the
cluster cannot run them): PAT, NVLS, NVLS_TREE, CollNet, OneShot. Above
--max-transfers a ring folds its hosts into one and a tree extrapolates
over loops, each row naming its shortcut and error bound; other
algorithms are left out (named in the header).`

func newPredictCmd(e *env) *cobra.Command {
	return collParentCmd("predict", "predict a collective's time on a cluster by replaying its schedules on a simulated clock", predictLong,
		func(c *bench.Coll) *cobra.Command { return newPredictCollCmd(c, e) })
}

func newPredictCollCmd(c *bench.Coll, e *env) *cobra.Command {
	f := defaultPredictFlags()
	cmd := &cobra.Command{
		Use:   c.Name + " [flags]",
		Short: "predict " + c.Name,
		Long:  predictLong,
		Args:  onlyFlags("predict " + c.Name),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := f.config(c, cmd.Flags().Changed("hosts"), e)
			if err != nil {
				return err
			}
			return runPredict(cfg, f.showAlg == 1, f.json, e)
		},
	}
	cmd.Flags().SortFlags = false
	f.register(cmd.Flags())
	return cmd
}

func runPredict(cfg *predict.Config, showAlgo bool, jsonPath string, e *env) error {
	rows, err := predict.Run(cfg)
	if err != nil {
		return cli.Errorf(exitRuntime, "predict: %w", err)
	}
	if err := predict.WriteText(e.stdout, cfg, rows, showAlgo); err != nil {
		return cli.Errorf(exitSystem, "predict: %w", err)
	}
	if jsonPath == "" {
		return nil
	}
	var b bytes.Buffer
	if err := predict.WriteJSON(&b, cfg, rows); err != nil {
		return cli.Errorf(exitInternal, "predict: %w", err)
	}
	if err := writeAtomic(jsonPath, b.Bytes()); err != nil {
		return cli.Errorf(exitSystem, "-J/--output_file %q: %w", jsonPath, err)
	}
	return nil
}

// config validates the flags into a prediction; every error is one line
// naming the bad value and what is allowed, before anything runs.
func (f *predictFlags) config(c *bench.Coll, hostsSet bool, e *env) (*predict.Config, error) {
	if !hostsSet {
		return nil, usagef("predict %s: --hosts is required: the number of hosts to predict for", c.Name)
	}
	min, max := int64(f.minBytes), int64(f.maxBytes)
	if min < 1 || min > max {
		return nil, usagef("-b/--minbytes %d, -e/--maxbytes %d: want 1 <= minbytes <= maxbytes", min, max)
	}
	cfg := &predict.Config{Coll: c, Hosts: f.hosts, PPN: f.ppn, ElemSize: 4, Root: f.root,
		Cores: f.cores, SharedCores: f.shared, MaxTransfers: f.maxTransfers, MTU: f.mtu}
	bench.Sizes(min, max, 0, int64(f.stepFactor), func(size int64) bool {
		cfg.Sizes = append(cfg.Sizes, size)
		return true
	})
	var err error
	if cfg.LinkRate, cfg.LinkLatency, err = parseLink(f.link); err != nil {
		return nil, usagef("--link %q: %v", f.link, err)
	}
	if f.burst != "" {
		if cfg.Burst, err = parseBurst(f.burst, cfg.LinkRate); err != nil {
			return nil, usagef("--burst %q: %v", f.burst, err)
		}
	}
	if cfg.Consts, err = f.loadConsts(e); err != nil {
		return nil, err
	}
	if f.algo != "" {
		if cfg.Algos, err = parseAlgos(f.algo); err != nil {
			return nil, usagef("--algo %q: %v", f.algo, err)
		}
	}
	if f.proto != "" {
		if cfg.Protos, err = parseProtos(f.proto); err != nil {
			return nil, usagef("--proto %q: %v", f.proto, err)
		}
	}
	if err := f.whatIfs(cfg); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, usagef("predict %s: %v", c.Name, err)
	}
	return cfg, nil
}

func (f *predictFlags) loadConsts(e *env) (*tune.Consts, error) {
	path, flag := f.consts, "--consts"
	if path == "" {
		if v, ok := e.lookup("CC_TUNE_FILE"); ok && v != "" {
			path, flag = v, "CC_TUNE_FILE"
		}
	}
	if path == "" {
		return tune.Default(), nil
	}
	b, err := e.readFile(path)
	if err != nil {
		return nil, cli.Errorf(exitSystem, "%s %q: %w", flag, path, err)
	}
	c, err := tune.ParseConsts(path, b)
	if err != nil {
		return nil, usagef("%s: not a constants file of cc-perf calibrate's format: %v", flag, oneLine(err))
	}
	return c, nil
}

// oneLine keeps an error's first line.
func oneLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}

// whatIfs parses --slow-host, --slow-link, --late-start and --leaf-spine.
func (f *predictFlags) whatIfs(cfg *predict.Config) error {
	for _, s := range f.slowHosts {
		k, v, ok := strings.Cut(s, "=")
		h, err1 := strconv.Atoi(k)
		fac, err2 := strconv.ParseFloat(v, 64)
		if !ok || err1 != nil || err2 != nil {
			return usagef("--slow-host %q: want K=FACTOR, a host index and a number >= 1 (2=1.5)", s)
		}
		cfg.SlowHosts = append(cfg.SlowHosts, predict.SlowHost{Host: h, Factor: fac})
	}
	for _, s := range f.slowLinks {
		ab, v, ok := strings.Cut(s, "=")
		a, b, ok2 := strings.Cut(ab, "-")
		ha, err1 := strconv.Atoi(a)
		hb, err2 := strconv.Atoi(b)
		fac, err3 := strconv.ParseFloat(v, 64)
		if !ok || !ok2 || err1 != nil || err2 != nil || err3 != nil {
			return usagef("--slow-link %q: want A-B=FACTOR, two host indexes and a number >= 1 (0-1=4)", s)
		}
		cfg.SlowLinks = append(cfg.SlowLinks, timed.SlowLink{A: ha, B: hb, Factor: fac})
	}
	for _, s := range f.lateStarts {
		k, v, ok := strings.Cut(s, "=")
		r, err1 := strconv.Atoi(k)
		d, err2 := time.ParseDuration(v)
		if !ok || err1 != nil || err2 != nil || d < 0 {
			return usagef("--late-start %q: want R=DURATION, a rank and a duration >= 0 (3=200us)", s)
		}
		cfg.LateStarts = append(cfg.LateStarts, predict.LateStart{Rank: r, Ns: float64(d.Nanoseconds())})
	}
	if f.leafSpine != "" {
		h, o, ok := strings.Cut(f.leafSpine, ":")
		hosts, err1 := strconv.Atoi(h)
		over, err2 := strconv.ParseFloat(o, 64)
		if !ok || err1 != nil || err2 != nil {
			return usagef("--leaf-spine %q: want HOSTS_PER_LEAF:OVERSUBSCRIPTION (16:4)", f.leafSpine)
		}
		cfg.Fabric = &timed.LeafSpine{HostsPerLeaf: hosts, Oversub: over}
	}
	return nil
}

// parseLink reads --link: RATE[,LATENCY], RATE in tc's units (bit, kbit,
// mbit, gbit, tbit per second; bps, kbps, mbps, gbps are bytes) or
// "unlimited"; it returns bytes per ns and ns.
func parseLink(s string) (rate, latency float64, err error) {
	if s == "" {
		return 0, 0, nil
	}
	r, l, hasLat := strings.Cut(s, ",")
	r = strings.ToLower(strings.TrimSpace(r))
	if r != "unlimited" {
		units := []struct {
			suffix string
			bits   float64
		}{{"tbit", 1e12}, {"gbit", 1e9}, {"mbit", 1e6}, {"kbit", 1e3}, {"bit", 1}, {"tbps", 8e12}, {"gbps", 8e9}, {"mbps", 8e6}, {"kbps", 8e3}, {"bps", 8}}
		found := false
		for _, u := range units {
			if num, ok := strings.CutSuffix(r, u.suffix); ok {
				v, perr := strconv.ParseFloat(num, 64)
				if perr != nil || !(v > 0) {
					return 0, 0, fmt.Errorf("rate %q: want a number > 0 with a unit (100mbit, 1gbit, 25gbit)", r)
				}
				rate, found = v*u.bits/8/1e9, true
				break
			}
		}
		if !found {
			return 0, 0, fmt.Errorf("rate %q: want a number with tc's units: bit, kbit, mbit, gbit, tbit (or bps, kbps, mbps, gbps for bytes), or unlimited", r)
		}
	}
	if hasLat {
		d, derr := time.ParseDuration(strings.TrimSpace(l))
		if derr != nil || d < 0 {
			return 0, 0, fmt.Errorf("latency %q: want a duration >= 0 (50us, 1ms)", l)
		}
		latency = float64(d.Nanoseconds())
	}
	return rate, latency, nil
}

// parseBurst reads --burst: SIZE[,RATE], the peak 10 x linkRate unless
// given.
func parseBurst(s string, linkRate float64) (*timed.Bucket, error) {
	size, rate, hasRate := strings.Cut(s, ",")
	n, err := cli.ParseSize(strings.TrimSpace(size))
	if err != nil || n < 1 {
		return nil, fmt.Errorf("size %q: want bytes >= 1, or with a K, M or G suffix (128K)", size)
	}
	b := &timed.Bucket{Size: float64(n), Peak: 10 * linkRate}
	if hasRate {
		if b.Peak, _, err = parseLink(rate); err != nil || b.Peak == 0 {
			return nil, fmt.Errorf("rate %q: want a number > 0 with tc's units (10gbit)", rate)
		}
	}
	return b, nil
}

// parseAlgos reads a comma-separated list of algorithm names, any case.
func parseAlgos(s string) ([]algos.Algo, error) {
	var all []algos.Algo
	for a := range algos.Algo(algos.NumAlgos) {
		all = append(all, a)
	}
	return parseNames(s, all, "an algorithm")
}

// parseProtos reads a comma-separated list of protocol names, any case.
func parseProtos(s string) ([]protocols.Proto, error) {
	return parseNames(s, []protocols.Proto{protocols.LL, protocols.LL128, protocols.Simple}, "a protocol")
}

// parseNames reads a comma-separated list of the names of values of all,
// any case; what names the kind of value in errors.
func parseNames[T fmt.Stringer](s string, all []T, what string) ([]T, error) {
	var out []T
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(all, func(v T) bool { return strings.EqualFold(v.String(), name) })
		if i < 0 {
			names := make([]string, len(all))
			for j, v := range all {
				names[j] = v.String()
			}
			return nil, fmt.Errorf("%q is not %s: want one of %s", name, what, strings.Join(names, ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}
