package report

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
)

// Output is a result file (-J, -Z): created when the run starts, under the
// name printed then, and written row by row as the run goes ([JSON], [CSV]).
// Like nccl-tests, an existing file is never replaced: the first of path,
// path.0, path.1 ... that does not exist is created.
type Output struct {
	Path string // the name created
	f    *os.File
}

// maxProbe bounds the search for a free name.
const maxProbe = 1000

// Create creates the first free name among path, path.0, path.1 ... (each
// with O_EXCL, so a name taken meanwhile is skipped, not replaced), with
// the permissions a plain create gets. The error names the path.
func Create(path string) (*Output, error) {
	for i := -1; i < maxProbe; i++ {
		name := path
		if i >= 0 {
			name += "." + strconv.Itoa(i)
		}
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if err == nil {
			return &Output{Path: name, f: f}, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("cannot write %q: %w", name, unwrapPath(err))
		}
	}
	return nil, fmt.Errorf("cannot write %q: %s .. %s.%d all exist", path, path, path, maxProbe-1)
}

// Write appends p (CSV rows).
func (o *Output) Write(p []byte) (int, error) { return o.f.Write(p) }

// WriteAt writes p at offset off (JSON rows, each over the closing of the
// document before it).
func (o *Output) WriteAt(p []byte, off int64) (int, error) { return o.f.WriteAt(p, off) }

// Close closes the file.
func (o *Output) Close() error { return o.f.Close() }

// Remove closes and removes the file, for a run that stops before it
// starts (another file could not be created).
func (o *Output) Remove() {
	o.f.Close()
	os.Remove(o.Path)
}

// unwrapPath drops the *PathError wrapper and keeps the reason, e.g.
// "permission denied": the caller names the path.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ResultFile is the writer of a result file's format, [JSON] or [CSV]: it
// gets rank 0's records as the run goes and writes them to the file at
// once, then the end of a finished run (End) or of a failed one (Abort).
type ResultFile interface {
	Devices(ds []bench.Device)
	Row(r bench.Result)
	End(f Footer, end time.Time)
	// Abort ends the file of a run stopped by errs (the failure report's
	// lines).
	Abort(errs []string, end time.Time)
	// Err returns the first write error.
	Err() error
}

var (
	_ ResultFile = (*JSON)(nil)
	_ ResultFile = (*CSV)(nil)
	_ ResultFile = (*Reporter)(nil)
)

// Kind is the format of an output file.
type Kind int

// The output formats.
const (
	KindJSON         Kind = iota + 1 // nccl-tests' -J JSON document
	KindCSV                          // the old rccl-tests' CSV (-x FILE -Z csv)
	KindReporterCSV                  // current rccl-tests' -X FILE -Z csv
	KindReporterJSON                 // current rccl-tests' -X FILE -Z json
)

// KindOf infers the format from the file name's extension (.json or .csv,
// any case), as nccl-tests infers JSON from ".json".
func KindOf(path string) (Kind, bool) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		return KindJSON, true
	case ".csv":
		return KindCSV, true
	}
	return 0, false
}
