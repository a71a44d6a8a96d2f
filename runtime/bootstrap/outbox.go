package bootstrap

import "sync"

// writeLoop sends the rank's queued messages in order; see Root for its end.
func (rc *rankConn) writeLoop() {
	defer close(rc.writerDone)
	broken := false
	for {
		msgs, open := rc.out.take()
		for _, m := range msgs {
			if broken {
				break
			}
			if _, err := rc.conn.Write(m); err != nil {
				// The read loop sees the same dead connection and reports it.
				broken = true
			}
		}
		if !open {
			return
		}
	}
}

// outbox is an unbounded FIFO of encoded messages for one rank's writer. It holds at most
// one welcome or abort plus one result per round the rank has joined, so it stays small.
type outbox struct {
	mu     sync.Mutex
	q      [][]byte
	closed bool
	wake   chan struct{} // capacity 1: "something changed"
}

func newOutbox() *outbox { return &outbox{wake: make(chan struct{}, 1)} }

func (o *outbox) put(m []byte) {
	o.mu.Lock()
	if !o.closed {
		o.q = append(o.q, m)
	}
	o.mu.Unlock()
	o.signal()
}

func (o *outbox) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.signal()
}

func (o *outbox) signal() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// take waits for queued messages or close; open is false once closed (msgs then holds
// the last ones to flush).
func (o *outbox) take() (msgs [][]byte, open bool) {
	for {
		o.mu.Lock()
		if len(o.q) > 0 || o.closed {
			msgs, o.q = o.q, nil
			open = !o.closed
			o.mu.Unlock()
			return msgs, open
		}
		o.mu.Unlock()
		<-o.wake
	}
}
