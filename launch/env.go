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
	EnvRank           = "CC_RANK"
	EnvNRanks         = "CC_NRANKS"
	EnvLocalRank      = "CC_LOCAL_RANK"
	EnvLocalNRanks    = "CC_LOCAL_NRANKS"
	EnvNodeRank       = "CC_NODE_RANK"
	EnvRootAddr       = "CC_ROOT_ADDR"
	EnvJobID          = "CC_JOB_ID"
	EnvJobSecret      = "CC_JOB_SECRET"
	EnvJobSecretFile  = "CC_JOB_SECRET_FILE"
	EnvMasterAddr     = "MASTER_ADDR"
	EnvMasterPort     = "MASTER_PORT"
	masterPortBase    = 20000
	masterPortSpan    = 10000
	errReservedSuffix = "is set by ccrun for each rank"
)

// reserved are the rank-identity names ccrun owns; MASTER_ADDR/MASTER_PORT are not among
// them because a user may point a program's own rendezvous elsewhere.
var reserved = map[string]bool{
	EnvRank: true, EnvNRanks: true, EnvLocalRank: true, EnvLocalNRanks: true, EnvNodeRank: true,
	EnvRootAddr: true, EnvJobID: true, EnvJobSecret: true, EnvJobSecretFile: true,
	"OMPI_COMM_WORLD_RANK": true, "OMPI_COMM_WORLD_SIZE": true,
	"OMPI_COMM_WORLD_LOCAL_RANK": true, "OMPI_COMM_WORLD_LOCAL_SIZE": true,
	"PMI_RANK": true, "PMI_SIZE": true, EnvPMIPort: true, EnvPMIID: true,
	"RANK": true, "WORLD_SIZE": true, "LOCAL_RANK": true, "LOCAL_WORLD_SIZE": true,
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

// EnvRequest is what the user asked to pass to ranks.
type EnvRequest struct {
	// Forward lists prefixes copied from ccrun's environment (DefaultForward by default).
	Forward []string
	// X holds -x values in order: "VAR" (value taken from ccrun's environment) or "VAR=value".
	X []string
	// Env holds --env values in order: "VAR=value".
	Env []string
}

// BaseEnv resolves an EnvRequest against ccrun's environment (a list of KEY=VALUE) into
// the variables every rank gets before its rank variables: forwarded ones first, then -x
// and --env in order, a later setting of a name replacing an earlier one.
func BaseEnv(environ []string, req EnvRequest) ([]string, error) {
	lookup := map[string]string{}
	var e envList
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		lookup[k] = v
		if !reserved[k] && ValidName(k) && hasAnyPrefix(k, req.Forward) {
			e.set(k, v)
		}
	}
	for _, x := range req.X {
		k, v, hasValue := strings.Cut(x, "=")
		if err := checkUserName("-x", x, k); err != nil {
			return nil, err
		}
		if !hasValue {
			var ok bool
			if v, ok = lookup[k]; !ok {
				return nil, fmt.Errorf("-x %s: %s is not set in ccrun's environment (use -x %s=value)", x, k, k)
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
	return e.list(), nil
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
	// PMIPort is the port of the job's PMI-1 server (launch/pmi), on the bootstrap root's
	// host; 0: none, and no PMI_PORT.
	PMIPort int
}

// MasterPort is the MASTER_PORT ccrun exports: a port in 20000-29999 derived from the
// job id, offered to programs that run their own torch-style rendezvous. ccrun does not
// listen on it.
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
		{"PMI_RANK", itoa(s.Rank)}, {"PMI_SIZE", itoa(job.NRanks)}, {EnvPMIID, itoa(s.Rank)},
		{"RANK", itoa(s.Rank)}, {"WORLD_SIZE", itoa(job.NRanks)},
		{"LOCAL_RANK", itoa(s.LocalRank)}, {"LOCAL_WORLD_SIZE", itoa(s.LocalNRanks)},
	} {
		e.set(kv[0], kv[1])
	}
	if job.PMIPort > 0 {
		e.set(EnvPMIPort, pmiPort(rootAddr, job.PMIPort))
	}
	if _, ok := e.get(EnvMasterAddr); !ok {
		e.set(EnvMasterAddr, job.MasterAddr)
	}
	if _, ok := e.get(EnvMasterPort); !ok {
		e.set(EnvMasterPort, itoa(MasterPort(job.JobID)))
	}
	return e.list()
}

// Inherit returns environ without the variables ccrun reserves, for local ranks, which
// inherit ccrun's whole environment as under mpirun.
func Inherit(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if !reserved[k] {
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
