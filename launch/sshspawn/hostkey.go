package sshspawn

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// HostKeyError is a host key ccrun refused: unknown, changed or revoked. Its message says
// how to fix it.
type HostKeyError struct {
	Host    string // host:port as dialled
	Key     ssh.PublicKey
	Files   []string // the known_hosts files consulted
	Known   []knownhosts.KnownKey
	Revoked bool
}

// Error names the host, the offered key's fingerprint and the fix.
func (e *HostKeyError) Error() string {
	got := e.Key.Type() + " " + ssh.FingerprintSHA256(e.Key)
	kh := knownhosts.Normalize(e.Host)
	host, port, _ := net.SplitHostPort(e.Host)
	switch {
	case e.Revoked:
		return fmt.Sprintf("host key of %s (%s) is marked @revoked in %s: ccrun will not connect", e.Host, got, strings.Join(e.Files, ", "))
	case len(e.Known) == 0:
		return fmt.Sprintf("host key of %s is not known (offered %s; looked in %s): "+
			"check the fingerprint, then add it with `ssh-keyscan -p %s %s >> %s`, or run ccrun with --ssh-accept-new to record it on first contact",
			e.Host, got, strings.Join(e.Files, ", "), port, host, e.Files[0])
	}
	k := e.Known[0]
	return fmt.Sprintf("host key of %s does not match %s:%d (offered %s, known %s %s): "+
		"if the host was reinstalled, remove the old key with `ssh-keygen -R '%s' -f %s` and connect again with --ssh-accept-new; otherwise someone may be intercepting the connection",
		e.Host, k.Filename, k.Line, got, k.Key.Type(), ssh.FingerprintSHA256(k.Key), kh, k.Filename)
}

// hostKeys checks host keys against known_hosts files, strictly, optionally recording
// keys of hosts seen for the first time.
type hostKeys struct {
	mu        sync.Mutex // serialises appends to the known_hosts file
	acceptNew bool
	logf      func(string, ...any)
	cache     map[string]ssh.HostKeyCallback // by file list
}

// callback returns the check for one host and the host key algorithms to ask for: the
// types of its known keys, so that a server offering several key types shows one we can
// check (golang/go#49631).
func (h *hostKeys) callback(files []string) (ssh.HostKeyCallback, error) {
	existing := existingFiles(files)
	key := strings.Join(existing, "\x00")
	h.mu.Lock()
	defer h.mu.Unlock()
	if cb, ok := h.cache[key]; ok {
		return cb, nil
	}
	cb := ssh.HostKeyCallback(func(string, net.Addr, ssh.PublicKey) error {
		return &knownhosts.KeyError{} // no file: every host is unknown
	})
	if len(existing) > 0 {
		var err error
		if cb, err = knownhosts.New(existing...); err != nil {
			return nil, fmt.Errorf("known_hosts: %w", err)
		}
	}
	if h.cache == nil {
		h.cache = map[string]ssh.HostKeyCallback{}
	}
	h.cache[key] = cb
	return cb, nil
}

func existingFiles(files []string) []string {
	var out []string
	for _, f := range files {
		if st, err := os.Stat(f); err == nil && st.Mode().IsRegular() {
			out = append(out, f)
		}
	}
	return out
}

// check returns a HostKeyCallback for a host whose known_hosts files are files.
func (h *hostKeys) check(files []string) (ssh.HostKeyCallback, error) {
	if _, err := h.callback(files); err != nil {
		return nil, err
	}
	verify := func(host string, remote net.Addr, key ssh.PublicKey) error {
		cb, err := h.callback(files) // again: --ssh-accept-new may have added lines
		if err != nil {
			return err
		}
		err = cb(host, remote, key)
		var ke *knownhosts.KeyError
		var re *knownhosts.RevokedError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &re):
			return &HostKeyError{Host: host, Key: key, Files: files, Revoked: true}
		case errors.As(err, &ke) && len(ke.Want) == 0 && h.acceptNew:
			return h.record(files[0], host, key)
		case errors.As(err, &ke):
			return &HostKeyError{Host: host, Key: key, Files: files, Known: ke.Want}
		}
		return err
	}
	return verify, nil
}

// algorithms returns the host key algorithms matching the keys known for host:port, or
// nil when none is known (then any algorithm is acceptable and the key is checked).
func (h *hostKeys) algorithms(files []string, hostport string) []string {
	cb, err := h.callback(files)
	if err != nil {
		return nil
	}
	probe, _ := ssh.NewPublicKey(ed25519.PublicKey(make([]byte, ed25519.PublicKeySize)))
	var ke *knownhosts.KeyError
	if err := cb(hostport, &net.TCPAddr{IP: net.IPv4zero}, probe); !errors.As(err, &ke) {
		return nil // err == nil: the probe matched?! let the handshake decide
	}
	var algos []string
	seen := map[string]bool{}
	for _, k := range ke.Want {
		for _, a := range algorithmsFor(k.Key.Type()) {
			if !seen[a] {
				seen[a] = true
				algos = append(algos, a)
			}
		}
	}
	return algos
}

// algorithmsFor maps a key type to the signature algorithms that can prove it.
func algorithmsFor(keyType string) []string {
	if keyType == ssh.KeyAlgoRSA {
		return []string{ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA}
	}
	return []string{keyType}
}

// record appends host's key to file (--ssh-accept-new).
func (h *hostKeys) record(file, host string, key ssh.PublicKey) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return fmt.Errorf("--ssh-accept-new: %w", err)
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("--ssh-accept-new: %w", err)
	}
	line := knownhosts.Line([]string{knownhosts.Normalize(host)}, key)
	_, err = fmt.Fprintln(f, line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("--ssh-accept-new: %s: %w", file, err)
	}
	// The cached callbacks predate the new line; drop them so later hosts see it.
	h.cache = nil
	h.logf("added the %s key of %s (%s) to %s", key.Type(), host, ssh.FingerprintSHA256(key), file)
	return nil
}
