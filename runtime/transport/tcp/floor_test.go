//go:build linux

package tcp

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// exchangePeerEnv makes the test binary BenchmarkExchangeFloor's peer
// process: it dials the address the variable holds.
const exchangePeerEnv = "CC_TCP_TEST_EXCHANGE_PEER"

// exchangeStop is the byte that ends the peer's loop.
const exchangeStop = 0xff

// BenchmarkExchangeFloor is the floor under an 8 B all-reduce of 2 ranks
// over loopback TCP (recursive doubling: one exchange): two processes
// each write 8 bytes and then wait until the other's 8 bytes are in, with
// nothing of the transport, the engine or cc-perf around it. Set beside
// cc-perf's 8 B all-reduce with NCCL_SHM_DISABLE=1 it shows what the rest
// adds. How a rank waits: recv polls recv with MSG_DONTWAIT (what the
// transport's inline receive does), poll polls poll(2) with a zero
// timeout and then reads, block reads a blocking socket (the kernel
// sleeps and wakes the thread).
func BenchmarkExchangeFloor(b *testing.B) {
	for _, mode := range []string{"recv", "poll", "block"} {
		b.Run(mode, func(b *testing.B) { benchExchange(b, mode) })
	}
}

func benchExchange(b *testing.B, mode string) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	peer := exec.Command(exe)
	peer.Env = append(os.Environ(), exchangePeerEnv+"="+mode+" "+ln.Addr().String())
	peer.Stderr = os.Stderr
	if err := peer.Start(); err != nil {
		b.Fatal(err)
	}
	defer peer.Process.Kill()
	conn, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	fd, done, err := rawFD(conn) // closes conn
	if err != nil {
		b.Fatal(err)
	}
	defer done()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	msg, in := make([]byte, 8), make([]byte, 8)
	for range 1000 { // warm up
		if err := exchange(fd, mode, msg, in); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for range b.N {
		if err := exchange(fd, mode, msg, in); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	msg[0] = exchangeStop
	if err := exchange(fd, mode, msg, in); err != nil {
		b.Fatal(err)
	}
	if err := peer.Wait(); err != nil {
		b.Fatalf("peer: %v", err)
	}
}

// exchangePeer is BenchmarkExchangeFloor's other process; arg is the
// mode and the address to dial.
func exchangePeer(arg string) int {
	mode, addr, _ := strings.Cut(arg, " ")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "exchange peer:", err)
		return 2
	}
	fd, done, err := rawFD(conn) // closes conn
	if err != nil {
		fmt.Fprintln(os.Stderr, "exchange peer:", err)
		return 2
	}
	defer done()
	runtime.LockOSThread()
	msg, in := make([]byte, 8), make([]byte, 8)
	for {
		if err := exchange(fd, mode, msg, in); err != nil {
			fmt.Fprintln(os.Stderr, "exchange peer:", err)
			return 3
		}
		if in[0] == exchangeStop {
			return 0
		}
	}
}

// rawFD takes conn's socket out of the runtime's poller as the inline
// receiver does (takeRaw: otherwise every arriving byte would wake the
// runtime's idle thread), in blocking mode for "block", with TCP_NODELAY
// set; it returns the descriptor and a function that closes it.
func rawFD(conn net.Conn) (int, func(), error) {
	if err := conn.(*net.TCPConn).SetNoDelay(true); err != nil {
		return 0, nil, err
	}
	s, ok := takeRaw(conn)
	if !ok {
		return 0, nil, fmt.Errorf("%T is not a socket", conn)
	}
	if err := unix.SetNonblock(s.fd, false); err != nil {
		s.Close()
		return 0, nil, err
	}
	return s.fd, func() { s.Close() }, nil
}

// exchange writes msg and waits, as mode says, until len(in) bytes have
// been read.
func exchange(fd int, mode string, msg, in []byte) error {
	if _, err := unix.Write(fd, msg); err != nil {
		return err
	}
	flags := unix.MSG_DONTWAIT
	if mode == "block" {
		flags = 0
	}
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for got := 0; got < len(in); {
		if mode == "poll" {
			if n, err := unix.Poll(pfd, 0); n == 0 || err == unix.EINTR {
				continue
			} else if err != nil {
				return err
			}
		}
		n, _, err := unix.Recvfrom(fd, in[got:], flags)
		switch {
		case err == unix.EAGAIN || err == unix.EINTR:
			continue
		case err != nil:
			return err
		case n == 0:
			return fmt.Errorf("peer closed the connection")
		}
		got += n
	}
	return nil
}
