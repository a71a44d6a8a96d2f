package launch

import (
	"context"
	"io"
	"syscall"

	"github.com/seed-760dd1f1/cc/hw"
	"github.com/seed-760dd1f1/cc/launch/sshspawn"
)

// SSH adapts an sshspawn.Spawner to Remote.
func SSH(s *sshspawn.Spawner) Remote { return sshRemote{s} }

type sshRemote struct{ s *sshspawn.Spawner }

func (r sshRemote) Connect(ctx context.Context, hosts []RemoteHost) error {
	t := make([]sshspawn.Target, len(hosts))
	for i, h := range hosts {
		t[i] = sshspawn.Target{Name: h.Name, User: h.User, Port: h.Port}
	}
	return r.s.Connect(ctx, t)
}

func (r sshRemote) Addrs(host string) (local, remote string) { return r.s.Addrs(host) }

func (r sshRemote) Preload(ctx context.Context, host, path string) (string, error) {
	return r.s.Preload(ctx, host, path)
}

// Start runs the rank in a session of its own, whose stdin carries the secret and then the
// lifeline: the rank's stdin is /dev/null (Spec.Stdin is closed at once).
func (r sshRemote) Start(ctx context.Context, spec Spec) (Proc, error) {
	dropStdin(spec.Stdin)
	p, err := r.s.Start(ctx, spec.Slot.Host, sshspawn.Command{
		Argv: spec.Argv, Env: spec.Env, Dir: spec.Dir, DirOptional: spec.DirOptional, Secret: spec.Secret,
	}, spec.Stdout, spec.Stderr)
	if err != nil {
		return nil, err
	}
	return sshProc{p}, nil
}

func (r sshRemote) Close() error { return r.s.Close() }

// HostID asks the host which machine it is, with one command (see sshspawn.HostID).
func (r sshRemote) HostID(ctx context.Context, host string) (hw.HostID, error) {
	return r.s.HostID(ctx, host)
}

type sshProc struct{ p *sshspawn.Process }

func (p sshProc) Pid() int                        { return p.p.Pid() }
func (p sshProc) Signal(sig syscall.Signal) error { return p.p.Signal(sig) }

func (p sshProc) Wait() Exit {
	code, sig, err := p.p.Wait()
	return Exit{Code: code, Signal: sig, Err: err}
}

// dropStdin closes the stdin of a rank whose spawner cannot feed it, so that ccrun's
// stdin goes on to the ranks that read it.
func dropStdin(in io.Reader) {
	if c, ok := in.(io.Closer); ok {
		c.Close()
	}
}
