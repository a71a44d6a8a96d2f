package launch

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestLineWriterPrefixes(t *testing.T) {
	tests := []struct {
		name string
		opt  Output
		want string
	}{
		{"plain", Output{}, "hello\nworld\npartial\n"},
		{"tag-output", Output{Tag: true}, "[1,3]<stdout>:hello\n[1,3]<stdout>:world\n[1,3]<stdout>:partial\n"},
		{"label", Output{Label: true}, "[3] hello\n[3] world\n[3] partial\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			tt.opt.Stdout = &out
			w, _, err := newStreams(tt.opt, nil).rankWriters(3)
			if err != nil {
				t.Fatal(err)
			}
			for _, chunk := range []string{"hel", "lo\nwor", "ld\n", "partial"} {
				w.Write([]byte(chunk))
			}
			w.Close()
			if got := out.String(); got != tt.want {
				t.Errorf("got %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestLineWriterStderrTag(t *testing.T) {
	var out, errb bytes.Buffer
	_, e, _ := newStreams(Output{Stdout: &out, Stderr: &errb, Tag: true}, nil).rankWriters(12)
	e.Write([]byte("oops\n"))
	if got, want := errb.String(), "[1,12]<stderr>:oops\n"; got != want {
		t.Errorf("got %q want %q", got, want)
	}
	if out.Len() != 0 {
		t.Errorf("stdout got %q, want nothing", out.String())
	}
}

func TestLineWriterLongLine(t *testing.T) {
	var out bytes.Buffer
	w, _, _ := newStreams(Output{Stdout: &out, Label: true}, nil).rankWriters(0)
	w.Write(bytes.Repeat([]byte("x"), maxLine+10))
	w.Write([]byte("\n"))
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 || len(lines[0]) != maxLine+4 || lines[1] != "[0] "+strings.Repeat("x", 10) {
		t.Errorf("got %d lines of lengths %d, want a %d-byte piece and the 10-byte rest", len(lines), len(lines[0]), maxLine+4)
	}
}

// TestLineWriterLongLineUntagged: without a tag, a line of any length arrives unchanged,
// in several writes; an unterminated one gets its newline at the end.
func TestLineWriterLongLineUntagged(t *testing.T) {
	var out bytes.Buffer
	w, _, _ := newStreams(Output{Stdout: &out}, nil).rankWriters(0)
	long := strings.Repeat("y", 3*maxLine+5)
	for _, piece := range []string{long[:7], long[7 : 2*maxLine], long[2*maxLine:] + "\nshort\n", long} {
		w.Write([]byte(piece))
	}
	w.Close()
	if got, want := out.String(), long+"\nshort\n"+long+"\n"; got != want {
		t.Errorf("got %d bytes with %d newlines, want %d bytes with 3", len(got), strings.Count(got, "\n"), len(want))
	}
}

// TestNoInterleaving writes long lines from many ranks at once, in odd-sized pieces, and
// checks every printed line is one rank's line, whole.
func TestNoInterleaving(t *testing.T) {
	var out bytes.Buffer
	s := newStreams(Output{Stdout: &out, Label: true}, nil)
	const ranks, lines = 8, 200
	var wg sync.WaitGroup
	for r := range ranks {
		w, _, _ := s.rankWriters(r)
		wg.Go(func() {
			defer w.Close()
			line := fmt.Sprintf("%s\n", strings.Repeat(fmt.Sprint(r), 300))
			all := strings.Repeat(line, lines)
			for i := 0; i < len(all); i += 7 + r {
				w.Write([]byte(all[i:min(len(all), i+7+r)]))
			}
		})
	}
	wg.Wait()
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(got) != ranks*lines {
		t.Fatalf("got %d lines, want %d", len(got), ranks*lines)
	}
	for _, l := range got {
		var r int
		if _, err := fmt.Sscanf(l, "[%d] ", &r); err != nil || l != fmt.Sprintf("[%d] %s", r, strings.Repeat(fmt.Sprint(r), 300)) {
			t.Fatalf("mixed line: %.80q", l)
		}
	}
}

func TestOutputDir(t *testing.T) {
	dir := t.TempDir()
	o, e, err := newStreams(Output{Dir: dir, Tag: true}, nil).rankWriters(2)
	if err != nil {
		t.Fatal(err)
	}
	o.Write([]byte("out\n"))
	e.Write([]byte("err"))
	o.Close()
	e.Close()
	for name, want := range map[string]string{"stdout": "out\n", "stderr": "err"} {
		b, err := os.ReadFile(filepath.Join(dir, "1", "rank.2", name))
		if err != nil || string(b) != want {
			t.Errorf("%s: got %q, %v; want %q", name, b, err, want)
		}
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	f.n++
	return 0, os.ErrClosed
}

func TestBrokenOutputDropsQuietly(t *testing.T) {
	fw := &failWriter{}
	w, _, _ := newStreams(Output{Stdout: fw}, nil).rankWriters(0)
	for range 3 {
		if n, err := w.Write([]byte("x\n")); n != 2 || err != nil {
			t.Fatalf("Write = %d, %v; want 2, nil", n, err)
		}
	}
	if fw.n != 1 {
		t.Errorf("underlying writes = %d, want 1 (then dropped)", fw.n)
	}
}

// TestStatusLine: with Status, what a rank writes to stderr after a carriage
// return is one status line on ccrun's terminal, erased before every other
// forwarded line and drawn again after it; a newline turns it back into an
// ordinary line; CRLF line ends and tagged output are untouched.
func TestStatusLine(t *testing.T) {
	var term bytes.Buffer // stdout and stderr on one terminal
	s := newStreams(Output{Stdout: &term, Stderr: &term, Status: true}, nil)
	_, e0, _ := s.rankWriters(0)
	o1, _, _ := s.rankWriters(1)
	for _, step := range []struct {
		w    io.Writer
		text string
	}{
		{e0, "\r   \r\rtune: 1/4"},
		{o1, "row\n"},
		{e0, "\r  \r\rtune: 2/4"},
		{e0, "\r     \r"},
		{e0, "# done\n"},
		{o1, "crlf\r\n"},
	} {
		step.w.Write([]byte(step.text))
	}
	e0.Close()
	want := "\rtune: 1/4" + "\r\x1b[K" + "row\n" + "\rtune: 1/4" +
		"\r\x1b[K" + "\rtune: 2/4" + "\r\x1b[K" + "# done\n" + "crlf\r\n"
	if got := term.String(); got != want {
		t.Errorf("terminal got\n%q\nwant\n%q", got, want)
	}

	// A return inside a line, then a newline: the line is kept whole.
	term.Reset()
	_, e2, _ := newStreams(Output{Stdout: &term, Stderr: &term, Status: true}, nil).rankWriters(2)
	e2.Write([]byte("hello\r"))
	e2.Write([]byte("\n"))
	if got := term.String(); got != "hello\n" {
		t.Errorf("a split CRLF: got %q, want %q", got, "hello\n")
	}

	for _, o := range []Output{{Status: true, Tag: true}, {Status: true, Label: true}, {Status: false}} {
		term.Reset()
		o.Stdout, o.Stderr = &term, &term
		_, e, _ := newStreams(o, nil).rankWriters(0)
		e.Write([]byte("\rtune: 1/4\r"))
		e.Close()
		if got := term.String(); strings.Contains(got, "\x1b[K") || !strings.Contains(got, "tune: 1/4\r\n") {
			t.Errorf("%+v: got %q, want the text forwarded as a line, no status", o, got)
		}
	}
}
