package launch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/seed-760dd1f1/cc/launch/sshspawn"
)

// Srun is a Remote that starts every rank with its own `srun` job step inside the current
// Slurm allocation, so that Slurm tracks, accounts and cleans up every rank:
//
//	srun --nodes=1 --ntasks=1 --nodelist=HOST --exact --kill-on-bad-exit=1 --job-name=ccrun
//	     [--chdir=DIR] /bin/sh -c '<srunScript>' ccrun OPTIONAL PROGRAM ARGS...
//
// srun runs on this machine as a child of ccrun in its own process group; the rank's
// variables reach the task through srun's environment (srun's default --export=ALL), and
// the job secret through srun's stdin, which srun forwards to the task: the task's script
// keeps it in a deleted 0600 file read as CC_JOB_SECRET_FILE=/dev/fd/3, so it appears
// neither on a command line nor in an environment. SIGTERM, SIGUSR1 and SIGUSR2 go to srun,
// which forwards them to the task; SIGKILL goes to srun's process group, and Slurm ends
// the step when srun is gone. srun's exit status is the task's (128+N when the task died
// of signal N), so a killed rank reads as exit code 137.
//
// One step per rank costs one srun process here and one step record in slurmctld per rank:
// fine for tens of ranks, heavy for thousands.
type Srun struct {
	// Path is the srun program (default "srun", looked up in PATH).
	Path string
	// Scontrol is the scontrol program used to find the nodes' addresses (default
	// "scontrol").
	Scontrol string
	// Environ is ccrun's environment; srun and the task inherit it (reserved names dropped).
	Environ []string

	mu    sync.Mutex
	addrs map[string][2]string // host -> {ccrun's address toward it, its address}
}

// srunScript runs in the task. It reads the job secret (one line) from stdin into a
// deleted 0600 file opened as fd 3, detaches stdin, prints "ccrun-pid PID" as its first
// line of output (the rank keeps that pid: it is exec'd), unsets the one-task step's
// identity slurmd set (unsetSlurmTask), enters DIR when given, checks the program exists
// (exit 127 naming the host otherwise) and execs it. It contains no single quote.
const srunScript = sshspawn.SecretPrelude + `exec </dev/null
printf "ccrun-pid %s\n" $$
` + unsetSlurmTask + sshspawn.EnterDir + `shift 2
` + sshspawn.ExecProgram

// SrunArgs returns the srun command line (without the program name) that runs spec's
// program as one task on spec.Slot.Host. It is pure.
func SrunArgs(spec Spec) []string {
	opt := "0"
	if spec.DirOptional {
		opt = "1"
	}
	args := []string{
		"--nodes=1", "--ntasks=1", "--nodelist=" + spec.Slot.Host, "--exact",
		"--kill-on-bad-exit=1", "--job-name=ccrun",
		"/bin/sh", "-c", srunScript, "ccrun", spec.Dir, opt,
	}
	return append(args, spec.Argv...)
}

// Connect checks that srun runs and finds each host's address and ccrun's address toward
// it (where its ranks reach the bootstrap root).
func (s *Srun) Connect(ctx context.Context, hosts []RemoteHost) error {
	if _, err := exec.LookPath(s.srun()); err != nil {
		return fmt.Errorf("--launcher srun: %w", err)
	}
	scontrol := s.Scontrol
	if scontrol == "" {
		scontrol = "scontrol"
	}
	cmd := exec.CommandContext(ctx, scontrol, "show", "node", "--oneliner")
	cmd.Env = Inherit(s.Environ)
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && len(ee.Stderr) > 0 {
			err = fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return fmt.Errorf("--launcher srun: %s show node: %w", scontrol, err)
	}
	nodeAddr := ParseNodeAddrs(string(out))
	addrs := map[string][2]string{}
	for _, h := range hosts {
		addr, ok := nodeAddr[h.Name]
		if !ok {
			return fmt.Errorf("--launcher srun: host %s is not a node of this Slurm cluster (scontrol show node lists %d nodes)", h.Name, len(nodeAddr))
		}
		local, err := localAddrToward(addr)
		if err != nil {
			return fmt.Errorf("--launcher srun: host %s (NodeAddr=%s): %w", h.Name, addr, err)
		}
		addrs[h.Name] = [2]string{local, addr}
	}
	s.mu.Lock()
	s.addrs = addrs
	s.mu.Unlock()
	return nil
}

// ParseNodeAddrs reads `scontrol show node` output (one line per node with --oneliner, or
// the multi-line form) into a map from NodeName to NodeAddr (the name itself when a node
// has no NodeAddr). Each NodeName= field starts a node; fields before the first are
// ignored. It is pure.
func ParseNodeAddrs(out string) map[string]string {
	m := map[string]string{}
	name := ""
	for f := range strings.FieldsSeq(out) {
		if v, ok := strings.CutPrefix(f, "NodeName="); ok {
			name = v
			if name != "" {
				m[name] = name
			}
		} else if v, ok := strings.CutPrefix(f, "NodeAddr="); ok && name != "" && v != "" {
			m[name] = v
		}
	}
	return m
}

// localAddrToward returns this machine's source address for packets to host (a name or
// an address); no packet is sent.
func localAddrToward(host string) (string, error) {
	ips, err := net.LookupHost(host)
	if err != nil {
		return "", err
	}
	c, err := net.Dial("udp", net.JoinHostPort(ips[0], "9"))
	if err != nil {
		return "", fmt.Errorf("no route: %w", err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String(), nil
}

// Addrs returns ccrun's address toward host and host's address (after Connect).
func (s *Srun) Addrs(host string) (local, remote string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.addrs[host]
	return a[0], a[1]
}

// Preload is not supported: the allocation's hosts are expected to share the program (or
// the job script copies it with sbcast).
func (s *Srun) Preload(context.Context, string, string) (string, error) {
	return "", errors.New("--preload-binary is not supported with --launcher srun (use sbcast, or a shared file system)")
}

// Start runs one srun step for spec and returns once the task has reported its pid (or
// srun has ended without it).
func (s *Srun) Start(ctx context.Context, spec Spec) (Proc, error) {
	dropStdin(spec.Stdin) // srun's own stdin forwarding is not used: /dev/null
	if len(spec.Argv) == 0 {
		return nil, errors.New("no program to run")
	}
	stdout, stderr := spec.Stdout, spec.Stderr
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	cmd := exec.Command(s.srun(), SrunArgs(spec)...)
	cmd.Env = append(Inherit(s.Environ), spec.Env...)
	cmd.Stderr = stderr
	// Own process group, so that a Ctrl-C at the terminal reaches ccrun alone (srun reacts
	// to SIGINT on its own). Pdeathsig: if ccrun dies, srun dies and Slurm ends the step.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 2 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = pw
	err = cmd.Start()
	pw.Close()
	if err != nil {
		pr.Close()
		return nil, fmt.Errorf("start srun for rank %d on %s: %w", spec.Slot.Rank, spec.Slot.Host, err)
	}
	p := &srunProc{cmd: cmd, out: pr, copied: make(chan struct{})}
	// The secret is one line; srun forwards it to the task, which detaches its stdin once
	// it has read the line.
	_, werr := io.WriteString(stdin, spec.Secret+"\n")
	stdin.Close()
	stop := context.AfterFunc(ctx, func() { p.Signal(syscall.SIGKILL) })
	br := bufio.NewReader(pr)
	line, rerr := br.ReadString('\n')
	if !stop() {
		close(p.copied) // nothing copies the output
		p.Wait()
		return nil, fmt.Errorf("srun for rank %d on %s: %w", spec.Slot.Rank, spec.Slot.Host, context.Cause(ctx))
	}
	if pid, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), srunPidPrefix); ok && werr == nil && rerr == nil {
		p.pid, _ = strconv.Atoi(pid)
	} else if line != "" {
		io.WriteString(stdout, line)
	}
	go func() {
		io.Copy(stdout, br)
		close(p.copied)
	}()
	return p, nil
}

// srunPidPrefix starts the first line srunScript prints.
const srunPidPrefix = "ccrun-pid "

// srunProc is one rank's srun. Pid is the task's pid on its host; signals go to srun's
// process group here.
type srunProc struct {
	cmd    *exec.Cmd
	out    *os.File
	pid    int
	copied chan struct{}
	once   sync.Once
	exit   Exit
}

// Pid is the rank's pid on its host (0 if the task failed before reporting it).
func (p *srunProc) Pid() int { return p.pid }

// Signal sends sig to srun's process group: srun forwards SIGTERM, SIGUSR1 and SIGUSR2 to
// the task, and when SIGKILL ends srun, Slurm ends the step.
func (p *srunProc) Signal(sig syscall.Signal) error {
	err := syscall.Kill(-p.cmd.Process.Pid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// Wait waits for srun to end and for the task's output, at most WaitDelay after srun.
func (p *srunProc) Wait() Exit {
	p.once.Do(func() {
		p.cmd.Wait()
		select {
		case <-p.copied:
		case <-time.After(p.cmd.WaitDelay):
			p.out.Close() // a straggler holds the pipe: stop copying
			<-p.copied
		}
		p.out.Close()
		st, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
		switch {
		case !ok:
			p.exit = Exit{Err: errors.New("srun: no exit status")}
		case st.Signaled():
			p.exit = Exit{Signal: st.Signal()}
		default:
			p.exit = Exit{Code: st.ExitStatus()}
		}
	})
	return p.exit
}

// Close has nothing to end: every srun is a child process that Wait reaps.
func (s *Srun) Close() error { return nil }

func (s *Srun) srun() string {
	if s.Path == "" {
		return "srun"
	}
	return s.Path
}

var _ Remote = (*Srun)(nil)
