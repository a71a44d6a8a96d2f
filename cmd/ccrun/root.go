package main

import (
	"context"
	"io"
	"time"

	"github.com/seed-760dd1f1/cc/cmd/internal/cli"
	"github.com/seed-760dd1f1/cc/launch"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// envPrefix prefixes the environment variables that fill unset flags: CCRUN_HOSTFILE=f is
// --hostfile f, CCRUN_SSH_ACCEPT_NEW=1 is --ssh-accept-new.
const envPrefix = "CCRUN"

// exitUsage is the status of a command line ccrun cannot run.
const exitUsage = 2

// Options holds every flag of ccrun.
type Options struct {
	NP            int
	Hosts         []string
	Hostfile      string
	Machinefile   string
	PerNode       int
	PPN           int
	MapBy         string
	Oversubscribe bool
	X             []string
	Env           []string
	GenvList      []string
	GenvAll       bool
	GenvNone      bool
	ForwardPrefix []string
	TagOutput     bool
	Label         bool
	OutputDir     string
	Timeout       string
	Grace         time.Duration
	Wdir          string
	RootAddr      string
	Preload       bool
	DisplayMap    bool
	Verbose       bool
	Launcher      string
	// AllowSingletons runs an Open MPI program anyway (see checkMPI).
	AllowSingletons bool
	// PMI serves PMI-1 to any program, not only to one ccrun detects as MPICH (see speaksPMI).
	PMI             bool
	NoAgent         bool
	SkipUnreachable bool
	Stdin           string
	CollNet         string // --collnet-server: the host of the aggregation server, "" for none
	CollNetServe    string // the hidden server mode's listen address

	SSHPort         int
	SSHUser         string
	SSHIdentity     []string
	SSHKnownHosts   []string
	SSHConfig       string
	SSHAcceptNew    bool
	SSHTimeout      time.Duration
	SSHKeepalive    time.Duration
	SSHKeepaliveMax int
	SSHParallel     int
	SSHMaxSessions  int
}

// register declares the flags on fs.
func (o *Options) register(fs *pflag.FlagSet) {
	fs.SortFlags = false
	fs.IntVarP(&o.NP, "np", "n", 0, "number of ranks (also -np); default: one per slot")
	fs.StringArrayVarP(&o.Hosts, "host", "H", nil, "hosts, comma-separated, each [user@]h or h:slots; Slurm hostlists allowed (node[01-04]:2); repeatable; with --hostfile, selects within it")
	fs.StringVarP(&o.Hostfile, "hostfile", "f", "", "hostfile: Open MPI (host slots=N max_slots=M) or MPICH (host:N) lines, # comments (-f: Hydra)")
	fs.StringVar(&o.Machinefile, "machinefile", "", "same as --hostfile")
	fs.IntVarP(&o.PerNode, "npernode", "N", 0, "ranks per host (Open MPI -N/--npernode)")
	fs.IntVar(&o.PPN, "ppn", 0, "give every host N slots, whatever its hostfile says (Hydra -ppn)")
	fs.StringVar(&o.MapBy, "map-by", "slot", "placement: slot (fill each host), node (round-robin), or ppr:N:node")
	fs.BoolVar(&o.Oversubscribe, "oversubscribe", false, "allow more ranks than slots on a host (never more than max_slots); without hosts, more ranks than CPUs")
	fs.StringArrayVarP(&o.X, "export", "x", nil, "pass VAR (ccrun's value) or VAR=value to every rank; repeatable")
	fs.StringArrayVar(&o.Env, "env", nil, "pass VAR=value to every rank; repeatable (also Hydra's -genv VAR=value, -genv VAR value, -env)")
	fs.StringSliceVar(&o.GenvList, "genvlist", nil, "pass only these variables of ccrun's environment, comma-separated, with -x and --env (Hydra -genvlist)")
	fs.BoolVar(&o.GenvAll, "genvall", false, "pass all of ccrun's environment to every rank, remote ones too (Hydra -genvall)")
	fs.BoolVar(&o.GenvNone, "genvnone", false, "pass nothing of ccrun's environment but -x and --env; local ranks keep PATH, HOME, USER, ... (Hydra -genvnone)")
	fs.StringSliceVar(&o.ForwardPrefix, "forward-prefix", launch.DefaultForward,
		"prefixes of ccrun's own variables passed to every rank without -x; --forward-prefix= passes none")
	fs.BoolVar(&o.TagOutput, "tag-output", false, "prefix each output line with [1,RANK]<stdout>: or <stderr>: (Open MPI)")
	fs.BoolVarP(&o.Label, "prepend-rank", "l", false, "prefix each output line with [RANK] (Hydra -l)")
	fs.StringVar(&o.OutputDir, "output-filename", "", "write each rank's output to DIR/1/rank.RANK/{stdout,stderr} instead of the terminal")
	fs.StringVar(&o.Timeout, "timeout", "0", "end the job after `SEC` seconds (5, 1.5) or a duration (500ms, 2m) with exit status 110, printing each rank's state (env MPIEXEC_TIMEOUT); 0: none")
	fs.DurationVar(&o.Grace, "grace", launch.DefaultGrace, "time between SIGTERM and SIGKILL when the job is torn down")
	fs.StringVar(&o.Wdir, "wdir", "", "working directory of the ranks; default: ccrun's (remote: if it exists there, else the login directory)")
	fs.StringVar(&o.RootAddr, "root-addr", "", "host or address ranks use to reach ccrun's bootstrap root; default: 127.0.0.1 locally, ccrun's end of each SSH connection remotely")
	fs.BoolVar(&o.Preload, "preload-binary", false, "copy the program to each remote host over SSH before starting it")
	fs.BoolVar(&o.DisplayMap, "display-map", false, "print the rank-to-host map before starting")
	fs.BoolVarP(&o.Verbose, "verbose", "v", false, "print ccrun's own progress (connections, exits, signals) on stderr")
	fs.StringVar(&o.Stdin, "stdin", "0", "which ranks read ccrun's stdin: a rank, all, or none (/dev/null); the others read /dev/null")
	fs.BoolVar(&o.NoAgent, "no-agent", false, "start each remote rank in an SSH session of its own instead of through one ccrun agent per host")
	fs.BoolVar(&o.SkipUnreachable, "skip-unreachable", false, "drop the hosts SSH cannot reach (no connection or handshake within --ssh-connect-timeout) before placing ranks, one stderr line each; ranks get their names in CC_UNREACHABLE_HOSTS")
	fs.StringVar(&o.Launcher, "launcher", "ssh", "how remote ranks start: ssh, or srun (one Slurm job step per rank, inside an allocation)")
	fs.BoolVar(&o.AllowSingletons, "allow-singletons", false, "run an Open MPI (PMIx) program anyway, each rank as a 1-rank MPI job (ccrun serves MPICH's PMI-1 only)")
	fs.BoolVar(&o.PMI, "pmi", false, "serve PMI-1 to the ranks even when the program is not one ccrun recognizes as MPICH (a script or wrapper that starts one, a program not on this machine)")
	fs.StringVar(&o.CollNet, "collnet-server", "", "start the CollNet aggregation server on HOST (--collnet-server=HOST; alone: this machine) and give ranks CC_COLLNET_SERVER; ranks use it with NCCL_COLLNET_ENABLE=1")
	fs.Lookup("collnet-server").NoOptDefVal = collnetHere
	// The server's own process: ccrun starts itself in this mode (a flag, not a
	// subcommand, so that no program name is shadowed).
	fs.StringVar(&o.CollNetServe, collnetServeFlag, "", "run as the CollNet aggregation server listening on ADDR (started by --collnet-server)")
	fs.MarkHidden(collnetServeFlag)

	fs.IntVar(&o.SSHPort, "ssh-port", 0, "SSH port; default: the ssh config's Port, else 22")
	fs.StringVar(&o.SSHUser, "ssh-user", "", "SSH login name; default: the hostfile's user=, the ssh config's User, else your user name")
	fs.StringArrayVarP(&o.SSHIdentity, "ssh-identity", "i", nil, "private key file; repeatable; tried after ssh-agent's keys")
	fs.StringArrayVar(&o.SSHKnownHosts, "ssh-known-hosts", nil, "known_hosts file; repeatable; default: the ssh config's UserKnownHostsFile, else ~/.ssh/known_hosts")
	fs.StringVar(&o.SSHConfig, "ssh-config", "", "ssh config file; default ~/.ssh/config; 'none' for none")
	fs.BoolVar(&o.SSHAcceptNew, "ssh-accept-new", false, "record the key of a host seen for the first time in known_hosts (a changed key is still refused)")
	fs.DurationVar(&o.SSHTimeout, "ssh-connect-timeout", 10*time.Second, "bound on connecting to and authenticating with one host")
	fs.DurationVar(&o.SSHKeepalive, "ssh-keepalive", 5*time.Second, "interval of SSH keepalives")
	fs.IntVar(&o.SSHKeepaliveMax, "ssh-keepalive-count", 3, "unanswered keepalives in a row after which a host counts as lost")
	fs.IntVar(&o.SSHParallel, "ssh-parallel", 32, "hosts contacted at once")
	fs.IntVar(&o.SSHMaxSessions, "ssh-max-sessions", 8, "sessions per SSH connection: one per host with an agent, one per rank without (sshd's MaxSessions is 10 by default)")
}

const long = `ccrun starts PROGRAM as NP ranks on this machine or on hosts reached over SSH,
forwards their output, and ends the whole job as soon as one rank fails.

  ccrun -np 2 cc-perf all_reduce -b 8 -e 64M -f 2 -c 1
  ccrun -np 8 --hostfile hosts -x NCCL_ALGO=ring cc-perf all_reduce -b 8 -e 1G -f 2
  ccrun -H node[01-04]:2 --tag-output ./app --app-flag

Hosts come from -H and --hostfile; with neither, inside a Slurm allocation from
SLURM_JOB_NODELIST and SLURM_TASKS_PER_NODE; otherwise the job runs here, one
slot per CPU (more ranks need --oversubscribe).
Remote ranks start over SSH, through one ccrun agent per host (--no-agent: one
session per rank), or with --launcher srun as Slurm job steps. Rank 0 reads
ccrun's stdin (--stdin).
ccrun's own flags end at PROGRAM: everything after it belongs to PROGRAM.

Every rank gets CC_RANK, CC_NRANKS, CC_LOCAL_RANK, CC_LOCAL_NRANKS, CC_NODE_RANK,
CC_ROOT_ADDR and CC_JOB_ID (and its job secret, never on a command line), the
same under the names other launchers use (OMPI_COMM_WORLD_*, PMI_RANK/PMI_SIZE,
MPI_LOCALRANKID/MPI_LOCALNRANKS, torchrun's RANK, WORLD_SIZE, LOCAL_RANK,
GROUP_RANK, TORCHELASTIC_RUN_ID, ..., MASTER_ADDR, MASTER_PORT), plus every NCCL_*
and CC_* variable of ccrun's environment (see --forward-prefix) and what -x and
--env name. An outer launcher's variables (PMIX_*, OMPI_*, PMI_*, SLURM_PROCID,
...) never reach the ranks.

MPI programs built with MPICH (or Intel MPI, MVAPICH) run as one job: ccrun
serves them PMI-1 (PMI_FD: a private socketpair; --pmi for a script that starts
one). Open MPI programs, which want PMIx, are refused unless --allow-singletons.

Ctrl-C, SIGTERM or SIGHUP ends the job (SIGTERM to every rank's process group,
--grace, SIGKILL); a second one SIGKILLs every rank at once. A closed output pipe
(ccrun ... | head) ends it too. Local ranks and their children die with ccrun,
even when it is killed with SIGKILL.

Exit status: 0; the first failing rank's exit code (128+N for a signal); 110
after --timeout; 130 on Ctrl-C (143 on SIGTERM, 129 on SIGHUP); 141 when the
output pipe was closed; 2 for bad usage; 127 when the program is missing here
(126: not executable); 1 when a host cannot be reached or is lost.

Shell completion: ccrun completion bash|zsh|fish (exactly these two words).`

// newRoot builds the cobra command; run is called with the parsed options and program.
func newRoot(o *Options, stdout, stderr io.Writer, run func(ctx context.Context, argv []string) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:           "ccrun [flags] PROGRAM [ARGS...]",
		Short:         "an MPI-style launcher for cc programs, local and over SSH",
		Version:       cli.Version(),
		Long:          long,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 && o.CollNetServe == "" {
				return cli.Errorf(exitUsage, "no program given: usage: ccrun [flags] PROGRAM [ARGS...] (ccrun -h for help)")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return run(cmd.Context(), args) },
	}
	cmd.CompletionOptions.DisableDefaultCmd = true
	cmd.Flags().SetInterspersed(false)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cli.WithCode(exitUsage, err) })
	o.register(cmd.Flags())
	// cobra prints Version for --version; -V is Open MPI's spelling.
	cmd.Flags().BoolP("version", "V", false, "print ccrun's version (module, commit when recorded, Go release) and exit")
	return cmd
}

func usagef(format string, args ...any) error { return cli.Errorf(exitUsage, format, args...) }
