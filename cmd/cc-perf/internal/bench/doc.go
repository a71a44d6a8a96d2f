// Package bench measures collectives the way nccl-tests does and returns the
// measurements as records ([Result], [Summary]); package report prints them.
//
// [Run] drives every rank of this process, each on its own goroutine with its
// own [Communicator] (a *comm.Comm in cc-perf), through nccl-tests' loop:
//
//	for each data type, op and root:       (-d, -o, -r; "all" loops)
//	    warm up every size class once       (-w)
//	    for each cycle (-N), each size (-b -e -f -i):
//	        out of place, then in place:
//	            time -n iterations of -m calls  -> time, algbw, busbw
//	            check the result -c times        -> #wrong
//
// Times, wrong-element counts and per-iteration samples are combined across
// every rank of the job with the communicator itself (like nccl-tests does
// with MPI), so each process ends with the same numbers; the rank-0 goroutine
// hands each row to a [Recorder] as it completes. When the job is split into
// groups (NCCL_TESTS_SPLIT), each rank measures on its group's communicator
// while that bookkeeping stays job-wide, on [Communicator.Control].
//
// Vocabulary: a rank is one communicator endpoint; nranks ranks form the job.
// algbw is bytes / time (GB/s, 1e9 bytes); busbw is algbw times the
// collective's bus factor ([Coll.BusFactor]), the rate every link sustains.
package bench
