package pmi

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Flavor is the MPI a program was built with, as far as its ELF header tells.
type Flavor int

// The flavors Inspect tells apart.
const (
	// Unknown: not an ELF file (a script, a Python program), so nothing can be said.
	Unknown Flavor = iota
	// NoMPI: an ELF program that links no MPI library (or links one statically).
	NoMPI
	// MPICH: links the MPICH ABI (libmpich.so, libmpi.so.12: MPICH, Intel MPI, MVAPICH),
	// which speaks PMI-1 to its launcher: ccrun serves it.
	MPICH
	// OpenMPI: links Open MPI (libmpi.so.40, libopen-rte, libopen-pal) or PMIx, which
	// ccrun does not serve: its ranks would each run as a 1-rank MPI job.
	OpenMPI
)

func (f Flavor) String() string {
	switch f {
	case NoMPI:
		return "no MPI"
	case MPICH:
		return "MPICH"
	case OpenMPI:
		return "Open MPI"
	}
	return "unknown"
}

// libraries maps the start of a DT_NEEDED name to the flavor it implies; the first match
// wins, so libmpi.so.12 (the MPICH ABI) comes before the libmpi.so. of Open MPI.
var libraries = []struct {
	prefix string
	flavor Flavor
}{
	{"libmpich", MPICH},         // Debian's MPICH: libmpich.so.12, libmpichfort, libmpichcxx
	{"libmpi.so.12", MPICH},     // the MPICH ABI: upstream MPICH, Intel MPI, MVAPICH2
	{"libmpifort.so.12", MPICH}, // its Fortran and C++ bindings
	{"libmpicxx.so.12", MPICH},
	{"libmpi.so.", OpenMPI}, // libmpi.so.40 (Open MPI 3 to 5), libmpi.so.20 (2.x)
	{"libmpi_mpifh.so", OpenMPI},
	{"libmpi_usempi", OpenMPI},
	{"libmpi_cxx.so", OpenMPI},
	{"libopen-rte.so", OpenMPI},
	{"libopen-pal.so", OpenMPI},
	{"libpmix.so", OpenMPI},
}

// Inspect reads the dynamic section of the program at path and returns its flavor and the
// library that decided it. Only the program's own DT_NEEDED entries count, not those of
// the libraries it loads. A file that is not ELF is Unknown with no error.
func Inspect(path string) (Flavor, string, error) {
	f, err := os.Open(path)
	if err != nil {
		return Unknown, "", err
	}
	defer f.Close()
	var magic [4]byte
	if _, err := io.ReadFull(f, magic[:]); err != nil || string(magic[:]) != elf.ELFMAG {
		return Unknown, "", nil
	}
	ef, err := elf.NewFile(f)
	if err != nil {
		return Unknown, "", fmt.Errorf("%s: %w", path, err)
	}
	libs, err := ef.ImportedLibraries()
	if err != nil && !errors.Is(err, elf.ErrNoSymbols) {
		return Unknown, "", fmt.Errorf("%s: %w", path, err)
	}
	for _, lib := range libs {
		for _, l := range libraries {
			if strings.HasPrefix(lib, l.prefix) {
				return l.flavor, lib, nil
			}
		}
	}
	return NoMPI, "", nil
}
