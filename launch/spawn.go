package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/seed-760dd1f1/cc/launch/sshspawn"
	"github.com/seed-760dd1f1/cc/runtime/transport/shm"
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
	// Stdin, when not nil, is copied to the rank's standard input until it ends (the rank
	// then reads EOF); nil means /dev/null. The spawner closes it, if it is an io.Closer,
	// once the rank has ended, so that whoever feeds it stops.
	Stdin io.Reader
	// PMI, when set, gives the rank a private connection to the job's PMI server: the
	// spawner makes a socketpair (on the rank's host), passes one end to the rank as an
	// inherited descriptor named by PMI_FD, and, once the rank has started, calls PMI
	// with ccrun's end (or a relay of it), which serves it.
	PMI func(net.Conn)
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
//
// Every local rank has a lifeline, as a remote one has its SSH session: a watcher process
// (/bin/sh running sshspawn.WatchLifeline), started by ccrun right after the rank in a
// process group of its own (so no signal ccrun sends the rank's group reaches it), holds
// the read end of a pipe whose only write end ccrun keeps. The pipe ends when the rank has
// exited and ccrun closes it, or when ccrun dies, even by SIGKILL (the kernel closes its
// files); the watcher then sends SIGTERM to the rank's group, waits up to 3 s for the rank
// to be gone, and sends SIGKILL to the group. So the rank's children and grandchildren
// (ccrun sh -c ..., Python workers) never outlive the rank or ccrun, unless they leave the
// process group (setsid, daemons). The rank itself also has Pdeathsig: it gets SIGKILL the
// moment ccrun dies (the only cover in the instant between the rank's start and its
// watcher's). Wait returns only once the watcher is gone, that is once the whole group has
// had its SIGKILL.
type Local struct {
	// Environ is what local ranks inherit (ccrun's environment); reserved names are dropped.
	Environ []string
	// WaitDelay bounds how long Wait waits for output after the rank's process group was
	// killed, in case a process that left the group still holds the pipes (default 2s).
	WaitDelay time.Duration
}

// localWatcher is the lifeline watcher's script: $1 is the rank's process group, stdin
// the lifeline.
const localWatcher = `exec 4<&0 </dev/null; g=$1; ` + sshspawn.WatchLifeline

// Start runs spec.Argv. The secret reaches the rank as CC_JOB_SECRET, visible only to the
// rank's own user in /proc/PID/environ, never on a command line. A relative program path
// (./app) is taken relative to spec.Dir, where the rank runs.
func (l Local) Start(ctx context.Context, spec Spec) (Proc, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("no program to run")
	}
	path, err := LookProgram(spec.Argv[0], spec.Dir)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, spec.Argv[1:]...)
	cmd.Args[0] = spec.Argv[0]
	env := append(Inherit(l.Environ), spec.Env...)
	watcherEnv := env[:len(env):len(env)] // the rank's, without the secret
	if spec.Secret != "" {
		env = append(env, EnvJobSecret+"="+spec.Secret)
	}
	var pmiConn net.Conn
	if spec.PMI != nil {
		f, nc, err := pmiSocketpair()
		if err != nil {
			return nil, fmt.Errorf("start %s: PMI socketpair: %w", spec.Argv[0], err)
		}
		defer f.Close() // the rank has its copy once started
		cmd.ExtraFiles = []*os.File{f}
		env = append(env, EnvPMIFD+"=3") // ExtraFiles[0] is descriptor 3
		pmiConn = nc
	}
	cmd.Env = env
	cmd.Dir = spec.Dir
	// Setpgid: own process group. Pdeathsig: if ccrun dies without tearing down (SIGKILL),
	// the kernel kills the rank; its watcher then kills the rest of the group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &localProc{cmd: cmd, waitDelay: l.WaitDelay, watcherEnv: watcherEnv}
	if p.waitDelay == 0 {
		p.waitDelay = 2 * time.Second
	}
	if err := p.start(spec); err != nil {
		if pmiConn != nil {
			pmiConn.Close()
		}
		return nil, fmt.Errorf("start %s: %w", spec.Argv[0], err)
	}
	if pmiConn != nil {
		spec.PMI(pmiConn)
	}
	return p, nil
}

// pmiSocketpair returns the rank's end of a new Unix socketpair, as a file to pass on,
// and ccrun's end as a connection. Both are close-on-exec: no other child started
// meanwhile inherits them.
func pmiSocketpair() (*os.File, net.Conn, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	mine := os.NewFile(uintptr(fds[0]), "pmi")
	defer mine.Close() // FileConn has its own copy
	theirs := os.NewFile(uintptr(fds[1]), "pmi-rank")
	nc, err := net.FileConn(mine)
	if err != nil {
		theirs.Close()
		return nil, nil, err
	}
	return theirs, nc, nil
}

// LookProgram finds the program a local rank runs: a name without a slash in PATH, a path
// with one relative to dir (ccrun's directory when dir is empty), as the rank will see it.
// Its error is a *ProgramError.
func LookProgram(prog, dir string) (string, error) {
	look := prog
	if dir != "" && strings.Contains(prog, "/") && !filepath.IsAbs(prog) {
		look = filepath.Join(dir, prog)
	}
	path, err := exec.LookPath(look)
	if err != nil {
		pe := &ProgramError{Prog: prog, Err: err}
		if look != prog {
			pe.Dir = dir
		}
		return "", pe
	}
	return path, nil
}

// ProgramError is a program that local ranks cannot run. Its Code is what a shell (and a
// remote rank, see sshspawn.ExecProgram) exits with: 127 when it does not exist, 126 when
// it cannot be executed.
type ProgramError struct {
	// Prog is the program as given; Dir the --wdir it was looked up in, if any.
	Prog, Dir string
	Err       error
}

func (e *ProgramError) missing() bool {
	return errors.Is(e.Err, exec.ErrNotFound) || errors.Is(e.Err, fs.ErrNotExist)
}

func (e *ProgramError) Error() string {
	where := "this machine"
	if e.Dir != "" {
		where += " (in --wdir " + e.Dir + ")"
	}
	switch {
	case e.missing() && !strings.Contains(e.Prog, "/"):
		return fmt.Sprintf("program %q not found on %s (PATH=%s)", e.Prog, where, os.Getenv("PATH"))
	case e.missing():
		return fmt.Sprintf("program %q not found on %s", e.Prog, where)
	}
	var pe *fs.PathError
	err := e.Err
	if errors.As(err, &pe) {
		err = pe.Err
	} else if ee := (*exec.Error)(nil); errors.As(err, &ee) {
		err = ee.Err
	}
	return fmt.Sprintf("program %q on %s cannot be run: %v", e.Prog, where, err)
}

func (e *ProgramError) Unwrap() error { return e.Err }

// Code is the exit status ccrun ends with: 127 for a missing program, else 126.
func (e *ProgramError) Code() int {
	if e.missing() {
		return 127
	}
	return 126
}

// CheckDir checks that dir, the ranks' working directory, is a directory on this machine.
func CheckDir(dir string) error {
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("--wdir %s: %w", dir, err)
	case !fi.IsDir():
		return fmt.Errorf("--wdir %s: not a directory", dir)
	}
	return nil
}

// localProc is a local rank and its watcher.
type localProc struct {
	cmd       *exec.Cmd
	watcher   *exec.Cmd
	lifeline  *os.File   // ccrun's end: closing it makes the watcher kill the group
	readers   []*os.File // ccrun's ends of the rank's stdout and stderr pipes
	copied    sync.WaitGroup
	stdin     io.Reader      // Spec.Stdin
	stdinW    *os.File       // ccrun's end of the rank's stdin pipe
	fed       sync.WaitGroup // the copy to stdinW
	waitDelay time.Duration
	// watcherEnv is the watcher's environment: the rank's without the secret, so that
	// whoever finds a job's processes by a variable of its ranks finds the watcher too.
	watcherEnv []string
}

// start starts the rank, then its watcher. The rank's output goes through pipes that
// ccrun reads (a file, as with --output-filename, is handed over as it is), so that Wait
// can tell the rank's exit from the end of its output.
func (p *localProc) start(spec Spec) (err error) {
	var childEnds []*os.File // the rank's (and the watcher's) ends, closed here once passed on
	defer func() {
		for _, f := range childEnds {
			f.Close()
		}
		if err != nil {
			for _, f := range p.readers {
				f.Close()
			}
			p.copied.Wait()
			p.closeStdin()
			if p.lifeline != nil {
				p.lifeline.Close()
			}
		}
	}()
	if p.cmd.Stdout, err = p.forward(spec.Stdout, &childEnds); err != nil {
		return err
	}
	if p.cmd.Stderr, err = p.forward(spec.Stderr, &childEnds); err != nil {
		return err
	}
	if err := p.feed(spec.Stdin, &childEnds); err != nil {
		return err
	}
	lr, lw, err := os.Pipe()
	if err != nil {
		return err
	}
	childEnds = append(childEnds, lr)
	p.lifeline = lw
	if err := p.cmd.Start(); err != nil {
		return err
	}
	pgid := p.cmd.Process.Pid
	p.watcher = exec.Command("/bin/sh", "-c", localWatcher, "ccrun-lifeline", strconv.Itoa(pgid))
	p.watcher.Stdin = lr
	p.watcher.Env = p.watcherEnv
	p.watcher.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.watcher.Start(); err != nil {
		// No lifeline: do not leave a rank that nothing would clean up after.
		syscall.Kill(-pgid, syscall.SIGKILL)
		p.cmd.Wait()
		return fmt.Errorf("lifeline watcher: %w", err)
	}
	return nil
}

// forward returns what the rank writes a stream to: w itself when it is a file, else the
// write end of a pipe whose read end is copied to w.
func (p *localProc) forward(w io.Writer, childEnds *[]*os.File) (io.Writer, error) {
	if w == nil {
		return nil, nil // /dev/null
	}
	if f, ok := w.(*os.File); ok {
		return f, nil
	}
	r, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	*childEnds = append(*childEnds, pw)
	p.readers = append(p.readers, r)
	p.copied.Go(func() { io.Copy(w, r) })
	return pw, nil
}

// feed gives the rank a pipe as stdin and copies in to it, closing it when in ends; with
// in nil the rank's stdin is /dev/null.
func (p *localProc) feed(in io.Reader, childEnds *[]*os.File) error {
	if in == nil {
		return nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	*childEnds = append(*childEnds, r)
	p.cmd.Stdin, p.stdin, p.stdinW = r, in, w
	p.fed.Go(func() {
		io.Copy(w, in)
		w.Close()
	})
	return nil
}

// closeStdin ends the copy to the rank's stdin: it closes Spec.Stdin (if it can), which
// ends a read blocked on it, and the pipe, which ends a blocked write.
func (p *localProc) closeStdin() {
	if p.stdinW == nil {
		return
	}
	if c, ok := p.stdin.(io.Closer); ok {
		c.Close()
	}
	p.stdinW.Close()
	p.fed.Wait()
}

func (p *localProc) Pid() int { return p.cmd.Process.Pid }

// Signal signals the process group, whose id is the rank's pid (Setpgid).
func (p *localProc) Signal(sig syscall.Signal) error {
	err := syscall.Kill(-p.cmd.Process.Pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil // already gone
	}
	return err
}

// Wait waits for the rank, closes its lifeline so that the watcher kills what is left of
// its process group, waits for the watcher, then for the rank's output (at most WaitDelay
// more, for a process that left the group and still holds the pipes).
func (p *localProc) Wait() Exit {
	err := p.cmd.Wait()
	p.lifeline.Close()
	p.watcher.Wait()
	// The rank's process group is gone: remove what it left in shared
	// memory (the pool files of a rank killed before MemFree) now, not at
	// the next job's start.
	shm.CleanStale(shmDir, nil)
	p.closeStdin()
	copied := make(chan struct{})
	go func() {
		p.copied.Wait()
		close(copied)
	}()
	t := time.NewTimer(p.waitDelay)
	select {
	case <-copied:
	case <-t.C:
	}
	t.Stop()
	for _, r := range p.readers {
		r.Close() // ends the copies still blocked on an escaped holder of the pipe
	}
	<-copied
	st, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case !ok:
		return Exit{Err: err}
	case st.Signaled():
		return Exit{Signal: st.Signal()}
	default:
		return Exit{Code: st.ExitStatus()}
	}
}

var _ Spawner = Local{}

// shmDir is where ranks keep their shared memory.
const shmDir = "/dev/shm"
