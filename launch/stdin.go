package launch

import (
	"fmt"
	"io"
	"strconv"
	"sync"
)

// StdinTarget says which ranks read ccrun's stdin (--stdin): a rank, StdinAll or
// StdinNone. The others read /dev/null.
type StdinTarget int

// The targets that are not one rank.
const (
	StdinAll  StdinTarget = -1 // every rank gets a copy (srun's default)
	StdinNone StdinTarget = -2 // every rank reads /dev/null
)

// ParseStdinTarget reads --stdin: "all", "none" or a rank number (mpirun's default is 0).
func ParseStdinTarget(s string) (StdinTarget, error) {
	switch s {
	case "all":
		return StdinAll, nil
	case "none":
		return StdinNone, nil
	}
	r, err := strconv.Atoi(s)
	if err != nil || r < 0 {
		return 0, fmt.Errorf("bad --stdin %q: want all, none or a rank number (0 is the default)", s)
	}
	return StdinTarget(r), nil
}

// String is the --stdin spelling of t.
func (t StdinTarget) String() string {
	switch t {
	case StdinAll:
		return "all"
	case StdinNone:
		return "none"
	}
	return strconv.Itoa(int(t))
}

// check reports a target rank the job does not have.
func (t StdinTarget) check(nranks int) error {
	if int(t) >= nranks {
		return fmt.Errorf("bad --stdin %d: the job has %d rank(s), 0-%d", int(t), nranks, nranks-1)
	}
	return nil
}

// stdinFan copies ccrun's stdin to the ranks that read it, one io.Pipe per rank: a chunk
// goes to every rank still reading before the next one is read, so the slowest reader
// sets the pace (nothing piles up in ccrun). A rank whose pipe is closed (it ended, or
// never started) drops out. At the end of the input every pipe is closed, which the
// rank reads as EOF.
//
// Goroutines: one copy loop; it ends when the input ends or no rank reads any more. A
// read of the input that never returns (a terminal nobody types into) keeps it blocked
// after the job; Run does not wait for it.
type stdinFan struct {
	mu      sync.Mutex
	readers map[int]*io.PipeReader // handed to the ranks' specs
	writers map[int]*io.PipeWriter
}

// newStdinFan prepares pipes for the ranks t names among nranks; with no input (in nil)
// or StdinNone it holds none.
func newStdinFan(in io.Reader, t StdinTarget, nranks int) *stdinFan {
	f := &stdinFan{readers: map[int]*io.PipeReader{}, writers: map[int]*io.PipeWriter{}}
	if in == nil || t == StdinNone {
		return f
	}
	for r := range nranks {
		if t == StdinAll || int(t) == r {
			f.readers[r], f.writers[r] = io.Pipe()
		}
	}
	if len(f.writers) > 0 {
		go f.copy(in)
	}
	return f
}

// reader returns rank r's stdin, or nil (/dev/null).
func (f *stdinFan) reader(r int) io.Reader {
	f.mu.Lock()
	defer f.mu.Unlock()
	if pr, ok := f.readers[r]; ok {
		return pr
	}
	return nil
}

// drop closes rank r's pipe: the rank has ended or will not start.
func (f *stdinFan) drop(r int) {
	f.mu.Lock()
	pr := f.readers[r]
	f.mu.Unlock()
	if pr != nil {
		pr.Close()
	}
}

func (f *stdinFan) copy(in io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := in.Read(buf)
		if n > 0 && !f.write(buf[:n]) {
			return
		}
		if err != nil {
			f.mu.Lock()
			for _, w := range f.writers {
				w.Close()
			}
			f.mu.Unlock()
			return
		}
	}
}

// write hands b to every rank still reading; false when none is left.
func (f *stdinFan) write(b []byte) bool {
	f.mu.Lock()
	ws := make(map[int]*io.PipeWriter, len(f.writers))
	for r, w := range f.writers {
		ws[r] = w
	}
	f.mu.Unlock()
	for r, w := range ws {
		if _, err := w.Write(b); err != nil {
			f.mu.Lock()
			delete(f.writers, r)
			f.mu.Unlock()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.writers) > 0
}
