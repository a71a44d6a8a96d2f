package main

// End-to-end tests of the hostfile, flag and environment forms on the SSH testbed (see
// e2e_test.go): user@host, username= and port= in a hostfile, -H within a hostfile,
// Hydra's -ppn, the torchrun/MPICH identity across hosts, -genvall and MASTER_PORT.

import (
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// runBin runs the ccrun binary to its end and returns its exit status, stdout and stderr.
func runBin(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	bin, _ := binaries(t)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb syncBuf
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// sortedLines is out's lines, sorted.
func sortedLines(out string) []string {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	sort.Strings(lines)
	return lines
}

// TestE2EHostfileUserAndPort: a hostfile's login name (user@host, username=) and port=
// reach SSH without any ssh config, and win over --ssh-user and --ssh-port.
func TestE2EHostfileUserAndPort(t *testing.T) {
	tb := needTestbed(t)
	a2, a3 := tb.addr(2), tb.addr(3)
	ssh := []string{"--ssh-config", "none", "-i", tb.key, "--ssh-known-hosts", tb.knownHosts}
	hf := hostfileIn(t, "root@"+a2+" slots = 2 port=22\n"+a3+":1 username=root port=22\n")
	args := append(append([]string{}, ssh...), "--hostfile", hf, "--ssh-user", "nobody", "--ssh-port", "2222",
		"/bin/sh", "-c", `echo "$(id -un)@$(hostname) $CC_RANK"`)
	code, out, errs := runBin(t, nil, args...)
	if d := cmp.Diff([]string{"root@tb2 0", "root@tb2 1", "root@tb3 2"}, sortedLines(out)); code != 0 || d != "" {
		t.Errorf("exit %d, stderr %q, output (-want +got):\n%s", code, errs, d)
	}
	for _, tt := range []struct{ file, want string }{
		{a2 + " slots=1 port=2222\n", "ccrun: host " + a2 + ": dial tcp " + a2 + ":2222: connect: connection refused"},
		{"nobody@" + a2 + " slots=1\n", "ccrun: host " + a2 + ": authentication as nobody failed"},
	} {
		args := append(append([]string{}, ssh...), "--hostfile", hostfileIn(t, tt.file), "/bin/true")
		code, out, errs := runBin(t, nil, args...)
		if msg := strings.TrimSpace(errs); code != 1 || out != "" || !strings.HasPrefix(msg, tt.want) || strings.Contains(msg, "\n") {
			t.Errorf("hostfile %q: exit %d, stderr %q; want 1 and one line starting %q", tt.file, code, errs, tt.want)
		}
	}
}

// TestE2EHostSelectionAndPPN: -H picks hosts within the testbed's hostfile, and Hydra's
// -ppn gives every host that many slots.
func TestE2EHostSelectionAndPPN(t *testing.T) {
	tb := needTestbed(t)
	prog := []string{"/bin/sh", "-c", `echo "$(hostname) $CC_RANK"`}
	code, out, errs := runBin(t, nil, tb.args(append([]string{"-H", tb.addr(3) + ":1," + tb.addr(2) + ":2"}, prog...)...)...)
	if d := cmp.Diff([]string{"tb2 1", "tb2 2", "tb3 0"}, sortedLines(out)); code != 0 || d != "" {
		t.Errorf("-H within the hostfile: exit %d, stderr %q, output (-want +got):\n%s", code, errs, d)
	}
	code, _, errs = runBin(t, nil, tb.args(append([]string{"-H", "tb9"}, prog...)...)...)
	if want := "ccrun: -H with --hostfile " + tb.hostfile + `: host "tb9" is not in the hostfile: -H selects among the hostfile's hosts`; code != 2 || strings.TrimSpace(errs) != want {
		t.Errorf("-H tb9: exit %d, stderr %q, want 2 and %q", code, errs, want)
	}
	code, out, errs = runBin(t, nil, append([]string{"--ssh-config", tb.sshConfig, "-ppn", "2", "-hosts", tb.addr(1) + "," + tb.addr(2), "-n", "4"}, prog...)...)
	if d := cmp.Diff([]string{"tb1 0", "tb1 1", "tb2 2", "tb2 3"}, sortedLines(out)); code != 0 || d != "" {
		t.Errorf("-ppn 2: exit %d, stderr %q, output (-want +got):\n%s", code, errs, d)
	}
}

// TestE2ERemoteIdentityAndEnv: the identity of every family across two hosts, -genvall
// carrying ccrun's environment (not an outer launcher's) to remote ranks, and an exported
// MASTER_PORT reaching them.
func TestE2ERemoteIdentityAndEnv(t *testing.T) {
	tb := needTestbed(t)
	env := []string{"E2E_PLAIN=yes", "PMIX_RANK=0", "SLURM_PROCID=0", "MASTER_PORT=23456"}
	code, out, errs := runBin(t, env, "--ssh-config", tb.sshConfig, "-H", tb.addr(1)+":2,"+tb.addr(2)+":2", "-genvall",
		"/bin/sh", "-c", `echo "$RANK $GROUP_RANK/$GROUP_WORLD_SIZE $NODE_RANK $LOCAL_RANK $MPI_LOCALRANKID/$MPI_LOCALNRANKS $OMPI_COMM_WORLD_NODE_RANK $ROLE_RANK $TORCHELASTIC_RUN_ID=$CC_JOB_ID port=$MASTER_PORT plain=$E2E_PLAIN pmix=$PMIX_RANK slurm=$SLURM_PROCID"`)
	var got []string
	for _, l := range sortedLines(out) {
		f := strings.Fields(l)
		if len(f) > 7 {
			if a, b, _ := strings.Cut(f[7], "="); a == b && a != "" {
				f[7] = "run-id=job-id"
			}
		}
		got = append(got, strings.Join(f, " "))
	}
	tail := " run-id=job-id port=23456 plain=yes pmix= slurm="
	want := []string{"0 0/2 0 0 0/2 0 0" + tail, "1 0/2 0 1 1/2 1 1" + tail, "2 1/2 1 0 0/2 0 2" + tail, "3 1/2 1 1 1/2 1 3" + tail}
	if d := cmp.Diff(want, got); code != 0 || d != "" {
		t.Errorf("exit %d, stderr %q, output (-want +got):\n%s", code, errs, d)
	}
}

// TestE2ESlurmNoStepIdentity: under salloc, neither the allocation's nor (with --launcher
// srun) each one-task step's task identity reaches the ranks; with srun, the allocation's id
// does (SSH ranks get their login's environment, which has none).
func TestE2ESlurmNoStepIdentity(t *testing.T) {
	needSlurm(t)
	ccrun, _ := binaries(t)
	for _, launcher := range []string{"ssh", "srun"} {
		t.Run(launcher, func(t *testing.T) {
			j := startCmd(t, "salloc", "-N", "2", "-n", "4", ccrun, "--launcher", launcher, "--ssh-config", os.Getenv("TESTBED_SSH_CONFIG"),
				"/bin/sh", "-c", `echo "$RANK/$WORLD_SIZE procid=$SLURM_PROCID ntasks=$SLURM_NTASKS step=$SLURM_STEP_ID job=${SLURM_JOB_ID:+set}"`)
			if code := j.wait(t, 2*time.Minute); code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", code, j.err)
			}
			job := map[string]string{"ssh": "", "srun": "set"}[launcher]
			var want []string
			for r := range 4 {
				want = append(want, fmt.Sprintf("%d/4 procid= ntasks= step= job=%s", r, job))
			}
			if d := cmp.Diff(want, sortedLines(j.out.String())); d != "" {
				t.Errorf("output (-want +got):\n%s", d)
			}
		})
	}
}
