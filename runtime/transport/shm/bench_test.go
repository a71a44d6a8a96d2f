//go:build linux

package shm

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/protocols"
)

// The benchmarks run local rank 0 in the test process and local rank 1 in
// a child process, with NCCL's default buffer sizes.
var ncclBuff = sizes(protocols.Simple.DefaultBuffSize(), protocols.LL.DefaultBuffSize(), protocols.LL128.DefaultBuffSize())

const benchSpin = 50 * time.Microsecond

// benchPair opens a segment with a child rank in the given mode.
func benchPair(b *testing.B, mode string, p protocols.Proto, size int, spin time.Duration) (*Segment, *child) {
	b.Helper()
	return benchPairWith(b, mode, childConfig{spin: spin, proto: int(p), size: size})
}

// benchPairWith is benchPair with the child's configuration given (its
// directory, job, rank count and buffers filled in).
func benchPairWith(b *testing.B, mode string, cfg childConfig) (*Segment, *child) {
	b.Helper()
	cfg.dir, cfg.job, cfg.nranks, cfg.buff = b.TempDir(), "bench", 2, ncclBuff
	kids := startChildren(b, mode, cfg, []int{1})
	o := cfg.options(func(context.Context) error { return barrierAll(kids) })
	s, err := Open(context.Background(), o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s, kids[0]
}

// benchEcho (child) returns every 1-step message on channel p until one
// starts with 0xff.
func benchEcho(s *Segment, _ *bufio.Reader) error {
	cfg, _ := readChildConfig()
	p := protocols.Proto(cfg.proto)
	recv, err := s.Recv(int(p), 0, 1, p)
	if err != nil {
		return err
	}
	send, err := s.Send(int(p), 1, 0, p)
	if err != nil {
		return err
	}
	for {
		in, err := recv.Wait(1, cfg.size)
		if err != nil {
			return err
		}
		stop := in[0] == 0xff
		out, err := send.Acquire(1)
		if err != nil {
			return err
		}
		copy(out, in)
		if err := recv.Release(); err != nil {
			return err
		}
		if err := send.Post(cfg.size); err != nil {
			return err
		}
		if stop {
			return nil
		}
	}
}

func BenchmarkPingPong(b *testing.B) {
	for _, spin := range []time.Duration{benchSpin, 0} {
		for p := protocols.Proto(0); int(p) < protocols.NumProtos; p++ {
			b.Run(fmt.Sprintf("%v/8B/spin=%v", p, spin), func(b *testing.B) { benchPingPong(b, p, 8, spin) })
		}
	}
}

func benchPingPong(b *testing.B, p protocols.Proto, size int, spin time.Duration) {
	s, kid := benchPair(b, "echo", p, size, spin)
	send, err := s.Send(int(p), 0, 1, p)
	if err != nil {
		b.Fatal(err)
	}
	recv, err := s.Recv(int(p), 1, 0, p)
	if err != nil {
		b.Fatal(err)
	}
	round := func(mark byte) {
		out, err := send.Acquire(1)
		if err != nil {
			b.Fatal(err)
		}
		out[0] = mark
		if err := send.Post(size); err != nil {
			b.Fatal(err)
		}
		in, err := recv.Wait(1, size)
		if err != nil {
			b.Fatal(err)
		}
		if in[0] != mark {
			b.Fatalf("echo %#x, want %#x", in[0], mark)
		}
		if err := recv.Release(); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < 1000; i++ { // warm up: page faults, the child's start
		round(0)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		round(byte(i % 0xf0))
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/2, "ns/one-way")
	round(0xff)
	if err := kid.exit(); err != nil {
		b.Fatal(err)
	}
}

// benchSink (child) receives messages of cfg.size bytes, cut into slices
// of 2 full steps, into a user buffer; an 8-byte slice after each message
// says whether another follows (0) or not (0xff), and the last is
// acknowledged.
func benchSink(s *Segment, _ *bufio.Reader) error {
	cfg, _ := readChildConfig()
	p := protocols.Proto(cfg.proto)
	recv, err := s.Recv(int(p), 0, 1, p)
	if err != nil {
		return err
	}
	send, err := s.Send(int(p), 1, 0, p)
	if err != nil {
		return err
	}
	user := make([]byte, cfg.size)
	for {
		for off := 0; off < cfg.size; {
			n := min(2*recv.stepPayload, cfg.size-off)
			in, err := recv.Wait(2, n)
			if err != nil {
				return err
			}
			copy(user[off:], in)
			if err := recv.Release(); err != nil {
				return err
			}
			off += n
		}
		ctl, err := recv.Wait(1, 8)
		if err != nil {
			return err
		}
		stop := ctl[0] == 0xff
		if err := recv.Release(); err != nil {
			return err
		}
		if stop {
			if _, err := send.Acquire(1); err != nil {
				return err
			}
			return send.Post(8)
		}
	}
}

func BenchmarkStream4MiB(b *testing.B) {
	for p := protocols.Proto(0); int(p) < protocols.NumProtos; p++ {
		b.Run(p.String(), func(b *testing.B) { benchStream(b, p, 4<<20) })
	}
}

func benchStream(b *testing.B, p protocols.Proto, size int) {
	s, kid := benchPair(b, "sink", p, size, benchSpin)
	send, err := s.Send(int(p), 0, 1, p)
	if err != nil {
		b.Fatal(err)
	}
	recv, err := s.Recv(int(p), 1, 0, p)
	if err != nil {
		b.Fatal(err)
	}
	user := make([]byte, size)
	fillSlice(user, 1, 1)
	message := func(last bool) {
		for off := 0; off < size; {
			n := min(2*send.stepPayload, size-off)
			out, err := send.Acquire(2)
			if err != nil {
				b.Fatal(err)
			}
			copy(out, user[off:off+n])
			if err := send.Post(n); err != nil {
				b.Fatal(err)
			}
			off += n
		}
		out, err := send.Acquire(1)
		if err != nil {
			b.Fatal(err)
		}
		out[0] = 0
		if last {
			out[0] = 0xff
		}
		if err := send.Post(8); err != nil {
			b.Fatal(err)
		}
	}
	message(false) // warm up: page faults
	b.SetBytes(int64(size))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		message(i == b.N-1)
	}
	if _, err := recv.Wait(1, 8); err != nil { // the last message arrived
		b.Fatal(err)
	}
	b.StopTimer()
	recv.Release()
	if err := kid.exit(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkCopy is copy() of the same sizes, for comparison.
func BenchmarkCopy(b *testing.B) {
	for _, size := range []int{8, 4 << 20} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			src, dst := make([]byte, size), make([]byte, size)
			fillSlice(src, 2, 2)
			b.SetBytes(int64(size))
			for i := 0; i < b.N; i++ {
				copy(dst, src)
			}
		})
	}
}

// oneShotStop is the value rank 0 sends in its last one-shot call of a
// benchmark: the peer returns after that call.
const oneShotStop = ^uint64(0)

// BenchmarkOneShotFloor is the floor under an 8 B all-reduce by OneShot
// between two processes: the one-shot area's own exchange (8 B into the
// inline bytes, Post, Await, the peer's 8 B added to this rank's own),
// with nothing of a communicator, the engine or cc-perf around it. Set
// beside cc-perf's 8 B all-reduce through ccrun it shows how much of a
// call the exchange itself takes, and so how far the rest can shrink.
func BenchmarkOneShotFloor(b *testing.B) {
	s, kid := benchPairWith(b, "oneshot", childConfig{spin: benchSpin, oneShot: 256})
	area := s.OneShot()
	var k uint64
	call := func(v uint64) uint64 {
		k++
		binary.LittleEndian.PutUint64(area.Inline(0, k), v)
		area.Post(k)
		if err := area.Await(k); err != nil {
			b.Fatal(err)
		}
		return v + binary.LittleEndian.Uint64(area.Inline(1, k))
	}
	for range 1000 { // warm up: page faults, the child's start
		call(1)
	}
	b.ResetTimer()
	for range b.N {
		if got := call(1); got != 3 {
			b.Fatalf("call %d: sum %d, want 3", k, got)
		}
	}
	b.StopTimer()
	call(oneShotStop)
	if err := kid.exit(); err != nil {
		b.Fatal(err)
	}
}

// benchOneShotPeer (child) is BenchmarkOneShotFloor's local rank 1: it
// contributes 2 to every call until rank 0 sends oneShotStop.
func benchOneShotPeer(s *Segment, _ *bufio.Reader) error {
	area := s.OneShot()
	if area == nil {
		return fmt.Errorf("no one-shot area")
	}
	for k := uint64(1); ; k++ {
		binary.LittleEndian.PutUint64(area.Inline(1, k), 2)
		area.Post(k)
		if err := area.Await(k); err != nil {
			return err
		}
		if binary.LittleEndian.Uint64(area.Inline(0, k)) == oneShotStop {
			return nil
		}
	}
}
