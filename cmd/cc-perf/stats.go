package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
)

// runtimeStats returns the bench.Options.Swept of --runtime_stats: after each sweep the
// process's first rank (lead) writes one line to w, e.g.
//
//	# cc-perf runtime: pid 4242 sweep 3 goroutines 57 heap_inuse 9142272 heap_live 2101248
//
// so that a soak (scripts/soak.sh) sees goroutines, which nothing outside a Go process can
// count, grow or not from one sweep to the next, and the live heap: what a collection run
// just before leaves allocated, which grows only when memory stays reachable (heap_inuse,
// read before it, holds the sweep's garbage too). Sweeps count from 1.
func runtimeStats(w io.Writer, lead int) func(rank, cycle int) {
	return func(rank, cycle int) {
		if rank != lead {
			return
		}
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		inuse := m.HeapInuse
		runtime.GC()
		runtime.ReadMemStats(&m)
		fmt.Fprintf(w, "# cc-perf runtime: pid %d sweep %d goroutines %d heap_inuse %d heap_live %d\n",
			os.Getpid(), cycle+1, runtime.NumGoroutine(), inuse, m.HeapAlloc)
	}
}
