package hw

import (
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"strings"
)

// Files read by this package, as fs.FS paths under the root.
const (
	HostnameFile = "proc/sys/kernel/hostname"
	BootIDFile   = "proc/sys/kernel/random/boot_id"
)

// Root returns the real file system, rooted at "/".
func Root() fs.FS { return os.DirFS("/") }

// HostID identifies one boot of one host. Two ranks with equal HostIDs run
// on the same machine and can share memory; the boot id tells a host from a
// container or VM clone that kept its name, as NCCL's host hash and
// nccl-tests' local-rank grouping do (hostname + /proc/sys/kernel/random/boot_id).
type HostID struct {
	// Hostname is the kernel host name (the whole name, dots included).
	Hostname string
	// BootID is the kernel's random UUID for this boot.
	BootID string
}

// String returns "hostname/boot-id".
func (h HostID) String() string { return h.Hostname + "/" + h.BootID }

// Hash returns a 64-bit FNV-1a hash of the hostname and boot id (separated
// by a NUL byte), for fixed-size exchange between ranks. Equal HostIDs have
// equal hashes; compare the HostIDs themselves when a collision matters.
func (h HostID) Hash() uint64 {
	f := fnv.New64a()
	f.Write([]byte(h.Hostname))
	f.Write([]byte{0})
	f.Write([]byte(h.BootID))
	return f.Sum64()
}

// hostNameMax is Linux's HOST_NAME_MAX.
const hostNameMax = 64

// HostIdentity reads the host name and boot id.
func HostIdentity(fsys fs.FS) (HostID, error) {
	name, err := readLine(fsys, HostnameFile)
	if err != nil {
		return HostID{}, err
	}
	if err := checkHostname(name); err != nil {
		return HostID{}, err
	}
	boot, err := readLine(fsys, BootIDFile)
	if err != nil {
		return HostID{}, err
	}
	return ParseHostID(name, boot)
}

// ParseHostID checks a host name and boot id as the kernel prints them in HostnameFile
// and BootIDFile (without the newline), read on another host: ccrun learns its hosts'
// identities this way. Errors name the file and the bad value.
func ParseHostID(hostname, bootID string) (HostID, error) {
	if err := checkHostname(hostname); err != nil {
		return HostID{}, err
	}
	if !isUUID(bootID) {
		return HostID{}, fmt.Errorf("%s: %q: want a UUID like 5a3c8f0e-1b2d-4c6e-9f70-8a1b2c3d4e5f", BootIDFile, bootID)
	}
	return HostID{Hostname: hostname, BootID: bootID}, nil
}

func checkHostname(name string) error {
	if name == "" || len(name) > hostNameMax || strings.ContainsFunc(name, badHostRune) {
		return fmt.Errorf("%s: %q: want a host name of 1..%d characters without spaces or control characters", HostnameFile, name, hostNameMax)
	}
	return nil
}

// readLine reads a one-line file, dropping the trailing newline.
func readLine(fsys fs.FS, name string) (string, error) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", name, err)
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}

func badHostRune(r rune) bool { return r <= ' ' || r == 0x7f }

// isUUID accepts the 8-4-4-4-12 hex form the kernel prints.
func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
