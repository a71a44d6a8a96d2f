package sshspawn

import (
	"context"
	"fmt"
	"strings"

	"github.com/seed-760dd1f1/cc/hw"
)

// identityCommand prints the host's identity (hw.HostID): its kernel host name and boot
// id, one a line. Both files exist on every Linux since 2.6.
const identityCommand = "cat /" + hw.HostnameFile + " /" + hw.BootIDFile

// HostID asks a connected host which machine it is, with one short command on its first
// connection (one round trip; a session outside the MaxSessions count, as a signal's).
// ccrun uses it to number the ranks of two names of one machine as one node.
func (s *Spawner) HostID(ctx context.Context, hostName string) (hw.HostID, error) {
	h, err := s.host(hostName)
	if err != nil {
		return hw.HostID{}, err
	}
	h.mu.Lock()
	c := h.conns[0]
	h.mu.Unlock()
	sess, err := c.client.NewSession()
	if err != nil {
		return hw.HostID{}, c.lost(err)
	}
	defer sess.Close()
	stop := context.AfterFunc(ctx, func() { sess.Close() })
	defer stop()
	out, err := sess.Output(identityCommand)
	if ctx.Err() != nil {
		return hw.HostID{}, fmt.Errorf("host %s: %s: %w", hostName, identityCommand, context.Cause(ctx))
	}
	if err != nil {
		return hw.HostID{}, fmt.Errorf("host %s: %s: %v", hostName, identityCommand, err)
	}
	name, boot, ok := strings.Cut(strings.TrimSuffix(string(out), "\n"), "\n")
	if !ok {
		return hw.HostID{}, fmt.Errorf("host %s: %s printed %q: want two lines", hostName, identityCommand, trimOutput(out))
	}
	id, err := hw.ParseHostID(name, boot)
	if err != nil {
		return hw.HostID{}, fmt.Errorf("host %s: %w", hostName, err)
	}
	return id, nil
}
