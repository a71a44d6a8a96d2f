//go:build linux

package shm

// pause is the x86 PAUSE instruction: a cheap delay between polls that
// also tells the core a spin loop is running.
func pause()

// storeRelease stores v at *p with a plain MOV: on x86 (TSO) every store
// before it is visible first, which is all a reader that loads *p
// atomically needs, and unlike atomic.StoreUint64 (XCHG, a full fence) it
// does not stall until the line is exclusively this core's: the store
// drains from the store buffer while the core goes on to poll. A later
// load may pass it, so a Dekker-style check (the futex protocol of
// conn.await) needs a fence between the two (OneShot.wake).
func storeRelease(p *uint64, v uint64)
