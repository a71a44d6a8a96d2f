//go:build linux

package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// headerGrace is how long a segment may exist without a complete header.
// Its creator writes the header microseconds after creating the file, so
// an older header-less segment belongs to a creator that died in between.
const headerGrace = time.Minute

// CleanStale removes the segments and pool files (PoolPrefix) in dir that
// belong to dead jobs and returns their names. A segment is stale when
// none of the processes recorded in its header is alive (same pid, same
// start time, not a zombie), a pool when its creator is not; a file whose
// owners this process cannot judge (another pid namespace) is kept. Open
// calls it on local rank 0 before creating, and launchers call it when a
// rank has ended, so that what a killed rank leaves is removed with it.
func CleanStale(dir string, logf func(string, ...any)) ([]string, error) {
	if logf == nil {
		logf = func(string, ...any) {}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("shm: list %s: %w", dir, err)
	}
	ns := pidNamespace()
	var removed []string
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), namePrefix) && !strings.HasPrefix(e.Name(), PoolPrefix) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		stale, why, err := examine(path, ns)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				logf("shm: cannot examine %s: %v", path, err)
			}
			continue
		}
		if !stale {
			continue
		}
		if err := os.Remove(path); err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				logf("shm: cannot remove stale %s: %v", path, err)
			}
			continue
		}
		logf("shm: removed stale %s: %s", path, why)
		removed = append(removed, e.Name())
	}
	return removed, nil
}

// examine reads a segment's header and judges its owners from pid
// namespace ns. why says what was found, for messages.
func examine(path string, ns uint64) (stale bool, why string, err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return false, "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, "", err
	}
	if !fi.Mode().IsRegular() {
		return false, "is not a regular file", nil
	}
	if strings.HasPrefix(fi.Name(), PoolPrefix) {
		return examinePool(f, fi, ns)
	}
	hdr := make([]byte, hOwners)
	n, err := f.ReadAt(hdr, 0)
	if err != nil && err != io.EOF {
		return false, "", err
	}
	nranks := uint64(0)
	complete := n == len(hdr) && binary.NativeEndian.Uint64(hdr[hMagic:]) == segMagic
	if complete {
		nranks = uint64(binary.NativeEndian.Uint32(hdr[hNRanks:]))
		complete = nranks >= 1 && nranks <= maxLocalRanks
	}
	if !complete {
		if age := time.Since(fi.ModTime()); age > headerGrace {
			return true, fmt.Sprintf("no complete header after %v", age.Round(time.Second)), nil
		}
		return false, "is being created (no complete header yet)", nil
	}
	owners := make([]byte, nranks*ownerBytes)
	if _, err := f.ReadAt(owners, hOwners); err != nil {
		return false, "", fmt.Errorf("read owners: %w", err)
	}
	var gone []string
	for r := 0; r < int(nranks); r++ {
		e := owners[r*ownerBytes:]
		pid := binary.NativeEndian.Uint64(e[oPid:])
		if pid == 0 {
			continue
		}
		start := binary.NativeEndian.Uint64(e[oStart:])
		pidNS := binary.NativeEndian.Uint64(e[oPidNS:])
		switch ownerLiveness(int(pid), start, pidNS, ns) {
		case alive:
			return false, fmt.Sprintf("belongs to live process %d (local rank %d)", pid, r), nil
		case unknown:
			return false, fmt.Sprintf("belongs to process %d (local rank %d), which cannot be checked from here", pid, r), nil
		}
		gone = append(gone, fmt.Sprintf("%d (local rank %d)", pid, r))
	}
	return true, "its owners are gone: pid " + strings.Join(gone, ", "), nil
}
