package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/runtime/reduce"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCounts restates nccl-tests' per-collective byte counts and bandwidth
// formulas (doc/PERFORMANCE.md, src/*.cu) independently of the table.
func TestCounts(t *testing.T) {
	for _, c := range Collectives {
		for n := 1; n <= 9; n++ {
			for _, elt := range []int64{1, 2, 4, 8} {
				for _, count := range []int64{0, 1, 2, 7, 8, 64, 1000, 4096, 33554432} {
					base := (count / int64(n)) &^ (16/elt - 1)
					N := int64(n)
					var want Counts
					var algBytes float64
					var factor float64
					switch c.Name {
					case "all_reduce":
						want = Counts{count, count, count, 0, 0}
						algBytes, factor = float64(count*elt), 2*float64(N-1)/float64(N)
					case "reduce_scatter":
						want = Counts{base * N, base, base, 0, base}
						algBytes, factor = float64(base*N*elt), float64(N-1)/float64(N)
					case "all_gather":
						want = Counts{base, base * N, base, base, 0}
						algBytes, factor = float64(base*N*elt), float64(N-1)/float64(N)
					case "broadcast", "reduce", "sendrecv":
						want = Counts{count, count, count, 0, 0}
						algBytes, factor = float64(count*elt), 1
					case "alltoall":
						want = Counts{base * N, base * N, base, 0, 0}
						algBytes, factor = float64(base*N*elt), float64(N-1)/float64(N)
					case "gather":
						want = Counts{base, base * N, base, base, 0}
						algBytes, factor = float64(base*N*elt), float64(N-1)/float64(N)
					case "scatter":
						want = Counts{base * N, base, base, 0, base}
						algBytes, factor = float64(base*N*elt), float64(N-1)/float64(N)
					case "hypercube":
						want = Counts{base, base * N, base, base, 0}
						algBytes, factor = float64(base*(N-1)*elt), 1
					case "alltoallv":
						// The default matrix: to distance d, d/(n(n-1)/2)
						// of count/n x n x elt bytes, aligned down to 16.
						total, each := base*N*elt, base*N*elt&^15
						if n > 1 {
							each = 0
							for d := int64(1); d < N; d++ {
								each += d * total / (N * (N - 1) / 2) &^ 15
							}
						}
						want = Counts{each / elt, each / elt, base, 0, 0}
						algBytes, factor = float64(each), float64(N-1)/float64(N)
					default:
						t.Fatalf("no reference for %s", c.Name)
					}
					if got := c.Counts(count, elt, n); got != want {
						t.Errorf("%s n=%d elt=%d count=%d: Counts = %+v, want %+v", c.Name, n, elt, count, got, want)
					}
					if got := c.AlgBytes(want, elt, n); got != algBytes {
						t.Errorf("%s n=%d elt=%d count=%d: AlgBytes = %v, want %v", c.Name, n, elt, count, got, algBytes)
					}
					if got := c.BusFactor(n); got != factor {
						t.Errorf("%s n=%d: BusFactor = %v, want %v", c.Name, n, got, factor)
					}
					if alg, bus := c.Bandwidth(want, elt, n, 1e-3); alg != algBytes/1e9/1e-3 || bus != alg*factor {
						t.Errorf("%s n=%d: algbw %v busbw %v, want %v and x %v", c.Name, n, alg, bus, algBytes/1e9/1e-3, factor)
					}
				}
			}
		}
	}
}

func TestOpColumn(t *testing.T) {
	want := map[string]string{"all_reduce": "avg", "reduce_scatter": "avg", "reduce": "avg", "sendrecv": "avg",
		"all_gather": "none", "broadcast": "none", "alltoall": "none", "alltoallv": "none", "gather": "none", "scatter": "none", "hypercube": ""}
	for _, c := range Collectives {
		if got := c.OpColumn("avg"); got != want[c.Name] {
			t.Errorf("%s: OpColumn(avg) = %q, want %q", c.Name, got, want[c.Name])
		}
	}
	if got := OpName(reduce.PreMulSum); got != "mulsum" {
		t.Errorf("OpName(PreMulSum) = %q, want mulsum", got)
	}
}

func TestSizes(t *testing.T) {
	collect := func(min, max, step, factor int64) []int64 {
		var got []int64
		Sizes(min, max, step, factor, func(s int64) bool { got = append(got, s); return true })
		return got
	}
	tests := []struct {
		min, max, step, factor int64
		want                   []int64
	}{
		{8, 128, 0, 2, []int64{8, 16, 32, 64, 128}},
		{8, 100, 0, 4, []int64{8, 32}},
		{0, 3, 1, 1, []int64{0, 1, 2, 3}},
		{1024, 4096, 1024, 0, []int64{1024, 2048, 3072, 4096}},
		{32 << 20, 32 << 20, 1 << 20, 1, []int64{32 << 20}},
	}
	for _, tt := range tests {
		if got := collect(tt.min, tt.max, tt.step, tt.factor); fmt.Sprint(got) != fmt.Sprint(tt.want) {
			t.Errorf("Sizes(%d, %d, %d, %d) = %v, want %v", tt.min, tt.max, tt.step, tt.factor, got, tt.want)
		}
	}
	var warm []int64
	WarmupSizes(0, 9, func(s int64) { warm = append(warm, s) })
	if got, want := fmt.Sprint(warm), "[0 1 2 4 8]"; got != want {
		t.Errorf("WarmupSizes(0, 9) = %s, want %s", got, want)
	}
}

// TestExpectOrderIndependent checks the property the data check rests on:
// reducing the generated inputs in any rank order gives the same bits.
func TestExpectOrderIndependent(t *testing.T) {
	const count = 512
	rng := rand.New(rand.NewPCG(1, 2))
	for _, dt := range reduce.DataTypes() {
		elt := dt.Size()
		for _, op := range reduce.Ops() {
			for _, n := range []int{1, 2, 3, 4, 7, 8, 16, 33} {
				g := NewGen(dt, &op, n, 42)
				r, err := NewReducer(g)
				if err != nil {
					t.Fatal(err)
				}
				want := make([]byte, count*elt)
				r.Expect(want, 1000)

				// The same reduction in a random rank order.
				order := rng.Perm(n)
				acc := make([]byte, count*elt)
				tmp := make([]byte, count*elt)
				for i, rk := range order {
					buf := tmp
					if i == 0 {
						buf = acc
					}
					g.Fill(buf, rk, 1000)
					if len(r.pre) > 0 {
						r.pre[rk%len(r.pre)].Pre(buf, buf)
					}
					if i > 0 {
						r.sum.Reduce(acc, tmp, acc)
					}
				}
				if r.post {
					r.sum.Post(acc, acc)
				}
				if w := CountWrong(acc, want, elt, 0); w != 0 {
					t.Errorf("%s %s n=%d: %d of %d elements depend on the reduction order (order %v)", dt, OpName(op), n, w, count, order)
				}
			}
		}
	}
}

// TestGenExercisesBits guards against a degenerate generator (all zeros).
func TestGenExercisesBits(t *testing.T) {
	for _, dt := range reduce.DataTypes() {
		for _, op := range append(reduce.Ops(), 255) {
			var pop *reduce.Op
			if op != 255 {
				pop = &op
			}
			g := NewGen(dt, pop, 4, 7)
			buf := make([]byte, 256*dt.Size())
			g.Fill(buf, 0, 0)
			distinct := map[string]bool{}
			for i := 0; i < len(buf); i += dt.Size() {
				distinct[string(buf[i:i+dt.Size()])] = true
			}
			if len(distinct) < 3 {
				t.Errorf("%s op %v: only %d distinct values in 256", dt, op, len(distinct))
			}
		}
	}
}

func TestCountWrong(t *testing.T) {
	a := []byte{1, 0, 5, 0, 9, 0}
	b := []byte{1, 0, 7, 0, 8, 0}
	if got := CountWrong(a, b, 2, 0); got != 2 {
		t.Errorf("CountWrong tol 0 = %d, want 2", got)
	}
	if got := CountWrong(a, b, 2, 2); got != 0 {
		t.Errorf("CountWrong tol 2 = %d, want 0", got)
	}
	if got := Tolerance(reduce.Float16, ptr(reduce.Avg)); got != 2 {
		t.Errorf("Tolerance(half, avg) = %d, want 2", got)
	}
	if got := Tolerance(reduce.Int32, ptr(reduce.Avg)); got != 0 {
		t.Errorf("Tolerance(int32, avg) = %d, want 0", got)
	}
}

func ptr[T any](v T) *T { return &v }

func TestIterStats(t *testing.T) {
	sec := []float64{9e-6, 1e-6, 2e-6, 3e-6, 4e-6}
	s := iterStats(sec, 1)
	if s.Min != 1 || s.Max != 4 || s.P50 != 3 || s.P99 != 4 || s.Avg != 2.5 || s.Skipped != 1 || len(s.TimesUS) != 5 {
		t.Errorf("iterStats = %+v", s)
	}
	if got := iterStats(sec, 5); got.Max != 0 {
		t.Errorf("iterStats skipping everything = %+v, want zeros", got)
	}
}

// recorder collects what Run reports.
type recorder struct {
	devices []Device
	started int
	rows    []Result
}

func (r *recorder) Begin(d []Device) { r.devices = d }
func (r *recorder) RowStart(Result)  { r.started++ }
func (r *recorder) RowDone(x Result) { r.rows = append(r.rows, x) }

func devicesFor(n int) []Device {
	ds := make([]Device, n)
	for i := range ds {
		ds[i] = Device{Rank: i, Pid: 100, Host: "h", Device: i, CPUs: "cpu 0-1", Model: "test"}
	}
	return ds
}

func smallOptions(c *Coll) Options {
	return Options{
		Coll: c, Types: reduce.DataTypes(), Ops: reduce.Ops(), Root: -1,
		MinBytes: 8, MaxBytes: 1000, StepFactor: 5, Iters: 2, Warmup: 1, Agg: 1, Cycles: 1, Check: 1, Average: 1,
	}
}

func runFake(t *testing.T, n int, o Options, setup func(*fakeJob)) (*recorder, Summary, error) {
	t.Helper()
	j, comms := newFakeJob(n)
	if setup != nil {
		setup(j)
	}
	rec := &recorder{}
	sum, err := Run(context.Background(), comms, devicesFor(n), o, rec)
	return rec, sum, err
}

// TestRunEveryCollective runs every collective with every data type and op
// on 1-4 ranks over the fake and expects every checked half to be right.
func TestRunEveryCollective(t *testing.T) {
	for _, c := range Collectives {
		for n := 1; n <= 4; n++ {
			if c.CheckRanks(n) != nil {
				continue
			}
			o := smallOptions(c)
			o.Unalign = n % 2 // also run unaligned buffers
			if n == 3 {
				o.Agg = 2
			}
			rec, sum, err := runFake(t, n, o, nil)
			if err != nil {
				t.Fatalf("%s n=%d: %v", c.Name, n, err)
			}
			nops, nroots := 1, 1
			if c.LoopsOps() {
				nops = len(reduce.Ops())
			}
			if c.Rooted {
				nroots = n
			}
			if want := 12 * nops * nroots * 4; len(rec.rows) != want || rec.started != want {
				t.Errorf("%s n=%d: %d rows (%d started), want %d", c.Name, n, len(rec.rows), rec.started, want)
			}
			if len(rec.devices) != n {
				t.Errorf("%s n=%d: %d devices, want %d", c.Name, n, len(rec.devices), n)
			}
			for _, r := range rec.rows {
				for i, h := range []Half{r.OutOfPlace, r.InPlace} {
					wantChecked := i == 0 || c.InPlaceChecked
					if h.Checked != wantChecked || h.Wrong != 0 {
						t.Errorf("%s n=%d %s %s %d bytes root %d half %d: checked=%v wrong=%d, want checked=%v wrong=0",
							c.Name, n, r.Type, r.RedOp, r.Bytes, r.Root, i, h.Checked, h.Wrong, wantChecked)
					}
					if h.TimeUS <= 0 {
						t.Errorf("%s: time %v <= 0", c.Name, h.TimeUS)
					}
				}
			}
			if sum.OutOfBounds != 0 {
				t.Errorf("%s n=%d: OutOfBounds = %d, want 0", c.Name, n, sum.OutOfBounds)
			}
		}
	}
}

// TestRunDetectsCorruption flips one bit of one rank's result in every call:
// the check must count it and the footer must count the failing halves.
func TestRunDetectsCorruption(t *testing.T) {
	for _, name := range []string{"all_reduce", "all_gather", "gather", "hypercube"} {
		c, _ := Lookup(name)
		o := smallOptions(c)
		o.Types, o.Ops, o.MinBytes, o.MaxBytes = []reduce.DataType{reduce.Float32}, []reduce.Op{reduce.Sum}, 256, 256
		o.Root = 0 // the corrupted rank receives
		rec, sum, err := runFake(t, 2, o, func(j *fakeJob) {
			j.corrupt = func(rank, call int, out []byte) {
				// Only the data: bookkeeping all-reduces are at most 16
				// bytes and the device all-gather is 2 x deviceRecord.
				if rank == 0 && len(out) >= 64 && len(out) != 2*deviceRecord {
					out[len(out)-1] ^= 0x40
				}
			}
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, r := range rec.rows {
			if r.OutOfPlace.Wrong == 0 || r.InPlace.Wrong == 0 {
				t.Errorf("%s: corruption not detected: oop %d, ip %d wrong", name, r.OutOfPlace.Wrong, r.InPlace.Wrong)
			}
		}
		if sum.OutOfBounds != 2*len(rec.rows) {
			t.Errorf("%s: OutOfBounds = %d, want %d (rank 0, both halves of every row)", name, sum.OutOfBounds, 2*len(rec.rows))
		}
	}
}

// TestInPlaceStagingNotTimed: in-place alltoall, alltoallv and sendrecv
// send from a staging copy of the receive buffer, made once before the timed
// loop, not before every call. The fake writes a token unique to (rank,
// call) into every buffer it has sent; a call that sends a buffer still
// holding the token of the rank's previous call proves nothing copied into
// it in between. With one size (one buffer region) and no data check, a
// rank's only freshly filled sends are the first out-of-place call and the
// in-place synchronising call, which follows the staging copy. (On 2 ranks
// alltoallv's default matrix sends everything to the other rank: one Send a
// call, as in the other two.)
func TestInPlaceStagingNotTimed(t *testing.T) {
	for _, name := range []string{"alltoall", "alltoallv", "sendrecv"} {
		c, _ := Lookup(name)
		o := smallOptions(c)
		o.Types, o.Ops, o.MinBytes, o.MaxBytes = []reduce.DataType{reduce.Float32}, []reduce.Op{reduce.Sum}, 256, 256
		o.Iters, o.Warmup, o.Check = 10, 0, 0
		const n = 2
		var last [n][8]byte // the token each rank's previous send left
		for r := range last {
			last[r] = [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff} // no buffer holds it
		}
		var fresh [n]int
		_, _, err := runFake(t, n, o, func(j *fakeJob) {
			j.sent = func(rank, call int, buf []byte) {
				if len(buf) < 8 {
					return
				}
				if !bytes.Equal(buf[:8], last[rank][:]) {
					fresh[rank]++
				}
				binary.LittleEndian.PutUint64(last[rank][:], uint64(rank)<<32|uint64(call)+1)
				copy(buf, last[rank][:])
			}
		})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for rank, f := range fresh {
			if f != 2 {
				t.Errorf("%s rank %d: %d sends of a freshly filled buffer, want 2 (a copy before each of the %d timed calls makes %d)",
					name, rank, f, o.Iters, 2+o.Iters)
			}
		}
	}
}

// TestMaxBytesFor: the -e it returns fits the budget and one more byte
// does not.
func TestMaxBytesFor(t *testing.T) {
	for _, c := range Collectives {
		for _, check := range []int{0, 1} {
			for _, budget := range []int64{1 << 16, 1<<16 + 100, 3<<30 + 1<<16, 1e9 + 7} {
				o := Options{Coll: c, Check: check, Unalign: 1}
				m := MaxBytesFor(o, budget)
				o.MaxBytes = m
				fits := BufferBytes(o) <= budget
				o.MaxBytes = m + 1
				if m >= 0 && (!fits || BufferBytes(o) <= budget) || m < -1 {
					t.Errorf("%s -c %d: MaxBytesFor(%d) = %d, which is not the largest -e that fits", c.Name, check, budget, m)
				}
			}
		}
		if got := MaxBytesFor(Options{Coll: c}, 10); got != -1 {
			t.Errorf("%s: MaxBytesFor(10 bytes) = %d, want -1", c.Name, got)
		}
	}
	ar, _ := Lookup("all_reduce")
	if got := MaxBytesFor(Options{Coll: ar, Check: 1}, 3<<30+expectChunk); got != 1<<30 {
		t.Errorf("all_reduce -c 1: MaxBytesFor(3 GiB + 64 KiB) = %d, want 1 GiB", got)
	}
}

// TestAgreeMaxBytes: two "processes" of one rank each with different
// budgets agree on the smaller -e; a budget above -e leaves it.
func TestAgreeMaxBytes(t *testing.T) {
	ar, _ := Lookup("all_reduce")
	o := Options{Coll: ar, MaxBytes: 1 << 20, Check: 1}
	_, comms := newFakeJob(2)
	budgets := []int64{1 << 40, 3<<10 + expectChunk}
	got := make([]int64, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for p := range comms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[p], errs[p] = AgreeMaxBytes(context.Background(), comms[p:p+1], o, budgets[p])
		}()
	}
	wg.Wait()
	for p := range got {
		if errs[p] != nil || got[p] != 1<<10 {
			t.Errorf("process %d: AgreeMaxBytes = %d, %v; want 1024", p, got[p], errs[p])
		}
	}
	if m, err := AgreeMaxBytes(context.Background(), comms, o, 1<<40); err != nil || m != o.MaxBytes {
		t.Errorf("AgreeMaxBytes with room = %d, %v; want -e %d", m, err, o.MaxBytes)
	}
}

func TestRunTimeout(t *testing.T) {
	c, _ := Lookup("all_reduce")
	o := smallOptions(c)
	o.Types, o.Ops = []reduce.DataType{reduce.Float32}, []reduce.Op{reduce.Sum}
	o.Timeout = 50 * time.Millisecond
	_, _, err := runFake(t, 3, o, func(j *fakeJob) {
		j.hang = func(rank, call int) bool { return rank == 2 && call == 12 }
	})
	var te *TimeoutError
	if !errors.As(err, &te) {
		t.Fatalf("Run error = %v, want a *TimeoutError", err)
	}
	if te.Timeout != o.Timeout {
		t.Errorf("TimeoutError = %+v", te)
	}
}

func TestRunCancel(t *testing.T) {
	c, _ := Lookup("all_reduce")
	o := smallOptions(c)
	o.Cycles = 0 // until interrupted
	j, comms := newFakeJob(2)
	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("stop")
	j.hang = func(rank, call int) bool {
		if call == 40 {
			cancel(stop)
		}
		return false
	}
	_, err := Run(ctx, comms, devicesFor(2), o, &recorder{})
	if !errors.Is(err, stop) {
		t.Fatalf("Run error = %v, want the context's cause", err)
	}
}

// TestRunStopRequested: in a run of 10 sweeps on 3 ranks (finite, so that
// a Run that ignored the request fails rather than hangs), StopRequested
// says true once, to one rank (the 5th question: sweep 1, whichever rank
// asks second), and never again: every rank stops after sweep 1, which is
// whole, and Run ends as a finished run would, with its summary. With -N 1
// it is never asked.
func TestRunStopRequested(t *testing.T) {
	c, _ := Lookup("all_reduce")
	o := smallOptions(c)
	o.Types, o.Ops = o.Types[:1], o.Ops[:1]
	var mu sync.Mutex
	asked := 0
	o.StopRequested = func() bool {
		mu.Lock()
		defer mu.Unlock()
		asked++
		return asked == 5
	}
	o.Cycles = 10
	rec, sum, err := runFake(t, 3, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	o.Cycles = 1
	perSweep := o.Rows(3)
	if len(rec.rows) != 2*perSweep || asked != 6 {
		t.Errorf("%d rows and %d questions, want 2 sweeps (%d rows) and 2 per rank", len(rec.rows), asked, 2*perSweep)
	}
	for i, r := range rec.rows {
		if r.Cycle != i/perSweep {
			t.Errorf("row %d: sweep %d, want %d", i, r.Cycle, i/perSweep)
		}
	}
	if sum.OutOfBounds != 0 || !(sum.AvgBusBW > 0) {
		t.Errorf("summary %+v, want 0 out of bounds and a bandwidth", sum)
	}
	asked = 0
	if _, _, err := runFake(t, 3, o, nil); err != nil || asked != 0 {
		t.Errorf("-N 1: error %v, %d questions; want none", err, asked)
	}
}

func TestRunBadRanks(t *testing.T) {
	c, _ := Lookup("hypercube")
	if _, _, err := runFake(t, 3, smallOptions(c), nil); err == nil {
		t.Fatal("hypercube on 3 ranks: nil error")
	}
}
