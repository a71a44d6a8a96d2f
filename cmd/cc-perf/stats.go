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
//	# cc-perf runtime: pid 4242 sweep 3 goroutines 57 heap_inuse 9142272
//
// so that a soak (scripts/soak.sh) sees goroutines, which nothing outside a Go process can
// count, grow or not from one sweep to the next. Sweeps count from 1.
func runtimeStats(w io.Writer, lead int) func(rank, cycle int) {
	return func(rank, cycle int) {
		if rank != lead {
			return
		}
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		fmt.Fprintf(w, "# cc-perf runtime: pid %d sweep %d goroutines %d heap_inuse %d\n",
			os.Getpid(), cycle+1, runtime.NumGoroutine(), m.HeapInuse)
	}
}
