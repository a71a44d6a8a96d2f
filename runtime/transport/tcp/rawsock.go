package tcp

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A rawSock is a socket taken out of the runtime's poller, for the inline
// receive path (LL and LL128 over one socket). The runtime registers every
// net.Conn with its epoll instance, edge-triggered, and while one goroutine
// of the rank polls its socket the runtime's idle thread waits in that
// epoll instance: every frame that arrives then wakes the idle thread,
// which finds nothing to do and sleeps again, a context switch on a core
// the polling rank or its peer needs. Measured, 2 ranks over TCP loopback
// on 2 cores, 8 B all-reduce, both polling 100 ms (CC_TCP_SPIN_US=100000,
// so neither blocked), 4 interleaved runs each: 17-25 us with the socket
// registered, 9-12 us with it deleted from the runtime's epoll set (a bare
// Go ping-pong of the same exchange: 8.5-9.2 us; Open MPI's all-reduce:
// 8.4-11.1 us).
//
// So the inline receiver duplicates the socket's descriptor, closes the
// net.Conn (the runtime deregisters its descriptor; the duplicate keeps the
// connection), and waits for data itself: ppoll on the socket and an
// eventfd that Fail signals. A goroutine blocked in that ppoll holds its
// thread, as a blocking system call does (the runtime hands its P on).
type rawSock struct {
	fd, efd int
	mu      sync.RWMutex // held shared while the descriptors are in use; Close takes it
	failed  atomic.Bool
	once    sync.Once
}

// errSockFailed is what a rawSock's Read returns after Fail or Close.
var errSockFailed = errors.New("use of a failed or closed connection")

// takeRaw takes c's socket out of the runtime's poller. It returns false,
// leaving c as it was, if c is not a socket.
func takeRaw(c net.Conn) (*rawSock, bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, false
	}
	fd := -1
	if err := rc.Control(func(f uintptr) { fd, _ = unix.FcntlInt(f, unix.F_DUPFD_CLOEXEC, 0) }); err != nil || fd < 0 {
		return nil, false
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(fd)
		return nil, false
	}
	// The duplicate shares the socket's non-blocking mode. Closing c
	// deregisters and closes the runtime's descriptor only: the
	// connection stays open through the duplicate (no FIN is sent).
	c.Close()
	return &rawSock{fd: fd, efd: efd}, true
}

// Read calls f with the descriptor until f returns true, waiting for the
// socket to be readable between calls, as syscall.RawConn's Read does. It
// returns errSockFailed after Fail or Close.
func (s *rawSock) Read(f func(fd uintptr) bool) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for {
		if s.failed.Load() {
			return errSockFailed
		}
		if f(uintptr(s.fd)) {
			return nil
		}
		s.wait()
	}
}

// wait blocks until the socket is readable (or has an error or hang-up to
// report) or Fail was called.
func (s *rawSock) wait() {
	fds := [2]unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}, {Fd: int32(s.efd), Events: unix.POLLIN}}
	for {
		_, _, errno := unix.Syscall6(unix.SYS_PPOLL, uintptr(unsafe.Pointer(&fds[0])), 2, 0, 0, 0, 0)
		if errno != unix.EINTR {
			return
		}
	}
}

// Fail makes every pending and later Read return errSockFailed: the
// eventfd turns readable and stays so, which ends every wait.
func (s *rawSock) Fail() {
	if s.failed.Swap(true) {
		return
	}
	one := uint64(1)
	unix.Write(s.efd, (*[8]byte)(unsafe.Pointer(&one))[:])
}

// Close fails the socket, waits until no Read uses its descriptors and
// closes them.
func (s *rawSock) Close() error {
	s.once.Do(func() {
		s.Fail()
		s.mu.Lock()
		unix.Close(s.fd)
		unix.Close(s.efd)
		s.mu.Unlock()
	})
	return nil
}
