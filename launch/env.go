package launch

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
)

// DefaultForward lists the prefixes of variables that ccrun passes from its own environment
// to every rank without being asked (like Hydra's pass-through, limited to the knobs).
var DefaultForward = []string{"NCCL_", "CC_"}

// Variables ccrun sets for each rank. A user may not set them with -x or --env, and they
// are never forwarded from ccrun's own environment.
const (
	EnvRank          = "CC_RANK"
	EnvNRanks        = "CC_NRANKS"
	EnvLocalRank     = "CC_LOCAL_RANK"
	EnvLocalNRanks   = "CC_LOCAL_NRANKS"
	EnvNodeRank      = "CC_NODE_RANK"
	EnvRootAddr      = "CC_ROOT_ADDR"
	EnvJobID         = "CC_JOB_ID"
	EnvJobSecret     = "CC_JOB_SECRET"
	EnvJobSecretFile = "CC_JOB_SECRET_FILE"
	// EnvUnreachableHosts lists, comma-separated, the hosts --skip-unreachable dropped
	// (set only when it dropped some).
	EnvUnreachableHosts = "CC_UNREACHABLE_HOSTS"
	// EnvProgressTerminal is 1 when ccrun's stderr is a terminal on which it draws a
	// rank's carriage-return line as its status line (Output.Status): a rank may draw
	// a progress line although its own stderr is a pipe.
	EnvProgressTerminal = "CC_PROGRESS_TERMINAL"
	EnvMasterAddr       = "MASTER_ADDR"
	EnvMasterPort       = "MASTER_PORT"
	masterPortBase      = 20000
	masterPortSpan      = 10000
	errReservedSuffix   = "is set by ccrun for each rank"
)

// reserved are the rank-identity names ccrun owns; MASTER_ADDR/MASTER_PORT are not among
// them because a user may point a program's own rendezvous elsewhere.
var reserved = map[string]bool{
	EnvRank: true, EnvNRanks: true, EnvLocalRank: true, EnvLocalNRanks: true, EnvNodeRank: true,
	EnvRootAddr: true, EnvJobID: true, EnvJobSecret: true, EnvJobSecretFile: true, EnvUnreachableHosts: true,
	"OMPI_COMM_WORLD_RANK": true, "OMPI_COMM_WORLD_SIZE": true, "OMPI_COMM_WORLD_NODE_RANK": true,
	"OMPI_COMM_WORLD_LOCAL_RANK": true, "OMPI_COMM_WORLD_LOCAL_SIZE": true,
	"PMI_RANK": true, "PMI_SIZE": true, EnvPMIPort: true, EnvPMIID: true, EnvPMIFD: true, "MPI_LOCALRANKID": true, "MPI_LOCALNRANKS": true,
	"RANK": true, "WORLD_SIZE": true, "LOCAL_RANK": true, "LOCAL_WORLD_SIZE": true,
	"GROUP_RANK": true, "NODE_RANK": true, "GROUP_WORLD_SIZE": true,
	"ROLE_RANK": true, "ROLE_WORLD_SIZE": true, "ROLE_NAME": true,
	"TORCHELASTIC_RUN_ID": true, "TORCHELASTIC_RESTART_COUNT": true, "TORCHELASTIC_MAX_RESTARTS": true,
}

// outerLauncher lists the variables other launchers set for their own ranks. When ccrun
// itself runs as a rank of mpirun, mpiexec, srun or torchrun (or inside an sbatch script),
// they describe ccrun's place in that outer job, not a rank's place in ccrun's: a program
// that read them would take itself for rank 0 of 1, or an MPI library would join the
// outer job. So they never reach ccrun's ranks: Inherit drops them from what local ranks
// and srun inherit, and --genvall does not forward them; ccrun's own values of the names it
// sets (RANK, PMI_RANK, ...) are added afterwards. An explicit -x or --env still passes one.
// A pattern ending in "_" is a prefix. Slurm's allocation (SLURM_JOB_*, SLURM_NODELIST,
// SLURM_TASKS_PER_NODE, SLURM_NNODES, ...) stays: it describes the machines, which
// --launcher srun and programs in the ranks may need; only the task and step identity goes.
var outerLauncher = []string{
	"PMIX_", "PMI_", // PMIx (Open MPI 5, prterun, srun --mpi=pmix) and PMI-1/2 (Hydra, srun --mpi=pmi2, Cray)
	"OMPI_", "PRTE_", "ORTE_", // Open MPI's identity and MCA settings (OMPI_MCA_*), prterun's
	"HYDRA_", "HYDI_", "MPI_LOCALRANKID", "MPI_LOCALNRANKS", // Hydra and its proxies
	"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NTASKS", "SLURM_NPROCS", // srun's task identity
	"SLURM_GTIDS", "SLURM_TASK_PID", "SLURM_STEPID", "SLURM_STEP_", "SLURM_SRUN_COMM_",
	"TORCHELASTIC_", "GROUP_RANK", "NODE_RANK", "GROUP_WORLD_SIZE", // torchrun
	"ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME",
	"PALS_", "JSM_NAMESPACE_", // Cray PALS, IBM jsrun
}

// slurmTaskCase are the Slurm patterns of outerLauncher as a shell case pattern. With
// --launcher srun every rank is a one-task step and slurmd sets these in it (SLURM_PROCID=0,
// SLURM_NTASKS=1 on every rank), so the task's script unsets them (unsetSlurmTask). A test
// keeps the two lists equal.
const slurmTaskCase = "SLURM_PROCID|SLURM_LOCALID|SLURM_NODEID|SLURM_NTASKS|SLURM_NPROCS|SLURM_GTIDS|SLURM_TASK_PID|SLURM_STEPID|SLURM_STEP_*|SLURM_SRUN_COMM_*"

// unsetSlurmTask is the shell line that unsets slurmTaskCase's variables.
const unsetSlurmTask = `for v in $(env | cut -d= -f1); do case $v in ` + slurmTaskCase + `) unset "$v";; esac; done
`

// OuterLauncher reports whether name is set by another launcher for its ranks (see
// outerLauncher); ccrun's ranks never inherit it.
func OuterLauncher(name string) bool {
	for _, p := range outerLauncher {
		if name == p || strings.HasSuffix(p, "_") && strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// underTorchrun reports whether environ is that of a torchrun worker: its MASTER_ADDR and
// MASTER_PORT are then torchrun's store, not a rendezvous the user chose.
func underTorchrun(environ []string) bool {
	for _, kv := range environ {
		if strings.HasPrefix(kv, "TORCHELASTIC_RUN_ID=") {
			return true
		}
	}
	return false
}

// Reserved reports whether ccrun sets name itself for every rank.
func Reserved(name string) bool { return reserved[name] }

// ValidName reports whether name is a portable environment variable name:
// letters, digits and '_', not starting with a digit.
func ValidName(name string) bool {
	if name == "" {
		return false
	}
	for i, c := range name {
		switch {
		case c == '_', 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// Pass is how much of ccrun's own environment reaches the ranks (Hydra's -genvall,
// -genvnone, -genvlist).
type Pass int

// The values of Pass.
const (
	// PassDefault: local ranks inherit ccrun's environment (as under mpirun); remote ranks
	// get the Forward prefixes.
	PassDefault Pass = iota
	// PassAll: every rank, remote ones too, gets all of ccrun's environment but the names
	// tied to this host or session (hostSpecific) (Hydra's -genvall).
	PassAll
	// PassNone: no rank gets anything of ccrun's environment but -x and --env; local
	// ranks keep only a login's basics (loginBasis), as remote ranks have their login's
	// (Hydra's -genvnone; -genvlist A,B is PassNone plus -x A -x B).
	PassNone
)

// EnvRequest is what the user asked to pass to ranks.
type EnvRequest struct {
	// Forward lists prefixes copied from ccrun's environment (DefaultForward by default);
	// PassNone forwards none.
	Forward []string
	// X holds -x values in order: "VAR" (value taken from ccrun's environment; skipped when
	// unset there, see UnsetX) or "VAR=value".
	X []string
	// Env holds --env values in order: "VAR=value".
	Env []string
	// Pass says how much of ccrun's environment ranks get besides.
	Pass Pass
}

// hostSpecific are names that describe this host or this login session, which
// PassAll does not carry to other hosts.
var hostSpecific = map[string]bool{
	"HOSTNAME": true, "PWD": true, "OLDPWD": true, "SHLVL": true, "_": true,
	"SSH_AUTH_SOCK": true, "SSH_CLIENT": true, "SSH_CONNECTION": true, "SSH_TTY": true, "DISPLAY": true,
	"XDG_RUNTIME_DIR": true, "XDG_SESSION_ID": true,
}

// loginBasis are the variables a local rank keeps under PassNone.
var loginBasis = map[string]bool{
	"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "SHELL": true,
	"LANG": true, "TZ": true, "TMPDIR": true, "TERM": true,
}

// BaseEnv resolves an EnvRequest against ccrun's environment (a list of KEY=VALUE) into
// the variables every rank gets before its rank variables: forwarded ones first (all of
// them under PassAll), an exported MASTER_ADDR/MASTER_PORT (unless torchrun set them, for
// ccrun itself), then -x and --env in order, a later setting of a name replacing an
// earlier one. A -x VAR that ccrun's environment lacks is skipped (see UnsetX).
func BaseEnv(environ []string, req EnvRequest) ([]string, error) {
	lookup := map[string]string{}
	var e envList
	torchrun := underTorchrun(environ)
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		lookup[k] = v
		master := k == EnvMasterAddr || k == EnvMasterPort
		if reserved[k] || !ValidName(k) || OuterLauncher(k) || master && torchrun {
			continue
		}
		switch {
		case master && req.Pass != PassNone:
		case req.Pass == PassAll && !hostSpecific[k]:
		case req.Pass != PassNone && hasAnyPrefix(k, req.Forward):
		default:
			continue
		}
		e.set(k, v)
	}
	for _, x := range req.X {
		k, v, hasValue := strings.Cut(x, "=")
		if err := checkUserName("-x", x, k); err != nil {
			return nil, err
		}
		if !hasValue {
			var ok bool
			if v, ok = lookup[k]; !ok {
				continue // mpirun warns and goes on; so does ccrun (UnsetX)
			}
		}
		e.set(k, v)
	}
	for _, x := range req.Env {
		k, v, hasValue := strings.Cut(x, "=")
		if err := checkUserName("--env", x, k); err != nil {
			return nil, err
		}
		if !hasValue {
			return nil, fmt.Errorf("--env %q: want VAR=value (or use -x %s to pass ccrun's own value)", x, k)
		}
		e.set(k, v)
	}
	if p, ok := e.get(EnvMasterPort); ok {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("MASTER_PORT=%q: want a port number from 1 to 65535", p)
		}
	}
	return e.list(), nil
}

// UnsetX returns the names that -x asks to pass with ccrun's value (-x VAR) but that
// ccrun's environment lacks: ranks do not get them, and ccrun warns, as mpirun does.
func UnsetX(environ []string, req EnvRequest) []string {
	set := map[string]bool{}
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	var out []string
	for _, x := range req.X {
		if !strings.Contains(x, "=") && !set[x] {
			out = append(out, x)
		}
	}
	return out
}

func checkUserName(flag, arg, name string) error {
	if !ValidName(name) {
		return fmt.Errorf("%s %q: bad variable name %q: want letters, digits and _, not starting with a digit", flag, arg, name)
	}
	if reserved[name] {
		return fmt.Errorf("%s %q: %s %s", flag, arg, name, errReservedSuffix)
	}
	return nil
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if p != "" && strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// JobEnv is what every rank of one job shares.
type JobEnv struct {
	// NRanks is the job size.
	NRanks int
	// JobID names the job in the bootstrap handshake.
	JobID string
	// MasterAddr is rank 0's host as the other ranks reach it.
	MasterAddr string
	// MasterPort is the MASTER_PORT offered when the user gave none; 0: MasterPort(JobID).
	MasterPort int
	// NNodes is the number of hosts that run ranks (GROUP_WORLD_SIZE); 0: unknown, unset.
	NNodes int
	// Unreachable names the hosts dropped because they could not be reached
	// (CC_UNREACHABLE_HOSTS); empty: the variable is not set.
	Unreachable []string
	// StatusLine sets CC_PROGRESS_TERMINAL=1 (Output.UsesStatus).
	StatusLine bool
}

// MasterPort is the MASTER_PORT ccrun exports when rank 0 is on another host, where ccrun
// cannot check a port is free: a port in 20000-29999 derived from the job id, offered to
// programs that run their own torch-style rendezvous. ccrun does not listen on it.
func MasterPort(jobID string) int {
	h := fnv.New32a()
	h.Write([]byte(jobID))
	return masterPortBase + int(h.Sum32()%masterPortSpan)
}

// RankEnv returns base plus the rank variables of slot s, with rootAddr the bootstrap
// root's address as s's host reaches it. The secret is not included: the spawner passes
// it by a channel that ps cannot see.
func RankEnv(base []string, job JobEnv, s Slot, rootAddr string) []string {
	var e envList
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		e.set(k, v)
	}
	itoa := strconv.Itoa
	for _, kv := range [][2]string{
		{EnvRank, itoa(s.Rank)}, {EnvNRanks, itoa(job.NRanks)},
		{EnvLocalRank, itoa(s.LocalRank)}, {EnvLocalNRanks, itoa(s.LocalNRanks)},
		{EnvNodeRank, itoa(s.NodeRank)}, {EnvRootAddr, rootAddr}, {EnvJobID, job.JobID},
		{"OMPI_COMM_WORLD_RANK", itoa(s.Rank)}, {"OMPI_COMM_WORLD_SIZE", itoa(job.NRanks)},
		{"OMPI_COMM_WORLD_LOCAL_RANK", itoa(s.LocalRank)}, {"OMPI_COMM_WORLD_LOCAL_SIZE", itoa(s.LocalNRanks)},
		{"PMI_RANK", itoa(s.Rank)}, {"PMI_SIZE", itoa(job.NRanks)},
		{"OMPI_COMM_WORLD_NODE_RANK", itoa(s.LocalRank)},                                 // Open MPI: the rank among the job's ranks on its node
		{"MPI_LOCALRANKID", itoa(s.LocalRank)}, {"MPI_LOCALNRANKS", itoa(s.LocalNRanks)}, // Hydra
		// torchrun: one worker group per node, one role ("default") spanning the job.
		{"RANK", itoa(s.Rank)}, {"WORLD_SIZE", itoa(job.NRanks)},
		{"LOCAL_RANK", itoa(s.LocalRank)}, {"LOCAL_WORLD_SIZE", itoa(s.LocalNRanks)},
		{"GROUP_RANK", itoa(s.NodeRank)}, {"NODE_RANK", itoa(s.NodeRank)},
		{"ROLE_RANK", itoa(s.Rank)}, {"ROLE_WORLD_SIZE", itoa(job.NRanks)}, {"ROLE_NAME", "default"},
		{"TORCHELASTIC_RUN_ID", job.JobID}, {"TORCHELASTIC_RESTART_COUNT", "0"}, {"TORCHELASTIC_MAX_RESTARTS", "0"},
	} {
		e.set(kv[0], kv[1])
	}
	if job.NNodes > 0 {
		e.set("GROUP_WORLD_SIZE", itoa(job.NNodes))
	}
	if len(job.Unreachable) > 0 {
		e.set(EnvUnreachableHosts, strings.Join(job.Unreachable, ","))
	}
	if job.StatusLine {
		e.set(EnvProgressTerminal, "1")
	}
	if _, ok := e.get(EnvMasterAddr); !ok {
		e.set(EnvMasterAddr, job.MasterAddr)
	}
	if _, ok := e.get(EnvMasterPort); !ok {
		port := job.MasterPort
		if port == 0 {
			port = MasterPort(job.JobID)
		}
		e.set(EnvMasterPort, itoa(port))
	}
	return e.list()
}

// Inherit returns environ without the variables ccrun reserves and those of an outer
// launcher (OuterLauncher; MASTER_ADDR/MASTER_PORT too when torchrun set them), for local
// ranks, which inherit ccrun's whole environment as under mpirun, and for srun.
func Inherit(environ []string) []string {
	torchrun := underTorchrun(environ)
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if !reserved[k] && !OuterLauncher(k) && !(torchrun && (k == EnvMasterAddr || k == EnvMasterPort)) {
			out = append(out, kv)
		}
	}
	return out
}

// Inherited is what local ranks inherit of environ under pass: all of it (see Inherit), or
// under PassNone only a login's basics (PATH, HOME, USER, LOGNAME, SHELL, LANG, LC_*, TZ,
// TMPDIR, TERM).
func Inherited(environ []string, pass Pass) []string {
	if pass != PassNone {
		return environ
	}
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if loginBasis[k] || strings.HasPrefix(k, "LC_") {
			out = append(out, kv)
		}
	}
	return out
}

// envList is an ordered map of variables: setting a name again replaces it in place.
type envList struct {
	keys []string
	vals map[string]string
}

func (e *envList) set(k, v string) {
	if e.vals == nil {
		e.vals = map[string]string{}
	}
	if _, ok := e.vals[k]; !ok {
		e.keys = append(e.keys, k)
	}
	e.vals[k] = v
}

func (e *envList) get(k string) (string, bool) {
	v, ok := e.vals[k]
	return v, ok
}

func (e *envList) list() []string {
	out := make([]string, len(e.keys))
	for i, k := range e.keys {
		out[i] = k + "=" + e.vals[k]
	}
	return out
}
