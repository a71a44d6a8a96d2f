package tcp

import "sync"

// A drainGroup decides when the drainers of a rank's inline receivers
// (LL and LL128 over one socket) read frames off their sockets.
//
// A drainer exists so that a peer's write never waits on this rank while
// this rank waits on something else: two ranks that both write more than
// their sockets hold, or a rank blocked sending to a third. NCCL's proxy
// thread drains every receive into its FIFO for the same reason. But a
// drainer waiting on its socket is woken by every frame that
// arrives, also those the engine reads itself a moment later in Wait:
// each small message then pays a goroutine wake-up, a thread wake-up on
// another core and a contended lock (strace of 1,000 all-gathers of 512 B:
// 2,505 futex calls and 1,714 drainer peeks, 182 and 2 without), the
// likely cause of LL128's small all-gathers losing 5x to LL on a loaded
// 2-core machine.
//
// So a drainer waits in the poller only while the group is armed: while
// some goroutine of this rank is blocked in the transport, in an eager
// write that the socket does not take at once, in a receive that has
// stopped polling, or in a Simple connection's wait for its FIFO. A rank
// whose engine runs (polls, reduces, writes what the sockets take) reads
// its frames itself in Wait. A peer's write can only wait on this rank
// when this rank's sockets are full, which takes it either not reading
// (blocked: armed) or reading them (Wait).
//
// A rank blocked outside the transport (a shared-memory wait of a job
// that mixes transports) does not arm its drainers: the schedules only
// wait there on peers of the same host, which do not wait on this rank's
// sockets to make progress.
type drainGroup struct {
	mu    sync.Mutex
	armed int         // goroutines blocked in the transport
	conns []*RecvConn // the inline receivers
}

// add makes c's drainer one of the group's.
func (g *drainGroup) add(c *RecvConn) {
	g.mu.Lock()
	g.conns = append(g.conns, c)
	g.mu.Unlock()
}

// arm tells the group that a goroutine is about to block, in a receive
// of self (nil: elsewhere), which reads self's socket itself: every other
// drainer reads until the matching disarm, and is woken if it waits to be
// armed. A nil group is always armed.
func (g *drainGroup) arm(self *RecvConn) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed++
	if self != nil {
		self.selfArmed++
	}
	for _, c := range g.conns {
		if c != self && g.armed-c.selfArmed == 1 { // it just turned on
			c.wakeDrainer()
		}
	}
}

// disarm undoes arm(self). self's drainer is woken if others are still
// blocked: self's receive no longer reads its socket.
func (g *drainGroup) disarm(self *RecvConn) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.armed--
	if self != nil {
		self.selfArmed--
		if g.armed-self.selfArmed > 0 {
			self.wakeDrainer()
		}
	}
}

// drains reports whether c's drainer should read: some goroutine other
// than a receive of c is blocked in the transport.
func (g *drainGroup) drains(c *RecvConn) bool {
	if g == nil {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.armed-c.selfArmed > 0
}
