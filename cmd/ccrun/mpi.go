package main

import (
	"fmt"

	"github.com/seed-760dd1f1/cc/launch"
	"github.com/seed-760dd1f1/cc/launch/pmi"
)

// checkMPI refuses a program built for an MPI whose launcher protocol ccrun does not
// serve (Open MPI's PMIx): each of its ranks would run as a separate 1-rank MPI job and
// exit 0 (audit bug 7). It reads the program's ELF header where local ranks will find it
// (for a remote-only job, a copy at the same path here, if any); a script, a Python
// program or a program not present here cannot be inspected and runs. One rank is a
// correct singleton, so it runs; --allow-singletons runs the rest anyway.
func checkMPI(o *Options, argv []string, nranks int) error {
	if o.AllowSingletons || nranks < 2 {
		return nil
	}
	path, err := launch.LookProgram(argv[0], o.Wdir)
	if err != nil {
		return nil // launch.Run says what is wrong, or the program is on the remote hosts only
	}
	flavor, lib, err := pmi.Inspect(path)
	if err != nil || flavor != pmi.OpenMPI {
		return nil
	}
	return usagef("%s is an Open MPI program (it links %s): ccrun serves MPICH's PMI-1, not Open MPI's PMIx, so each of its %d ranks would run alone as a 1-rank MPI job; run it with Open MPI's mpirun, rebuild it with mpicc.mpich, or add --allow-singletons to run it anyway",
		argv[0], lib, nranks)
}

// speaksPMI reports whether the job gets a PMI-1 server, and why in words for -v: with
// --pmi, or when the program links the MPICH ABI (read where local ranks will find it, as
// checkMPI does). Any other program (no MPI, Open MPI, a script, a program not present
// here) gets none: nothing listens for it and its ranks get no PMI_FD or PMI_PORT.
func speaksPMI(o *Options, argv []string) (bool, string) {
	if o.PMI {
		return true, "--pmi"
	}
	path, err := launch.LookProgram(argv[0], o.Wdir)
	if err != nil {
		return false, "the program is not on this machine to inspect; --pmi serves an MPICH program anyway"
	}
	flavor, _, err := pmi.Inspect(path)
	switch {
	case err != nil:
		return false, err.Error()
	case flavor == pmi.MPICH:
		return true, "an MPICH program"
	}
	return false, fmt.Sprintf("%s is %s; --pmi serves a script or wrapper that starts an MPICH program", argv[0], flavorName(flavor))
}

// flavorName reads "not an ELF program", "no MPI program", "an Open MPI program".
func flavorName(f pmi.Flavor) string {
	switch f {
	case pmi.Unknown:
		return "not an ELF program"
	case pmi.NoMPI:
		return "no MPI program"
	}
	return "an " + f.String() + " program"
}
