//go:build linux

package shm

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Cross-memory attach (process_vm_readv, Linux 3.2): a process reads
// another process's memory with one system call, one copy, given the
// other's pid and an address in it. It needs the permission ptrace would
// (the same user; under Yama's ptrace_scope 1 only a descendant or a
// process the target allowed with PR_SET_PTRACER, which this package
// never sets; a seccomp filter may refuse the call outright), so a
// communicator probes it at Init (ReadPeer on a word every local rank
// publishes) before it relies on it. Open MPI's shared-memory transport
// reads large messages this way (btl_vader_single_copy_mechanism cma).

// PeerPid returns local rank r's process id as this process can name it:
// false when r recorded no pid or lives in another pid namespace, where
// its pid means another process here.
func (s *Segment) PeerPid(r int) (int, bool) {
	if r < 0 || r >= s.geo.nranks || s.mem == nil {
		return 0, false
	}
	e := hOwners + r*ownerBytes
	pid := atomic.LoadUint64(s.u64(e + oPid))
	ns := atomic.LoadUint64(s.u64(e + oPidNS))
	if pid == 0 || ns == 0 || ns != s.me.pidNS {
		return 0, false
	}
	return int(pid), true
}

// maxReadPeer bounds one process_vm_readv: the kernel moves at most
// MAX_RW_COUNT (2 GiB less a page) per call.
const maxReadPeer = 1 << 30

// ReadPeer copies len(dst) bytes at address addr of process pid into dst
// with process_vm_readv, as many calls as a short transfer needs. It
// allocates nothing. The error names the system call's: EPERM (not
// allowed), ESRCH (no such process), EFAULT (addr not mapped there).
func ReadPeer(pid int, dst []byte, addr uint64) error {
	for len(dst) > 0 {
		n := min(len(dst), maxReadPeer)
		local := unix.Iovec{Base: &dst[0]}
		local.SetLen(n)
		remote := unix.RemoteIovec{Base: uintptr(addr), Len: n}
		got, _, errno := unix.Syscall6(unix.SYS_PROCESS_VM_READV, uintptr(pid),
			uintptr(unsafe.Pointer(&local)), 1, uintptr(unsafe.Pointer(&remote)), 1, 0)
		if errno != 0 {
			return fmt.Errorf("process_vm_readv of %d bytes at %#x of pid %d: %w", n, addr, pid, errno)
		}
		if got == 0 {
			return fmt.Errorf("process_vm_readv of %d bytes at %#x of pid %d: read nothing", n, addr, pid)
		}
		dst, addr = dst[got:], addr+uint64(got)
	}
	return nil
}
