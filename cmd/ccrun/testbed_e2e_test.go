package main

// End-to-end tests of the testbed's own shaping (scripts/testbed.sh shape --dir, --to,
// --fair): a shaped direction or link really is slower, and --fair gives each flow its own
// queue. Each transfer runs between sockets opened inside two hosts' network namespaces,
// timed at the receiver; what is checked is the RATIO of a shaped transfer to an unshaped
// one measured in the same test, never a time on its own.

import (
	"fmt"
	"io"
	"net"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// shape runs scripts/testbed.sh shape args...; the test's cleanup unshapes args[0] (which
// clears its links on the peers too).
func (tb *testbed) shape(t *testing.T, args ...string) {
	t.Helper()
	t.Cleanup(func() {
		if out, err := exec.Command(tb.tool, "shape", args[0]).CombinedOutput(); err != nil {
			t.Errorf("testbed shape %s: %v: %s", args[0], err, out)
		}
	})
	if out, err := exec.Command(tb.tool, append([]string{"shape"}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("testbed shape %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// shaping is the SHAPING column of host tbk in scripts/testbed.sh status.
func (tb *testbed) shaping(t *testing.T, k int) string {
	t.Helper()
	out, err := exec.Command(tb.tool, "status").CombinedOutput()
	if err != nil {
		t.Fatalf("testbed status: %v: %s", err, out)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 9 && f[0] == "tb"+strconv.Itoa(k) {
			return strings.Join(f[9:], " ") // HOST ADDRESS NETNS LINK pid N pid N PORT SHAPING...
		}
	}
	t.Fatalf("testbed status lists no tb%d:\n%s", k, out)
	return ""
}

// inNetns runs f on a thread inside host tbk's network namespace: sockets f opens belong
// to that host. The thread is never unlocked, so it ends with the goroutine.
func inNetns(k int, f func() error) error {
	return inNetnsAt(fmt.Sprintf("/run/netns/cch%d", k), f)
}

// inNetnsAt runs f on a thread inside the network namespace that the file ns names
// (/run/netns/NAME, /proc/PID/ns/net), as inNetns does.
func inNetnsAt(ns string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		fd, err := unix.Open(ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- err
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		errc <- f()
	}()
	return <-errc
}

// transfer sends n bytes over TCP from host tba to host tbb and returns the time from the
// first write until the receiver has read them all.
func (tb *testbed) transfer(t *testing.T, a, b, n int) time.Duration {
	t.Helper()
	ln := tb.listen(t, b)
	defer ln.Close()
	return tb.bulk(t, a, ln, n)()
}

// slowdown is the shortest of 5 transfers slow[0] -> slow[1] over the shortest of 5
// transfers fast[0] -> fast[1], interleaved, 4 MiB each (0.34 s at 100 Mbit/s). The
// machine's other work can only lengthen a transfer, and a shaped one cannot beat its rate,
// so the shortest times compare what each path can do; medians did not (an unshaped median
// of 410 ms once, with a load average of 16 on the 2 cores).
func (tb *testbed) slowdown(t *testing.T, slow, fast [2]int) float64 {
	t.Helper()
	var s, f []time.Duration
	for range 5 {
		s = append(s, tb.transfer(t, slow[0], slow[1], 4<<20))
		f = append(f, tb.transfer(t, fast[0], fast[1], 4<<20))
	}
	slices.Sort(s)
	slices.Sort(f)
	ratio := float64(s[0]) / float64(f[0])
	t.Logf("tb%d -> tb%d %v, tb%d -> tb%d %v: %.1fx", slow[0], slow[1], s, fast[0], fast[1], f, ratio)
	return ratio
}

// An unshaped 4 MiB transfer between two hosts takes 13-60 ms on the 2-core machine; at
// 100 Mbit/s it takes 340 ms. A shaped path must be at least minSlowdown times slower.
const minSlowdown = 3

func TestE2ETestbedShapeDirection(t *testing.T) {
	tb := needTestbed(t)
	tx, rx := [2]int{3, 4}, [2]int{4, 3} // what tb3 sends, what it receives
	tb.shape(t, "tb3", "--dir", "tx", "--rate", "100mbit")
	if got, want := tb.shaping(t, 3), "tx tbf rate 100Mbit, rx none"; got != want {
		t.Errorf("--dir tx: tb3 shaping %q, want %q", got, want)
	}
	if r := tb.slowdown(t, tx, rx); r < minSlowdown {
		t.Errorf("--dir tx: tb3's sends are %.1fx slower than its receives, want >= %d", r, minSlowdown)
	}
	tb.shape(t, "tb3", "--dir", "rx", "--rate", "100mbit")
	if got, want := tb.shaping(t, 3), "tx none, rx tbf rate 100Mbit"; got != want {
		t.Errorf("--dir rx: tb3 shaping %q, want %q", got, want)
	}
	if r := tb.slowdown(t, rx, tx); r < minSlowdown {
		t.Errorf("--dir rx: tb3's receives are %.1fx slower than its sends, want >= %d", r, minSlowdown)
	}
}

func TestE2ETestbedShapeLink(t *testing.T) {
	tb := needTestbed(t)
	tb.shape(t, "tb2", "--to", "tb6", "--rate", "100mbit")
	for k, want := range map[int]string{2: "tx none, rx none, link tb6 htb rate 100Mbit", 6: "tx none, rx none, link tb2 htb rate 100Mbit"} {
		if got := tb.shaping(t, k); got != want {
			t.Errorf("tb%d shaping %q, want %q", k, got, want)
		}
	}
	// Both ways of the link are slow; the same hosts' other links are not.
	for _, c := range []struct{ slow, fast [2]int }{
		{[2]int{2, 6}, [2]int{2, 5}},
		{[2]int{6, 2}, [2]int{6, 5}},
	} {
		if r := tb.slowdown(t, c.slow, c.fast); r < minSlowdown {
			t.Errorf("tb%d -> tb%d is %.1fx slower than tb%d -> tb%d, want >= %d", c.slow[0], c.slow[1], r, c.fast[0], c.fast[1], minSlowdown)
		}
	}
	// shape HOST clears its links on both ends.
	if out, err := exec.Command(tb.tool, "shape", "tb2").CombinedOutput(); err != nil {
		t.Fatalf("testbed shape tb2: %v: %s", err, out)
	}
	for _, k := range []int{2, 6} {
		if got, want := tb.shaping(t, k), "tx none, rx none"; got != want {
			t.Errorf("after shape tb2: tb%d shaping %q, want %q", k, got, want)
		}
	}
}

func TestE2ETestbedShapeBadInput(t *testing.T) {
	tb := needTestbed(t)
	tb.shape(t, "tb4", "--rate", "1gbit")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"tb2", "--dir", "up"}, 2, "bad --dir 'up' (allowed: tx, rx)"},
		{[]string{"tb2", "--loss", "200%"}, 2, "bad --loss '200%' (allowed: a percentage above 0 and at most 100: 1%, 0.5%)"},
		{[]string{"all", "--to", "tb3", "--rate", "1gbit"}, 2, "--to shapes one link: give one HOST"},
		{[]string{"tb2", "--to", "tb2", "--rate", "1gbit"}, 2, "a link needs two hosts"},
		{[]string{"tb2", "--to", "tb3"}, 2, "needs --rate R"},
		{[]string{"tb2", "--to", "tb3", "--rate", "1gbit", "--dir", "tx"}, 2, "takes --rate only"},
		{[]string{"tb2", "--to", "tb9", "--rate", "1gbit"}, 2, "bad host 'tb9'"},
		{[]string{"tb2", "--fair"}, 2, "shape --fair shares a --rate fairly between flows: give --rate, and not --delay, --loss or --to"},
		{[]string{"tb2", "--to", "tb4", "--rate", "1gbit"}, 1, "tb4 shapes all it sends (tx tbf rate 1Gbit, rx tbf rate 1Gbit): clear it first"},
	} {
		out, err := exec.Command(tb.tool, append([]string{"shape"}, c.args...)...).CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if msg := strings.TrimSpace(string(out)); code != c.code || !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
			t.Errorf("shape %s: exit %d, %q; want %d and one line with %q", strings.Join(c.args, " "), code, msg, c.code, c.want)
		}
	}
	// --loss needs netem: where the kernel lacks it, a clear error; where it has it, a netem qdisc.
	out, err := exec.Command(tb.tool, "shape", "tb2", "--loss", "1%").CombinedOutput()
	t.Cleanup(func() { exec.Command(tb.tool, "shape", "tb2").Run() })
	if err != nil {
		if !strings.Contains(string(out), "need the kernel's sch_netem, which this kernel lacks") {
			t.Errorf("shape tb2 --loss 1%%: %v: %s", err, out)
		}
	} else if got := tb.shaping(t, 2); !strings.HasPrefix(got, "tx netem loss 1%") {
		t.Errorf("after --loss 1%%: tb2 shaping %q, want tx netem loss 1%%", got)
	}
}

// listen opens a TCP listener in host tbb, on a port whose low 4 bits differ from those
// of every port in avoid (fair shaping hashes them to pick a flow's queue).
func (tb *testbed) listen(t *testing.T, b int, avoid ...int) net.Listener {
	t.Helper()
	for {
		var ln net.Listener
		if err := inNetns(b, func() (err error) { ln, err = net.Listen("tcp", net.JoinHostPort(tb.addr(b), "0")); return err }); err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		if !slices.ContainsFunc(avoid, func(p int) bool { return p%16 == port%16 }) {
			return ln
		}
		ln.Close()
	}
}

// bulk starts an n-byte transfer from host tba to the listener ln of another host in the
// background; wait waits for it and returns the time from the first write until the
// receiver had read all n bytes.
func (tb *testbed) bulk(t *testing.T, a int, ln net.Listener, n int) (wait func() time.Duration) {
	t.Helper()
	var c net.Conn
	if err := inNetns(a, func() (err error) { c, err = net.Dial("tcp", ln.Addr().String()); return err }); err != nil {
		t.Fatal(err)
	}
	r, err := ln.Accept()
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	type result struct {
		got  int64
		err  error
		took time.Duration
	}
	sent, read := make(chan error, 1), make(chan result, 1)
	start := time.Now()
	go func() {
		_, err := c.Write(make([]byte, n))
		c.Close()
		sent <- err
	}()
	go func() {
		got, err := io.Copy(io.Discard, r)
		took := time.Since(start)
		r.Close()
		read <- result{got, err, took}
	}()
	return func() time.Duration {
		t.Helper()
		werr, res := <-sent, <-read
		if werr != nil {
			t.Fatalf("tb%d -> %v: write: %v", a, ln.Addr(), werr)
		}
		if res.err != nil || res.got != int64(n) {
			t.Fatalf("tb%d -> %v: read %d of %d bytes: %v", a, ln.Addr(), res.got, n, res.err)
		}
		return res.took
	}
}

// fairQueues is how many of the queues of --fair shaping on the bridge's side of host tbk
// (htb classes 5:100-5:10f on ccvK) have sent at least min bytes.
func fairQueues(t *testing.T, k int, min int64) int {
	t.Helper()
	out, err := exec.Command("tc", "-s", "class", "show", "dev", fmt.Sprintf("ccv%d", k)).CombinedOutput()
	if err != nil {
		t.Fatalf("tc -s class show dev ccv%d: %v: %s", k, err, out)
	}
	n, child := 0, false
	for _, l := range strings.Split(string(out), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) > 2 && f[0] == "class":
			child = f[1] == "htb" && strings.HasPrefix(f[2], "5:1") && len(f[2]) == 5
		case child && len(f) > 1 && f[0] == "Sent":
			if b, err := strconv.ParseInt(f[1], 10, 64); err == nil && b >= min {
				n++
			}
		}
	}
	return n
}

// TestE2ETestbedShapeFair: shape --fair keeps the rate (what tb4 receives is slower than
// what it sends, as with the tbf) and gives each flow its own queue: two transfers to tb4
// at once, to ports the hash tells apart, each pass through a queue of their own (the
// queues are served round robin, htb's way). On the tbf's one FIFO there are no such queues.
func TestE2ETestbedShapeFair(t *testing.T) {
	tb := needTestbed(t)
	tb.shape(t, "tb4", "--dir", "rx", "--rate", "100mbit", "--fair")
	if got, want := tb.shaping(t, 4), "tx none, rx fair rate 100Mbit"; got != want {
		t.Errorf("--fair: tb4 shaping %q, want %q", got, want)
	}
	if r := tb.slowdown(t, [2]int{3, 4}, [2]int{4, 3}); r < minSlowdown {
		t.Errorf("--fair: tb4's receives are %.1fx slower than its sends, want >= %d", r, minSlowdown)
	}
	tb.shape(t, "tb4", "--dir", "rx", "--rate", "100mbit", "--fair") // counters from 0
	const n = 4 << 20
	ln1 := tb.listen(t, 4)
	defer ln1.Close()
	ln2 := tb.listen(t, 4, ln1.Addr().(*net.TCPAddr).Port)
	defer ln2.Close()
	w1, w2 := tb.bulk(t, 3, ln1, n), tb.bulk(t, 5, ln2, n)
	w1()
	w2()
	if q := fairQueues(t, 4, n); q != 2 {
		t.Errorf("two 4 MiB transfers to tb4 at once: %d of its --fair queues sent >= 4 MiB, want 2", q)
	}
}
