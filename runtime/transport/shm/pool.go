//go:build linux

package shm

// Pool files: the files behind comm.MemAlloc's registrable buffers. Each
// is one header page, recording its creator as a segment's owner entry
// does (pid, start time, pid namespace), then the buffer's pages, which
// the creator and its local peers map at offset PoolHeader. The header is
// what lets CleanStale remove the pools of a process that died without
// MemFree (SIGKILL): a pool file outlives every mapping of it, so without
// a sweep its pages would be lost until someone deletes the file.

import (
	"encoding/binary"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// PoolPrefix starts the name of every pool file.
	PoolPrefix = "cc-mem-"
	// PoolHeader is the bytes before a pool's data: one page.
	PoolHeader = 4096
	// poolMagic opens a complete pool header ("ccpool01" in memory order).
	poolMagic uint64 = 0x31306c6f6f706363
	pMagic           = 0
	pOwner           = 8 // one owner entry: pid, start, pid namespace
)

// WritePoolHeader records the calling process as the creator of the pool
// file open as fd, which must be at least PoolHeader bytes long.
func WritePoolHeader(fd int) error {
	me, err := readSelf()
	if err != nil {
		return err
	}
	var b [pOwner + ownerBytes]byte
	binary.NativeEndian.PutUint64(b[pOwner+oPid:], uint64(me.pid))
	binary.NativeEndian.PutUint64(b[pOwner+oStart:], me.start)
	binary.NativeEndian.PutUint64(b[pOwner+oPidNS:], me.pidNS)
	// The magic last, in a write of its own: a reader that sees it sees a
	// complete owner.
	if _, err := unix.Pwrite(fd, b[pOwner:], pOwner); err != nil {
		return fmt.Errorf("write pool header: %w", err)
	}
	binary.NativeEndian.PutUint64(b[:8], poolMagic)
	if _, err := unix.Pwrite(fd, b[:8], pMagic); err != nil {
		return fmt.Errorf("write pool header: %w", err)
	}
	return nil
}

// examinePool judges the pool file f (of info fi) from pid namespace ns,
// as examine judges a segment.
func examinePool(f *os.File, fi os.FileInfo, ns uint64) (stale bool, why string, err error) {
	var b [pOwner + ownerBytes]byte
	n, _ := f.ReadAt(b[:], 0)
	if n < len(b) || binary.NativeEndian.Uint64(b[pMagic:]) != poolMagic {
		if age := time.Since(fi.ModTime()); age > headerGrace {
			return true, fmt.Sprintf("no pool header after %v", age.Round(time.Second)), nil
		}
		return false, "is being created (no pool header yet)", nil
	}
	e := b[pOwner:]
	pid := binary.NativeEndian.Uint64(e[oPid:])
	switch ownerLiveness(int(pid), binary.NativeEndian.Uint64(e[oStart:]), binary.NativeEndian.Uint64(e[oPidNS:]), ns) {
	case alive:
		return false, fmt.Sprintf("belongs to live process %d", pid), nil
	case unknown:
		return false, fmt.Sprintf("belongs to process %d, which cannot be checked from here", pid), nil
	}
	return true, fmt.Sprintf("its creator, pid %d, is gone", pid), nil
}
