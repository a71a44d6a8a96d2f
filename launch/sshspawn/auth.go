package sshspawn

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// keyring loads private keys once per file and talks to ssh-agent.
type keyring struct {
	agentSocket string

	mu        sync.Mutex
	files     map[string]fileKey
	agentConn net.Conn
	agent     agent.ExtendedAgent
	agentErr  error
}

type fileKey struct {
	signer ssh.Signer
	note   string // why the file gave no key
}

// load returns the signer of one key file, or a note saying why there is none. A file the
// user named that cannot be used is an error.
func (k *keyring) load(path string, explicit bool) (ssh.Signer, string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if fk, ok := k.files[path]; ok {
		return fk.signer, fk.note, nil
	}
	var fk fileKey
	b, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && !explicit:
		fk.note = path + ": not there"
	case err != nil:
		return nil, "", fmt.Errorf("identity file %s: %w", path, err)
	default:
		fk.signer, err = ssh.ParsePrivateKey(b)
		var pm *ssh.PassphraseMissingError
		switch {
		case errors.As(err, &pm):
			fk.note = path + ": protected by a passphrase (load it into ssh-agent)"
		case err != nil:
			return nil, "", fmt.Errorf("identity file %s: %w", path, err)
		}
	}
	if k.files == nil {
		k.files = map[string]fileKey{}
	}
	k.files[path] = fk
	return fk.signer, fk.note, nil
}

// agentSigners returns the agent's keys, connecting once.
func (k *keyring) agentSigners() ([]ssh.Signer, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.agentSocket == "" {
		return nil, nil
	}
	if k.agent == nil && k.agentErr == nil {
		c, err := net.Dial("unix", k.agentSocket)
		if err != nil {
			k.agentErr = fmt.Errorf("ssh-agent at %s: %w", k.agentSocket, err)
		} else {
			k.agentConn, k.agent = c, agent.NewClient(c)
		}
	}
	if k.agentErr != nil {
		return nil, k.agentErr
	}
	return k.agent.Signers()
}

func (k *keyring) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.agentConn != nil {
		k.agentConn.Close()
	}
}

// auth returns the authentication of one host: agent keys (unless IdentitiesOnly), then its
// key files. With no key at all it fails, listing where it looked.
func (k *keyring) auth(s settings) ([]ssh.AuthMethod, []string, error) {
	var signers []ssh.Signer
	var tried, notes []string
	if !s.noAgent {
		as, err := k.agentSigners()
		if err != nil {
			notes = append(notes, err.Error())
		}
		signers = append(signers, as...)
		if len(as) > 0 {
			tried = append(tried, fmt.Sprintf("%d agent key(s)", len(as)))
		}
	}
	for _, p := range s.identities {
		sg, note, err := k.load(p, s.explicit[p])
		if err != nil {
			return nil, nil, err
		}
		if sg == nil {
			notes = append(notes, note)
			continue
		}
		signers = append(signers, sg)
		tried = append(tried, p)
	}
	if len(signers) == 0 {
		agentNote := "no ssh-agent (SSH_AUTH_SOCK unset)"
		if s.noAgent {
			agentNote = "agent not used (IdentitiesOnly yes)"
		} else if k.agentSocket != "" {
			agentNote = "ssh-agent holds no key"
		}
		return nil, nil, fmt.Errorf("no usable SSH key for %s@%s: %s; %s: pass -i/--ssh-identity FILE or add a key to ssh-agent",
			s.user, s.alias, agentNote, strings.Join(notes, "; "))
	}
	return []ssh.AuthMethod{ssh.PublicKeys(signers...)}, tried, nil
}
