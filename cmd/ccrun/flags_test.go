package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// hostfileIn writes a hostfile into a test directory.
func hostfileIn(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// countRanks runs ccrun with args and a rank program printing its rank, and returns how
// many ranks ran.
func countRanks(t *testing.T, environ []string, args ...string) int {
	t.Helper()
	args = append(args, "/bin/sh", "-c", `echo "rank $CC_RANK of $CC_NRANKS"`)
	code, out, errs := ccrun(t, context.Background(), environ, args...)
	if code != 0 {
		t.Fatalf("ccrun %s: exit %d, stderr %q", strings.Join(args, " "), code, errs)
	}
	return strings.Count(out, "rank ")
}

// TestHostfileForms: the Open MPI forms users have, on this machine's names.
func TestHostfileForms(t *testing.T) {
	cpus := runtime.NumCPU()
	tests := []struct {
		name, file string
		args       []string
		want       int
	}{
		{"max_slots alone sets slots", "localhost max_slots=3\n", []string{"-np", "3"}, 3},
		{"no slots: the machine's CPUs", "localhost\n", nil, cpus},
		{"repeated bare lines: still the CPUs", "localhost\nlocalhost\nlocalhost\n", nil, cpus},
		{"spaces around =", "localhost slots = 3\n", nil, 3},
		{"count=", "localhost count=2\n", nil, 2},
		{"cpu=", "localhost cpu=2\n", nil, 2},
		{"user@host and port= (unused here)", "root@localhost slots=2 port=2222\n", nil, 2},
		{"username=", "localhost slots=2 username=root\n", nil, 2},
		{"-H selects within the hostfile", "localhost slots=3\n", []string{"-H", "localhost:1"}, 1},
		{"-H without a count keeps the hostfile's", "localhost slots=3\n", []string{"-H", "localhost"}, 3},
		{"-H another name of the machine", "localhost slots=3\n", []string{"-H", "127.0.0.1"}, 3},
		{"-f is Hydra's --hostfile", "localhost:2\n", nil, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			flag := "--hostfile"
			if strings.HasPrefix(tt.name, "-f") {
				flag = "-f"
			}
			args := append([]string{flag, hostfileIn(t, tt.file)}, tt.args...)
			if got := countRanks(t, nil, args...); got != tt.want {
				t.Errorf("ccrun %s: %d ranks, want %d", strings.Join(args, " "), got, tt.want)
			}
		})
	}
}

// TestHostfileFormErrors: forms ccrun refuses, each with one line naming file:line.
func TestHostfileFormErrors(t *testing.T) {
	tests := []struct {
		file string
		args []string
		want string // after "ccrun: FILE"
	}{
		{"localhost slots=1\nlocalhost slots=1\n", nil,
			`:2: host "localhost": slot count given again (first on line 1): give it on one line (Open MPI refuses multiple definitions of the slot count)`},
		{"localhost\n^localhost\n", nil, `:2: "^localhost": excluding a host (Open MPI's ^host) is not supported: delete the lines that name it`},
		{"localhost:2:3\n", nil, `:1: host "localhost:2:3": want host, host:N or an IPv6 address ([fe80::1]:N with a count)`},
		{"@localhost\n", nil, `:1: "@localhost": want user@host`},
		{"localhost port=99999\n", nil, `:1: bad port "99999" for host "localhost": want 1-65535`},
		{"localhost slots=2 max_slots=1\n", nil, `:1: host "localhost": slots=2 exceeds max_slots=1`},
		{"localhost slots=2\n", []string{"-H", "elsewhere"}, `: host "elsewhere" is not in the hostfile: -H selects among the hostfile's hosts`},
		{"localhost slots=2 max_slots=2\n", []string{"-H", "localhost:3"}, `: host "localhost": -H asks for 3 slots, more than its max_slots=2`},
	}
	for _, tt := range tests {
		hf := hostfileIn(t, tt.file)
		args := append(append([]string{"--hostfile", hf}, tt.args...), "true")
		code, out, errs := ccrun(t, context.Background(), nil, args...)
		want := "ccrun: " + hf + tt.want
		if tt.args != nil {
			want = "ccrun: -H with --hostfile " + hf + tt.want
		}
		if code != 2 || out != "" || strings.TrimSpace(errs) != want {
			t.Errorf("hostfile %q %v:\n got exit %d, stderr %q\nwant exit 2, stderr %q", tt.file, tt.args, code, errs, want)
		}
	}
}

// TestHydraPPN: -ppn N gives every host N slots (Hydra), where -N asks for exactly N ranks
// per host within its slots.
func TestHydraPPN(t *testing.T) {
	if got := countRanks(t, nil, "-ppn", "3", "-hosts", "localhost", "-n", "3"); got != 3 {
		t.Errorf("-ppn 3 -hosts localhost -n 3: %d ranks, want 3", got)
	}
	if got := countRanks(t, nil, "-ppn", "2", "-f", hostfileIn(t, "localhost slots=1\n")); got != 2 {
		t.Errorf("-ppn 2 over a hostfile of slots=1: %d ranks, want 2 (-ppn wins)", got)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"-ppn", "2", "-hosts", "localhost", "-n", "3"},
			"ccrun: 3 ranks requested but the 1 hosts have 2 slots: use -np 2 or fewer, add slots, or add --oversubscribe"},
		{[]string{"-ppn", "2", "-f", hostfileIn(t, "localhost max_slots=1\n")}, "ccrun: -ppn 2: host localhost has max_slots=1"},
		{[]string{"-ppn", "2", "-N", "2"}, "ccrun: -N 2 and -ppn 2 mean different things (exactly N ranks per host; every host has N slots): give one"},
	} {
		code, _, errs := ccrun(t, context.Background(), nil, append(tt.args, "true")...)
		if code != 2 || strings.TrimSpace(errs) != tt.want {
			t.Errorf("ccrun %v: exit %d, stderr %q; want 2, %q", tt.args, code, errs, tt.want)
		}
	}
}

// rankEnv runs one rank per args and returns each rank's environment as a map, by rank.
func rankEnv(t *testing.T, environ []string, args ...string) (envs []map[string]string, stderr string) {
	t.Helper()
	args = append(args, "/bin/sh", "-c", `env | sed "s/^/$CC_RANK /"`)
	code, out, errs := ccrun(t, context.Background(), environ, args...)
	if code != 0 {
		t.Fatalf("ccrun %v: exit %d, stderr %q", args, code, errs)
	}
	byRank := map[int]map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		r, kv, _ := strings.Cut(line, " ")
		n, err := strconv.Atoi(r)
		if err != nil {
			continue // a multi-line value
		}
		if byRank[n] == nil {
			byRank[n] = map[string]string{}
		}
		k, v, _ := strings.Cut(kv, "=")
		byRank[n][k] = v
	}
	for r := range len(byRank) {
		envs = append(envs, byRank[r])
	}
	return envs, errs
}

func baseEnviron(t *testing.T, extra ...string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, extra...)
}

// TestHydraEnvFlags: -genv in both forms, -env, -genvlist, -genvall, -genvnone, and -x of
// an unset variable.
func TestHydraEnvFlags(t *testing.T) {
	environ := baseEnviron(t, "AA=1", "BB=2", "CC=3", "NCCL_ALGO=ring")
	// -genv NAME=VALUE takes one argument: the program stays the program (bug 6).
	code, out, errs := ccrun(t, context.Background(), environ, "-np", "1", "-genv", "FOO=bar", "-genv", "Q", "a b",
		"-env", "E1", "x", "-env", "E2=y=z", "/bin/sh", "-c", `echo "[$FOO] [$Q] [$E1] [$E2]"`)
	if code != 0 || out != "[bar] [a b] [x] [y=z]\n" {
		t.Errorf("-genv/-env: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	tests := []struct {
		args        []string
		want, unset []string
	}{
		{nil, []string{"AA", "BB", "CC", "NCCL_ALGO"}, nil},
		{[]string{"-genvnone"}, []string{"PATH", "HOME"}, []string{"AA", "BB", "NCCL_ALGO"}},
		{[]string{"-genvlist", "AA,BB"}, []string{"AA", "BB", "PATH"}, []string{"CC", "NCCL_ALGO"}},
		{[]string{"-envlist", "CC", "-genv", "DD=4"}, []string{"CC", "DD"}, []string{"AA", "NCCL_ALGO"}},
		{[]string{"-genvall"}, []string{"AA", "BB", "CC", "NCCL_ALGO"}, nil},
	}
	for _, tt := range tests {
		envs, _ := rankEnv(t, environ, append([]string{"-np", "1"}, tt.args...)...)
		for _, k := range tt.want {
			if _, ok := envs[0][k]; !ok {
				t.Errorf("%v: rank lacks %s", tt.args, k)
			}
		}
		for _, k := range tt.unset {
			if v, ok := envs[0][k]; ok {
				t.Errorf("%v: rank has %s=%s, want it unset", tt.args, k, v)
			}
		}
	}
	// -x of an unset variable warns and goes on, as mpirun.
	code, out, errs = ccrun(t, context.Background(), environ, "-np", "1", "-x", "NOT_SET_HERE", "-x", "AA", "/bin/sh", "-c", `echo "[$NOT_SET_HERE] $AA"`)
	if code != 0 || out != "[] 1\n" || strings.TrimSpace(errs) != "ccrun: warning: -x NOT_SET_HERE: NOT_SET_HERE is not set in ccrun's environment; the ranks do not get it" {
		t.Errorf("-x NOT_SET_HERE: exit %d, stdout %q, stderr %q; want a warning and a run", code, out, errs)
	}
	code, out, errs = ccrun(t, context.Background(), environ, "-np", "1", "-genvlist", "AA,NOPE", "/bin/sh", "-c", `echo "$AA"`)
	if code != 0 || out != "1\n" || strings.TrimSpace(errs) != "ccrun: warning: -genvlist AA,NOPE: NOPE is not set in ccrun's environment; the ranks do not get it" {
		t.Errorf("-genvlist AA,NOPE: exit %d, stdout %q, stderr %q; want a warning and a run", code, out, errs)
	}
	code, _, errs = ccrun(t, context.Background(), environ, "-genvall", "-genvnone", "true")
	if code != 2 || strings.TrimSpace(errs) != "ccrun: -genvall cannot be combined with -genvnone or -genvlist: choose one" {
		t.Errorf("-genvall -genvnone: exit %d, stderr %q", code, errs)
	}
}

// TestOuterLauncherEnv: ccrun run under mpirun, mpiexec, srun or torchrun: none of their
// per-rank variables reaches ccrun's ranks, which get ccrun's own identity under every
// family's names.
func TestOuterLauncherEnv(t *testing.T) {
	outer := []string{
		"PMIX_RANK=0", "PMIX_NAMESPACE=prterun-x@1", "OMPI_MCA_orte_ess_num_procs=1", "OMPI_COMM_WORLD_RANK=0",
		"OMPI_COMM_WORLD_NODE_RANK=0", "OMPI_UNIVERSE_SIZE=1", "PMI_FD=7", "PMI_PORT=h:1", "PMI_ID=0", "PMI_RANK=0", "PMI_SIZE=1",
		"HYDRA_CONTROL_FD=9", "MPI_LOCALRANKID=0", "MPI_LOCALNRANKS=1",
		"SLURM_PROCID=0", "SLURM_LOCALID=0", "SLURM_NODEID=0", "SLURM_NTASKS=1", "SLURM_STEP_ID=0",
		"SLURM_JOB_ID=42", "SLURM_JOB_NAME=j",
		"TORCHELASTIC_RUN_ID=outer", "TORCHELASTIC_USE_AGENT_STORE=True", "GROUP_RANK=0", "NODE_RANK=0",
		"ROLE_RANK=0", "GROUP_WORLD_SIZE=1", "MASTER_ADDR=10.9.9.9", "MASTER_PORT=29500", "RANK=0", "WORLD_SIZE=1",
	}
	envs, _ := rankEnv(t, baseEnviron(t, outer...), "-np", "2", "--oversubscribe")
	if len(envs) != 2 {
		t.Fatalf("got %d ranks, want 2", len(envs))
	}
	for r, e := range envs {
		rs := strconv.Itoa(r)
		want := map[string]string{
			"RANK": rs, "WORLD_SIZE": "2", "LOCAL_RANK": rs, "LOCAL_WORLD_SIZE": "2", "GROUP_RANK": "0", "NODE_RANK": "0",
			"ROLE_RANK": rs, "ROLE_WORLD_SIZE": "2", "ROLE_NAME": "default", "GROUP_WORLD_SIZE": "1",
			"TORCHELASTIC_RUN_ID": e["CC_JOB_ID"], "TORCHELASTIC_RESTART_COUNT": "0", "TORCHELASTIC_MAX_RESTARTS": "0",
			"MASTER_ADDR":          "127.0.0.1",
			"OMPI_COMM_WORLD_RANK": rs, "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": rs,
			"OMPI_COMM_WORLD_LOCAL_SIZE": "2", "OMPI_COMM_WORLD_NODE_RANK": rs,
			"PMI_RANK": rs, "PMI_SIZE": "2", "MPI_LOCALRANKID": rs, "MPI_LOCALNRANKS": "2",
			"SLURM_JOB_ID": "42", "SLURM_JOB_NAME": "j", // the allocation stays
		}
		for k, v := range want {
			if e[k] != v {
				t.Errorf("rank %d: %s=%q, want %q", r, k, e[k], v)
			}
		}
		for _, k := range []string{"PMIX_RANK", "PMIX_NAMESPACE", "OMPI_MCA_orte_ess_num_procs", "OMPI_UNIVERSE_SIZE",
			"PMI_FD", "PMI_PORT", "PMI_ID", "HYDRA_CONTROL_FD", "SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID",
			"SLURM_NTASKS", "SLURM_STEP_ID", "TORCHELASTIC_USE_AGENT_STORE"} {
			if v, ok := e[k]; ok {
				t.Errorf("rank %d: %s=%q leaked from the outer launcher", r, k, v)
			}
		}
		if e["MASTER_PORT"] == "29500" || e["MASTER_PORT"] != envs[0]["MASTER_PORT"] {
			t.Errorf("rank %d: MASTER_PORT=%q: want ccrun's (torchrun's 29500 is its store), the same on every rank", r, e["MASTER_PORT"])
		}
	}
	// With a PMI server (--pmi), PMI_FD is ccrun's own socketpair, never the outer 7.
	envs, _ = rankEnv(t, baseEnviron(t, outer...), "-np", "2", "--oversubscribe", "--pmi")
	for r, e := range envs {
		_, port := e["PMI_PORT"]
		if e["PMI_FD"] != "3" || port {
			t.Errorf("--pmi: rank %d: PMI_FD=%q, PMI_PORT=%q; want ccrun's PMI_FD=3 and no PMI_PORT", r, e["PMI_FD"], e["PMI_PORT"])
		}
	}
}

// TestMasterPort: an exported MASTER_PORT (and MASTER_ADDR) is the user's; otherwise a
// port that is free on this machine, where rank 0 runs.
func TestMasterPort(t *testing.T) {
	envs, _ := rankEnv(t, baseEnviron(t, "MASTER_PORT=1234", "MASTER_ADDR=10.1.2.3"), "-np", "1")
	if envs[0]["MASTER_PORT"] != "1234" || envs[0]["MASTER_ADDR"] != "10.1.2.3" {
		t.Errorf("exported MASTER_PORT/ADDR not respected: %s:%s", envs[0]["MASTER_ADDR"], envs[0]["MASTER_PORT"])
	}
	envs, _ = rankEnv(t, nil, "-np", "1")
	port := envs[0]["MASTER_PORT"]
	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		t.Errorf("MASTER_PORT=%s is not free here: %v", port, err)
	} else {
		ln.Close()
	}
	code, _, errs := ccrun(t, context.Background(), baseEnviron(t, "MASTER_PORT=abc"), "true")
	if code != 2 || strings.TrimSpace(errs) != `ccrun: MASTER_PORT="abc": want a port number from 1 to 65535` {
		t.Errorf("MASTER_PORT=abc: exit %d, stderr %q", code, errs)
	}
}

// TestTimeoutForms: sub-second and duration forms; plain integers stay seconds.
func TestTimeoutForms(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		environ []string
		code    int
		summary string
	}{
		{[]string{"--timeout", "0.3"}, nil, 110, "The job timed out after 300ms (--timeout)"},
		{[]string{"--timeout", "250ms"}, nil, 110, "The job timed out after 250ms (--timeout)"},
		{[]string{"--timeout=1"}, nil, 110, "The job timed out after 1s (--timeout)"},
		{nil, baseEnviron(t, "MPIEXEC_TIMEOUT=0.2"), 110, "The job timed out after 200ms (--timeout)"},
	} {
		code, _, errs := ccrun(t, context.Background(), tt.environ, append(tt.args, "-np", "1", "sleep", "30")...)
		if code != tt.code || !strings.Contains(errs, tt.summary) {
			t.Errorf("%v %v: exit %d, stderr:\n%s\nwant %d and %q", tt.args, tt.environ, code, errs, tt.code, tt.summary)
		}
	}
	if code, out, errs := ccrun(t, context.Background(), nil, "--timeout", "2m", "-np", "1", "echo", "ok"); code != 0 || out != "ok\n" {
		t.Errorf("--timeout 2m: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	code, _, errs := ccrun(t, context.Background(), baseEnviron(t, "MPIEXEC_TIMEOUT=soon"), "true")
	if want := `ccrun: bad MPIEXEC_TIMEOUT "soon": want seconds (5, 1.5) or a duration (500ms, 2m); 0: no timeout`; code != 2 || strings.TrimSpace(errs) != want {
		t.Errorf("MPIEXEC_TIMEOUT=soon: exit %d, stderr %q, want %q", code, errs, want)
	}
}

// TestCompletion: `ccrun completion SHELL` alone writes a script; anything else with the
// word is a program named completion; __complete sees -np as a command line does.
func TestCompletion(t *testing.T) {
	for _, sh := range completionShells {
		code, out, errs := ccrun(t, context.Background(), nil, "completion", sh)
		if code != 0 || !strings.Contains(out, "ccrun") || len(out) < 1000 || errs != "" {
			t.Errorf("completion %s: exit %d, %d bytes, stderr %q", sh, code, len(out), errs)
		}
	}
	for _, args := range [][]string{{"completion"}, {"completion", "bash", "x"}, {"-np", "1", "completion", "bash"}, {"--", "completion", "bash"}, {"completion", "tcsh"}} {
		code, out, errs := ccrun(t, context.Background(), nil, args...)
		if code != 127 || out != "" || !strings.HasPrefix(errs, `ccrun: program "completion" not found on this machine`) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want the program \"completion\" looked up", args, code, out, errs)
		}
	}
	code, out, errs := ccrun(t, context.Background(), nil, "__complete", "-np", "2", "--hostf")
	if code != 0 || !strings.HasPrefix(out, "--hostfile\t") {
		t.Errorf("__complete -np 2 --hostf: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// TestLongLines: an untagged line longer than 64 KiB arrives unchanged; tagged, it is
// split into tagged pieces (bug 13).
func TestLongLines(t *testing.T) {
	prog := []string{"/bin/sh", "-c", `head -c 100000 /dev/zero | tr '\0' x; echo; echo short`}
	code, out, errs := ccrun(t, context.Background(), nil, append([]string{"-np", "1"}, prog...)...)
	if want := strings.Repeat("x", 100000) + "\nshort\n"; code != 0 || out != want {
		t.Errorf("untagged: exit %d, %d bytes with %d newlines, stderr %q; want the line unchanged", code, len(out), strings.Count(out, "\n"), errs)
	}
	code, out, _ = ccrun(t, context.Background(), nil, append([]string{"-np", "1", "-l"}, prog...)...)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var lens []int
	for _, l := range lines {
		lens = append(lens, len(l))
	}
	if d := cmp.Diff([]int{4 + 65536, 4 + 100000 - 65536, 4 + 5}, lens); code != 0 || d != "" || !regexp.MustCompile(`^\[0\] x+$`).MatchString(lines[1]) {
		t.Errorf("-l: exit %d, line lengths (-want +got):\n%s", code, d)
	}
}

// TestProgramMissingExit127: a program missing here exits 127 with one line (checked whole),
// as a remote one does; ccrun starts no rank.
func TestProgramMissingExit127(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := ccrun(t, context.Background(), nil, "-np", "2", "--wdir", dir, "./prog")
	want := fmt.Sprintf(`ccrun: program "./prog" not found on this machine (in --wdir %s)`, dir)
	if code != 127 || out != "" || strings.TrimSpace(errs) != want {
		t.Errorf("exit %d, stdout %q, stderr %q; want 127, %q", code, out, errs, want)
	}
}
