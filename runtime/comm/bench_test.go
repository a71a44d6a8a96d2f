package comm

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// benchBytes is the all-reduce size of the comparison: 64 MiB of float32.
const benchBytes = 64 << 20

// benchChild is rank r of the 2-process comparison. Between the same two
// processes it measures, interleaved over several rounds so that all three
// see the same machine load:
//  1. a plain Go TCP stream from rank 0 to rank 1 (1 MiB writes), the
//     baseline;
//  2. two plain streams at once, one each way (what a ring all-reduce
//     does to each link);
//  3. all-reduce of 64 MiB float32 sum, busbw = 2(n-1)/n * S / t.
//
// Rank 0 prints the medians: "stream=<GB/s> duplex=<GB/s> busbw=<GB/s>".
func benchChild(c *Comm) error {
	rounds, _ := strconv.Atoi(os.Getenv("CC_BENCH_ROUNDS"))
	rounds = max(rounds, 5)
	count := benchBytes / 4
	send := make([]byte, benchBytes)
	recv := make([]byte, benchBytes)
	if err := c.AllReduce(send, recv, count, reduce.Float32, reduce.Sum); err != nil { // warm up
		return err
	}
	var streams, duplexes, busbws []float64
	n := float64(c.NRanks())
	for i := 0; i < rounds; i++ {
		s, err := plainStream(c, false)
		if err != nil {
			return err
		}
		d, err := plainStream(c, true)
		if err != nil {
			return err
		}
		start := time.Now()
		const iters = 3
		for j := 0; j < iters; j++ {
			if err := c.AllReduce(send, recv, count, reduce.Float32, reduce.Sum); err != nil {
				return err
			}
		}
		t := time.Since(start).Seconds() / iters
		streams, duplexes = append(streams, s), append(duplexes, d)
		busbws = append(busbws, float64(benchBytes)/t*2*(n-1)/n/1e9)
	}
	if c.Rank() == 0 {
		fmt.Printf("stream=%.3f duplex=%.3f busbw=%.3f\n", median(streams), median(duplexes), median(busbws))
	}
	return c.Close()
}

func median(v []float64) float64 {
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// plainStream moves 256 MiB over fresh TCP connections between ranks 0 and
// 1 and returns GB/s per direction; duplex sends both ways at once.
func plainStream(c *Comm, duplex bool) (float64, error) {
	const total, wsize = 256 << 20, 1 << 20
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	ctx := context.Background()
	addrs, err := c.boot.AllGather(ctx, []byte(ln.Addr().String()))
	if err != nil {
		return 0, err
	}
	peer := string(addrs[1-c.Rank()])
	sender := c.Rank() == 0 || duplex
	receiver := c.Rank() == 1 || duplex
	out, in := make(chan error, 1), make(chan error, 1)
	if err := c.boot.Barrier(ctx); err != nil {
		return 0, err
	}
	start := time.Now()
	go func() {
		if !sender {
			out <- nil
			return
		}
		conn, err := net.Dial("tcp", peer)
		if err != nil {
			out <- err
			return
		}
		defer conn.Close()
		buf := make([]byte, wsize)
		for sent := 0; sent < total; sent += wsize {
			if _, err := conn.Write(buf); err != nil {
				out <- err
				return
			}
		}
		var ack [8]byte
		_, err = io.ReadFull(conn, ack[:])
		out <- err
	}()
	go func() {
		if !receiver {
			in <- nil
			return
		}
		conn, err := ln.Accept()
		if err != nil {
			in <- err
			return
		}
		defer conn.Close()
		buf := make([]byte, wsize)
		if _, err := io.CopyBuffer(io.Discard, io.LimitReader(conn, total), buf); err != nil {
			in <- err
			return
		}
		var ack [8]byte
		binary.LittleEndian.PutUint64(ack[:], total)
		_, err = conn.Write(ack[:])
		in <- err
	}()
	if err := <-out; err != nil {
		return 0, err
	}
	if err := <-in; err != nil {
		return 0, err
	}
	return total / time.Since(start).Seconds() / 1e9, nil
}

// BenchmarkAllReduceVsTCPStream runs two rank processes and reports the
// 64 MiB float32 all-reduce busbw next to a plain Go TCP stream (and a
// two-way stream) between the same two processes, medians of rounds
// interleaved in the same run (CC_BENCH_ROUNDS, default 5).
func BenchmarkAllReduceVsTCPStream(b *testing.B) {
	for i := 0; i < b.N; i++ {
		procs := startRanks(b, 2, "bench", transports[0].env) // TCP: both ranks share this host
		var line string
		for r, p := range procs {
			if r == 0 {
				hangGuard(b, 10*time.Minute, "bench rank 0 output", func() { line = p.line() })
			}
			var err error
			hangGuard(b, 10*time.Minute, "bench ranks", func() { err = <-p.done; p.done <- err })
			if err != nil {
				b.Fatalf("rank %d: %v\n%s", r, err, p.cmd.Stderr.(*syncWriter).String())
			}
		}
		var stream, duplex, busbw float64
		if _, err := fmt.Sscanf(strings.TrimSpace(line), "stream=%g duplex=%g busbw=%g", &stream, &duplex, &busbw); err != nil {
			b.Fatalf("rank 0 printed %q: %v", line, err)
		}
		b.ReportMetric(stream, "stream-GB/s")
		b.ReportMetric(duplex, "duplex-GB/s")
		b.ReportMetric(busbw, "busbw-GB/s")
		b.ReportMetric(busbw/stream, "busbw/stream")
	}
}

// shmBenchChild measures, for the protocol its NCCL_PROTO forces, the
// all-reduce time at 8 B (median of 2000 calls) and the busbw at 64 MiB,
// and the memcpy bandwidth of 64 MiB in the same process. Rank 0 prints
// "small_us=<us> busbw=<GB/s> memcpy=<GB/s>".
func shmBenchChild(c *Comm) error {
	small := make([]byte, 8)
	var lat []float64
	for i := 0; i < 2000; i++ {
		start := time.Now()
		if err := c.AllReduce(small, small, 2, reduce.Float32, reduce.Sum); err != nil {
			return err
		}
		lat = append(lat, time.Since(start).Seconds()*1e6)
	}
	send := make([]byte, benchBytes)
	recv := make([]byte, benchBytes)
	if err := c.AllReduce(send, recv, benchBytes/4, reduce.Float32, reduce.Sum); err != nil {
		return err
	}
	var bws, cps []float64
	n := float64(c.NRanks())
	for i := 0; i < 5; i++ {
		start := time.Now()
		if err := c.AllReduce(send, recv, benchBytes/4, reduce.Float32, reduce.Sum); err != nil {
			return err
		}
		bws = append(bws, float64(benchBytes)/time.Since(start).Seconds()*2*(n-1)/n/1e9)
		start = time.Now()
		copy(recv, send)
		cps = append(cps, float64(benchBytes)/time.Since(start).Seconds()/1e9)
	}
	if c.Rank() == 0 {
		fmt.Printf("small_us=%.3f busbw=%.3f memcpy=%.3f\n", median(lat), median(bws), median(cps))
	}
	return c.Close()
}

// BenchmarkSHMProtocols runs 2 rank processes on shared memory once per
// protocol and reports, from one benchmark run: the 8 B all-reduce time
// (LL should win), the 64 MiB busbw (Simple should win), and memcpy of
// 64 MiB measured in the same processes (64 MiB memcpy moves 64 MiB; an
// all-reduce's busbw counts what each rank sends).
func BenchmarkSHMProtocols(b *testing.B) {
	for i := 0; i < b.N; i++ {
		for _, proto := range []string{"LL", "LL128", "Simple"} {
			procs := startRanks(b, 2, "shmbench", func(int) []string { return []string{"NCCL_SHM_DISABLE=0", "NCCL_PROTO=" + proto} })
			line := ""
			hangGuard(b, 10*time.Minute, "shm bench", func() { line = procs[0].line() })
			for r, p := range procs {
				var err error
				hangGuard(b, 10*time.Minute, "shm bench ranks", func() { err = <-p.done; p.done <- err })
				if err != nil {
					b.Fatalf("%s rank %d: %v\n%s", proto, r, err, p.cmd.Stderr.(*syncWriter).String())
				}
			}
			var us, bw, cp float64
			if _, err := fmt.Sscanf(line, "small_us=%g busbw=%g memcpy=%g", &us, &bw, &cp); err != nil {
				b.Fatalf("%s: rank 0 printed %q: %v", proto, line, err)
			}
			b.ReportMetric(us, proto+"-8B-us")
			b.ReportMetric(bw, proto+"-64MiB-busbw-GB/s")
			b.ReportMetric(cp, proto+"-run-memcpy-GB/s")
		}
	}
}
