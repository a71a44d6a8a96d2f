package comm

import (
	"context"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/runtime/param"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
	"github.com/seed-760dd1f1/cc/runtime/wire"
)

// TestBadCalls checks that every invalid argument gets an error naming the
// bad value, without breaking the communicator.
func TestBadCalls(t *testing.T) {
	cs := withComms(t, 1, testParams(t, nil))
	c := cs[0]
	buf := make([]byte, 64)
	cases := []struct {
		name string
		call func() error
		want string
	}{
		{"nil send", func() error { return c.AllReduce(nil, buf, 4, reduce.Float32, reduce.Sum) }, "sendbuff is nil, need 16 bytes"},
		{"short recv", func() error { return c.AllReduce(buf, buf[:8], 4, reduce.Float32, reduce.Sum) }, "recvbuff has 8 bytes, need 16"},
		{"negative count", func() error { return c.AllReduce(buf, buf, -1, reduce.Float32, reduce.Sum) }, "count -1 is negative"},
		{"overflowing count", func() error { return c.AllReduce(buf, buf, math.MaxInt64/2, reduce.Float64, reduce.Sum) }, "overflows"},
		{"bad datatype", func() error { return c.AllReduce(buf, buf, 1, reduce.DataType(99), reduce.Sum) }, "datatype 99 is not valid (allowed: int8"},
		{"bad op", func() error { return c.AllReduce(buf, buf, 1, reduce.Float32, reduce.Op(17)) }, "op 17 is not valid (allowed: sum"},
		{"premulsum without scalar", func() error { return c.AllReduce(buf, buf, 1, reduce.Float32, reduce.PreMulSum) }, "CreatePreMulSum"},
		{"root out of range", func() error { return c.Broadcast(buf, buf, 1, reduce.Float32, 3) }, "root 3 is out of range (allowed: 0..0)"},
		{"peer out of range", func() error { return c.Send(buf, 1, reduce.Float32, 5) }, "peer 5 is out of range"},
		{"partial overlap", func() error { return c.AllReduce(buf[:16], buf[4:20], 4, reduce.Float32, reduce.Sum) }, "overlap"},
		{"alltoall in place", func() error { return c.AllToAll(buf, buf, 4, reduce.Float32) }, "overlap"},
	}
	for _, tc := range cases {
		err := tc.call()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	// The communicator is still usable after invalid arguments.
	if err := c.AllReduce(buf, buf, 4, reduce.Float32, reduce.Sum); err != nil {
		t.Fatalf("AllReduce after bad calls: %v", err)
	}
}

// TestPreMulSumOpLifecycle checks CreatePreMulSum's op bookkeeping.
func TestPreMulSumOpLifecycle(t *testing.T) {
	cs := withComms(t, 1, testParams(t, nil))
	c := cs[0]
	op, err := c.CreatePreMulSum(3, reduce.Int32)
	if err != nil {
		t.Fatal(err)
	}
	send := i32s(4, func(i int) int32 { return int32(i) })
	recv := make([]byte, 16)
	if err := c.AllReduce(send, recv, 4, reduce.Int32, op); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if got := getI32(recv, i); got != int32(3*i) {
			t.Errorf("elem %d = %d, want %d", i, got, 3*i)
		}
	}
	if err := c.AllReduce(send, recv, 4, reduce.Float32, op); err == nil || !strings.Contains(err.Error(), "created for int32") {
		t.Errorf("premulsum op with another type: got %v", err)
	}
	if err := c.DestroyOp(op); err != nil {
		t.Fatal(err)
	}
	if err := c.AllReduce(send, recv, 4, reduce.Int32, op); err == nil {
		t.Error("destroyed op still accepted")
	}
}

// TestNoAlgorithmForCall: an NCCL_ALGO that leaves a collective without
// an implemented algorithm fails that collective when it is called, with
// NCCL's "no algorithm/protocol available" shape, naming the setting; the
// communicator and the other collectives keep working.
func TestNoAlgorithmForCall(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		call func(c *Comm, b []byte) error
		want string
	}{
		{map[string]string{"NCCL_ALGO": "allreduce:pat"},
			func(c *Comm, b []byte) error { return c.AllReduce(b, b, 2, reduce.Int32, reduce.Sum) },
			`AllReduce: no algorithm/protocol available for function AllReduce with datatype int32: NCCL_ALGO was set to "allreduce:pat" (implemented for AllReduce: Ring`},
		{map[string]string{"NCCL_ALGO": "allgather:tree"},
			func(c *Comm, b []byte) error { return c.AllGather(b[4*c.Rank():4*c.Rank()+4], b, 1, reduce.Float32) },
			`AllGather: no algorithm/protocol available for function AllGather with datatype float: NCCL_ALGO was set to "allgather:tree" (implemented for AllGather: Ring, CollNetDirect, NVLS, PAT, OneShot, RecDbl, CMA)`},
		{map[string]string{"NCCL_ALGO": "allreduce:ctring", "NCCL_PROTO": "LL"},
			func(c *Comm, b []byte) error { return c.AllReduce(b, b, 2, reduce.Int32, reduce.Sum) },
			`no algorithm/protocol available for function AllReduce with datatype int32: NCCL_ALGO was set to "allreduce:ctring", NCCL_PROTO was set to "LL"`},
	} {
		cs := withComms(t, 2, testParams(t, tc.env))
		errs := each(cs, func(c *Comm) error { return tc.call(c, make([]byte, 8)) })
		for r, err := range errs {
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v rank %d: got %v, want an error containing %q", tc.env, r, err, tc.want)
			}
		}
		// Another collective still runs.
		mustEach(t, cs, "Broadcast", func(c *Comm) error {
			b := make([]byte, 8)
			return c.Broadcast(b, b, 2, reduce.Int32, 0)
		})
	}
}

// TestBadEnvironment: malformed knobs fail Load with the variable named.
func TestBadEnvironment(t *testing.T) {
	for _, tc := range []struct{ env, val string }{
		{"NCCL_ALGO", "FOO"}, {"NCCL_PROTO", "^"}, {"NCCL_BUFFSIZE", "abc"}, {"NCCL_BUFFSIZE", "-1"},
		{"NCCL_BUFFSIZE", "0"}, {"NCCL_NCHANNELS", "0"}, {"NCCL_NCHANNELS", "1000"},
	} {
		_, err := param.Load(func(k string) (string, bool) {
			if k == tc.env {
				return tc.val, true
			}
			return "", false
		})
		if err == nil || !strings.Contains(err.Error(), tc.env) || !strings.Contains(err.Error(), tc.val) {
			t.Errorf("%s=%s: got %v, want an error naming both", tc.env, tc.val, err)
		}
	}
}

// TestSocketIfnameNoMatch: an interface filter that matches nothing fails
// Init with the filter and the existing interfaces named.
func TestSocketIfnameNoMatch(t *testing.T) {
	p := testParams(t, map[string]string{"NCCL_SOCKET_IFNAME": "nosuchif9"})
	_, err := InitLocal(context.Background(), 2, p)
	if err == nil || !strings.Contains(err.Error(), "nosuchif9") || !strings.Contains(err.Error(), "lo") {
		t.Fatalf("got %v, want an error naming nosuchif9 and the interfaces", err)
	}
}

// TestUnreachableRoot: a root nobody listens on gives an error naming the
// address after bounded retries.
func TestUnreachableRoot(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	p := testParams(t, map[string]string{"NCCL_SOCKET_RETRY_CNT": "2", "NCCL_SOCKET_RETRY_SLEEP_MSEC": "10"})
	job, _ := NewJob()
	var ierr error
	hangGuard(t, 30*time.Second, "Init", func() {
		_, ierr = Init(context.Background(), Options{Rank: 1, NRanks: 2, RootAddr: addr, Job: job, Params: p})
	})
	if ierr == nil || !strings.Contains(ierr.Error(), addr) {
		t.Fatalf("got %v, want an error naming %s", ierr, addr)
	}
}

// TestGarbageOnDataPort: strangers, wrong secrets and garbage on a rank's
// data listener are dropped; the job keeps working.
func TestGarbageOnDataPort(t *testing.T) {
	cs := withComms(t, 2, testParams(t, map[string]string{"NCCL_SHM_DISABLE": "1"}))
	addr := cs[0].Peers()[0].Addr
	for _, payload := range [][]byte{[]byte("GET / HTTP/1.0\r\n\r\n"), make([]byte, 4096), {}} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.Write(payload)
		conn.Close()
	}
	wrong := wire.Job{ID: "intruder", Secret: []byte("guess")}
	if c, err := wire.Dial(context.Background(), addr, wrong, wire.Hello{Kind: wire.KindData, Rank: 1}, 0, 0); err == nil {
		c.Close()
		t.Error("a wrong job was accepted on the data port")
	}
	runCase(t, cs, collCases()[0], 1000, false)
}

// TestAbortReachesEveryRank: one rank's Abort makes a pending collective on
// every other rank return an error carrying the cause.
func TestAbortReachesEveryRank(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := InitLocal(ctx, 3, testParams(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range cs {
			c.Close()
		}
	}()
	errs := make(chan error, 2)
	buf := make([]byte, 4<<20)
	for _, c := range cs[1:] {
		go func(c *Comm) { errs <- c.AllReduce(buf, buf, len(buf)/4, reduce.Float32, reduce.Sum) }(c)
	}
	time.Sleep(50 * time.Millisecond)
	cs[0].Abort(errOperator)
	for i := 0; i < 2; i++ {
		var err error
		hangGuard(t, 30*time.Second, "pending AllReduce after Abort", func() { err = <-errs })
		if err == nil || !strings.Contains(err.Error(), "operator stop") {
			t.Errorf("got %v, want the abort cause", err)
		}
	}
	if err := cs[1].AllReduce(buf, buf, 16, reduce.Float32, reduce.Sum); err == nil {
		t.Error("a call after the abort succeeded")
	}
}

var errOperator = stringError("operator stop")

type stringError string

func (e stringError) Error() string { return string(e) }

// TestSocketFamilyMismatch: NCCL_SOCKET_FAMILY=AF_INET6 with an IPv4 root
// and no interface filter is an error that says what to do.
func TestSocketFamilyMismatch(t *testing.T) {
	p := testParams(t, map[string]string{"NCCL_SOCKET_FAMILY": "AF_INET6"})
	_, err := InitLocal(context.Background(), 2, p)
	if err == nil || !strings.Contains(err.Error(), "AF_INET6") || !strings.Contains(err.Error(), "NCCL_SOCKET_IFNAME") {
		t.Fatalf("got %v, want an error naming AF_INET6 and NCCL_SOCKET_IFNAME", err)
	}
}

// TestSocketIfnameLoopback: NCCL_SOCKET_IFNAME=lo picks loopback and works.
func TestSocketIfnameLoopback(t *testing.T) {
	cs := withComms(t, 2, testParams(t, map[string]string{"NCCL_SOCKET_IFNAME": "=lo"}))
	if a := cs[1].Peers()[1].Addr; !strings.HasPrefix(a, "127.") {
		t.Fatalf("rank 1 listens on %s, want loopback", a)
	}
	runCase(t, cs, collCases()[0], 100, false)
}
