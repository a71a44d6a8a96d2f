//go:build linux && !amd64

package shm

import "sync/atomic"

// pause is an empty call between polls where no pause instruction is wired.
func pause() {}

// storeRelease is atomic.StoreUint64 where no plain release store is
// wired (see pause_amd64.go).
func storeRelease(p *uint64, v uint64) { atomic.StoreUint64(p, v) }
