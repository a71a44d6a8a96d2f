package pmi

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestInspectNotMPI(t *testing.T) {
	script := filepath.Join(t.TempDir(), "run.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec ./app\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		path string
		want Flavor
	}{
		{"/bin/sh", NoMPI},
		{script, Unknown},
	} {
		got, lib, err := Inspect(tt.path)
		if err != nil || got != tt.want || lib != "" {
			t.Errorf("Inspect(%s) = %v, %q, %v; want %v", tt.path, got, lib, err, tt.want)
		}
	}
	if _, _, err := Inspect(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("Inspect of a missing file: no error")
	}
}

// TestInspectMPI builds the same program with MPICH's and Open MPI's compiler wrappers.
func TestInspectMPI(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "hello.c")
	if err := os.WriteFile(src, []byte("#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); return MPI_Finalize(); }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		cc      string
		want    Flavor
		wantLib string
	}{
		{"mpicc.mpich", MPICH, "libmpich.so.12"},
		{"mpicc.openmpi", OpenMPI, "libmpi.so.40"},
	} {
		t.Run(tt.cc, func(t *testing.T) {
			if _, err := exec.LookPath(tt.cc); err != nil {
				t.Skipf("%s not found: install mpich, libmpich-dev, openmpi-bin and libopenmpi-dev (scripts/test.sh does, as root)", tt.cc)
			}
			bin := filepath.Join(dir, tt.cc)
			if out, err := exec.Command(tt.cc, "-o", bin, src).CombinedOutput(); err != nil {
				t.Fatalf("%s: %v\n%s", tt.cc, err, out)
			}
			got, lib, err := Inspect(bin)
			if err != nil || got != tt.want || lib != tt.wantLib {
				t.Errorf("Inspect = %v, %q, %v; want %v, %q", got, lib, err, tt.want, tt.wantLib)
			}
		})
	}
}
