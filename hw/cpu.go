package hw

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// Files read by this package, as fs.FS paths under the root.
const (
	OnlineFile  = "sys/devices/system/cpu/online"
	CPUInfoFile = "proc/cpuinfo"
	StatusFile  = "proc/self/status"
)

// maxCPU bounds CPU numbers in a list: Linux's NR_CPUS is at most 8192
// today; 65535 leaves room without letting "0-4000000000" allocate
// gigabytes.
const maxCPU = 1<<16 - 1

// CPUList is a set of logical CPU numbers, ascending and without
// duplicates, as the kernel's list format describes it ("0-3,8-11").
type CPUList []int

// ParseCPUList parses the kernel's CPU list format: comma-separated CPU
// numbers or inclusive ranges "a-b", surrounding spaces and a trailing
// newline allowed. Overlapping or unordered parts are merged. The stride
// form "a-b:n" of cpuset inputs is not accepted: /proc and /sys never print
// it.
func ParseCPUList(s string) (CPUList, error) {
	body := strings.TrimSpace(s)
	if body == "" {
		return nil, fmt.Errorf("empty CPU list (want e.g. 0-3,8-11)")
	}
	var in []bool // in[c]: CPU c is listed
	for _, part := range strings.Split(body, ",") {
		loText, hiText, isRange := strings.Cut(part, "-")
		lo, err := parseCPU(loText)
		if err != nil {
			return nil, fmt.Errorf("CPU list %q: %w", s, err)
		}
		hi := lo
		if isRange {
			if hi, err = parseCPU(hiText); err != nil {
				return nil, fmt.Errorf("CPU list %q: %w", s, err)
			}
			if hi < lo {
				return nil, fmt.Errorf("CPU list %q: range %q runs backwards", s, part)
			}
		}
		if hi >= len(in) {
			in = append(in, make([]bool, hi+1-len(in))...)
		}
		for c := lo; c <= hi; c++ {
			in[c] = true
		}
	}
	var out CPUList
	for c, ok := range in {
		if ok {
			out = append(out, c)
		}
	}
	return out, nil
}

func parseCPU(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > maxCPU || s == "" || s[0] == '+' {
		return 0, fmt.Errorf("%q is not a CPU number in 0..%d", s, maxCPU)
	}
	return n, nil
}

// String returns the kernel's list form, consecutive CPUs folded into
// ranges: "0-3,8-11", "5", "" for an empty list.
func (c CPUList) String() string {
	var b strings.Builder
	for i := 0; i < len(c); {
		j := i
		for j+1 < len(c) && c[j+1] == c[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(c[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(c[j]))
		}
		i = j + 1
	}
	return b.String()
}

// OnlineCPUs reads the logical CPUs the kernel has online.
func OnlineCPUs(fsys fs.FS) (CPUList, error) {
	b, err := fs.ReadFile(fsys, OnlineFile)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", OnlineFile, err)
	}
	l, err := ParseCPUList(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", OnlineFile, err)
	}
	return l, nil
}

// Cores returns the number of logical CPUs (hardware threads) online: from
// sys/devices/system/cpu/online, or, when that file does not exist, by
// counting the "processor" lines of proc/cpuinfo. A file that exists but
// cannot be parsed is an error, never a reason to fall back. The count
// ignores this process's affinity; see AllowedCPUs for that.
func Cores(fsys fs.FS) (int, error) {
	online, err := OnlineCPUs(fsys)
	if err == nil {
		return len(online), nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return 0, err
	}
	n, err2 := countProcessors(fsys)
	if err2 != nil {
		return 0, fmt.Errorf("count CPUs: %w", errors.Join(err, err2))
	}
	return n, nil
}

// countProcessors counts the "processor : N" lines of proc/cpuinfo.
func countProcessors(fsys fs.FS) (int, error) {
	b, err := fs.ReadFile(fsys, CPUInfoFile)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", CPUInfoFile, err)
	}
	n := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, _, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(key) == "processor" {
			n++
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", CPUInfoFile, err)
	}
	if n == 0 {
		return 0, fmt.Errorf("%s: no \"processor\" lines in %d bytes", CPUInfoFile, len(b))
	}
	return n, nil
}

// AllowedCPUs reads the Cpus_allowed_list line of proc/self/status: the
// CPUs this process may run on (its affinity, cgroup cpuset included).
func AllowedCPUs(fsys fs.FS) (CPUList, error) {
	b, err := fs.ReadFile(fsys, StatusFile)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", StatusFile, err)
	}
	return ParseAllowedCPUs(string(b))
}

// ParseAllowedCPUs finds the Cpus_allowed_list line in the text of a
// /proc/<pid>/status file and parses its CPU list.
func ParseAllowedCPUs(status string) (CPUList, error) {
	for line := range strings.Lines(status) {
		if value, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			l, err := ParseCPUList(value)
			if err != nil {
				return nil, fmt.Errorf("%s: Cpus_allowed_list: %w", StatusFile, err)
			}
			return l, nil
		}
	}
	return nil, fmt.Errorf("%s: no Cpus_allowed_list line", StatusFile)
}
