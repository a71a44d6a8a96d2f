// Package hw reads host facts (host identity, CPU counts, CPU affinity) from
// an fs.FS rooted at "/", so the parsing is pure and tests feed it a
// testing/fstest.MapFS instead of a real /proc and /sys:
//
//	id, err := hw.HostIdentity(hw.Root())    // hostname + boot id
//	n, err := hw.Cores(hw.Root())            // logical CPUs online
//	cpus, err := hw.AllowedCPUs(hw.Root())   // this process's CPU set, e.g. 0-3,8-11
//
// Paths are fs.FS paths, without the leading '/': "proc/sys/kernel/hostname".
// Every error about a file's content names the file and quotes the text
// that could not be used.
package hw
