package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"
)

// Spec is one rank to start.
type Spec struct {
	Slot Slot
	// Argv is the program and its arguments.
	Argv []string
	// Env holds the variables the rank gets on top of what its host gives it: the
	// forwarded and requested ones and the rank variables (see RankEnv).
	Env []string
	// Dir is the working directory; empty means the spawner's default.
	Dir string
	// DirOptional: if Dir does not exist on the host, stay in the default directory
	// instead of failing (remote ranks follow ccrun's directory when they can).
	DirOptional bool
	// Secret is the job secret, hex-encoded, passed so that ps cannot see it.
	Secret string
	// Stdout and Stderr receive the rank's output.
	Stdout, Stderr io.Writer
}

// Exit is how a rank ended.
type Exit struct {
	// Code is the exit status when the rank exited by itself.
	Code int
	// Signal is the signal that killed it, or 0.
	Signal syscall.Signal
	// Err is set when the rank's fate is unknown: its host's connection was lost.
	Err error
}

// Failed reports whether the rank did not end with status 0.
func (e Exit) Failed() bool { return e.Code != 0 || e.Signal != 0 || e.Err != nil }

// Status is the exit status a shell would report: the code, or 128+signal.
func (e Exit) Status() int {
	if e.Signal != 0 {
		return 128 + int(e.Signal)
	}
	return e.Code
}

// String reads "exit code 3", "signal 9 (killed)" or the connection error.
func (e Exit) String() string {
	switch {
	case e.Err != nil:
		return e.Err.Error()
	case e.Signal != 0:
		return fmt.Sprintf("signal %d (%s)", int(e.Signal), e.Signal)
	}
	return fmt.Sprintf("exit code %d", e.Code)
}

// Proc is a started rank.
type Proc interface {
	// Pid is the rank's process id on its host.
	Pid() int
	// Signal sends sig to the rank's process group.
	Signal(sig syscall.Signal) error
	// Wait blocks until the rank has ended and its output has been delivered.
	Wait() Exit
}

// Spawner starts ranks on one kind of host.
type Spawner interface {
	Start(ctx context.Context, spec Spec) (Proc, error)
}

// Local starts ranks on this machine with os/exec, each in its own process group, so that
// a Ctrl-C at the terminal reaches ccrun alone and ccrun decides what the ranks get.
type Local struct {
	// Environ is what local ranks inherit (ccrun's environment); reserved names are dropped.
	Environ []string
	// WaitDelay bounds how long Wait waits for output after the rank exited, in case a
	// child of the rank that left its process group still holds the pipes (default 2s).
	WaitDelay time.Duration
}

// Start runs spec.Argv. The secret reaches the rank as CC_JOB_SECRET, visible only to the
// rank's own user in /proc/PID/environ, never on a command line.
func (l Local) Start(ctx context.Context, spec Spec) (Proc, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("no program to run")
	}
	path, err := exec.LookPath(spec.Argv[0])
	if err != nil {
		return nil, fmt.Errorf("program %q: %w", spec.Argv[0], err)
	}
	cmd := exec.Command(path, spec.Argv[1:]...)
	cmd.Args[0] = spec.Argv[0]
	env := append(Inherit(l.Environ), spec.Env...)
	if spec.Secret != "" {
		env = append(env, EnvJobSecret+"="+spec.Secret)
	}
	cmd.Env = env
	cmd.Dir = spec.Dir
	cmd.Stdout, cmd.Stderr = spec.Stdout, spec.Stderr
	// Setpgid: own process group. Pdeathsig: if ccrun dies without tearing down (SIGKILL),
	// the kernel kills the rank; the bootstrap lifeline covers its children.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = l.WaitDelay
	if cmd.WaitDelay == 0 {
		cmd.WaitDelay = 2 * time.Second
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Argv[0], err)
	}
	return &localProc{cmd: cmd}, nil
}

type localProc struct{ cmd *exec.Cmd }

func (p *localProc) Pid() int { return p.cmd.Process.Pid }

// Signal signals the process group, whose id is the rank's pid (Setpgid).
func (p *localProc) Signal(sig syscall.Signal) error {
	err := syscall.Kill(-p.cmd.Process.Pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil // already gone
	}
	return err
}

func (p *localProc) Wait() Exit {
	err := p.cmd.Wait()
	st, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		return Exit{Err: err}
	case st.Signaled():
		return Exit{Signal: st.Signal()}
	default:
		// ErrWaitDelay (output still held open by a straggler) does not change the status.
		return Exit{Code: st.ExitStatus()}
	}
}

var _ Spawner = Local{}
