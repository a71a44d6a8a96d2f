package main

import (
	"bufio"
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/seed-760dd1f1/cc/hw"
	"golang.org/x/sys/unix"
)

// hostFacts are what the device listing says about this process's host.
type hostFacts struct {
	host  string // host name up to its first dot, as nccl-tests' getHostName
	cpus  string // the CPUs this process may run on, e.g. "cpu 0-3,8"
	model string // the CPU model
}

func readHostFacts() hostFacts { return hostFactsOf(nil) }

// hostFactsOf reads the host's facts, naming the host with hostname (nil:
// os.Hostname). The name is cut at its first dot here, where it is
// produced, so the table and the -J file say the same ("node01" for
// node01.example.com), as in nccl-tests, whose JSON hostname comes from the
// printed line.
func hostFactsOf(hostname func() (string, error)) hostFacts {
	h := hostFacts{cpus: "cpu ?", model: runtime.GOARCH}
	if hostname == nil {
		hostname = os.Hostname
	}
	name, _ := hostname()
	h.host, _, _ = strings.Cut(name, ".")
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err == nil {
		var cpus []int
		for i := 0; i < len(set)*64; i++ {
			if set.IsSet(i) {
				cpus = append(cpus, i)
			}
		}
		h.cpus = "cpu " + hw.CPUList(cpus).String()
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		if m := cpuModel(b); m != "" {
			h.model = m
		}
	}
	return h
}

// cpuModel returns the first "model name" of /proc/cpuinfo, blanks squeezed.
func cpuModel(cpuinfo []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(cpuinfo))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == "model name" {
			return strings.Join(strings.Fields(v), " ")
		}
	}
	return ""
}

// availableMemory returns the bytes this process can still allocate: the
// kernel's MemAvailable, capped by a cgroup v2 memory limit. ok is false when
// neither can be read.
func availableMemory(readFile func(string) ([]byte, error)) (avail int64, ok bool) {
	if b, err := readFile("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) >= 2 && f[0] == "MemAvailable:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					avail, ok = kb<<10, true
				}
			}
		}
	}
	lim, err1 := readFile("/sys/fs/cgroup/memory.max")
	cur, err2 := readFile("/sys/fs/cgroup/memory.current")
	if err1 == nil && err2 == nil {
		l, e1 := strconv.ParseInt(strings.TrimSpace(string(lim)), 10, 64) // "max" fails: no limit
		c, e2 := strconv.ParseInt(strings.TrimSpace(string(cur)), 10, 64)
		if e1 == nil && e2 == nil && (!ok || l-c < avail) {
			avail, ok = max(l-c, 0), true
		}
	}
	return avail, ok
}

// memSys is the memory the Go runtime has obtained from the OS.
func memSys() int64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.Sys)
}

// heldMemory is what this process holds at one moment: the live Go heap
// and goroutine stacks, and the writable shared memory it maps (the
// runtime's shared-memory transport segments, in /proc/self/maps).
type heldMemory struct{ live, shared int64 }

// readHeldMemory collects garbage first, so that live counts only what is
// reachable; it is for -M, around communicator creation.
func readHeldMemory(readFile func(string) ([]byte, error)) heldMemory {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	h := heldMemory{live: int64(m.HeapAlloc + m.StackInuse)}
	if b, err := readFile("/proc/self/maps"); err == nil {
		h.shared = sharedMapped(b)
	}
	return h
}

// growth is how much more h holds than since, each part floored at 0.
func (h heldMemory) growth(since heldMemory) int64 {
	return max(h.live-since.live, 0) + max(h.shared-since.shared, 0)
}

// sharedMapped sums the writable shared mappings of a /proc/<pid>/maps
// listing ("start-end rw-s offset dev inode path"), counting a file mapped
// several times (one segment, one mapping per local rank) once, at its
// largest mapping.
func sharedMapped(maps []byte) int64 {
	files := map[string]int64{}
	var anon int64
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 || len(f[1]) < 4 || f[1][1] != 'w' || f[1][3] != 's' {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || end < start {
			continue
		}
		size := int64(end - start)
		if f[4] == "0" { // anonymous shared memory: each mapping is its own
			anon += size
			continue
		}
		key := f[3] + " " + f[4] // device and inode
		files[key] = max(files[key], size)
	}
	for _, size := range files {
		anon += size
	}
	return anon
}

func pid() int { return os.Getpid() }
