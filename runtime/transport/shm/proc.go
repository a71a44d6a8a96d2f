//go:build linux

package shm

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"syscall"
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
// last ')'.
func parseProcStat(b []byte) (procStat, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("no ')' closing the command name")
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state), so field 22 (starttime) is f[19].
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("%d fields after the command name, want at least 20", len(f))
	}
	if len(f[0]) != 1 {
		return procStat{}, fmt.Errorf("state %q: want one letter", f[0])
	}
	start, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("start time %q: %w", f[19], err)
	}
	return procStat{state: f[0][0], start: start}, nil
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	st, err := parseProcStat(b)
	if err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return st, nil
}

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
