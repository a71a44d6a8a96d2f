package bench

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
	"github.com/seed-760dd1f1/cc/runtime/tune"
)

// Tune measures, for every size of a sweep, the runtime's automatic pick
// against every (algorithm, protocol) entry the collective may run with
// (Tuned.Entries), each forced with every channel count asked for:
//
//	for each size (-b -e -f -i; a size whose bytes repeat the last one's is skipped):
//	    warm up every configuration                      (-w calls each)
//	    for rep in 0 .. reps-1:
//	        for each configuration, in an order shuffled  (the same on every rank:
//	            per size and repetition:                   a fixed seed, see order)
//	            time iters iterations, then check the data
//	    per configuration: the median of its reps x iters per-iteration times
//
// Each per-iteration time is the slowest rank's, as -I reports it; only
// out-of-place calls are measured. Configurations that ran the same
// (algorithm, protocol, channels) measured one thing: the automatic pick and
// the forced entry it equals, a channel count of "auto" and the count it
// came to. Their samples are pooled, and the pooled medians pick the
// fastest.
//
// The fastest of many noisy medians is biased: among configurations that
// are equally fast, the one whose samples happened to be lowest wins, so a
// regret taken from the same samples is above 1 even when the automatic
// pick is as good as any (the winner's curse). So when the fastest ran
// something other than the automatic pick, a confirmation round measures
// the two again, head to head: reps more measurements of each, alternating
// (A B, then B A), and the regret is auto's median over the candidate's
// from those fresh samples alone. When the candidate is not faster there,
// the automatic pick wins the row and the regret is 1. Configurations that
// ran what the automatic pick ran give a regret of exactly 1 without a
// confirmation.

// TuneOptions is one tune sweep, validated by the caller (cc-perf tune).
type TuneOptions struct {
	Coll *Coll
	Type reduce.DataType
	Op   reduce.Op // collectives that reduce
	Root int       // rooted collectives: a rank

	MinBytes, MaxBytes, StepBytes, StepFactor int64 // the sweep, as in Options

	Iters  int // timed iterations per measurement, >= 1
	Warmup int // untimed calls of every configuration at each size
	Reps   int // measurements of every configuration at each size, >= 1
	// Channels are the channel counts every entry is forced with, 0 for
	// the communicator's choice; empty means {0}.
	Channels []int
	// Timeout aborts the job when a warmup or a measurement takes longer,
	// as Options.Timeout; 0 = no limit.
	Timeout time.Duration
}

// Config is one configuration of the sweep: the tuner's own pick, or an
// entry forced on every rank.
type Config struct {
	Auto     bool
	Algo     algos.Algo
	Proto    protocols.Proto
	Channels int // 0: the communicator's choice
}

// String is "auto", or "algo/proto/channels" with "auto" for channels 0.
func (c Config) String() string {
	switch {
	case c.Auto:
		return "auto"
	case c.Channels == 0:
		return fmt.Sprintf("%s/%s/auto", c.Algo, c.Proto)
	}
	return fmt.Sprintf("%s/%s/%d", c.Algo, c.Proto, c.Channels)
}

// Measured is one configuration at one size.
type Measured struct {
	Config Config
	Ran    Ran     // what rank 0's communicator says the calls ran
	TimeUS float64 // median of this configuration's per-iteration times (slowest rank), µs
	Iters  int     // the timed iterations behind TimeUS: reps x iters
	Wrong  int64   // wrong elements, summed over every check and rank
	// RanUS is the median of the per-iteration times of every
	// configuration that ran the same as this one (Ran), µs.
	RanUS float64
}

// TuneRow is one size of a tune sweep.
type TuneRow struct {
	Bytes   int64      // NCCL's nBytes: the larger of one rank's send and receive bytes
	Count   int64      // the count argument of the calls
	Configs []Measured // Configs[0] is the automatic pick
	Best    int        // index in Configs of the fastest of the first round (by RanUS), the first of equals
	// AutoWon says the confirmation round found the candidate no faster
	// than the automatic pick: the pick wins the row.
	AutoWon bool
	// AutoUS and BestUS are the median times the regret is taken from:
	// the confirmation round's when there was one, else the first round's
	// pooled medians (RanUS) of auto and Configs[Best]. BestUS is AutoUS
	// when the automatic pick won.
	AutoUS, BestUS float64
	AlgBW          float64 // of the winner at BestUS, GB/s
	BusBW          float64 // of the winner at BestUS, GB/s
}

// Auto is the automatic pick's measurement.
func (r TuneRow) Auto() Measured { return r.Configs[0] }

// Fastest is the measurement of the fastest configuration of the first
// round (Best).
func (r TuneRow) Fastest() Measured { return r.Configs[r.Best] }

// Confirmed says a confirmation round measured the automatic pick against
// the first round's fastest again: the fastest ran something else.
func (r TuneRow) Confirmed() bool { return r.Fastest().Ran != r.Auto().Ran }

// Winner is the configuration that won the row: the automatic pick when
// the confirmation round found the first round's fastest no faster, else
// the first round's fastest.
func (r TuneRow) Winner() Measured {
	if r.AutoWon {
		return r.Auto()
	}
	return r.Fastest()
}

// Regret is the automatic pick's time over the winner's (AutoUS / BestUS),
// >= 1.
func (r TuneRow) Regret() float64 {
	if r.BestUS > 0 {
		return r.AutoUS / r.BestUS
	}
	return 1
}

// Wrong is the wrong elements of every configuration.
func (r TuneRow) Wrong() int64 {
	var n int64
	for _, m := range r.Configs {
		n += m.Wrong
	}
	return n
}

// TuneProgress says where the sweep is: size Size of Sizes (1-based), of
// Bytes bytes, measurement Step of Steps at that size (0 while warming up).
type TuneProgress struct {
	Bytes       int64
	Size, Sizes int
	Step, Steps int
}

// TuneRecorder receives what rank 0 learns, as it learns it, from the
// goroutine of global rank 0 only (never when rank 0 is in another
// process).
type TuneRecorder interface {
	// Begin is called once with the configurations, in measurement order
	// of the first repetition.
	Begin(configs []Config)
	// Progress is called before each warmup and after each measurement.
	Progress(p TuneProgress)
	// Row is called with each finished size.
	Row(r TuneRow)
}

// Tune runs the sweep of o on every rank of this process (comms[i] is one
// rank of the job; each must implement Tuned) and returns when every local
// rank is done. Failures, ctx and timeouts end it as they end Run. Wrong
// data does not stop the sweep: each row counts it.
func Tune(ctx context.Context, comms []Communicator, o TuneOptions, rec TuneRecorder) error {
	if len(comms) == 0 {
		return fmt.Errorf("bench: no communicators")
	}
	kind, ok := o.Coll.Func()
	if !ok {
		return fmt.Errorf("%s is made of point-to-point calls: the tuner chooses nothing for it", o.Coll.Name)
	}
	for _, c := range comms {
		if _, ok := c.(Tuned); !ok {
			return fmt.Errorf("bench: the communicator of rank %d cannot force algorithms (no Tuned)", c.Rank())
		}
	}
	if o.Iters < 1 || o.Reps < 1 {
		return fmt.Errorf("bench: %d iterations and %d repetitions, want at least 1 of each", o.Iters, o.Reps)
	}
	bo := Options{
		Coll: o.Coll, Types: []reduce.DataType{o.Type}, Ops: []reduce.Op{o.Op}, Root: o.Root,
		MinBytes: o.MinBytes, MaxBytes: o.MaxBytes, StepBytes: o.StepBytes, StepFactor: o.StepFactor,
		Iters: o.Iters, Warmup: o.Warmup, Agg: 1, Cycles: 1, Check: 1, Average: 1,
		PerIter: true, Timeout: o.Timeout, Now: time.Now,
	}
	return onEveryRank(ctx, comms, func(ctx context.Context, i int) error {
		k, err := newRank(comms[i], &bo, nil)
		if err != nil {
			return err
		}
		t := comms[i].(Tuned)
		defer t.ForceNone()
		return k.tune(ctx, t, kind, &o, rec)
	})
}

// tuneConfigs is the automatic pick, then every entry with every channel
// count, in NCCL's entry order.
func tuneConfigs(entries []tune.Choice, channels []int) []Config {
	if len(channels) == 0 {
		channels = []int{0}
	}
	configs := []Config{{Auto: true}}
	for _, e := range entries {
		for _, ch := range channels {
			configs = append(configs, Config{Algo: e.Algo, Proto: e.Proto, Channels: ch})
		}
	}
	return configs
}

func (k *rank) tune(ctx context.Context, t Tuned, kind algos.Coll, o *TuneOptions, rec TuneRecorder) error {
	root := -1
	if k.coll.Rooted {
		root = o.Root
	}
	k.dt, k.op, k.root, k.elt = o.Type, o.Op, root, int64(o.Type.Size())
	configs := tuneConfigs(t.Entries(kind), o.Channels)
	lead := k.job == 0 && rec != nil
	if lead {
		rec.Begin(configs)
	}
	var sizes []int64
	Sizes(o.MinBytes, o.MaxBytes, o.StepBytes, o.StepFactor, func(size int64) bool {
		sizes = append(sizes, size)
		return true
	})
	if err := k.barrier(); err != nil {
		return err
	}
	last := int64(-1)
	for i, size := range sizes {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		k.setup(size)
		b := k.counts.Bytes(k.elt)
		if b == last {
			continue // the same calls as the row before (blocks round down)
		}
		last = b
		progress := func(step int) {}
		if lead {
			p := TuneProgress{Bytes: last, Size: i + 1, Sizes: len(sizes), Steps: o.Reps * (len(configs) + 2)}
			progress = func(step int) {
				p.Step = step
				rec.Progress(p)
			}
		}
		row, err := k.tuneRow(t, configs, o, progress)
		if err != nil {
			return err
		}
		if lead {
			rec.Row(row)
		}
	}
	return nil
}

// tuneRow measures every configuration at the current size.
func (k *rank) tuneRow(t Tuned, configs []Config, o *TuneOptions, progress func(step int)) (TuneRow, error) {
	defer func() { k.config = "" }()
	row := TuneRow{Bytes: k.counts.Bytes(k.elt), Count: k.counts.Param, Configs: make([]Measured, len(configs))}
	progress(0)
	// Warm up: the first calls of a configuration open its connections.
	for _, c := range configs {
		if err := k.use(t, c); err != nil {
			return row, err
		}
		var err error
		k.wd.arm(k.phase("warmup"))
		for it := 0; it < o.Warmup && err == nil; it++ {
			err = k.startColl(false, it)
		}
		if err = k.wd.disarm(err); err != nil {
			return row, err
		}
	}
	n := len(configs)
	samples := make([][]float64, n)
	for rep := 0; rep < o.Reps; rep++ {
		for j, i := range order(n, k.counts.Bytes(k.elt), rep) {
			if err := k.use(t, configs[i]); err != nil {
				return row, err
			}
			h, err := k.benchTime(false)
			if err != nil {
				return row, err
			}
			a, p, ch, _ := t.Ran()
			m := &row.Configs[i]
			m.Config, m.Ran = configs[i], Ran{Algo: a, Proto: p, Channels: ch}
			m.Wrong += h.Wrong
			samples[i] = append(samples[i], h.Iter.TimesUS...)
			progress(rep*n + j + 1)
		}
	}
	pooled := map[Ran][]float64{}
	for i, m := range row.Configs {
		pooled[m.Ran] = append(pooled[m.Ran], samples[i]...)
	}
	for i := range row.Configs {
		m := &row.Configs[i]
		m.TimeUS, m.Iters, m.RanUS = median(samples[i]), len(samples[i]), median(pooled[m.Ran])
		if m.RanUS < row.Configs[row.Best].RanUS {
			row.Best = i
		}
	}
	row.AutoUS, row.BestUS = row.Auto().RanUS, row.Fastest().RanUS
	// Every rank has the same samples (each time is the slowest rank's), so
	// every rank makes the same decision here.
	if !row.Confirmed() {
		progress(o.Reps * (n + 2)) // no confirmation round
	} else {
		auto, cand, err := k.confirm(t, &row.Configs[0], &row.Configs[row.Best], o, func(step int) { progress(o.Reps*n + step) })
		if err != nil {
			return row, err
		}
		row.AutoUS, row.BestUS = auto, cand
		if cand >= auto {
			row.AutoWon, row.BestUS = true, auto
		}
	}
	row.AlgBW, row.BusBW = k.coll.Bandwidth(k.counts, k.elt, k.n, row.BestUS/1e6)
	return row, nil
}

// confirm measures configurations a (the automatic pick) and b again, reps
// times each, alternating A B then B A, and returns their median
// per-iteration times; wrong elements count on a and b.
func (k *rank) confirm(t Tuned, a, b *Measured, o *TuneOptions, progress func(step int)) (float64, float64, error) {
	var sa, sb []float64
	for rep := 0; rep < o.Reps; rep++ {
		pair := [2]*Measured{a, b}
		if rep%2 == 1 {
			pair = [2]*Measured{b, a}
		}
		for j, m := range pair {
			if err := k.use(t, m.Config); err != nil {
				return 0, 0, err
			}
			h, err := k.benchTime(false)
			if err != nil {
				return 0, 0, err
			}
			m.Wrong += h.Wrong
			if m == a {
				sa = append(sa, h.Iter.TimesUS...)
			} else {
				sb = append(sb, h.Iter.TimesUS...)
			}
			progress(2*rep + j + 1)
		}
	}
	return median(sa), median(sb), nil
}

// order is the order in which repetition rep measures n configurations at
// a size of nbytes: a Fisher-Yates shuffle driven by splitmix64 seeded with
// both, so that every rank (every build, too) takes the same order, and
// no configuration always follows the same one (which might leave it
// connections or goroutines in some state).
func order(n int, nbytes int64, rep int) []int {
	x := uint64(nbytes)*0x9e3779b97f4a7c15 ^ uint64(rep)
	next := func() uint64 { // splitmix64 (Steele, Lea, Flood 2014)
		x += 0x9e3779b97f4a7c15
		z := x
		z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
		z = (z ^ z>>27) * 0x94d049bb133111eb
		return z ^ z>>31
	}
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j := int(next() % uint64(i+1))
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// use makes the following calls run configuration c.
func (k *rank) use(t Tuned, c Config) error {
	k.config = c.String()
	if c.Auto {
		t.ForceNone()
		return nil
	}
	return t.Force(c.Algo, c.Proto, c.Channels)
}

// median of xs (the mean of the middle two for an even count); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
