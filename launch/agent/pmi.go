package agent

import (
	"net"
	"sync"
)

// pmiRelay carries one rank's PMI connection over an agent's stream, at both ends: on the
// rank's host the agent's end of the rank's PMI_FD socketpair, in ccrun the end of a pipe
// whose other end ccrun's PMI server serves. What is read from conn goes out as tPMI
// frames, then one tPMIEOF; what comes in is queued and written to conn in order by its
// own goroutine, so that the stream's reader never waits for a rank (or the server) to
// read. PMI-1 is a request-reply protocol of short lines: a peer that lets more than
// stdinWindow bytes pile up is not speaking it, and its connection is closed.
//
// Goroutines: the reader (ends when conn is closed or ends) and the writer (ends at
// tPMIEOF once the queue is written, when a write fails, at close, or once the reader
// has ended).
type pmiRelay struct {
	conn net.Conn
	out  *stdinQueue
}

// newPMIRelay starts relaying conn as rank's PMI connection; wg counts its goroutines.
func newPMIRelay(fw *frameWriter, rank int, conn net.Conn, wg *sync.WaitGroup) *pmiRelay {
	r := &pmiRelay{conn: conn, out: newQueue(fw, rank, conn, false)}
	wg.Go(r.out.feed)
	wg.Go(func() {
		buf := make([]byte, dataChunk)
		for {
			n, err := conn.Read(buf)
			if n > 0 && fw.data(tPMI, rank, 0, buf[:n]) != nil {
				return
			}
			if err != nil {
				fw.data(tPMIEOF, rank, 0, nil)
				r.out.close() // conn is done both ways (the rank, or the server, closed it)
				return
			}
		}
	})
	return r
}

// deliver acts on a tPMI or tPMIEOF frame from the other end: queue its bytes, or close
// conn once what is queued is written. A nil relay (a rank without one, or not yet
// started) drops it.
func (r *pmiRelay) deliver(typ byte, b []byte) {
	switch {
	case r == nil:
	case typ == tPMIEOF:
		r.out.close()
	case !r.out.put(b):
		r.close()
	}
}

// close ends the relay at once: conn is closed (the reader sends tPMIEOF) and the queue
// dropped.
func (r *pmiRelay) close() {
	r.conn.Close()
	r.out.close()
}

// deliverPMI hands a tPMI or tPMIEOF frame to its rank's relay in relays (guarded by mu).
func deliverPMI(typ byte, p []byte, mu *sync.Mutex, relays map[int]*pmiRelay) error {
	rank, _, b, err := decodeData(typ, p, false)
	if err != nil {
		return err
	}
	mu.Lock()
	r := relays[rank]
	mu.Unlock()
	r.deliver(typ, b)
	return nil
}
