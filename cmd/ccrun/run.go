package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/seed-760dd1f1/cc/cmd/internal/cli"
	"github.com/seed-760dd1f1/cc/launch"
	"github.com/seed-760dd1f1/cc/launch/agent"
	"github.com/seed-760dd1f1/cc/launch/hostfile"
	"github.com/seed-760dd1f1/cc/launch/sshspawn"
	"github.com/spf13/cobra"
)

// run is the whole program (see cli.RunFunc).
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	if len(args) > 1 && args[1] == agent.Flag {
		return runAgent(ctx, stderr)
	}
	ctx, kill, stop := trapSignals(ctx)
	defer stop()
	var o Options
	v := cli.NewViper(envPrefix, environ)
	var cmd *cobra.Command
	cmd = newRoot(&o, stdout, stderr, func(ctx context.Context, argv []string) error {
		if err := cli.BindFlags(cmd.Flags(), v, envPrefix); err != nil {
			return cli.WithCode(exitUsage, err)
		}
		lookup := cli.Lookup(environ)
		if o.CollNetServe != "" {
			return serveCollNet(ctx, o.CollNetServe, lookup, stdout, stderr)
		}
		what := "--timeout"
		if t, ok := lookup("MPIEXEC_TIMEOUT"); ok && !cmd.Flags().Changed("timeout") && !v.IsSet("timeout") {
			o.Timeout, what = t, "MPIEXEC_TIMEOUT"
		}
		timeout, err := parseTimeout(what, o.Timeout)
		if err != nil {
			return cli.WithCode(exitUsage, err)
		}
		return launchJob(ctx, kill, &o, timeout, argv, environ, stdout, stderr)
	})
	if shell, ok := completionShell(args[1:]); ok {
		return cli.Fail(stderr, "ccrun", writeCompletion(cmd, shell, stdout))
	}
	cmd.SetArgs(completeArgs(args[1:], cmd.Flags()))
	return cli.Fail(stderr, "ccrun", cmd.ExecuteContext(ctx))
}

// launchJob turns the options into a launch.Options, runs the job and maps its outcome to
// an exit status. kill carries the signals that hurry the teardown (see trapSignals).
func launchJob(ctx context.Context, kill <-chan os.Signal, o *Options, timeout time.Duration, argv, environ []string, stdout, stderr io.Writer) error {
	lookup := cli.Lookup(environ)
	logw := &lockedWriter{w: stderr}
	logf := func(format string, args ...any) {}
	if o.Verbose {
		logf = func(format string, args ...any) { logw.printf("ccrun: "+format+"\n", args...) }
	}
	switch {
	case o.NP < 0:
		return usagef("bad -np %d: want 1 or more ranks", o.NP)
	case o.Grace <= 0:
		return usagef("bad --grace %v: want a positive duration such as 3s", o.Grace)
	case o.PerNode < 0 || o.PPN < 0:
		return usagef("bad ranks per node %d: want 1 or more", min(o.PerNode, o.PPN))
	case o.PerNode > 0 && o.PPN > 0:
		return usagef("-N %d and -ppn %d mean different things (exactly N ranks per host; every host has N slots): give one", o.PerNode, o.PPN)
	case o.TagOutput && o.Label:
		return usagef("--tag-output and -l/--prepend-rank exclude each other: choose one")
	}
	if err := checkLauncher(o, lookup); err != nil {
		return err
	}
	cn, err := collnetServer(o)
	if err != nil {
		return err
	}
	if err := checkSSH(o); err != nil {
		return err
	}
	mapBy, ppr, err := launch.ParseMapBy(o.MapBy)
	if err != nil {
		return cli.WithCode(exitUsage, err)
	}
	perNode := o.PerNode
	if ppr > 0 {
		if perNode > 0 && perNode != ppr {
			return usagef("--map-by %s and -N %d disagree", o.MapBy, perNode)
		}
		perNode = ppr
	}
	isLocal := launch.IsLocalName
	if o.Launcher == launcherSrun {
		isLocal = func(string) bool { return false } // every rank is a Slurm step
	}
	hosts, source, err := resolveHosts(o, lookup, isLocal)
	if err != nil {
		return err
	}
	hosts = launch.OneNode(hosts, isLocal)
	if o.PPN > 0 {
		if hosts, err = hydraPPN(hosts, o.PPN); err != nil {
			return err
		}
	} // localhost, the host name, its addresses: one node
	logf("hosts from %s: %d", source, len(hosts))
	if err := checkLocal(o, hosts, source, isLocal); err != nil {
		return err
	}
	lo := launch.Options{
		Hosts:     hosts,
		Placement: launch.Placement{NP: o.NP, MapBy: mapBy, PerNode: perNode, Oversubscribe: o.Oversubscribe},
		Argv:      argv,
		Environ:   environ,
		Env:       envRequest(o),
		Wdir:      o.Wdir,
		Output:    launch.Output{Stdout: stdout, Stderr: stderr, Tag: o.TagOutput, Label: o.Label, Dir: o.OutputDir, Status: cli.IsTerminal(stderr)},
		Timeout:   timeout,
		Grace:     o.Grace,
		RootAddr:  o.RootAddr,
		Preload:   o.Preload,
		IsLocal:   isLocal,
		Kill:      kill,
		Logf:      logf,

		SkipUnreachable: o.SkipUnreachable,
		Skipped:         func(host string, why error) { logw.printf("ccrun: skipping %s: %v\n", host, why) },
	}
	// Input errors are usage errors: check them before touching any host.
	if o.Launcher == launcherSrun && source == sourceSlurm {
		if total := slotCount(hosts); o.NP > total {
			return usagef("--launcher srun: -np %d is more than the %d tasks of the Slurm allocation (SLURM_JOB_NODELIST=%s, SLURM_TASKS_PER_NODE=%s): use -np %d or fewer, or allocate more tasks (salloc/sbatch -n)",
				o.NP, total, env(lookup, "SLURM_JOB_NODELIST"), env(lookup, "SLURM_TASKS_PER_NODE"), total)
		}
	}
	slots, err := launch.Place(hosts, lo.Placement)
	if err != nil {
		if source == sourceSlurm {
			err = fmt.Errorf("the Slurm allocation (SLURM_JOB_NODELIST=%s, SLURM_TASKS_PER_NODE=%s): %w",
				env(lookup, "SLURM_JOB_NODELIST"), env(lookup, "SLURM_TASKS_PER_NODE"), err)
		}
		return cli.WithCode(exitUsage, err)
	}
	if o.GenvAll && (o.GenvNone || len(o.GenvList) > 0) {
		return usagef("-genvall cannot be combined with -genvnone or -genvlist: choose one")
	}
	if _, err := launch.BaseEnv(environ, lo.Env); err != nil {
		return cli.WithCode(exitUsage, err)
	}
	if err := checkMPI(o, argv, len(slots)); err != nil {
		return err
	}
	var why string
	lo.PMI, why = speaksPMI(o, argv)
	if lo.PMI {
		logf("PMI-1 server: on (%s)", why)
	} else {
		logf("PMI-1 server: off (%s)", why)
	}
	for _, name := range launch.UnsetX(environ, lo.Env) {
		flag := "-x " + name
		if !slices.Contains(o.X, name) {
			flag = "-genvlist " + strings.Join(o.GenvList, ",")
		}
		logw.printf("ccrun: warning: %s: %s is not set in ccrun's environment; the ranks do not get it\n", flag, name)
	}
	if lo.StdinTo, err = stdinTarget(o.Stdin, len(slots)); err != nil {
		return err
	}
	if lo.StdinTo != launch.StdinNone {
		lo.Stdin = ranksStdin(stdinFile)
	}
	if o.DisplayMap {
		// Printed once the hosts are reached: two names of one machine are one node.
		lo.Placed = func(slots []launch.Slot) { writeMap(stdout, slots) }
	}
	if o.Launcher == launcherSrun {
		lo.Remote = &launch.Srun{Environ: environ}
	} else if needsSSH(hosts) || (o.CollNet != "" && !isLocal(o.CollNet)) {
		sp, err := sshspawn.New(sshspawn.Config{
			User: o.SSHUser, Port: o.SSHPort, Identities: o.SSHIdentity, KnownHosts: o.SSHKnownHosts,
			ConfigFile: o.SSHConfig, AcceptNew: o.SSHAcceptNew, ConnectTimeout: o.SSHTimeout,
			KeepaliveInterval: o.SSHKeepalive, KeepaliveCountMax: o.SSHKeepaliveMax,
			MaxParallel: o.SSHParallel, MaxSessions: o.SSHMaxSessions,
			Home: env(lookup, "HOME"), LocalUser: env(lookup, "USER"), AgentSocket: env(lookup, "SSH_AUTH_SOCK"),
			Logf: logf,
		})
		if err != nil {
			return err
		}
		self, err := os.Executable()
		lo.Remote = agent.NewSSH(sp, agent.SSHOptions{
			Path: self, Preload: o.Preload, Disabled: o.NoAgent || err != nil, Keepalive: o.SSHKeepalive, Logf: logf,
		})
	}
	lo.CollNet = cn
	fwd, stop := forwardSignals()
	defer stop()
	lo.Forward = fwd
	rep, err := launch.Run(ctx, lo)
	var pe *launch.ProgramError
	if errors.As(err, &pe) {
		return cli.WithCode(pe.Code(), err)
	}
	if err != nil {
		return err
	}
	code := rep.ExitCode()
	if rep.Cause != nil && rep.Cause.Kind == launch.CauseInterrupt {
		code = cli.Code(rep.Cause.Err)
		var se *cli.SignalError
		if errors.As(rep.Cause.Err, &se) {
			rep.Cause.Err = fmt.Errorf("%s received", signalName(se.Signal))
		}
	}
	logw.mu.Lock()
	rep.WriteSummary(stderr)
	logw.mu.Unlock()
	if code != 0 {
		return cli.Silent(code)
	}
	return nil
}

// envRequest turns -x, --env, --forward-prefix and Hydra's -genvlist, -genvall and
// -genvnone into a launch.EnvRequest: -genvlist A,B is -genvnone plus -x A -x B.
func envRequest(o *Options) launch.EnvRequest {
	req := launch.EnvRequest{Forward: o.ForwardPrefix, X: append(slices.Clone(o.X), o.GenvList...), Env: o.Env}
	switch {
	case o.GenvAll:
		req.Pass = launch.PassAll
	case o.GenvNone || len(o.GenvList) > 0:
		req.Pass = launch.PassNone
	}
	return req
}

// resolveHosts reads --hostfile and -H (with both, -H selects among the hostfile's hosts,
// as with mpirun); without them, a Slurm allocation; else this machine. A hostfile host of
// this machine without a slot count gets one slot per CPU (Open MPI: its cores).
func resolveHosts(o *Options, lookup func(string) (string, bool), isLocal func(string) bool) ([]hostfile.Host, string, error) {
	var inFile []hostfile.Host
	var file string
	for _, hf := range []struct{ flag, file string }{{"--hostfile", o.Hostfile}, {"--machinefile", o.Machinefile}} {
		if hf.file == "" {
			continue
		}
		f, err := os.Open(hf.file)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, "", usagef("%s %s: %v", hf.flag, hf.file, err)
		}
		got, err := hostfile.Parse(hf.file, f)
		f.Close()
		if err != nil {
			return nil, "", cli.WithCode(exitUsage, err)
		}
		inFile, file = hostfile.Merge(inFile, got...), hf.file
	}
	inFile = launch.LocalCores(inFile, isLocal)
	var listed []hostfile.Host
	for _, h := range o.Hosts {
		got, err := hostfile.ParseList(h)
		if err != nil {
			return nil, "", cli.WithCode(exitUsage, fmt.Errorf("-H: %w", err))
		}
		listed = hostfile.Merge(listed, got...)
	}
	switch {
	case len(inFile) > 0 && len(listed) > 0:
		same := func(a, b string) bool { return a == b || isLocal(a) && isLocal(b) }
		hosts, err := hostfile.Select(inFile, listed, same)
		if err != nil {
			return nil, "", usagef("-H with --hostfile %s: %v", file, err)
		}
		return hosts, "-H within " + file, nil
	case len(inFile) > 0:
		return inFile, file, nil
	case len(listed) > 0:
		return listed, "-H", nil // -H node without a count is one slot, as with mpirun
	}
	nodes, ok := lookup("SLURM_JOB_NODELIST")
	if !ok {
		nodes, ok = lookup("SLURM_NODELIST")
	}
	if ok && nodes != "" {
		tasks, _ := lookup("SLURM_TASKS_PER_NODE")
		h, err := hostfile.Slurm(nodes, tasks)
		return h, sourceSlurm, cli.WithCode(exitUsage, err)
	}
	return launch.LocalHost(), sourceLocal, nil
}

// hydraPPN applies Hydra's -ppn N: every host gets N slots, whatever its hostfile said.
func hydraPPN(hosts []hostfile.Host, n int) ([]hostfile.Host, error) {
	out := make([]hostfile.Host, len(hosts))
	for i, h := range hosts {
		if h.MaxSlots > 0 && n > h.MaxSlots {
			return nil, usagef("-ppn %d: host %s has max_slots=%d", n, h.Name, h.MaxSlots)
		}
		h.Slots, h.NoCount = n, false
		out[i] = h
	}
	return out, nil
}

// Where the hosts came from, when neither -H nor --hostfile gave them.
const (
	sourceSlurm = "the Slurm allocation"
	sourceLocal = "this machine"
)

// checkLocal checks what concerns the ranks on this machine before anything starts:
// without hosts, no more ranks than CPUs unless --oversubscribe (as mpirun); --wdir must
// exist here.
func checkLocal(o *Options, hosts []hostfile.Host, source string, isLocal func(string) bool) error {
	if cpus := slotCount(hosts); source == sourceLocal && o.NP > cpus && !o.Oversubscribe {
		return usagef("-np %d is more than the %d CPUs of this machine (one slot each): use -np %d or fewer, add --oversubscribe, or give hosts with -H or --hostfile",
			o.NP, cpus, cpus)
	}
	if o.Wdir == "" {
		return nil
	}
	for _, h := range hosts {
		if isLocal(h.Name) {
			return cli.WithCode(exitUsage, launch.CheckDir(o.Wdir))
		}
	}
	return nil
}

// checkSSH refuses SSH settings that cannot work, rather than replacing them with defaults.
func checkSSH(o *Options) error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--ssh-connect-timeout", o.SSHTimeout}, {"--ssh-keepalive", o.SSHKeepalive}} {
		if d.v <= 0 {
			return usagef("bad %s %v: want a positive duration such as 5s", d.flag, d.v)
		}
	}
	for _, n := range []struct {
		flag string
		v    int
	}{{"--ssh-keepalive-count", o.SSHKeepaliveMax}, {"--ssh-parallel", o.SSHParallel}, {"--ssh-max-sessions", o.SSHMaxSessions}} {
		if n.v <= 0 {
			return usagef("bad %s %d: want 1 or more", n.flag, n.v)
		}
	}
	if o.SSHPort < 0 || o.SSHPort > 65535 {
		return usagef("bad --ssh-port %d: want 1-65535 (0: the ssh config's Port, else 22)", o.SSHPort)
	}
	return nil
}

// The values of --launcher.
const (
	launcherSSH  = "ssh"
	launcherSrun = "srun"
)

// checkLauncher validates --launcher and what it cannot be combined with.
func checkLauncher(o *Options, lookup func(string) (string, bool)) error {
	switch o.Launcher {
	case launcherSSH:
		return nil
	case launcherSrun:
	default:
		return usagef("bad --launcher %q (allowed: ssh, srun)", o.Launcher)
	}
	if job, ok := lookup("SLURM_JOB_ID"); !ok || job == "" {
		return usagef("--launcher srun needs a Slurm allocation, but SLURM_JOB_ID is not set: run ccrun under salloc or sbatch")
	}
	switch {
	case o.Preload:
		return usagef("--preload-binary cannot be used with --launcher srun: use sbcast or a shared file system")
	case o.SkipUnreachable:
		return usagef("--skip-unreachable cannot be used with --launcher srun: Slurm allocates only nodes it reaches (sbatch --exclude drops others)")
	case o.Oversubscribe:
		return usagef("--oversubscribe cannot be used with --launcher srun: Slurm runs at most the allocation's tasks at once")
	}
	return nil
}

// slotCount adds up the hosts' slots.
func slotCount(hosts []hostfile.Host) int {
	n := 0
	for _, h := range hosts {
		n += h.Slots
	}
	return n
}

// needsSSH reports whether some host is not this machine.
func needsSSH(hosts []hostfile.Host) bool {
	for _, h := range hosts {
		if !launch.IsLocalName(h.Name) {
			return true
		}
	}
	return false
}

func env(lookup func(string) (string, bool), k string) string {
	v, _ := lookup(k)
	return v
}

// writeMap prints the rank-to-host map (--display-map).
func writeMap(w io.Writer, slots []launch.Slot) {
	t := tablewriter.NewTable(w,
		tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{
			Borders:  tw.BorderNone,
			Symbols:  tw.NewSymbols(tw.StyleNone),
			Settings: tw.Settings{Lines: tw.LinesNone, Separators: tw.SeparatorsNone},
		})),
		tablewriter.WithHeaderAutoFormat(tw.Off),
		tablewriter.WithHeaderAlignment(tw.AlignRight),
		tablewriter.WithRowAlignment(tw.AlignRight))
	t.Header([]string{"rank", "host", "node", "local rank", "local ranks"})
	for _, s := range slots {
		t.Append([]string{strconv.Itoa(s.Rank), s.Host, strconv.Itoa(s.NodeRank), strconv.Itoa(s.LocalRank), strconv.Itoa(s.LocalNRanks)})
	}
	t.Render()
}

// signalName is "SIGINT" for os.Interrupt.
func signalName(s os.Signal) string {
	if ss, ok := s.(syscall.Signal); ok {
		return launch.SignalName(ss)
	}
	return s.String()
}

// lockedWriter serialises ccrun's own lines on stderr.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, format, args...)
}
