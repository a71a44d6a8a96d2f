package agent

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/seed-760dd1f1/cc/runtime/fuzzcheck"
)

// FuzzFrames reads any stream as ccrun and an agent read each other's: the
// frames read re-encode to the bytes they came from, a data frame that
// decodes re-encodes to its frame, every error is one line, and a frame's
// memory grows with its bytes rather than with the length it claims.
func FuzzFrames(f *testing.F) {
	var b bytes.Buffer
	fw := &frameWriter{w: &b}
	fw.json(tHello, helloMsg{Magic: magic, Version: Version, Host: "tb1", Pid: 7, BootID: "5a3c", KeepaliveMs: 1000})
	fw.json(tStart, startMsg{Rank: 1, Argv: []string{"cc-perf", "-b", "8"}, Env: []string{"A=1"}, Dir: "/tmp", Stdin: true})
	fw.json(tStarted, startedMsg{Rank: 1, Pid: 42})
	fw.data(tStdin, 1, 0, []byte("input\n"))
	fw.data(tStdinAck, 1, 0, []byte{0, 0, 0, 6})
	fw.data(tStdinEOF, 1, 0, nil)
	fw.data(tOutput, 1, streamStdout, []byte("out\n"))
	fw.data(tOutput, -1, streamStderr, []byte("err\n"))
	fw.json(tSignal, signalMsg{Rank: 1, Signal: 15})
	fw.json(tExit, exitMsg{Rank: 1, Code: 2})
	fw.write(tPing)
	f.Add(b.Bytes())
	f.Add([]byte{0x00, 0x10, 0x00, 0x00, tOutput, 0, 0, 0, 1, 1}) // claims 1 MiB, holds 5 bytes
	f.Add([]byte("Last login: Fri Nov 27 06:00:00 2026\n"))
	f.Add(frame(tStart, `{"rank":1,"argv":["a"],"env":["\n"]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		rd := fuzzcheck.NewReader(in)
		rd.Chunk = 4096
		fr := newFrameReader(rd)
		var again bytes.Buffer
		fw := &frameWriter{w: &again}
		for {
			typ, p, err := fr.next()
			rd.Bounded(t, 64<<10)
			if err != nil {
				if err != io.EOF && !errors.Is(err, ErrBadFrame) {
					t.Fatalf("error %v is neither EOF nor a bad frame", err)
				}
				fuzzcheck.OneLine(t, err)
				break
			}
			start := again.Len()
			fw.write(typ, p)
			checkPayload(t, typ, p, again.Bytes()[start:])
		}
		if !bytes.HasPrefix(in, again.Bytes()) {
			t.Fatalf("frames re-encode as %x, not a prefix of the input %x", again.Bytes(), in)
		}
	})
}

// checkPayload decodes a frame's payload as its type says; a data payload
// that decodes must re-encode to frame.
func checkPayload(t *testing.T, typ byte, p, frame []byte) {
	t.Helper()
	var msg any
	switch typ {
	case tOutput, tStdin, tStdinEOF, tStdinAck:
		withStream := typ == tOutput
		rank, stream, b, err := decodeData(typ, p, withStream)
		if err != nil {
			fuzzcheck.OneLine(t, err)
			return
		}
		var re bytes.Buffer
		(&frameWriter{w: &re}).data(typ, rank, stream, b)
		if !bytes.Equal(re.Bytes(), frame) {
			t.Fatalf("data frame %x decodes to rank %d stream %d %q, which encodes as %x", frame, rank, stream, b, re.Bytes())
		}
		return
	case tHello:
		msg = &helloMsg{}
	case tStart:
		msg = &startMsg{}
	case tStarted:
		msg = &startedMsg{}
	case tSignal:
		msg = &signalMsg{}
	case tExit:
		msg = &exitMsg{}
	default:
		return
	}
	fuzzcheck.OneLine(t, decodeJSON(typ, p, msg))
}
