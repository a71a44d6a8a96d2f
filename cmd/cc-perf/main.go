// Command cc-perf is the nccl-tests benchmark suite for cc's runtime: the
// same subcommands (all_reduce, all_gather, broadcast, reduce_scatter,
// reduce, alltoall, alltoallv, scatter, gather, sendrecv, hypercube, also spelled
// all_reduce_perf ... or reached through a symlink of that name), flags,
// table, bandwidth formulas, data check and exit statuses, plus JSON and CSV
// output. Run cc-perf <collective> -h for the flags.
package main

import (
	"os"

	"github.com/seed-760dd1f1/cc/cmd/internal/cli"
)

//go:generate go test -run ^TestGeneratedDocs$ -update-docs .

func main() { os.Exit(cli.Main(run)) }
