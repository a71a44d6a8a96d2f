// Command ccrun is cc's MPI-style launcher: it starts a program as N ranks on this machine
// or on hosts reached over SSH, hosts the runtime's bootstrap root, forwards output, and
// ends the whole job (SIGTERM, a grace period, SIGKILL, on every host) as soon as one rank
// fails. It takes mpirun's and Hydra's flags and hostfiles. Run ccrun -h for the flags.
package main

import (
	"os"

	"github.com/seed-760dd1f1/cc/cmd/internal/cli"
)

//go:generate go test -run ^TestGeneratedDocs$ -update-docs .

func main() { os.Exit(cli.Main(run)) }
