package agent

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Version is the protocol version; both ends must speak the same one.
const Version = 1

// magic names the protocol in both hellos: a stream that does not start with a hello
// carrying it is not an agent.
const magic = "ccrun-agent"

// A frame is a 4-byte big-endian length n (of what follows), a 1-byte type and n-1 bytes
// of payload. Control messages carry JSON; data messages carry a 4-byte rank (and for
// output a 1-byte stream) before the bytes.
//
//	00 00 00 0c  05  00 00 00 03  01  68 69 0a   output of rank 3, stderr, "hi\n"
//	len 12       typ rank         stream data
const (
	maxFrame  = 1 << 20 // bound on n: a length above it is not a frame (a login banner, noise)
	dataChunk = 32 << 10
	// stdinWindow bounds the stdin bytes ccrun sends a rank before the agent has written
	// them to the rank's pipe (acknowledged them): a rank that does not read its stdin
	// holds at most this much in its agent.
	stdinWindow = 8 * dataChunk
)

// Frame types. ccrun sends hello, start, signal, stdin, stdinEOF and ping; the agent sends
// hello, started, output, exit and stdinAck; both send pmi and pmiEOF.
const (
	tHello    byte = 1 + iota // helloMsg
	tStart                    // startMsg
	tStarted                  // startedMsg
	tSignal                   // signalMsg
	tOutput                   // rank, stream, bytes
	tExit                     // exitMsg
	tStdin                    // rank, bytes
	tStdinEOF                 // rank
	tStdinAck                 // rank, count (4 bytes)
	tPing                     // empty: ccrun is alive (see helloMsg.KeepaliveMs)
	tPMI                      // both ways: rank, bytes of its PMI connection (see pmiRelay)
	tPMIEOF                   // both ways: rank; that end of its PMI connection closed
)

// Streams of an output frame.
const (
	streamStdout byte = 1
	streamStderr byte = 2
)

// helloMsg opens the stream both ways. The agent sends its own as soon as it starts, so
// the handshake is one round trip (and none for the agent, which needs nothing before it
// answers).
type helloMsg struct {
	Magic   string `json:"magic"`
	Version int    `json:"version"`
	Host    string `json:"host,omitempty"` // the agent's host name
	Pid     int    `json:"pid,omitempty"`  // the agent's pid
	// BootID (the agent's hello) is its host's kernel boot id: with Host, the host's
	// hw.HostID, which tells ccrun which names are one machine at no extra round trip.
	// Added within version 1: an older agent omits it (ccrun then asks with a command),
	// an older ccrun ignores it.
	BootID string `json:"boot_id,omitempty"`
	// KeepaliveMs (ccrun's hello): ccrun sends a frame at least this often; an agent that
	// hears nothing for keepaliveMissed times as long ends the session, as if it had
	// ended, even when the connection is cut and sshd has not noticed yet. 0: no pings.
	KeepaliveMs int64 `json:"keepalive_ms,omitempty"`
	// PMI (the agent's hello): the agent relays a rank's PMI connection (startMsg.PMI).
	// Added within version 1: ccrun gives an older agent's ranks PMI_PORT instead.
	PMI bool `json:"pmi,omitempty"`
}

// keepaliveMissed is how many keepalive intervals of silence end an agent's session
// (ssh's ServerAliveCountMax is 3 too).
const keepaliveMissed = 3

// startMsg is one rank to start: launch.Spec without the streams.
type startMsg struct {
	Rank        int      `json:"rank"`
	Argv        []string `json:"argv"`
	Env         []string `json:"env"`
	Dir         string   `json:"dir,omitempty"`
	DirOptional bool     `json:"dir_optional,omitempty"`
	Secret      string   `json:"secret,omitempty"`
	Stdin       bool     `json:"stdin,omitempty"` // tStdin frames follow; else /dev/null
	// PMI: give the rank PMI_FD, a socketpair whose other end the agent relays in tPMI
	// and tPMIEOF frames.
	PMI bool `json:"pmi,omitempty"`
}

// startedMsg answers a start: the pid, or the status and message of a rank that could not
// start (127: no such program, 126: no such directory), as a shell would report them.
type startedMsg struct {
	Rank int    `json:"rank"`
	Pid  int    `json:"pid,omitempty"`
	Code int    `json:"code,omitempty"`
	Msg  string `json:"msg,omitempty"`
}

// signalMsg asks for sig to the rank's process group.
type signalMsg struct {
	Rank   int `json:"rank"`
	Signal int `json:"signal"`
}

// exitMsg reports a rank's end, after all of its output.
type exitMsg struct {
	Rank   int `json:"rank"`
	Code   int `json:"code"`
	Signal int `json:"signal,omitempty"`
}

// frameWriter writes whole frames from many goroutines.
type frameWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (fw *frameWriter) write(typ byte, parts ...[]byte) error {
	n := 1
	for _, p := range parts {
		n += len(p)
	}
	buf := make([]byte, 5, 4+n)
	binary.BigEndian.PutUint32(buf, uint32(n))
	buf[4] = typ
	for _, p := range parts {
		buf = append(buf, p...)
	}
	fw.mu.Lock()
	defer fw.mu.Unlock()
	_, err := fw.w.Write(buf)
	return err
}

func (fw *frameWriter) json(typ byte, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return fw.write(typ, b)
}

// data writes a rank's bytes (output with a stream, or stdin with stream 0).
func (fw *frameWriter) data(typ byte, rank int, stream byte, b []byte) error {
	hdr := binary.BigEndian.AppendUint32(nil, uint32(rank))
	if stream != 0 {
		hdr = append(hdr, stream)
	}
	return fw.write(typ, hdr, b)
}

// ErrBadFrame is a stream that does not follow the protocol.
var ErrBadFrame = errors.New("bad frame")

// frameReader reads frames.
type frameReader struct{ r *bufio.Reader }

func newFrameReader(r io.Reader) *frameReader { return &frameReader{r: bufio.NewReaderSize(r, 64<<10)} }

// next returns the next frame's type and payload; io.EOF at a clean end between frames.
func (fr *frameReader) next() (byte, []byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(fr.r, hdr[:]); err != nil {
		if err == io.ErrUnexpectedEOF {
			return 0, nil, fmt.Errorf("%w: stream ends inside a frame header", ErrBadFrame)
		}
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n == 0 || n > maxFrame {
		return 0, nil, fmt.Errorf("%w: length %d (want 1 to %d; bytes % x)", ErrBadFrame, n, maxFrame, hdr)
	}
	var buf []byte
	var err error
	if n <= eagerFrame {
		buf = make([]byte, n)
		_, err = io.ReadFull(fr.r, buf)
	} else {
		// Grow with what arrives: a length that lies (noise on the stream)
		// costs no more memory than the bytes behind it.
		var b bytes.Buffer
		_, err = io.CopyN(&b, fr.r, int64(n))
		buf = b.Bytes()
	}
	if err != nil {
		return 0, nil, fmt.Errorf("%w: stream ends inside a frame of %d bytes", ErrBadFrame, n)
	}
	return buf[0], buf[1:], nil
}

// eagerFrame is the largest frame allocated in full before its bytes arrive.
const eagerFrame = 64 << 10

// decodeJSON decodes a control payload.
func decodeJSON(typ byte, p []byte, v any) error {
	if err := json.Unmarshal(p, v); err != nil {
		return fmt.Errorf("%w: type %d: %v", ErrBadFrame, typ, err)
	}
	return nil
}

// decodeData splits a data payload into rank, stream (when withStream) and bytes.
func decodeData(typ byte, p []byte, withStream bool) (rank int, stream byte, b []byte, err error) {
	min := 4
	if withStream {
		min = 5
	}
	if len(p) < min {
		return 0, 0, nil, fmt.Errorf("%w: type %d: %d bytes, want %d or more", ErrBadFrame, typ, len(p), min)
	}
	// Signed: a process that is not a rank (the CollNet aggregation server) has rank -1.
	rank = int(int32(binary.BigEndian.Uint32(p)))
	if withStream {
		stream = p[4]
		if stream != streamStdout && stream != streamStderr {
			return 0, 0, nil, fmt.Errorf("%w: type %d: stream %d", ErrBadFrame, typ, stream)
		}
	}
	return rank, stream, p[min:], nil
}

// readHello reads the first frame, which must be a hello of this protocol.
func readHello(fr *frameReader) (helloMsg, error) {
	var h helloMsg
	typ, p, err := fr.next()
	if err != nil {
		return h, err
	}
	if typ != tHello {
		return h, fmt.Errorf("%w: first frame has type %d, want hello", ErrBadFrame, typ)
	}
	if err := decodeJSON(typ, p, &h); err != nil {
		return h, err
	}
	if h.Magic != magic {
		return h, fmt.Errorf("%w: hello of %q, want %q", ErrBadFrame, h.Magic, magic)
	}
	return h, nil
}

// VersionError is a peer that speaks another version of the protocol.
type VersionError struct{ Theirs int }

// Error names both versions.
func (e *VersionError) Error() string {
	return fmt.Sprintf("agent protocol version %d, want %d (ccrun and its agent are different builds)", e.Theirs, Version)
}
