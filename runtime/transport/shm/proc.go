//go:build linux

package shm

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"strconv"
	"syscall"
	"unsafe"
)

// procStat is what the liveness checks need from /proc/<pid>/stat.
type procStat struct {
	state byte   // field 3: R, S, D, Z (zombie), X (dead), ...
	start uint64 // field 22: start time in clock ticks since boot
}

// parseProcStat parses the contents of /proc/<pid>/stat:
//
//	1234 (name with (parens) and spaces) S 1 1234 ... starttime ...
//
// The command name may contain anything, so fields are counted from the
// last ')'. Fields are separated by ASCII white space. It allocates only
// to report an error: a waiter whose peer is slow checks the peer's
// liveness in the middle of a call, and a call allocates nothing.
func parseProcStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("no ')' closing the command name")
	}
	// Field 3 (state) is the first after the name, field 22 (starttime)
	// the twentieth.
	var state, start []byte
	nf := 0
	for rest := b[i+1:]; ; nf++ {
		j := 0
		for j < len(rest) && asciiSpace(rest[j]) {
			j++
		}
		rest = rest[j:]
		if len(rest) == 0 {
			break
		}
		j = 0
		for j < len(rest) && !asciiSpace(rest[j]) {
			j++
		}
		switch nf {
		case 0:
			state = rest[:j]
		case 19:
			start = rest[:j]
		}
		rest = rest[j:]
	}
	if nf < 20 {
		return procStat{}, fmt.Errorf("%d fields after the command name, want at least 20", nf)
	}
	if len(state) != 1 {
		return procStat{}, fmt.Errorf("state %q: want one letter", string(state))
	}
	v, ok := parseDecimal(start)
	if !ok {
		return procStat{}, fmt.Errorf("start time %q: want a decimal number below 2^64", string(start))
	}
	return procStat{state: state[0], start: v}, nil
}

// asciiSpace reports whether c separates fields of /proc/<pid>/stat.
func asciiSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// parseDecimal parses an unsigned decimal number without allocating.
func parseDecimal(b []byte) (uint64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := uint64(c - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false
		}
		v = v*10 + d
	}
	return v, true
}

// readProcStat reads and parses /proc/<pid>/stat. It allocates nothing
// unless it fails: the path and the contents live on the stack, and the
// file is opened with openat(2) directly (syscall.Open copies its path to
// the heap).
func readProcStat(pid int) (procStat, error) {
	var path [40]byte
	p := append(path[:0], "/proc/"...)
	p = strconv.AppendInt(p, int64(pid), 10)
	p = append(p, "/stat\x00"...)
	fd, _, errno := syscall.Syscall6(syscall.SYS_OPENAT, atFDCWD, uintptr(unsafe.Pointer(&p[0])),
		uintptr(syscall.O_RDONLY|syscall.O_CLOEXEC), 0, 0, 0)
	if errno != 0 {
		return procStat{}, &fs.PathError{Op: "open", Path: string(p[:len(p)-1]), Err: errno}
	}
	defer syscall.Close(int(fd))
	var buf [1024]byte // the fields up to 22 fit: the name is at most 64 bytes
	n := 0
	for n < len(buf) {
		// read(2) directly: syscall.Read's race-detector hooks move buf
		// to the heap.
		m, _, errno := syscall.Syscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&buf[n])), uintptr(len(buf)-n))
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return procStat{}, &fs.PathError{Op: "read", Path: string(p[:len(p)-1]), Err: errno}
		}
		if m == 0 {
			break
		}
		n += int(m)
	}
	st, err := parseProcStat(buf[:n])
	if err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return st, nil
}

// atFDCWD is AT_FDCWD: openat(2) resolves a relative path from the
// working directory (ours is absolute). It is -100, as a uintptr.
const atFDCWD = ^uintptr(99)

// self describes this process for its owner entry.
type self struct {
	pid   int
	start uint64
	pidNS uint64
}

func readSelf() (self, error) {
	st, err := readProcStat(os.Getpid())
	if err != nil {
		return self{}, fmt.Errorf("own start time: %w", err)
	}
	return self{pid: os.Getpid(), start: st.start, pidNS: pidNamespace()}, nil
}

// pidNamespace is the inode of this process's pid namespace, 0 if unknown.
// Pids recorded by a process of another namespace mean nothing here.
func pidNamespace() uint64 {
	fi, err := os.Stat("/proc/self/ns/pid")
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 0
}

// liveness is the verdict on a recorded owner.
type liveness int

const (
	alive   liveness = iota
	dead             // no such process, a zombie, or another process that reused the pid
	unknown          // another pid namespace, or /proc unreadable: treat as alive
)

// ownerLiveness judges an owner recorded as pid, start time and pid
// namespace, from this process's namespace ns.
func ownerLiveness(pid int, start, pidNS, ns uint64) liveness {
	if pidNS != 0 && ns != 0 && pidNS != ns {
		return unknown
	}
	st, err := readProcStat(pid)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return dead
	case err != nil:
		return unknown
	case st.start != start, st.state == 'Z', st.state == 'X':
		return dead
	}
	return alive
}
