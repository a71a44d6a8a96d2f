package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/seed-760dd1f1/cc/cmd/internal/cli"
	"github.com/spf13/pflag"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func flagSet() *pflag.FlagSet {
	var o Options
	fs := pflag.NewFlagSet("ccrun", pflag.ContinueOnError)
	o.register(fs)
	return fs
}

func TestRewriteArgs(t *testing.T) {
	tests := []struct{ in, want string }{
		{"-np 4 prog -np 5", "--np 4 prog -np 5"},
		{"-n 4 prog", "-n 4 prog"},
		{"-n4 -l prog", "-n4 -l prog"},
		{"-np=4 prog", "--np=4 prog"},
		{"-x NCCL_ALGO=ring -x FOO prog --x", "-x NCCL_ALGO=ring -x FOO prog --x"},
		{"-lx A=1 prog", "-lx A=1 prog"},
		{"-genv A b -ppn 2 -hostfile h prog", "--env A=b --ppn 2 --hostfile h prog"},
		{"-genv A=b prog x", "--env A=b prog x"},
		{"-env A b -env C=d=e prog", "--env A=b --env C=d=e prog"},
		{"-genvlist A,B -genvall -genvnone -envlist C -envall -envnone prog", "--genvlist A,B --genvall --genvnone --genvlist C --genvall --genvnone prog"},
		{"-f hosts -genv", "-f hosts --env"},
		{"-host a,b -wdir /tmp -oversubscribe prog", "--host a,b --wdir /tmp --oversubscribe prog"},
		{"--hostfile h -- -np", "--hostfile h -- -np"},
		{"--timeout 5 prog -timeout 6", "--timeout 5 prog -timeout 6"},
		{"--tag-output prog", "--tag-output prog"},
		{"-N 2 prog", "-N 2 prog"},
		{"--bogus prog", "--bogus prog"},
	}
	for _, tt := range tests {
		got := strings.Join(rewriteArgs(strings.Fields(tt.in), flagSet()), " ")
		if got != tt.want {
			t.Errorf("rewriteArgs(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
	}
}

// ccrun runs the command in-process and returns its exit status and streams.
func ccrun(t *testing.T, ctx context.Context, environ []string, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	if environ == nil {
		environ = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	}
	code := run(ctx, append([]string{"ccrun"}, args...), environ, &out, &errb)
	return code, out.String(), errb.String()
}

func TestLocalJob(t *testing.T) {
	code, out, errs := ccrun(t, context.Background(), nil, "-np", "3", "--oversubscribe", "-l", "-x", "A=1",
		"/bin/sh", "-c", `echo "$CC_RANK/$CC_NRANKS a=$A"`)
	if code != 0 {
		t.Fatalf("exit %d, stderr %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	sort.Strings(lines)
	if d := cmp.Diff([]string{"[0] 0/3 a=1", "[1] 1/3 a=1", "[2] 2/3 a=1"}, lines); d != "" {
		t.Errorf("output (-want +got):\n%s", d)
	}
}

func TestProgramFlagsAreNotOurs(t *testing.T) {
	code, out, errs := ccrun(t, context.Background(), nil, "-np", "1", "/bin/echo", "-np", "9", "--help", "-x")
	if code != 0 || out != "-np 9 --help -x\n" {
		t.Errorf("exit %d, out %q, err %q; want the program's flags passed through", code, out, errs)
	}
}

func TestRankFailureExitCode(t *testing.T) {
	code, _, errs := ccrun(t, context.Background(), nil, "-np", "2", "/bin/sh", "-c", `[ "$CC_RANK" = 1 ] && exit 3; exec sleep 30`)
	if code != 3 || !strings.Contains(errs, "Exit code:  3") || !strings.Contains(errs, "Rank:       1") {
		t.Errorf("exit %d, stderr:\n%s\nwant 3 and a summary naming rank 1", code, errs)
	}
}

func TestInterruptExit130(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(&cli.SignalError{Signal: os.Interrupt})
	code, _, errs := ccrun(t, ctx, nil, "-np", "2", "sleep", "30")
	if code != 130 || !strings.Contains(errs, "ccrun was interrupted (SIGINT received) and terminated the job.") {
		t.Errorf("exit %d, stderr:\n%s\nwant 130 and the interrupt summary", code, errs)
	}
}

func TestTimeoutFromEnvironment(t *testing.T) {
	env := []string{"PATH=" + os.Getenv("PATH"), "MPIEXEC_TIMEOUT=1"}
	code, _, errs := ccrun(t, context.Background(), env, "-np", "1", "sleep", "30")
	if code != 110 || !strings.Contains(errs, "The job timed out after 1s (--timeout)") {
		t.Errorf("exit %d, stderr:\n%s\nwant 110", code, errs)
	}
}

func TestViperFillsUnsetFlags(t *testing.T) {
	env := []string{"PATH=" + os.Getenv("PATH"), "CCRUN_NP=2", "CCRUN_PREPEND_RANK=true"}
	code, out, errs := ccrun(t, context.Background(), env, "/bin/sh", "-c", "echo x")
	if code != 0 || out != "[0] x\n[1] x\n" && out != "[1] x\n[0] x\n" {
		t.Errorf("exit %d, out %q, err %q; want 2 labelled ranks", code, out, errs)
	}
	env = []string{"PATH=" + os.Getenv("PATH"), "CCRUN_NP=2"}
	if code, out, _ := ccrun(t, context.Background(), env, "-n", "1", "/bin/echo", "y"); code != 0 || out != "y\n" {
		t.Errorf("flag must win over CCRUN_NP: exit %d out %q", code, out)
	}
}

func TestSlurmAllocation(t *testing.T) {
	env := []string{"PATH=" + os.Getenv("PATH"), "SLURM_JOB_NODELIST=localhost", "SLURM_TASKS_PER_NODE=3"}
	code, out, errs := ccrun(t, context.Background(), env, "/bin/sh", "-c", "echo $CC_NRANKS")
	if code != 0 || out != "3\n3\n3\n" {
		t.Errorf("exit %d, out %q, err %q; want 3 ranks from the allocation", code, out, errs)
	}
}

func TestDisplayMap(t *testing.T) {
	code, out, errs := ccrun(t, context.Background(), nil, "-np", "2", "--display-map", "true")
	want := []string{"rank", "host", "localhost"}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("map lacks %q:\n%s", w, out)
		}
	}
	if code != 0 {
		t.Errorf("exit %d: %s", code, errs)
	}
}

// TestBadInput runs every bad input of issue 4 that needs no remote host: one line naming
// the problem, a non-zero exit, nothing started.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	hf := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o644)
		return p
	}
	typo := hf("typo", "localhost slots=2\nlocalhost slot=2\n")
	cpus := runtime.NumCPU()
	over := strconv.Itoa(cpus + 1)
	badCount := hf("badcount", "# hosts\nlocalhost:x\n")
	emptyHost := hf("empty", ":4\n")
	two := hf("two", "localhost slots=2\n")
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"hostfile typo", []string{"--hostfile", typo, "true"}, 2,
			"ccrun: " + typo + `:2: unknown setting "slot" (allowed: slots, count, cpu, max_slots, slots_max, user, username, port)`},
		{"hostfile host:x", []string{"--hostfile", badCount, "true"}, 2,
			"ccrun: " + badCount + `:2: host "localhost:x": bad slot count "x": want an integer from 1 to 1048576`},
		{"hostfile empty host", []string{"--machinefile", emptyHost, "true"}, 2,
			"ccrun: " + emptyHost + `:1: empty host name in ":4"`},
		{"missing hostfile", []string{"--hostfile", filepath.Join(dir, "nope"), "true"}, 2,
			"ccrun: --hostfile " + filepath.Join(dir, "nope") + ": no such file or directory"},
		{"missing machinefile", []string{"--machinefile", filepath.Join(dir, "nope"), "true"}, 2,
			"ccrun: --machinefile " + filepath.Join(dir, "nope") + ": no such file or directory"},
		{"more ranks than slots", []string{"-np", "3", "--hostfile", two, "true"}, 2,
			"ccrun: 3 ranks requested but the 1 hosts have 2 slots: use -np 2 or fewer, add slots, or add --oversubscribe"},
		{"bad -x name", []string{"-x", "1BAD=2", "true"}, 2,
			`ccrun: -x "1BAD=2": bad variable name "1BAD": want letters, digits and _, not starting with a digit`},
		{"reserved -x name", []string{"-x", "CC_RANK=2", "true"}, 2,
			`ccrun: -x "CC_RANK=2": CC_RANK is set by ccrun for each rank`},
		{"timeout -1", []string{"--timeout", "-1", "true"}, 2,
			`ccrun: bad --timeout "-1": want seconds (5, 1.5) or a duration (500ms, 2m); 0: no timeout`},
		{"timeout 1.5.2", []string{"--timeout", "1.5.2", "true"}, 2,
			`ccrun: bad --timeout "1.5.2": want seconds (5, 1.5) or a duration (500ms, 2m); 0: no timeout`},
		{"timeout 5 min", []string{"--timeout", "5min", "true"}, 2,
			`ccrun: bad --timeout "5min": want seconds (5, 1.5) or a duration (500ms, 2m); 0: no timeout`},
		{"np -1", []string{"-np", "-1", "true"}, 2, "ccrun: bad -np -1: want 1 or more ranks"},
		{"bad map-by", []string{"--map-by", "core", "true"}, 2, `ccrun: bad --map-by "core" (allowed: slot, node, ppr:N:node)`},
		{"bad -H", []string{"-H", "a,,b", "true"}, 2, `ccrun: -H: empty host name in "a,,b"`},
		{"no program", []string{"-np", "2"}, 2, "ccrun: no program given: usage: ccrun [flags] PROGRAM [ARGS...] (ccrun -h for help)"},
		{"unknown flag", []string{"--bogus", "true"}, 2, "ccrun: unknown flag: --bogus"},
		{"missing local program", []string{"-np", "1", "no-such-program-ccrun"}, 127,
			`ccrun: program "no-such-program-ccrun" not found on this machine (PATH=` + os.Getenv("PATH") + ")"},
		{"missing local ./program", []string{"-np", "1", "./no-such-program-ccrun"}, 127,
			`ccrun: program "./no-such-program-ccrun" not found on this machine`},
		{"program is a directory", []string{"-np", "1", dir}, 126,
			`ccrun: program "` + dir + `" on this machine cannot be run: is a directory`},
		{"both output tags", []string{"--tag-output", "-l", "true"}, 2,
			"ccrun: --tag-output and -l/--prepend-rank exclude each other: choose one"},
		{"more ranks than CPUs", []string{"-np", over, "true"}, 2,
			fmt.Sprintf("ccrun: -np %s is more than the %d CPUs of this machine (one slot each): use -np %d or fewer, add --oversubscribe, or give hosts with -H or --hostfile", over, cpus, cpus)},
		{"missing --wdir", []string{"--wdir", filepath.Join(dir, "nope"), "true"}, 2,
			"ccrun: --wdir " + filepath.Join(dir, "nope") + ": no such file or directory"},
		{"ssh keepalive 0", []string{"--ssh-keepalive", "0s", "true"}, 2, "ccrun: bad --ssh-keepalive 0s: want a positive duration such as 5s"},
		{"ssh timeout -1s", []string{"--ssh-connect-timeout", "-1s", "true"}, 2, "ccrun: bad --ssh-connect-timeout -1s: want a positive duration such as 5s"},
		{"ssh keepalive count 0", []string{"--ssh-keepalive-count", "0", "true"}, 2, "ccrun: bad --ssh-keepalive-count 0: want 1 or more"},
		{"ssh parallel -1", []string{"--ssh-parallel", "-1", "true"}, 2, "ccrun: bad --ssh-parallel -1: want 1 or more"},
		{"ssh sessions 0", []string{"--ssh-max-sessions", "0", "true"}, 2, "ccrun: bad --ssh-max-sessions 0: want 1 or more"},
		{"ssh port", []string{"--ssh-port", "70000", "true"}, 2, "ccrun: bad --ssh-port 70000: want 1-65535 (0: the ssh config's Port, else 22)"},
		{"bad --stdin", []string{"--stdin", "first", "true"}, 2, `ccrun: bad --stdin "first": want all, none or a rank number (0 is the default)`},
		{"--stdin rank out of the job", []string{"-np", "2", "--stdin", "2", "true"}, 2, "ccrun: bad --stdin 2: the job has 2 rank(s), 0-1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errs := ccrun(t, context.Background(), nil, tt.args...)
			if code != tt.code || strings.TrimSpace(errs) != tt.want || out != "" {
				t.Errorf("ccrun %s\n got exit %d, stderr %q, stdout %q\nwant exit %d, stderr %q",
					strings.Join(tt.args, " "), code, errs, out, tt.code, tt.want)
			}
		})
	}
}

// TestOneMachineOneNode: localhost, the host name and the machine's own address are one
// node, whose local ranks are numbered across them.
func TestOneMachineOneNode(t *testing.T) {
	name, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	lists := []string{"localhost," + name, name + ",127.0.0.1"}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() && n.IP.To4() != nil {
			lists = append(lists, n.IP.String()+",localhost")
			break
		}
	}
	for _, hosts := range lists {
		code, out, errs := ccrun(t, context.Background(), nil, "-H", hosts, "/bin/sh", "-c", `echo "$LOCAL_RANK/$LOCAL_WORLD_SIZE node $CC_NODE_RANK"`)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		sort.Strings(lines)
		if d := cmp.Diff([]string{"0/2 node 0", "1/2 node 0"}, lines); code != 0 || d != "" {
			t.Errorf("-H %s: exit %d, stderr %q, output (-want +got):\n%s", hosts, code, errs, d)
		}
	}
}

// TestOversubscribeThisMachine: more ranks than CPUs run with --oversubscribe.
func TestOversubscribeThisMachine(t *testing.T) {
	n := runtime.NumCPU() + 1
	code, out, errs := ccrun(t, context.Background(), nil, "-np", strconv.Itoa(n), "--oversubscribe", "/bin/echo", "x")
	if code != 0 || out != strings.Repeat("x\n", n) {
		t.Errorf("exit %d, stdout %q, stderr %q; want %d ranks", code, out, errs, n)
	}
}

// FuzzRewriteArgs checks that rewriting never grows the command line, never panics, and
// leaves a command line without ccrun flags alone, and that the arguments after "--" are
// never touched when nothing before it takes a value.
func FuzzRewriteArgs(f *testing.F) {
	f.Add("-np 4 -x A=1", "prog -np 5 --x")
	f.Add("-genv A B", "-n 1")
	f.Add("-lx", "p")
	f.Fuzz(func(t *testing.T, ours, theirs string) {
		args := strings.Fields(ours)
		tail := strings.Fields(theirs)
		got := rewriteArgs(append(append(args[:len(args):len(args)], "--"), tail...), flagSet())
		if len(got) > len(args)+1+len(tail) {
			t.Fatalf("rewriteArgs grew %q to %q", args, got)
		}
		plain := true
		for _, a := range args {
			if strings.HasPrefix(a, "-") {
				plain = false
			}
		}
		want := append(append(args[:len(args):len(args)], "--"), tail...)
		if plain && !cmp.Equal(got, want) {
			t.Fatalf("rewriteArgs(%q) = %q, want it unchanged", want, got)
		}
		if plain || len(tail) == 0 {
			return
		}
		if g := got[len(got)-len(tail):]; !cmp.Equal(g, tail) && !strings.HasPrefix(args[len(args)-1], "-") {
			t.Fatalf("rewriteArgs(%q) = %q: the program's arguments changed", want, got)
		}
	})
}

// TestVersion: --version and Open MPI's -V print one line naming ccrun and
// its version, exit 0 and start nothing, whatever follows.
func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-V"}, {"-V", "-np", "2", "/bin/false"}} {
		code, out, errs := ccrun(t, context.Background(), nil, args...)
		if code != 0 || errs != "" || !strings.HasPrefix(out, "ccrun version ") || strings.Count(out, "\n") != 1 || !strings.Contains(out, runtime.Version()) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want one line \"ccrun version ... %s\"", args, code, out, errs, runtime.Version())
		}
	}
}
