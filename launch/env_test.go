package launch

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBaseEnv(t *testing.T) {
	environ := []string{
		"PATH=/bin", "NCCL_ALGO=tree", "NCCL_DEBUG=WARN", "CC_FOO=1", "HOME=/root",
		"CC_RANK=7", "CC_JOB_SECRET=s3cret", "OMPI_COMM_WORLD_RANK=3", "MYVAR=hello", "EMPTY=",
	}
	tests := []struct {
		name string
		req  EnvRequest
		want []string
	}{
		{"default forward skips reserved", EnvRequest{Forward: DefaultForward},
			[]string{"NCCL_ALGO=tree", "NCCL_DEBUG=WARN", "CC_FOO=1"}},
		{"no forward", EnvRequest{}, []string{}},
		{"-x overrides forwarded in place", EnvRequest{Forward: DefaultForward, X: []string{"NCCL_ALGO=ring", "MYVAR", "EMPTY"}},
			[]string{"NCCL_ALGO=ring", "NCCL_DEBUG=WARN", "CC_FOO=1", "MYVAR=hello", "EMPTY="}},
		{"--env after -x wins", EnvRequest{X: []string{"A=1"}, Env: []string{"A=2", "B=x=y"}},
			[]string{"A=2", "B=x=y"}},
		{"value with spaces and quotes", EnvRequest{X: []string{`Q=it's "a b"`}}, []string{`Q=it's "a b"`}},
		{"MASTER_PORT may be set", EnvRequest{X: []string{"MASTER_PORT=1234"}}, []string{"MASTER_PORT=1234"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := BaseEnv(environ, tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("BaseEnv(%+v) (-want +got):\n%s", tt.req, d)
			}
		})
	}
}

func TestBaseEnvErrors(t *testing.T) {
	tests := []struct {
		req  EnvRequest
		want string
	}{
		{EnvRequest{X: []string{"1FOO=1"}}, `-x "1FOO=1": bad variable name "1FOO": want letters, digits and _, not starting with a digit`},
		{EnvRequest{X: []string{"FOO-BAR"}}, `-x "FOO-BAR": bad variable name "FOO-BAR": want letters, digits and _, not starting with a digit`},
		{EnvRequest{X: []string{"=1"}}, `-x "=1": bad variable name "": want letters, digits and _, not starting with a digit`},
		{EnvRequest{X: []string{"A B=1"}}, `-x "A B=1": bad variable name "A B": want letters, digits and _, not starting with a digit`},
		{EnvRequest{X: []string{"MASTER_PORT=http"}}, `MASTER_PORT="http": want a port number from 1 to 65535`},
		{EnvRequest{Env: []string{"FOO"}}, `--env "FOO": want VAR=value (or use -x FOO to pass ccrun's own value)`},
		{EnvRequest{X: []string{"CC_RANK=3"}}, `-x "CC_RANK=3": CC_RANK is set by ccrun for each rank`},
		{EnvRequest{Env: []string{"WORLD_SIZE=3"}}, `--env "WORLD_SIZE=3": WORLD_SIZE is set by ccrun for each rank`},
	}
	for _, tt := range tests {
		_, err := BaseEnv(nil, tt.req)
		if err == nil || err.Error() != tt.want {
			t.Errorf("BaseEnv(%+v) error\n got %v\nwant %s", tt.req, err, tt.want)
		}
	}
}

func TestRankEnv(t *testing.T) {
	job := JobEnv{NRanks: 8, JobID: "abc", MasterAddr: "10.0.0.1"}
	s := Slot{Rank: 5, Host: "b", HostIndex: 1, NodeRank: 1, LocalRank: 1, LocalNRanks: 4}
	got := RankEnv([]string{"NCCL_ALGO=ring", "RANK=99"}, job, s, "10.0.0.254:4000")
	port := MasterPort("abc")
	want := []string{
		"NCCL_ALGO=ring", "RANK=5",
		"CC_RANK=5", "CC_NRANKS=8", "CC_LOCAL_RANK=1", "CC_LOCAL_NRANKS=4", "CC_NODE_RANK=1",
		"CC_ROOT_ADDR=10.0.0.254:4000", "CC_JOB_ID=abc",
		"OMPI_COMM_WORLD_RANK=5", "OMPI_COMM_WORLD_SIZE=8", "OMPI_COMM_WORLD_LOCAL_RANK=1", "OMPI_COMM_WORLD_LOCAL_SIZE=4",
		"PMI_RANK=5", "PMI_SIZE=8", "OMPI_COMM_WORLD_NODE_RANK=1", "MPI_LOCALRANKID=1", "MPI_LOCALNRANKS=4",
		"WORLD_SIZE=8", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=4", "GROUP_RANK=1", "NODE_RANK=1",
		"ROLE_RANK=5", "ROLE_WORLD_SIZE=8", "ROLE_NAME=default",
		"TORCHELASTIC_RUN_ID=abc", "TORCHELASTIC_RESTART_COUNT=0", "TORCHELASTIC_MAX_RESTARTS=0",
		"MASTER_ADDR=10.0.0.1", "MASTER_PORT=" + strconv.Itoa(port),
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("RankEnv (-want +got):\n%s", d)
	}
	if port < 20000 || port >= 30000 {
		t.Errorf("MasterPort = %d, want 20000..29999", port)
	}
	// The open PMI port, when there is one, is on the root's host (IPv6 bracketed).
	for root, want := range map[string]string{"10.0.0.254:4000": "10.0.0.254:4100", "[fd00::1]:4000": "[fd00::1]:4100"} {
		if got := pmiPort(root, 4100); got != want {
			t.Errorf("pmiPort(%s, 4100) = %s, want %s", root, got, want)
		}
	}
	// A user-given MASTER_ADDR/MASTER_PORT is kept.
	got = RankEnv([]string{"MASTER_ADDR=x", "MASTER_PORT=1"}, job, s, "r:1")
	if !contains(got, "MASTER_ADDR=x") || !contains(got, "MASTER_PORT=1") || contains(got, "MASTER_ADDR=10.0.0.1") {
		t.Errorf("RankEnv dropped the user's MASTER_*: %v", got)
	}
}

func TestInherit(t *testing.T) {
	got := Inherit([]string{"PATH=/bin", "CC_JOB_SECRET=x", "CC_RANK=1", "NCCL_ALGO=ring", "RANK=2"})
	if d := cmp.Diff([]string{"PATH=/bin", "NCCL_ALGO=ring"}, got); d != "" {
		t.Errorf("Inherit (-want +got):\n%s", d)
	}
}

// TestOuterLauncher: what mpirun, mpiexec, srun and torchrun set for ccrun itself never
// reaches ranks, by inheritance or by --genvall; Slurm's allocation and a user's
// MASTER_* do; torchrun's MASTER_* do not.
func TestOuterLauncher(t *testing.T) {
	outer := []string{
		"PMIX_RANK=0", "PMIX_NAMESPACE=prterun-vm-1@1", "PMI_FD=7", "PMI_PORT=h:1", "PMI_ID=0", "PMI_RANK=0",
		"OMPI_MCA_orte_ess_num_procs=1", "OMPI_COMM_WORLD_RANK=0", "OMPI_UNIVERSE_SIZE=1", "PRTE_MCA_x=1",
		"HYDRA_CONTROL_FD=5", "MPI_LOCALRANKID=0", "MPI_LOCALNRANKS=1",
		"SLURM_PROCID=0", "SLURM_LOCALID=0", "SLURM_NODEID=0", "SLURM_NTASKS=1", "SLURM_NPROCS=1",
		"SLURM_STEP_ID=3", "SLURM_STEPID=3", "SLURM_STEP_NUM_TASKS=1", "SLURM_TASK_PID=9", "SLURM_GTIDS=0",
		"TORCHELASTIC_RUN_ID=r", "TORCHELASTIC_USE_AGENT_STORE=True", "GROUP_RANK=0", "NODE_RANK=0",
		"ROLE_RANK=0", "ROLE_NAME=default", "GROUP_WORLD_SIZE=1", "ROLE_WORLD_SIZE=1",
		"PALS_RANKID=0", "JSM_NAMESPACE_RANK=0",
	}
	kept := []string{"PATH=/bin", "SLURM_JOB_ID=5", "SLURM_JOB_NODELIST=n[1-2]", "SLURM_TASKS_PER_NODE=2(x2)",
		"SLURM_NNODES=2", "OMP_NUM_THREADS=1", "NCCL_ALGO=ring"}
	environ := append(append([]string{}, kept...), outer...)
	environ = append(environ, "MASTER_ADDR=10.0.0.9", "MASTER_PORT=29500") // torchrun's, with its run id
	if d := cmp.Diff(kept, Inherit(environ)); d != "" {
		t.Errorf("Inherit (-want +got):\n%s", d)
	}
	got, err := BaseEnv(environ, EnvRequest{Pass: PassAll})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(kept, got); d != "" {
		t.Errorf("BaseEnv(PassAll) (-want +got):\n%s", d)
	}
	// Without torchrun, an exported MASTER_ADDR/MASTER_PORT is the user's and reaches ranks.
	got, err = BaseEnv([]string{"MASTER_ADDR=h", "MASTER_PORT=1234", "X=1"}, EnvRequest{})
	if err != nil || !cmp.Equal(got, []string{"MASTER_ADDR=h", "MASTER_PORT=1234"}) {
		t.Errorf("BaseEnv with exported MASTER_* = %q, %v", got, err)
	}
	if _, err := BaseEnv([]string{"MASTER_PORT=99999"}, EnvRequest{}); err == nil {
		t.Errorf("MASTER_PORT=99999 accepted")
	}
	// An explicit -x still passes one.
	got, _ = BaseEnv(environ, EnvRequest{X: []string{"PMIX_RANK"}})
	if !contains(got, "PMIX_RANK=0") {
		t.Errorf("-x PMIX_RANK dropped: %q", got)
	}
}

// TestSlurmTaskCase: the srun task script unsets exactly the Slurm variables of the table.
func TestSlurmTaskCase(t *testing.T) {
	var want []string
	for _, p := range outerLauncher {
		if strings.HasPrefix(p, "SLURM_") {
			if strings.HasSuffix(p, "_") {
				p += "*"
			}
			want = append(want, p)
		}
	}
	if got := strings.Split(slurmTaskCase, "|"); !cmp.Equal(got, want) {
		t.Errorf("slurmTaskCase = %q, want %q (from outerLauncher)", got, want)
	}
}

func TestPass(t *testing.T) {
	environ := []string{"PATH=/bin", "HOME=/h", "LC_ALL=C", "NCCL_ALGO=ring", "FOO=1", "HOSTNAME=here", "PWD=/w"}
	tests := []struct {
		req  EnvRequest
		want []string
	}{
		{EnvRequest{Forward: DefaultForward}, []string{"NCCL_ALGO=ring"}},
		{EnvRequest{Forward: DefaultForward, Pass: PassAll}, []string{"PATH=/bin", "HOME=/h", "LC_ALL=C", "NCCL_ALGO=ring", "FOO=1"}},
		{EnvRequest{Forward: DefaultForward, Pass: PassNone, X: []string{"FOO", "NOPE"}}, []string{"FOO=1"}},
	}
	for _, tt := range tests {
		got, err := BaseEnv(environ, tt.req)
		if err != nil || !cmp.Equal(got, tt.want) {
			t.Errorf("BaseEnv(%+v) = %q, %v; want %q", tt.req, got, err, tt.want)
		}
	}
	if got := Inherited(environ, PassNone); !cmp.Equal(got, []string{"PATH=/bin", "HOME=/h", "LC_ALL=C"}) {
		t.Errorf("Inherited(PassNone) = %q", got)
	}
	if got := UnsetX(environ, EnvRequest{X: []string{"FOO", "NOPE", "A=1"}}); !cmp.Equal(got, []string{"NOPE"}) {
		t.Errorf("UnsetX = %q, want [NOPE]", got)
	}
}

func TestValidName(t *testing.T) {
	for _, n := range []string{"A", "_", "a1", "NCCL_ALGO", "x_Y_9"} {
		if !ValidName(n) {
			t.Errorf("ValidName(%q) = false, want true", n)
		}
	}
	for _, n := range []string{"", "1A", "A-B", "A B", "A=B", "é", "A.B"} {
		if ValidName(n) {
			t.Errorf("ValidName(%q) = true, want false", n)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func FuzzBaseEnv(f *testing.F) {
	f.Add("NCCL_ALGO=ring", "A=b=c")
	f.Add("FOO", "1X=2")
	f.Fuzz(func(t *testing.T, x, env string) {
		got, err := BaseEnv([]string{"FOO=1", "NCCL_X=2"}, EnvRequest{Forward: DefaultForward, X: []string{x}, Env: []string{env}})
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, kv := range got {
			k, _, ok := strings.Cut(kv, "=")
			if !ok || !ValidName(k) || Reserved(k) || seen[k] {
				t.Fatalf("BaseEnv(-x %q, --env %q) = %q", x, env, got)
			}
			seen[k] = true
		}
	})
}
