package main

// End-to-end tests of MPI programs under the real ccrun binary: an MPICH program built
// here with mpicc.mpich runs as one job through ccrun's PMI-1 server; an Open MPI one
// (mpicc.openmpi) is refused. They skip only when a compiler is missing; scripts/test.sh
// installs both (mpich, libmpich-dev, openmpi-bin, libopenmpi-dev) so CI runs them.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"
)

// mpiJob is the test program: MPI_Init, print the rank, MPI_Barrier, MPI_Finalize.
// "abort R CODE" makes rank R call MPI_Abort(MPI_COMM_WORLD, CODE) before the barrier;
// "exit R CODE" makes it _exit(CODE) there, inside MPI, without MPI_Finalize; "skip R
// CODE" makes it return CODE before MPI_Init. "wait [FILE]" makes every rank print how it
// reached PMI, and rank 0 read a line of its stdin (or of FILE, a FIFO), after MPI_Init
// and before the barrier.
const mpiJob = `#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
	int rank, size;
	if (argc == 4 && strcmp(argv[1], "skip") == 0 && atoi(getenv("PMI_RANK")) == atoi(argv[2]))
		return atoi(argv[3]);
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &size);
	printf("rank %d of %d\n", rank, size);
	fflush(stdout);
	if ((argc == 2 || argc == 3) && strcmp(argv[1], "wait") == 0) {
		char line[64];
		FILE *gate = stdin;
		printf("pmi of rank %d: PMI_FD=%s PMI_PORT=%s\n", rank,
			getenv("PMI_FD") ? getenv("PMI_FD") : "unset", getenv("PMI_PORT") ? getenv("PMI_PORT") : "unset");
		fflush(stdout);
		if (rank == 0 && argc == 3)
			gate = fopen(argv[2], "r"); /* a FIFO: blocks until the test opens it */
		if (rank == 0 && (!gate || !fgets(line, sizeof line, gate)))
			return 5;
	}
	if (argc == 4 && atoi(argv[2]) == rank) {
		if (strcmp(argv[1], "abort") == 0)
			MPI_Abort(MPI_COMM_WORLD, atoi(argv[3]));
		if (strcmp(argv[1], "exit") == 0)
			_exit(atoi(argv[3]));
	}
	MPI_Barrier(MPI_COMM_WORLD);
	MPI_Finalize();
	return 0;
}
`

// mpiProgram builds mpiJob with the compiler wrapper cc into dir, or skips the test when
// cc is not installed.
func mpiProgram(t *testing.T, cc, dir, name string) {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	if _, err := exec.LookPath(cc); err != nil {
		t.Skipf("%s not found: install mpich, libmpich-dev, openmpi-bin and libopenmpi-dev (scripts/test.sh does, as root)", cc)
	}
	src := filepath.Join(dir, name+".c")
	if err := os.WriteFile(src, []byte(mpiJob), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-o", filepath.Join(dir, name), src).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cc, err, out)
	}
}

// runIn runs the ccrun binary in dir and waits for it (a hang guard, not a speed limit).
func runIn(t *testing.T, dir string, args ...string) *job {
	t.Helper()
	bin, _ := binaries(t)
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	j := startJob(t, cmd)
	j.wait(t, 2*time.Minute)
	return j
}

// npFlags is -np N, with --oversubscribe when this machine has fewer CPUs.
func npFlags(n int) []string {
	args := []string{"-np", fmt.Sprint(n)}
	if runtime.NumCPU() < n {
		args = append(args, "--oversubscribe")
	}
	return args
}

func TestMPICHHello(t *testing.T) {
	dir := t.TempDir()
	mpiProgram(t, "mpicc.mpich", dir, "mpich_hello")
	j := runIn(t, dir, append(npFlags(4), "./mpich_hello")...)
	if j.code != 0 {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", j.code, j.out, j.err)
	}
	got := strings.Split(strings.TrimSpace(j.out.String()), "\n")
	sort.Strings(got)
	want := []string{"rank 0 of 4", "rank 1 of 4", "rank 2 of 4", "rank 3 of 4"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stdout %q, want %q", got, want)
	}
}

// TestMPICHFailures: MPI_Abort ends the job with its code, as under Hydra; a rank that
// dies inside MPI while the others wait in MPI_Barrier ends the job instead of hanging it.
func TestMPICHFailures(t *testing.T) {
	dir := t.TempDir()
	mpiProgram(t, "mpicc.mpich", dir, "mpich_job")
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"MPI_Abort", []string{"abort", "1", "7"}, 7, "rank 1 called MPI_Abort with exit code 7"},
		{"exit 0 without MPI_Finalize", []string{"exit", "2", "0"}, 1, "rank 2 closed its PMI connection without MPI_Finalize"},
		{"exit 3 inside MPI", []string{"exit", "0", "3"}, 3, "Exit code:  3"},
		{"exit 0 before MPI_Init", []string{"skip", "1", "0"}, 1, "rank 1 ended without entering the PMI barrier that rank"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := runIn(t, dir, append(npFlags(3), append([]string{"./mpich_job"}, tt.args...)...)...)
			if j.code != tt.code || !strings.Contains(j.err.String(), tt.stderr) {
				t.Errorf("exit %d, want %d; stderr should say %q:\n%s", j.code, tt.code, tt.stderr, j.err)
			}
		})
	}
}

// TestOpenMPIRefused: an Open MPI program would run as N singletons under ccrun; it is
// refused with one line and exit 2 before anything starts, unless --allow-singletons.
func TestOpenMPIRefused(t *testing.T) {
	dir := t.TempDir()
	mpiProgram(t, "mpicc.openmpi", dir, "ompi_hello")
	j := runIn(t, dir, "-np", "2", "./ompi_hello")
	want := "ccrun: ./ompi_hello is an Open MPI program (it links libmpi.so.40): ccrun serves MPICH's PMI-1, not Open MPI's PMIx"
	if j.code != 2 || !strings.HasPrefix(j.err.String(), want) || strings.Count(j.err.String(), "\n") != 1 || j.out.String() != "" {
		t.Errorf("exit %d, want 2 and one line starting %q; stdout %q, stderr:\n%s", j.code, want, j.out, j.err)
	}
	// Two Open MPI singletons starting at once race to create their session
	// directory's top (TMPDIR/ompi.HOST.UID) and one fails "File exists"
	// (Open MPI 4.1's orte_session_dir): give them a base of their own
	// with that directory already there.
	base := t.TempDir()
	host, _ := os.Hostname()
	for _, h := range []string{host, strings.Split(host, ".")[0]} {
		if err := os.MkdirAll(filepath.Join(base, fmt.Sprintf("ompi.%s.%d", h, os.Getuid())), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	j = runIn(t, dir, "-np", "2", "--allow-singletons", "-x", "OMPI_MCA_orte_tmpdir_base="+base, "./ompi_hello")
	if j.code != 0 || j.out.String() != "rank 0 of 1\nrank 0 of 1\n" {
		t.Errorf("--allow-singletons: exit %d, stdout %q, want two singletons; stderr:\n%s", j.code, j.out, j.err)
	}
}

// TestTestbedMPICH runs the MPICH program on two SSH hosts of the testbed, two ranks each,
// by slot and by node: remote ranks reach the PMI server at ccrun's end of their SSH
// connection, and PMI_process_mapping tells MPICH which ranks share a host.
func TestTestbedMPICH(t *testing.T) {
	tb := needTestbed(t)
	dir := t.TempDir() // the testbed hosts share this machine's file system
	mpiProgram(t, "mpicc.mpich", dir, "mpich_hello")
	hosts := fmt.Sprintf("%s:2,%s:2", tb.addr(1), tb.addr(2))
	for _, mapBy := range []string{"slot", "node"} {
		t.Run(mapBy, func(t *testing.T) {
			j := runIn(t, dir, "-H", hosts, "--ssh-config", tb.sshConfig, "--map-by", mapBy, "--tag-output", filepath.Join(dir, "mpich_hello"))
			if j.code != 0 {
				t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", j.code, j.out, j.err)
			}
			for r := range 4 {
				if want := fmt.Sprintf("[1,%d]<stdout>:rank %d of 4\n", r, r); !strings.Contains(j.out.String(), want) {
					t.Errorf("no %q in stdout:\n%s", want, j.out)
				}
			}
		})
	}
}
