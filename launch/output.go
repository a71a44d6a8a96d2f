package launch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
)

// maxLine is the longest line kept whole. A longer line is passed on in pieces of this
// size as they come: untagged, the pieces are written as they are, so the line arrives
// unchanged (another rank's line may land between two pieces); tagged (--tag-output, -l),
// each piece is printed as a line of its own, with its tag.
const maxLine = 64 << 10

// Output says where rank output goes and how it is labelled.
type Output struct {
	// Stdout and Stderr receive the ranks' streams (ccrun's own streams).
	Stdout, Stderr io.Writer
	// Tag prefixes each line with Open MPI's "[1,RANK]<stdout>:" or "<stderr>:".
	Tag bool
	// Label prefixes each line with Hydra's "[RANK] ".
	Label bool
	// Dir, when set, sends each rank's streams to DIR/1/rank.R/stdout and stderr instead
	// (Open MPI's --output-filename layout).
	Dir string
	// Status says that Stderr is a terminal on which ccrun keeps one status line: what a
	// rank writes to its stderr after a carriage return, up to the next carriage return or
	// newline, is drawn as that line (a progress line redrawn in place), erased before
	// every forwarded line and drawn again after it. It applies only to untagged output
	// to the terminal (not with Tag, Label or Dir); the ranks are told by
	// CC_PROGRESS_TERMINAL=1 (see UsesStatus).
	Status bool
}

// UsesStatus says whether o keeps a status line (Status, untagged, not to files).
func (o Output) UsesStatus() bool { return o.Status && !o.Tag && !o.Label && o.Dir == "" }

// prefix returns the label of one rank's stream.
func (o Output) prefix(rank int, stream string) string {
	switch {
	case o.Tag:
		return "[1," + strconv.Itoa(rank) + "]<" + stream + ">:"
	case o.Label:
		return "[" + strconv.Itoa(rank) + "] "
	}
	return ""
}

// streams builds the forwarding of every rank's stdout and stderr.
type streams struct {
	out, err *lockedWriter
	opt      Output
	status   *statusLine // nil: no status line
}

// newStreams forwards to o's streams; closed is called (once per stream) when one of them
// turns out to be a closed pipe.
func newStreams(o Output, closed func(error)) *streams {
	s := &streams{
		out: &lockedWriter{w: o.Stdout, name: "stdout", closed: closed},
		err: &lockedWriter{w: o.Stderr, name: "stderr", closed: closed},
		opt: o,
	}
	if o.UsesStatus() && o.Stderr != nil {
		s.status = &statusLine{w: o.Stderr, owner: -1}
		s.out.status, s.err.status = s.status, s.status
	}
	return s
}

// rankWriters returns the writers for one rank's stdout and stderr; close them when the
// rank's streams have ended, to flush an unterminated last line.
func (s *streams) rankWriters(rank int) (stdout, stderr io.WriteCloser, err error) {
	if s.opt.Dir != "" {
		dir := filepath.Join(s.opt.Dir, "1", "rank."+strconv.Itoa(rank))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("--output-filename: %w", err)
		}
		o, err := os.Create(filepath.Join(dir, "stdout"))
		if err != nil {
			return nil, nil, fmt.Errorf("--output-filename: %w", err)
		}
		e, err := os.Create(filepath.Join(dir, "stderr"))
		if err != nil {
			o.Close()
			return nil, nil, fmt.Errorf("--output-filename: %w", err)
		}
		return o, e, nil
	}
	return &lineWriter{dst: s.out, prefix: []byte(s.opt.prefix(rank, "stdout"))},
		&lineWriter{dst: s.err, prefix: []byte(s.opt.prefix(rank, "stderr")), status: s.status, rank: rank}, nil
}

// lockedWriter writes whole lines from many ranks without interleaving them. A write error
// is remembered and later output dropped, so ranks never block on it; a closed pipe (EPIPE:
// ccrun ... | head) is also reported to closed, which ends the job.
type lockedWriter struct {
	mu     sync.Mutex
	w      io.Writer
	name   string
	closed func(error)
	broken bool
	status *statusLine // erased around each write; nil: none
}

func (l *lockedWriter) writeLine(prefix, line []byte) {
	l.write(prefix, line, true)
}

// write writes prefix and text, and a newline if whole and text lacks one.
func (l *lockedWriter) write(prefix, text []byte, whole bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.broken || l.w == nil {
		return
	}
	buf := make([]byte, 0, len(prefix)+len(text)+1)
	buf = append(append(buf, prefix...), text...)
	if whole && (len(text) == 0 || text[len(text)-1] != '\n') {
		buf = append(buf, '\n')
	}
	if l.status != nil {
		l.status.mu.Lock()
		defer l.status.mu.Unlock()
		l.status.erase()
		defer l.status.draw()
	}
	if _, err := l.w.Write(buf); err != nil {
		l.broken = true
		if errors.Is(err, syscall.EPIPE) && l.closed != nil {
			l.closed(fmt.Errorf("nothing reads ccrun's %s any more: %w", l.name, syscall.EPIPE))
		}
	}
}

// lineWriter cuts one rank's stream into lines and hands each whole line, prefixed, to dst.
type lineWriter struct {
	dst    *lockedWriter
	prefix []byte
	buf    []byte
	// midLine is set once an untagged piece of a long line has been written: the rest of
	// the line follows without a prefix.
	midLine bool
	// status, when set, takes what follows a carriage return, up to the next return or
	// newline, as rank's status line (stext, while inStatus).
	status   *statusLine
	rank     int
	inStatus bool
	stext    []byte
}

// Write never fails: output that cannot be shown is dropped, not pushed back to the rank.
func (w *lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	if w.status == nil {
		w.lines(p)
		return n, nil
	}
	for len(p) > 0 {
		if w.inStatus {
			i := bytes.IndexAny(p, "\r\n")
			if i < 0 {
				w.stext = append(w.stext, p...)
				w.status.set(w.rank, w.stext)
				break
			}
			if p[i] == '\n' { // the text after the return is a line after all
				line := append(w.stext, p[:i+1]...)
				w.inStatus, w.stext = false, nil
				w.status.clear(w.rank)
				w.lines(line)
			} else { // another return: the line is redrawn
				w.stext = append(w.stext[:0], p[:i]...)
				w.status.set(w.rank, w.stext)
				w.stext = w.stext[:0]
			}
			p = p[i+1:]
			continue
		}
		i := bytes.IndexByte(p, '\r')
		if i < 0 {
			w.lines(p)
			break
		}
		if i+1 < len(p) && p[i+1] == '\n' { // CRLF ends a line
			w.lines(p[:i+2])
			p = p[i+2:]
			continue
		}
		w.lines(p[:i]) // the start of a line that the return overwrites, kept for a newline
		w.inStatus, w.stext = true, w.stext[:0]
		p = p[i+1:]
	}
	return n, nil
}

// lines cuts p into lines and hands each whole line to dst, keeping a partial one.
func (w *lineWriter) lines(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			w.buf = append(w.buf, p...)
			for len(w.buf) >= maxLine {
				if len(w.prefix) == 0 {
					w.dst.write(nil, w.buf[:maxLine], false) // untagged: pass it on as it is
					w.midLine = true
				} else {
					w.dst.writeLine(w.prefix, w.buf[:maxLine])
				}
				w.buf = append(w.buf[:0], w.buf[maxLine:]...)
			}
			break
		}
		if len(w.buf) > 0 {
			w.buf = append(w.buf, p[:i+1]...)
			w.dst.writeLine(w.prefix, w.buf)
			w.buf = w.buf[:0]
		} else {
			w.dst.writeLine(w.prefix, p[:i+1])
		}
		w.midLine = false
		p = p[i+1:]
	}
}

// Close prints an unterminated last line, ending it with a newline.
func (w *lineWriter) Close() error {
	if w.status != nil {
		w.status.clear(w.rank)
		w.inStatus, w.stext = false, nil
	}
	if len(w.buf) > 0 || w.midLine {
		w.dst.writeLine(w.prefix, w.buf)
		w.buf, w.midLine = nil, false
	}
	return nil
}

// statusLine is the one line ccrun keeps at the bottom of its terminal for a rank's
// progress line. The last rank to write one owns it.
type statusLine struct {
	mu    sync.Mutex
	w     io.Writer
	text  []byte
	owner int // the rank whose line it is; -1: none
	shown bool
}

// set makes text rank's status line and draws it ("" erases it).
func (s *statusLine) set(rank int, text []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.erase()
	s.text, s.owner = append(s.text[:0], text...), rank
	s.draw()
}

// clear removes rank's status line, if the line is rank's.
func (s *statusLine) clear(rank int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.owner != rank {
		return
	}
	s.erase()
	s.text, s.owner = s.text[:0], -1
}

// erase removes the drawn line (s.mu held).
func (s *statusLine) erase() {
	if s.shown {
		_, _ = s.w.Write([]byte("\r\x1b[K"))
		s.shown = false
	}
}

// draw shows the line again, if there is one (s.mu held).
func (s *statusLine) draw() {
	if s.owner >= 0 && len(bytes.TrimSpace(s.text)) > 0 {
		_, _ = s.w.Write(append([]byte("\r"), s.text...))
		s.shown = true
	}
}
