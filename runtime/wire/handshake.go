package wire

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"
)

// HandshakeTimeout bounds a whole handshake when the caller has no earlier deadline: long
// enough for a loaded root accepting a thousand ranks, short enough that a silent stranger
// (slowloris) is dropped quickly.
const HandshakeTimeout = 20 * time.Second

// Client runs the dialling side of the handshake on conn: it writes the hello for job and h
// with a fresh random nonce, then reads and verifies the server's ack. The deadline bounds
// both; it is cleared again on success. On error the caller closes conn.
func Client(conn net.Conn, job Job, h Hello, deadline time.Time) error {
	remote := conn.RemoteAddr()
	var nonce [NonceSize]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return fmt.Errorf("handshake with %s: nonce: %w", remote, err)
	}
	hello, err := EncodeHello(job, h, nonce)
	if err != nil {
		return fmt.Errorf("handshake with %s: %w", remote, err)
	}
	if err := conn.SetDeadline(deadline); err != nil {
		return fmt.Errorf("handshake with %s: %w", remote, err)
	}
	if _, err := conn.Write(hello[:]); err != nil {
		return fmt.Errorf("handshake with %s: write hello: %w", remote, err)
	}
	var ack [AckSize]byte
	if _, err := io.ReadFull(conn, ack[:]); err != nil {
		if closedByPeer(err) {
			return fmt.Errorf("handshake with %s: the server closed the connection without an ack "+
				"(it is in another job, has another secret, or is not a cc endpoint): %w", remote, err)
		}
		return fmt.Errorf("handshake with %s: read ack: %w", remote, err)
	}
	if err := VerifyAck(ack[:], job, hello[:]); err != nil {
		return fmt.Errorf("handshake with %s: %w", remote, err)
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return fmt.Errorf("handshake with %s: %w", remote, err)
	}
	return nil
}

// Server runs the accepting side of the handshake on conn: it reads a hello and checks it
// against job. On any mismatch it returns an error naming conn.RemoteAddr() and what was
// wrong, and writes nothing; the caller closes conn and keeps serving. On success it writes
// the ack, clears the deadline and returns the hello's fields.
//
// The first 8 bytes are checked before the rest is awaited, so a peer speaking another
// protocol is dropped at once; a peer that sends too little is dropped at the deadline.
func Server(conn net.Conn, job Job, deadline time.Time) (Hello, error) {
	remote := conn.RemoteAddr()
	fail := func(err error) (Hello, error) {
		return Hello{}, fmt.Errorf("handshake from %s: %w", remote, err)
	}
	if err := conn.SetDeadline(deadline); err != nil {
		return fail(err)
	}
	var frame [HelloSize]byte
	if n, err := io.ReadFull(conn, frame[:len(helloMagic)]); err != nil {
		if merr := CheckMagic(frame[:n]); merr != nil {
			return fail(merr)
		}
		return fail(readErr(err, n))
	}
	if err := CheckMagic(frame[:len(helloMagic)]); err != nil {
		return fail(err)
	}
	if n, err := io.ReadFull(conn, frame[len(helloMagic):]); err != nil {
		return fail(readErr(err, len(helloMagic)+n))
	}
	h, err := DecodeHello(frame[:], job)
	if err != nil {
		return fail(err)
	}
	ack := EncodeAck(job, frame[:])
	if _, err := conn.Write(ack[:]); err != nil {
		return fail(fmt.Errorf("write ack: %w", err))
	}
	if err := conn.SetDeadline(time.Time{}); err != nil {
		return fail(err)
	}
	return h, nil
}

// readErr describes a failed read of the hello after got bytes.
func readErr(err error, got int) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%w: peer closed after %d of %d hello bytes", ErrTruncated, got, HelloSize)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%w: only %d of %d hello bytes before the deadline: %w", ErrTruncated, got, HelloSize, err)
	}
	return fmt.Errorf("read hello after %d bytes: %w", got, err)
}

func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
