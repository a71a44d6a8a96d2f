package report

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Output is a result file (-J, -Z): its name is reserved when the run starts
// and its content written when the run ends, in one atomic step. Like
// nccl-tests, an existing file is never replaced: the next free name of
// path, path.0, path.1, ... is used.
type Output struct {
	Path string // the name the content is meant to get (printed at the start)
	want string // the path the user gave
}

// maxProbe bounds the search for a free name.
const maxProbe = 1000

// Reserve checks that a file can be created next to path and picks the
// first free name. It creates nothing but a short-lived probe file, so a run
// that fails leaves no partial output. The error names the path.
func Reserve(path string) (*Output, error) {
	dir := filepath.Dir(path)
	probe, err := os.CreateTemp(dir, ".cc-perf-probe-*")
	if err != nil {
		return nil, fmt.Errorf("cannot write %q: %w", path, unwrapPath(err))
	}
	probe.Close()
	os.Remove(probe.Name())
	o := &Output{want: path}
	name, err := o.free()
	if err != nil {
		return nil, err
	}
	o.Path = name
	return o, nil
}

// free returns the first name among want, want.0, want.1 ... that does not exist.
func (o *Output) free() (string, error) {
	for i := -1; i < maxProbe; i++ {
		name := o.want
		if i >= 0 {
			name += "." + strconv.Itoa(i)
		}
		if _, err := os.Lstat(name); errors.Is(err, fs.ErrNotExist) {
			return name, nil
		}
	}
	return "", fmt.Errorf("cannot write %q: %s .. %s.%d all exist", o.want, o.want, o.want, maxProbe-1)
}

// Commit writes data under the reserved name (or the next free one, if that
// has been taken meanwhile) without ever exposing a partial file: the data
// goes to a temporary file that is then hard-linked into place, which fails
// rather than replace an existing file. It returns the name used.
func (o *Output) Commit(data []byte) (string, error) {
	tmp, err := createTemp(filepath.Dir(o.want))
	if err != nil {
		return "", fmt.Errorf("write %q: %w", o.Path, unwrapPath(err))
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write %q: %w", o.Path, unwrapPath(err))
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("write %q: %w", o.Path, unwrapPath(err))
	}
	name := o.Path
	for i := 0; i < maxProbe; i++ {
		err := os.Link(tmp.Name(), name)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", fmt.Errorf("write %q: %w", name, unwrapPath(err))
		}
		if name, err = o.free(); err != nil {
			return "", err
		}
	}
	return "", fmt.Errorf("write %q: no free name", o.want)
}

// createTemp creates a new file in dir with the permissions a plain create
// gets (0666 less the umask, unlike os.CreateTemp's 0600).
func createTemp(dir string) (*os.File, error) {
	var err error
	for i := 0; i < 100; i++ {
		name := filepath.Join(dir, fmt.Sprintf(".cc-perf-%d-%d", os.Getpid(), rand.Uint64()))
		var f *os.File
		f, err = os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
		if err == nil || !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
	return nil, err
}

// unwrapPath drops the *PathError wrapper (whose path is a probe file's)
// and keeps the reason, e.g. "permission denied".
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// Kind is the format of an output file.
type Kind int

// The output formats.
const (
	KindJSON Kind = iota + 1
	KindCSV
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
