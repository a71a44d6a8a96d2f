package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/seed-760dd1f1/cc/cmd/internal/cli"
	"github.com/seed-760dd1f1/cc/launch"
	"github.com/seed-760dd1f1/cc/launch/hostfile"
	"github.com/seed-760dd1f1/cc/launch/sshspawn"
	"github.com/spf13/cobra"
)

// run is the whole program (see cli.RunFunc).
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
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
		if t, ok := lookup("MPIEXEC_TIMEOUT"); ok && !cmd.Flags().Changed("timeout") && !v.IsSet("timeout") {
			n, err := strconv.Atoi(t)
			if err != nil {
				return usagef("MPIEXEC_TIMEOUT=%q: want a number of seconds", t)
			}
			o.Timeout = n
		}
		return launchJob(ctx, kill, &o, argv, environ, stdout, stderr)
	})
	cmd.SetArgs(rewriteArgs(args[1:], cmd.Flags()))
	return cli.Fail(stderr, "ccrun", cmd.ExecuteContext(ctx))
}

// launchJob turns the options into a launch.Options, runs the job and maps its outcome to
// an exit status. kill carries the signals that hurry the teardown (see trapSignals).
func launchJob(ctx context.Context, kill <-chan os.Signal, o *Options, argv, environ []string, stdout, stderr io.Writer) error {
	lookup := cli.Lookup(environ)
	logw := &lockedWriter{w: stderr}
	logf := func(format string, args ...any) {}
	if o.Verbose {
		logf = func(format string, args ...any) { logw.printf("ccrun: "+format+"\n", args...) }
	}
	switch {
	case o.NP < 0:
		return usagef("bad -np %d: want 1 or more ranks", o.NP)
	case o.Timeout < 0:
		return usagef("bad --timeout %d: want 0 (no timeout) or a number of seconds", o.Timeout)
	case o.Grace <= 0:
		return usagef("bad --grace %v: want a positive duration such as 3s", o.Grace)
	case o.PerNode < 0 || o.PPN < 0:
		return usagef("bad ranks per node %d: want 1 or more", min(o.PerNode, o.PPN))
	case o.PerNode > 0 && o.PPN > 0 && o.PerNode != o.PPN:
		return usagef("-N %d and -ppn %d disagree: give one", o.PerNode, o.PPN)
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
	perNode := max(o.PerNode, o.PPN)
	if ppr > 0 {
		if perNode > 0 && perNode != ppr {
			return usagef("--map-by %s and -N %d disagree", o.MapBy, perNode)
		}
		perNode = ppr
	}
	hosts, source, err := resolveHosts(o, lookup)
	if err != nil {
		return err
	}
	isLocal := launch.IsLocalName
	if o.Launcher == launcherSrun {
		isLocal = func(string) bool { return false } // every rank is a Slurm step
	}
	hosts = launch.OneNode(hosts, isLocal) // localhost, the host name, its addresses: one node
	logf("hosts from %s: %d", source, len(hosts))
	if err := checkLocal(o, hosts, source, isLocal); err != nil {
		return err
	}
	lo := launch.Options{
		Hosts:     hosts,
		Placement: launch.Placement{NP: o.NP, MapBy: mapBy, PerNode: perNode, Oversubscribe: o.Oversubscribe},
		Argv:      argv,
		Environ:   environ,
		Env:       launch.EnvRequest{Forward: o.ForwardPrefix, X: o.X, Env: o.Env},
		Wdir:      o.Wdir,
		Output:    launch.Output{Stdout: stdout, Stderr: stderr, Tag: o.TagOutput, Label: o.Label, Dir: o.OutputDir},
		Timeout:   time.Duration(o.Timeout) * time.Second,
		Grace:     o.Grace,
		RootAddr:  o.RootAddr,
		Preload:   o.Preload,
		IsLocal:   isLocal,
		Kill:      kill,
		Logf:      logf,
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
	if _, err := launch.BaseEnv(environ, lo.Env); err != nil {
		return cli.WithCode(exitUsage, err)
	}
	if o.DisplayMap {
		writeMap(stdout, slots)
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
		lo.Remote = launch.SSH(sp)
	}
	lo.CollNet = cn
	fwd, stop := forwardSignals()
	defer stop()
	lo.Forward = fwd
	rep, err := launch.Run(ctx, lo)
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

// resolveHosts reads -H and --hostfile; without them, a Slurm allocation; else this machine.
func resolveHosts(o *Options, lookup func(string) (string, bool)) ([]hostfile.Host, string, error) {
	var hosts []hostfile.Host
	var source string
	for _, hf := range []struct{ flag, file string }{{"--hostfile", o.Hostfile}, {"--machinefile", o.Machinefile}} {
		file := hf.file
		if file == "" {
			continue
		}
		f, err := os.Open(file)
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, "", usagef("%s %s: %v", hf.flag, file, err)
		}
		got, err := hostfile.Parse(file, f)
		f.Close()
		if err != nil {
			return nil, "", cli.WithCode(exitUsage, err)
		}
		hosts, source = hostfile.Merge(hosts, got...), file
	}
	for _, h := range o.Hosts {
		got, err := hostfile.ParseList(h)
		if err != nil {
			return nil, "", cli.WithCode(exitUsage, fmt.Errorf("-H: %w", err))
		}
		hosts, source = hostfile.Merge(hosts, got...), "-H"
	}
	if len(hosts) > 0 {
		return hosts, source, nil
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
