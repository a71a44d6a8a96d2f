//go:build linux

package shm

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// x/sys/unix does not export the futex operations. The words live in a
// MAP_SHARED mapping used by several processes, so these are the shared
// operations, not the FUTEX_PRIVATE_FLAG variants.
const (
	futexWaitOp = 0 // FUTEX_WAIT
	futexWakeOp = 1 // FUTEX_WAKE
)

// futexWait sleeps while *addr == val, at most timeout. It reports whether
// the sleep timed out; a wake, a changed word (EAGAIN) or a signal (EINTR)
// all return false, and the caller re-checks its condition in every case.
func futexWait(addr *uint32, val uint32, timeout time.Duration) (timedOut bool) {
	ts := unix.NsecToTimespec(int64(timeout))
	_, _, errno := unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWaitOp, uintptr(val), uintptr(unsafe.Pointer(&ts)), 0, 0)
	return errno == unix.ETIMEDOUT
}

// futexWake wakes every process sleeping on addr.
func futexWake(addr *uint32) {
	unix.Syscall6(unix.SYS_FUTEX, uintptr(unsafe.Pointer(addr)), futexWakeOp, uintptr(1<<31-1), 0, 0, 0)
}

// yield gives the core to another runnable thread (sched_yield).
func yield() { unix.Syscall(unix.SYS_SCHED_YIELD, 0, 0, 0) }
