//go:build linux

package shm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seed-760dd1f1/cc/protocols"
)

// countingBarrier wraps a barrier and counts its calls.
type countingBarrier struct {
	calls atomic.Int32
	inner func(context.Context) error
}

func (c *countingBarrier) wait(ctx context.Context) error {
	c.calls.Add(1)
	if c.inner == nil {
		return nil
	}
	return c.inner(ctx)
}

// openAll runs Open on every local rank with a shared barrier; each may
// change a rank's options (and wrap its barrier); hook, if set, runs on
// local rank 0 before each of its barriers with the barrier's number. It
// returns each rank's segment, error and number of barrier calls.
func openAll(t *testing.T, o Options, each func(r int, o *Options), hook func(call int)) ([]*Segment, []error, []int) {
	t.Helper()
	n := o.LocalNRanks
	segs, errs, calls := make([]*Segment, n), make([]error, n), make([]int, n)
	b := newBarrier(n)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	var wg sync.WaitGroup
	for r := 0; r < n; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ro := o
			ro.LocalRank = r
			var inner atomic.Int32
			ro.Barrier = func(ctx context.Context) error {
				k := inner.Add(1)
				if r == 0 && hook != nil {
					hook(int(k))
				}
				return b.wait(ctx)
			}
			if each != nil {
				each(r, &ro)
			}
			cb := &countingBarrier{inner: ro.Barrier}
			ro.Barrier = cb.wait
			segs[r], errs[r] = Open(ctx, ro)
			calls[r] = int(cb.calls.Load())
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, s := range segs {
			if s != nil {
				s.Close()
			}
		}
	})
	return segs, errs, calls
}

func TestOpenLifecycle(t *testing.T) {
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			o := testOptions(t, n)
			if got := listDir(t, o.Dir); len(got) != 0 {
				t.Fatalf("dir before: %v", got)
			}
			var during [2][]string
			segs, errs, calls := openAll(t, o, nil, func(call int) { during[call-1] = listDir(t, o.Dir) })
			for r := range segs {
				if errs[r] != nil || calls[r] != 2 {
					t.Fatalf("local rank %d: Open = %v after %d barriers, want nil after 2", r, errs[r], calls[r])
				}
			}
			name := segs[0].Name()
			for r, s := range segs {
				if s.Name() != name {
					t.Errorf("local rank %d maps %s, rank 0 %s", r, s.Name(), name)
				}
			}
			// Created before the first barrier, attached by all before the
			// second, gone when Open returns.
			for i, want := range [][]string{{name}, {name}} {
				if fmt.Sprint(during[i]) != fmt.Sprint(want) {
					t.Errorf("dir at barrier %d: %v, want %v", i+1, during[i], want)
				}
			}
			if got := listDir(t, o.Dir); len(got) != 0 {
				t.Errorf("dir after Open: %v, want empty (unlinked)", got)
			}
			for r := 0; r < n; r++ {
				if pid := atomic.LoadUint64(segs[0].u64(hOwners + r*ownerBytes + oPid)); pid != uint64(os.Getpid()) {
					t.Errorf("owner %d: pid %d, want %d", r, pid, os.Getpid())
				}
			}
		})
	}
}

func TestOpenSingleRank(t *testing.T) {
	o := testOptions(t, 1)
	cb := &countingBarrier{}
	o.Barrier = cb.wait
	s, err := Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := cb.calls.Load(); got != 2 {
		t.Errorf("Barrier called %d times, want 2", got)
	}
	if got := listDir(t, o.Dir); len(got) != 0 {
		t.Errorf("dir: %v, want empty", got)
	}
	if _, err := s.Send(0, 0, 1, protocols.LL); err == nil || !strings.Contains(err.Error(), "single local rank") {
		t.Errorf("Send with one local rank = %v", err)
	}
}

// TestOpenErrors: every bad input gives every rank an error after exactly
// two barriers, and leaves no file behind.
func TestOpenErrors(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		each func(r int, o *Options)
		want []string // per rank; the last applies to the rest
	}{
		{"missing dir", func(r int, o *Options) { o.Dir = "/nonexistent/shm" },
			[]string{"shared-memory directory /nonexistent/shm: no such file or directory", "segment /nonexistent/shm/cc-shm-"}},
		{"dir is a file", func(r int, o *Options) { o.Dir = notDir },
			[]string{"shared-memory directory " + notDir + ": not a directory", "shm: open " + notDir + "/cc-shm-"}},
		{"bad LL size", func(r int, o *Options) { o.BuffSize[protocols.LL] = 100 },
			[]string{"LL buffer size 100 (NCCL_LL_BUFFSIZE): want at least 128 bytes"}},
		{"one rank's LL size", func(r int, o *Options) {
			if r == 1 {
				o.BuffSize[protocols.LL] *= 2
			}
		}, []string{"local ranks [1] did not attach", "local rank 1 expects", "local ranks [1] did not attach"}},
		{"bad rank", func(r int, o *Options) { o.LocalRank += 10 }, []string{"local rank 10 of 3: want 0..2", "local rank 11 of 3", "local rank 12 of 3"}},
		{"no job", func(r int, o *Options) { o.JobID = "" }, []string{"Options.JobID is empty"}},
		{"no dir", func(r int, o *Options) { o.Dir = "" }, []string{"Options.Dir is empty"}},
		{"negative spin", func(r int, o *Options) { o.Spin = -1 }, []string{"spin time -1ns: want 0 or more"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := testOptions(t, 3)
			_, errs, calls := openAll(t, o, tc.each, nil)
			for r, err := range errs {
				want := tc.want[min(r, len(tc.want)-1)]
				if err == nil || !strings.Contains(err.Error(), want) || calls[r] != 2 {
					t.Errorf("local rank %d: Open = %v after %d barriers, want an error containing %q after 2", r, err, calls[r], want)
				}
			}
			if got := listDir(t, o.Dir); len(got) != 0 {
				t.Errorf("dir after the errors: %v, want empty", got)
			}
		})
	}
}

// TestBarrierFailure: a failed barrier stops Open at once, and local rank 0
// removes the file it created.
func TestBarrierFailure(t *testing.T) {
	for _, failAt := range []int32{1, 2} {
		t.Run(fmt.Sprintf("barrier %d", failAt), func(t *testing.T) {
			o := testOptions(t, 2)
			cause := errors.New("job aborted")
			_, errs, calls := openAll(t, o, func(r int, o *Options) {
				inner := o.Barrier
				var n atomic.Int32
				o.Barrier = func(ctx context.Context) error {
					if n.Add(1) == failAt {
						return cause
					}
					return inner(ctx)
				}
			}, nil)
			for r, err := range errs {
				if !errors.Is(err, cause) || calls[r] != int(failAt) {
					t.Errorf("local rank %d: Open = %v after %d barriers, want %v after %d", r, err, calls[r], cause, failAt)
				}
			}
			if got := listDir(t, o.Dir); len(got) != 0 {
				t.Errorf("dir: %v, want empty", got)
			}
		})
	}
}

// mountTmpfs mounts a tmpfs for the test, or skips it.
func mountTmpfs(t *testing.T, flags uintptr, data string) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", flags, data); err != nil {
		t.Skipf("cannot mount a tmpfs here (needs root): %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, 0) })
	return dir
}

// TestOpenDirTooSmall: a segment whose control blocks do not fit fails at
// Open with a message naming the directory; one whose control blocks fit
// opens, and a connection whose FIFO does not fit fails when it opens, with
// a message naming the knob, instead of a SIGBUS on first touch.
func TestOpenDirTooSmall(t *testing.T) {
	dir := mountTmpfs(t, 0, "size=16k")
	o := testOptions(t, 8)
	o.Dir = dir
	o.Channels = 64
	o.BuffSize = ncclBuff
	_, errs, _ := openAll(t, o, nil, nil)
	want := "shm: " + dir + " has 16.0 KiB free, the segment's header and control blocks need"
	if errs[0] == nil || !strings.Contains(errs[0].Error(), want) {
		t.Errorf("local rank 0: Open = %v, want an error containing %q", errs[0], want)
	}
	if got := listDir(t, dir); len(got) != 0 {
		t.Errorf("dir: %v, want empty", got)
	}

	dir = mountTmpfs(t, 0, "size=1m")
	o = testOptions(t, 2)
	o.Dir = dir
	o.BuffSize = ncclBuff
	segs, errs, _ := openAll(t, o, nil, nil)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("local rank %d: Open = %v, want success: the control blocks fit in 1 MiB", r, err)
		}
	}
	defer func() {
		for _, s := range segs {
			s.Close()
		}
	}()
	if _, err := segs[0].Send(0, 0, 1, protocols.LL); err != nil {
		t.Errorf("LL connection (512 KiB FIFO) in 1 MiB: %v", err)
	}
	_, err := segs[0].Send(0, 0, 1, protocols.Simple)
	want = "shm: " + dir + " ("
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "cannot hold the 4.0 MiB of Simple FIFO of local ranks 0 -> 1, connection set 0 (NCCL_BUFFSIZE)") {
		t.Errorf("Simple connection (4 MiB FIFO) in 1 MiB: %v, want an error naming the FIFO and NCCL_BUFFSIZE", err)
	}
}

func TestOpenDirReadOnly(t *testing.T) {
	var dir string
	if os.Geteuid() == 0 {
		dir = mountTmpfs(t, unix.MS_RDONLY, "size=64m")
	} else {
		dir = t.TempDir()
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Chmod(dir, 0o755) })
	}
	o := testOptions(t, 2)
	o.Dir = dir
	_, errs, _ := openAll(t, o, nil, nil)
	want := "shm: create " + filepath.Join(dir, segmentName(o.JobID, o.Host)) + ": "
	if errs[0] == nil || !strings.Contains(errs[0].Error(), want) {
		t.Errorf("local rank 0: Open = %v, want an error containing %q", errs[0], want)
	}
	if errs[1] == nil {
		t.Errorf("local rank 1: Open succeeded")
	}
}

// blockedOpen starts local rank 0 of a 2-rank job whose first barrier
// blocks until release is called; the segment file then exists.
func blockedOpen(t *testing.T, o Options) (release func() error) {
	t.Helper()
	o.LocalNRanks, o.LocalRank = 2, 0
	arrived, unblock := make(chan struct{}), make(chan struct{})
	o.Barrier = func(ctx context.Context) error {
		close(arrived)
		<-unblock
		return errors.New("released")
	}
	done := make(chan error, 1)
	go func() { _, err := Open(context.Background(), o); done <- err }()
	<-arrived
	return func() error {
		close(unblock)
		return <-done
	}
}

func TestNameCollision(t *testing.T) {
	o := testOptions(t, 2)
	release := blockedOpen(t, o)
	name := segmentName(o.JobID, o.Host)
	if got := listDir(t, o.Dir); fmt.Sprint(got) != fmt.Sprint([]string{name}) {
		t.Fatalf("dir while the first job opens: %v", got)
	}
	cb := &countingBarrier{}
	second := o
	second.Barrier = cb.wait
	_, err := Open(context.Background(), second)
	want := fmt.Sprintf("segment %s already exists and belongs to live process %d (local rank 0): another job with id %q runs on host %q",
		filepath.Join(o.Dir, name), os.Getpid(), o.JobID, o.Host)
	if err == nil || !strings.Contains(err.Error(), want) || cb.calls.Load() != 2 {
		t.Errorf("second Open = %v after %d barriers, want an error containing %q after 2", err, cb.calls.Load(), want)
	}
	if err := release(); err == nil || !strings.Contains(err.Error(), "released") {
		t.Errorf("first Open = %v, want the barrier's error", err)
	}
	if got := listDir(t, o.Dir); len(got) != 0 {
		t.Errorf("dir: %v, want empty", got)
	}
}

// fakeSegment writes a segment header with the given owners (pid, start,
// pid namespace), as a crashed or running job would have left it.
func fakeSegment(t *testing.T, dir, name string, owners [][3]uint64) {
	t.Helper()
	b := make([]byte, hOwners+len(owners)*ownerBytes)
	ne := binary.NativeEndian
	ne.PutUint64(b[hMagic:], segMagic)
	ne.PutUint32(b[hNRanks:], uint32(len(owners)))
	for i, ow := range owners {
		e := b[hOwners+i*ownerBytes:]
		ne.PutUint64(e[oPid:], ow[0])
		ne.PutUint64(e[oStart:], ow[1])
		ne.PutUint64(e[oPidNS:], ow[2])
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// fakePool writes a pool file whose header records owner (pid, start,
// pid namespace).
func fakePool(t *testing.T, dir, name string, owner [3]uint64) {
	t.Helper()
	b := make([]byte, 2*PoolHeader)
	ne := binary.NativeEndian
	ne.PutUint64(b[pMagic:], poolMagic)
	ne.PutUint64(b[pOwner+oPid:], owner[0])
	ne.PutUint64(b[pOwner+oStart:], owner[1])
	ne.PutUint64(b[pOwner+oPidNS:], owner[2])
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCleanStale(t *testing.T) {
	dir := t.TempDir()
	me, err := readSelf()
	if err != nil {
		t.Fatal(err)
	}
	ns := me.pidNS
	old := time.Now().Add(-2 * headerGrace)

	// A live job: this process, blocked in Open.
	o := testOptions(t, 2)
	o.Dir = dir
	release := blockedOpen(t, o)
	live := segmentName(o.JobID, o.Host)

	// A job whose local rank 0 died right after creating the segment.
	kids := startChildren(t, "idle", childConfig{dir: dir, job: "crashed", nranks: 2, buff: smallBuff}, []int{0})
	if err := kids[0].expect("barrier"); err != nil {
		t.Fatal(err)
	}
	kids[0].cmd.Process.Kill()
	kids[0].exit()
	crashed := segmentName("crashed", "host-a")

	fakeSegment(t, dir, namePrefix+"reused-pid", [][3]uint64{{uint64(os.Getpid()), me.start + 1, ns}})
	fakeSegment(t, dir, namePrefix+"two-dead", [][3]uint64{{uint64(kids[0].cmd.Process.Pid), 1, ns}, {0, 0, 0}})
	fakeSegment(t, dir, namePrefix+"half-alive", [][3]uint64{{uint64(kids[0].cmd.Process.Pid), 1, ns}, {uint64(os.Getpid()), me.start, ns}})
	fakeSegment(t, dir, namePrefix+"other-ns", [][3]uint64{{999999, 1, ns + 1}})
	// Pool files: one of this process, written as MemAlloc writes them,
	// and fakes of a dead creator, a reused pid and another namespace.
	livePool := PoolPrefix + "live"
	fd, err := unix.Open(filepath.Join(dir, livePool), unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Ftruncate(fd, 2*PoolHeader); err != nil {
		t.Fatal(err)
	}
	if err := WritePoolHeader(fd); err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	fakePool(t, dir, PoolPrefix+"dead", [3]uint64{uint64(kids[0].cmd.Process.Pid), 1, ns})
	fakePool(t, dir, PoolPrefix+"reused-pid", [3]uint64{uint64(os.Getpid()), me.start + 1, ns})
	fakePool(t, dir, PoolPrefix+"other-ns", [3]uint64{999999, 1, ns + 1})
	for _, f := range []struct {
		name  string
		mtime time.Time
	}{{namePrefix + "headerless-new", time.Now()}, {namePrefix + "headerless-old", old}, {"not-ours", old},
		{PoolPrefix + "headerless-new", time.Now()}, {PoolPrefix + "headerless-old", old}} {
		p := filepath.Join(dir, f.name)
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, f.mtime, f.mtime); err != nil {
			t.Fatal(err)
		}
	}

	removed, err := CleanStale(dir, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	wantRemoved := []string{crashed, namePrefix + "headerless-old", namePrefix + "reused-pid", namePrefix + "two-dead",
		PoolPrefix + "dead", PoolPrefix + "reused-pid", PoolPrefix + "headerless-old"}
	wantKept := []string{live, namePrefix + "half-alive", namePrefix + "headerless-new", namePrefix + "other-ns", "not-ours",
		livePool, PoolPrefix + "other-ns", PoolPrefix + "headerless-new"}
	slices.Sort(removed)
	slices.Sort(wantRemoved)
	slices.Sort(wantKept)
	if fmt.Sprint(removed) != fmt.Sprint(wantRemoved) {
		t.Errorf("removed %v, want %v", removed, wantRemoved)
	}
	if got := listDir(t, dir); fmt.Sprint(got) != fmt.Sprint(wantKept) {
		t.Errorf("kept %v, want %v", got, wantKept)
	}
	if err := release(); err == nil {
		t.Error("the blocked Open succeeded")
	}
	if _, err := CleanStale("/nonexistent/shm", nil); err == nil || !strings.Contains(err.Error(), "/nonexistent/shm") {
		t.Errorf("CleanStale of a missing dir = %v", err)
	}
}

// TestOpenRemovesStale: a dead job's segment with the same name is replaced.
func TestOpenRemovesStale(t *testing.T) {
	o := testOptions(t, 2)
	fakeSegment(t, o.Dir, segmentName(o.JobID, o.Host), [][3]uint64{{1 << 30, 1, pidNamespace()}})
	segs, errs, _ := openAll(t, o, nil, nil)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("local rank %d: %v", r, err)
		}
	}
	_ = segs
	if got := listDir(t, o.Dir); len(got) != 0 {
		t.Errorf("dir: %v, want empty", got)
	}
}

// TestArriveDepart: four local ranks run many calls; in each every rank
// gets every rank's descriptor of that call (never the one of the call
// before or after), and no rank leaves Depart before every rank has
// entered it.
func TestArriveDepart(t *testing.T) {
	const n, calls = 4, 200
	segs := openGroup(t, testOptions(t, n))
	var departed [calls + 1]atomic.Int32
	errs := make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var descs []Desc
			for q := uint64(1); q <= calls; q++ {
				d := Desc{Registered: (q+uint64(r))%3 != 0, Pool: [3]uint64{uint64(r), q, 7}, Off: q * 10, Size: uint64(r)}
				got, err := segs[r].Arrive(q, d, descs)
				if err != nil {
					errs[r] = err
					return
				}
				descs = got
				for p, g := range got {
					want := Desc{Registered: (q+uint64(p))%3 != 0, Pool: [3]uint64{uint64(p), q, 7}, Off: q * 10, Size: uint64(p)}
					if g != want {
						errs[r] = fmt.Errorf("call %d: descriptor of local rank %d: %+v, want %+v", q, p, g, want)
						return
					}
				}
				departed[q].Add(1)
				if err := segs[r].Depart(q); err != nil {
					errs[r] = err
					return
				}
				if got := departed[q].Load(); got != n {
					errs[r] = fmt.Errorf("call %d: left Depart when %d of %d ranks had entered it", q, got, n)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// TestArriveFails: a rank waiting in Arrive for a rank that never comes
// returns the segment's failure.
func TestArriveFails(t *testing.T) {
	segs := openGroup(t, testOptions(t, 2))
	done := make(chan error, 1)
	go func() {
		_, err := segs[0].Arrive(1, Desc{}, nil)
		done <- err
	}()
	segs[0].Fail(errors.New("rank 1 is gone"))
	if err := <-done; err == nil || !strings.Contains(err.Error(), "rank 1 is gone") || !strings.Contains(err.Error(), "arrive of local rank 1") {
		t.Errorf("Arrive: %v, want the failure, naming the arrive of local rank 1", err)
	}
}
