package bootstrap

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/seed-760dd1f1/cc/runtime/wire"
)

// Identity is who this process is in the job, and where the ranks meet.
type Identity struct {
	Rank, NRanks int
	// LocalRank and LocalNRanks are the rank's index among the ranks of its host and their
	// number, when the launcher says (-1 and 0 when it does not; the communicator then
	// derives them from the peers' HostID).
	LocalRank, LocalNRanks int
	// RootAddr is where the bootstrap root listens, host:port; empty when there is nothing
	// to join (a single rank outside ccrun).
	RootAddr string
	// HostRoot is true when this process must host the root at RootAddr (rank 0 outside
	// ccrun). It should listen on RootAddr's port; the others dial RootAddr.
	HostRoot bool
	Job      wire.Job
	// Source names the launcher whose variables were used, e.g. "torchrun (RANK)".
	Source string
}

// launcher is one row of the discovery table: the variables a launcher sets.
type launcher struct {
	name                 string // as shown in Source
	rank, size           string // required pair
	localRank, localSize string // optional pair ("" when the launcher has no such variable)
	// derive sets the root address and job id; nil means NCCL_COMM_ID is the only way
	// to find the root (mpirun, PMI).
	derive func(e env, id *Identity) error
}

// launchers in discovery order: the first whose rank or size variable is set wins.
var launchers = []launcher{
	{name: "ccrun", rank: "CC_RANK", size: "CC_NRANKS", localRank: "CC_LOCAL_RANK", localSize: "CC_LOCAL_NRANKS", derive: deriveCCRun},
	{name: "torchrun", rank: "RANK", size: "WORLD_SIZE", localRank: "LOCAL_RANK", localSize: "LOCAL_WORLD_SIZE", derive: deriveTorchrun},
	{name: "mpirun", rank: "OMPI_COMM_WORLD_RANK", size: "OMPI_COMM_WORLD_SIZE",
		localRank: "OMPI_COMM_WORLD_LOCAL_RANK", localSize: "OMPI_COMM_WORLD_LOCAL_SIZE"},
	{name: "pmi", rank: "PMI_RANK", size: "PMI_SIZE", localRank: "MPI_LOCALRANKID", localSize: "MPI_LOCALNRANKS"},
	{name: "srun", rank: "SLURM_PROCID", size: "SLURM_NTASKS", localRank: "SLURM_LOCALID", derive: deriveSlurm},
}

// Discover works out the rank's identity from the environment (lookup is os.LookupEnv or a
// fake). Rank and size come from the first launcher whose variables are present:
//
//	CC_RANK/CC_NRANKS                       ccrun: root at CC_ROOT_ADDR, job CC_JOB_ID
//	RANK/WORLD_SIZE                         torchrun: root at MASTER_ADDR, port MASTER_PORT+1
//	OMPI_COMM_WORLD_RANK/SIZE               mpirun: root at NCCL_COMM_ID (required)
//	PMI_RANK/PMI_SIZE                       MPICH/Hydra: root at NCCL_COMM_ID (required)
//	SLURM_PROCID/SLURM_NTASKS               srun: root at the first host of the step's
//	                                        nodelist, port SlurmPort(job, step)
//	(none)                                  a single rank 0 of 1, no root
//
// NCCL_COMM_ID=host:port overrides the root address for every launcher but ccrun; outside
// ccrun, rank 0 hosts the root. The root port under torchrun is MASTER_PORT+1 because
// MASTER_PORT itself is torch's TCPStore, which torchrun's agent is already serving.
//
// The job secret is CC_JOB_SECRET, or the contents of the file named by CC_JOB_SECRET_FILE
// (a trailing newline is dropped). ccrun always sets one. Elsewhere it is usually empty,
// and then the handshake's authenticator only proves the job id, which is derived from
// what all ranks share: "slurm:JOBID.STEPID", "torchrun:MASTER_ADDR:MASTER_PORT" (plus
// TORCHELASTIC_RUN_ID and TORCHELASTIC_RESTART_COUNT when set, so a straggler of an earlier
// attempt is turned away), or "nccl-comm-id:HOST:PORT"; an id longer than 64 bytes is
// replaced by "sha256:" and 56 hex digits of its hash.
//
// Inconsistent variables are errors that name them: a non-numeric or negative value, a
// rank not below the size, one of a pair without the other, a malformed address or
// nodelist, or a multi-rank mpirun/PMI job with no NCCL_COMM_ID. Under srun without
// NCCL_COMM_ID, SLURM_DISTRIBUTION=arbitrary is an error (task 0 need not run on the first
// node), and so is rank 0 running (SLURMD_NODENAME) elsewhere than the first node.
func Discover(lookup func(string) (string, bool)) (Identity, error) {
	return discover(lookup, os.ReadFile)
}

// env wraps the lookup function.
type env struct {
	lookup   func(string) (string, bool)
	readFile func(string) ([]byte, error)
}

func (e env) get(name string) (string, bool) { return e.lookup(name) }

func (e env) has(name string) bool {
	_, ok := e.lookup(name)
	return ok
}

// nonNeg parses name's value as an integer >= 0.
func (e env) nonNeg(name string) (int, error) {
	v, _ := e.lookup(name)
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return 0, fmt.Errorf("%s=%q is not an integer", name, v)
	}
	if n < 0 {
		return 0, fmt.Errorf("%s=%d is negative, want >= 0", name, n)
	}
	return n, nil
}

func discover(lookup func(string) (string, bool), readFile func(string) ([]byte, error)) (Identity, error) {
	e := env{lookup: lookup, readFile: readFile}
	for _, l := range launchers {
		if e.has(l.rank) || e.has(l.size) {
			id, err := fromLauncher(e, l)
			if err != nil {
				return Identity{}, fmt.Errorf("%s rank discovery: %w", l.name, err)
			}
			return id, nil
		}
	}
	return Identity{Rank: 0, NRanks: 1, LocalRank: 0, LocalNRanks: 1, Source: "none (single rank)"}, nil
}

func fromLauncher(e env, l launcher) (Identity, error) {
	id := Identity{Source: fmt.Sprintf("%s (%s)", l.name, l.rank), LocalRank: -1}
	for _, pair := range [][2]string{{l.rank, l.size}, {l.size, l.rank}} {
		if !e.has(pair[1]) {
			return id, fmt.Errorf("%s is set but %s is not; %s sets both", pair[0], pair[1], l.name)
		}
	}
	var err error
	if id.Rank, err = e.nonNeg(l.rank); err != nil {
		return id, err
	}
	if id.NRanks, err = e.nonNeg(l.size); err != nil {
		return id, err
	}
	switch {
	case id.NRanks < 1:
		return id, fmt.Errorf("%s=%d, want at least 1", l.size, id.NRanks)
	case id.NRanks > MaxRanks:
		return id, fmt.Errorf("%s=%d, at most %d ranks are supported", l.size, id.NRanks, MaxRanks)
	case id.Rank >= id.NRanks:
		return id, fmt.Errorf("%s=%d is not below %s=%d (ranks are 0..%d)", l.rank, id.Rank, l.size, id.NRanks, id.NRanks-1)
	}
	if err := local(e, l, &id); err != nil {
		return id, err
	}
	if id.NRanks == 1 {
		id.LocalRank, id.LocalNRanks = 0, 1
	}
	if id.Job.Secret, err = secret(e); err != nil {
		return id, err
	}
	if l.derive != nil {
		return id, l.derive(e, &id)
	}
	if id.NRanks == 1 {
		return id, nil
	}
	if !e.has("NCCL_COMM_ID") {
		return id, fmt.Errorf("%s=%d ranks need a bootstrap root: set NCCL_COMM_ID=host:port "+
			"(a free port on the host of rank 0, the same value on every rank), or launch with ccrun", l.size, id.NRanks)
	}
	return id, commID(e, &id)
}

// local fills LocalRank/LocalNRanks from the launcher's optional variables.
func local(e env, l launcher, id *Identity) error {
	if e.has(l.localRank) {
		n, err := e.nonNeg(l.localRank)
		if err != nil {
			return err
		}
		id.LocalRank = n
	}
	if l.localSize != "" && e.has(l.localSize) {
		n, err := e.nonNeg(l.localSize)
		if err != nil {
			return err
		}
		if n < 1 || n > id.NRanks {
			return fmt.Errorf("%s=%d, want 1..%s=%d", l.localSize, n, l.size, id.NRanks)
		}
		id.LocalNRanks = n
	} else if l.name == "srun" {
		if err := slurmLocalSize(e, id); err != nil {
			return err
		}
	}
	if id.LocalNRanks > 0 && id.LocalRank >= id.LocalNRanks {
		return fmt.Errorf("%s=%d is not below the %d ranks on this host", l.localRank, id.LocalRank, id.LocalNRanks)
	}
	return nil
}

// slurmLocalSize reads the number of tasks on this node from SLURM_STEP_TASKS_PER_NODE
// (or SLURM_TASKS_PER_NODE) at SLURM_NODEID, when both are present.
func slurmLocalSize(e env, id *Identity) error {
	name := "SLURM_STEP_TASKS_PER_NODE"
	spec, ok := e.get(name)
	if !ok {
		name = "SLURM_TASKS_PER_NODE"
		spec, ok = e.get(name)
	}
	if !ok || !e.has("SLURM_NODEID") {
		return nil
	}
	node, err := e.nonNeg("SLURM_NODEID")
	if err != nil {
		return err
	}
	n, err := TasksOnNode(spec, node)
	if err != nil {
		return fmt.Errorf("%s with SLURM_NODEID=%d: %w", name, node, err)
	}
	if n > id.NRanks {
		return fmt.Errorf("%s=%q puts %d tasks on node %d, more than SLURM_NTASKS=%d", name, spec, n, node, id.NRanks)
	}
	id.LocalNRanks = n
	return nil
}

// secret reads CC_JOB_SECRET or the file named by CC_JOB_SECRET_FILE.
func secret(e env) ([]byte, error) {
	v, inline := e.get("CC_JOB_SECRET")
	file, fromFile := e.get("CC_JOB_SECRET_FILE")
	switch {
	case inline && fromFile:
		return nil, fmt.Errorf("both CC_JOB_SECRET and CC_JOB_SECRET_FILE are set, want at most one")
	case inline:
		return []byte(v), nil
	case fromFile:
		b, err := e.readFile(file)
		if err != nil {
			return nil, fmt.Errorf("CC_JOB_SECRET_FILE=%s: %w", file, err)
		}
		b = []byte(strings.TrimRight(string(b), "\r\n"))
		if len(b) == 0 {
			return nil, fmt.Errorf("CC_JOB_SECRET_FILE=%s is empty", file)
		}
		return b, nil
	}
	return nil, nil
}

func deriveCCRun(e env, id *Identity) error {
	addr, ok := e.get("CC_ROOT_ADDR")
	if !ok {
		if id.NRanks > 1 {
			return fmt.Errorf("CC_NRANKS=%d but CC_ROOT_ADDR is not set; ccrun sets both", id.NRanks)
		}
		return nil
	}
	if err := checkHostPort("CC_ROOT_ADDR", addr); err != nil {
		return err
	}
	job, ok := e.get("CC_JOB_ID")
	if !ok {
		return fmt.Errorf("CC_ROOT_ADDR is set but CC_JOB_ID is not; ccrun sets both")
	}
	id.Job.ID = job
	if err := id.Job.Validate(); err != nil {
		return fmt.Errorf("CC_JOB_ID: %w", err)
	}
	id.RootAddr = addr
	return nil
}

func deriveTorchrun(e env, id *Identity) error {
	if id.NRanks == 1 {
		return nil
	}
	if e.has("NCCL_COMM_ID") {
		return commID(e, id)
	}
	maddr, okA := e.get("MASTER_ADDR")
	mport, okP := e.get("MASTER_PORT")
	if !okA || !okP {
		return fmt.Errorf("WORLD_SIZE=%d but MASTER_ADDR and MASTER_PORT are not both set; torchrun sets them, or set NCCL_COMM_ID=host:port", id.NRanks)
	}
	if err := checkHostPort("MASTER_ADDR:MASTER_PORT", net.JoinHostPort(maddr, mport)); err != nil {
		return err
	}
	port, _ := strconv.Atoi(mport)
	if port == 65535 {
		return fmt.Errorf("MASTER_PORT=65535: the root listens on MASTER_PORT+1, want MASTER_PORT <= 65534 (or set NCCL_COMM_ID)")
	}
	id.RootAddr = net.JoinHostPort(maddr, strconv.Itoa(port+1))
	id.HostRoot = id.Rank == 0
	key := "torchrun:" + net.JoinHostPort(maddr, mport)
	if v, ok := e.get("TORCHELASTIC_RUN_ID"); ok {
		key += "/" + v
	}
	if v, ok := e.get("TORCHELASTIC_RESTART_COUNT"); ok {
		key += "#" + v
	}
	id.Job.ID = jobID(key)
	return nil
}

// SlurmPort is the root's port for Slurm job step jobID.stepID:
//
//	port = 20000 + 16*(jobID mod 2500) + (stepID mod 16)        in 20000..59999
//
// Steps 0..15 of one job get distinct ports, and so do jobs whose ids differ by less than
// 2500, which covers jobs sharing a node at the same time on most clusters. Example: job
// 123456 step 0 -> 20000 + 16*956 + 0 = 35296.
func SlurmPort(jobID, stepID uint64) int {
	return 20000 + 16*int(jobID%2500) + int(stepID%16)
}

func deriveSlurm(e env, id *Identity) error {
	if id.NRanks == 1 {
		return nil
	}
	if e.has("NCCL_COMM_ID") {
		return commID(e, id)
	}
	ids := [2]uint64{}
	for i, name := range []string{"SLURM_JOB_ID", "SLURM_STEP_ID"} {
		v, ok := e.get(name)
		if !ok {
			return fmt.Errorf("SLURM_NTASKS=%d but %s is not set: run the ranks with srun, or set NCCL_COMM_ID=host:port", id.NRanks, name)
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		if err != nil {
			return fmt.Errorf("%s=%q is not a non-negative integer", name, v)
		}
		ids[i] = n
	}
	name := "SLURM_STEP_NODELIST"
	list, ok := e.get(name)
	if !ok {
		name = "SLURM_JOB_NODELIST"
		if list, ok = e.get(name); !ok {
			return fmt.Errorf("SLURM_NTASKS=%d but neither SLURM_STEP_NODELIST nor SLURM_JOB_NODELIST is set; set NCCL_COMM_ID=host:port", id.NRanks)
		}
	}
	host, err := FirstHost(list)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	// Task 0 runs on the first node of the step under every distribution but arbitrary
	// (-m arbitrary with SLURM_HOSTFILE), where it may run anywhere.
	if d, ok := e.get("SLURM_DISTRIBUTION"); ok && strings.HasPrefix(d, "arbitrary") {
		return fmt.Errorf("SLURM_DISTRIBUTION=%s: task 0 need not run on %s, the first node of %s=%s, where the bootstrap root is looked for: set NCCL_COMM_ID=host:port (a free port on the node of task 0, the same value on every rank)",
			d, host, name, list)
	}
	if node, ok := e.get("SLURMD_NODENAME"); ok && id.Rank == 0 && node != host {
		return fmt.Errorf("SLURM_PROCID=0 runs on SLURMD_NODENAME=%s, not on %s, the first node of %s=%s, where the other ranks look for the bootstrap root: set NCCL_COMM_ID=host:port (a free port on %s, the same value on every rank)",
			node, host, name, list, node)
	}
	id.RootAddr = net.JoinHostPort(host, strconv.Itoa(SlurmPort(ids[0], ids[1])))
	id.HostRoot = id.Rank == 0
	id.Job.ID = jobID(fmt.Sprintf("slurm:%d.%d", ids[0], ids[1]))
	return nil
}

// commID makes NCCL_COMM_ID the root address, hosted by rank 0.
func commID(e env, id *Identity) error {
	v, _ := e.get("NCCL_COMM_ID")
	if err := checkHostPort("NCCL_COMM_ID", v); err != nil {
		return err
	}
	id.RootAddr = v
	id.HostRoot = id.Rank == 0
	id.Job.ID = jobID("nccl-comm-id:" + v)
	return nil
}

// checkHostPort accepts host:port, ipv4:port and [ipv6]:port with a port in 1..65535.
func checkHostPort(name, v string) error {
	host, port, err := net.SplitHostPort(v)
	if err == nil && host == "" {
		err = fmt.Errorf("empty host")
	}
	if err == nil {
		if p, perr := strconv.Atoi(port); perr != nil || p < 1 || p > 65535 {
			err = fmt.Errorf("port %q, want 1..65535", port)
		}
	}
	if err != nil {
		return fmt.Errorf("%s=%q: %v; want host:port, ipv4:port or [ipv6]:port", name, v, err)
	}
	return nil
}

// jobID keeps a derived id within wire.MaxJobIDLen bytes.
func jobID(key string) string {
	if len(key) <= wire.MaxJobIDLen {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])[:56]
}
