// Package proctest finds processes in /proc for tests that check a job leaves nothing
// behind: by a marker in their command line or environment, or by process group.
//
//	left := proctest.WaitNone(func() []int { return proctest.WithEnv("MARK=1234") }, 10*time.Second)
//	if len(left) > 0 { t.Errorf("left behind: %s", proctest.Describe(left)) }
//
// Zombies are never listed: they hold nothing, and the init of a container or VM does not
// always reap the ones reparented to it.
package proctest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Live lists the live processes, other than this one, for which match (given the process's
// /proc directory) is true.
func Live(match func(dir string) bool) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		dir := filepath.Join("/proc", e.Name())
		if f := statFields(dir); len(f) < 3 || f[0] == "Z" || !match(dir) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// statFields returns the fields of /proc/PID/stat after "(comm)": state, ppid, pgrp, ...
func statFields(dir string) []string {
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	i := bytes.LastIndexByte(stat, ')')
	if err != nil || i < 0 {
		return nil
	}
	return strings.Fields(string(stat[i+1:]))
}

// WithEnv lists the live processes whose environment holds the entry kv ("NAME=value").
func WithEnv(kv string) []int {
	return Live(func(dir string) bool {
		env, err := os.ReadFile(filepath.Join(dir, "environ"))
		return err == nil && bytes.Contains(append([]byte{0}, env...), []byte("\x00"+kv+"\x00"))
	})
}

// WithCmdline lists the live processes whose command line contains s.
func WithCmdline(s string) []int {
	return Live(func(dir string) bool {
		b, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		return err == nil && bytes.Contains(b, []byte(s))
	})
}

// InGroup lists the live processes of process group pgid.
func InGroup(pgid int) []int {
	return Live(func(dir string) bool {
		f := statFields(dir)
		return len(f) >= 3 && f[2] == strconv.Itoa(pgid)
	})
}

// WaitNone polls list until it is empty or limit has passed, and returns what is left.
func WaitNone(list func() []int, limit time.Duration) []int {
	deadline := time.Now().Add(limit)
	for {
		pids := list()
		if len(pids) == 0 || time.Now().After(deadline) {
			return pids
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Describe renders pids with their command lines, one per line.
func Describe(pids []int) string {
	var b strings.Builder
	for _, p := range pids {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		fmt.Fprintf(&b, "pid %d: %s\n", p, bytes.ReplaceAll(bytes.TrimRight(cmd, "\x00"), []byte{0}, []byte{' '}))
	}
	return b.String()
}

// Buffer is a bytes.Buffer for a process's output, safe to read while it is written.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
