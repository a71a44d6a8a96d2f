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
		{EnvRequest{X: []string{"UNSET_VAR"}}, `-x UNSET_VAR: UNSET_VAR is not set in ccrun's environment (use -x UNSET_VAR=value)`},
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
		"PMI_RANK=5", "PMI_SIZE=8", "PMI_ID=5", "WORLD_SIZE=8", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=4",
		"MASTER_ADDR=10.0.0.1", "MASTER_PORT=" + strconv.Itoa(port),
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("RankEnv (-want +got):\n%s", d)
	}
	if port < 20000 || port >= 30000 {
		t.Errorf("MasterPort = %d, want 20000..29999", port)
	}
	// With a PMI server, PMI_PORT is on the root's host (IPv6 bracketed).
	job.PMIPort = 4100
	for root, want := range map[string]string{"10.0.0.254:4000": "PMI_PORT=10.0.0.254:4100", "[fd00::1]:4000": "PMI_PORT=[fd00::1]:4100"} {
		if got := RankEnv(nil, job, s, root); !contains(got, want) {
			t.Errorf("RankEnv with root %s: %v, want %s", root, got, want)
		}
	}
	job.PMIPort = 0
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
