package main

// End-to-end tests of issue 24 item 1: ccrun serves PMI only to programs that speak it,
// over a private socketpair (PMI_FD) for local ranks, so a job has no PMI port for a
// stranger to end it through.

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// listeningTCP returns the TCP sockets process pid listens on, as ss -ltnp shows them:
// the LISTEN entries of /proc/PID/net/tcp and tcp6 whose inodes are among its fds.
func listeningTCP(t *testing.T, pid int) []netip.AddrPort {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if in, ok := strings.CutPrefix(l, "socket:["); ok {
			inodes[strings.TrimSuffix(in, "]")] = true
		}
	}
	var out []netip.AddrPort
	for _, table := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			const listen = "0A"
			if len(f) < 10 || f[3] != listen || !inodes[f[9]] {
				continue
			}
			out = append(out, procAddr(t, f[1]))
		}
	}
	return out
}

// procAddr decodes a /proc/net/tcp address: hex words of the IP in host (little-endian)
// order, a colon, the port in hex. "0100007F:1F90" is 127.0.0.1:8080.
func procAddr(t *testing.T, s string) netip.AddrPort {
	t.Helper()
	ipHex, portHex, _ := strings.Cut(s, ":")
	raw, err := hex.DecodeString(ipHex)
	port, err2 := strconv.ParseUint(portHex, 16, 16)
	if err != nil || err2 != nil || len(raw)%4 != 0 {
		t.Fatalf("bad /proc/net/tcp address %q", s)
	}
	for i := 0; i < len(raw); i += 4 {
		binary.BigEndian.PutUint32(raw[i:], binary.LittleEndian.Uint32(raw[i:]))
	}
	ip, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(ip.Unmap(), uint16(port))
}

// impersonate connects to addr as a stranger claiming rank 0 and asking for MPI_Abort
// with exit code 13, as the two lines did, then waits until the server has read
// everything and hung up (a hang guard, not a speed limit).
func impersonate(t *testing.T, addr netip.AddrPort) {
	t.Helper()
	if addr.Addr().IsUnspecified() {
		addr = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), addr.Port())
	}
	nc, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatalf("stranger: %v", err)
	}
	defer nc.Close()
	fmt.Fprint(nc, "cmd=initack pmiid=0\ncmd=abort exitcode=13\n")
	nc.(*net.TCPConn).CloseWrite()
	nc.SetReadDeadline(time.Now().Add(time.Minute))
	// EOF or a reset (the server closed with our bytes unread): it hung up.
	if _, err := io.Copy(io.Discard, nc); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("stranger on %s: %v, want the connection closed", addr, err)
	}
}

// strangerOnCCRun checks that the running ccrun of j listens on one TCP socket, the
// bootstrap root's (no PMI port), and impersonates a rank on every socket it listens on.
func strangerOnCCRun(t *testing.T, j *job) {
	t.Helper()
	lns := listeningTCP(t, j.cmd.Process.Pid)
	if len(lns) != 1 {
		t.Errorf("ccrun listens on %v, want one socket (the bootstrap root's)", lns)
	}
	for _, a := range lns {
		impersonate(t, a)
	}
}

// wantEachRank checks that j's stdout has format's line for each of its nranks ranks.
func wantEachRank(t *testing.T, j *job, nranks int, format string) {
	t.Helper()
	for r := range nranks {
		if want := fmt.Sprintf(format, r); !strings.Contains(j.out.String(), want) {
			t.Errorf("no %q in stdout:\n%s", want, j.out)
		}
	}
}

// releaseGate lets the MPICH job's rank 0 read its line from the FIFO gate (see mpiJob's
// "wait") and waits for the job to exit 0.
func releaseGate(t *testing.T, j *job, gate string) {
	t.Helper()
	w, err := os.OpenFile(gate, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(w, "go")
	w.Close()
	if code := j.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, j.out, j.err)
	}
}

// gated starts ccrun with args in dir with a pipe as its stdin, which the ranks of the
// job read to go on; release writes their line and closes it.
func gated(t *testing.T, dir string, args ...string) (j *job, release func()) {
	t.Helper()
	bin, _ := binaries(t)
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	w, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	j = startJob(t, cmd)
	return j, func() {
		fmt.Fprintln(w, "go")
		w.Close()
	}
}

// TestPMIOnlyForMPICH: ccrun serves PMI to an MPICH program and with --pmi, and not to
// cc-perf, a shell, or a program it cannot find.
func TestPMIOnlyForMPICH(t *testing.T) {
	dir := t.TempDir()
	mpiProgram(t, "mpicc.mpich", dir, "mpich_hello")
	_, perf := binaries(t)
	for _, tt := range []struct {
		prog string
		pmi  bool
		want bool
	}{
		{filepath.Join(dir, "mpich_hello"), false, true},
		{perf, false, false},
		{"sh", false, false},
		{"no-such-program", false, false},
		{"sh", true, true},
	} {
		if got, _ := speaksPMI(&Options{PMI: tt.pmi}, []string{tt.prog}); got != tt.want {
			t.Errorf("speaksPMI(--pmi=%v, %s) = %v, want %v", tt.pmi, tt.prog, got, tt.want)
		}
	}
}

// TestE2ENoPMIForCCPerf: a cc-perf job has no PMI listener and its ranks no PMI variables
// but PMI_RANK/PMI_SIZE; a stranger's abort on every socket ccrun listens on (only the
// bootstrap root's) does not end it: #wrong 0, exit 0.
func TestE2ENoPMIForCCPerf(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	_, perf := binaries(t)
	gate := `echo "rank $CC_RANK: PMI_FD=${PMI_FD-unset} PMI_PORT=${PMI_PORT-unset} PMI_ID=${PMI_ID-unset}"; read go; exec "$0" "$@"`
	j, release := gated(t, "", "-np", "2", "--oversubscribe", "--stdin", "all", "sh", "-c", gate,
		perf, "all_reduce", "-b", "8", "-e", "64K", "-f", "8", "-c", "1")
	j.waitOutput(t, regexp.MustCompile(`(?s)rank \d: .*rank \d: `), time.Minute)
	wantEachRank(t, j, 2, "rank %d: PMI_FD=unset PMI_PORT=unset PMI_ID=unset\n")
	strangerOnCCRun(t, j)
	release()
	if code := j.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("exit %d, want 0; stderr:\n%s", code, j.err)
	}
	checkRows(t, j.out.String(), 5) // 8 B to 32 KiB
}

// TestE2EMPICHOverPMIFD: the MPICH hello's 4 local ranks reach PMI through PMI_FD, with no
// PMI_PORT; during the job ccrun listens on the bootstrap root's socket alone, and a
// stranger's abort there does not end the job.
func TestE2EMPICHOverPMIFD(t *testing.T) {
	dir := t.TempDir()
	mpiProgram(t, "mpicc.mpich", dir, "mpich_job")
	j, release := gated(t, dir, append(npFlags(4), "./mpich_job", "wait")...)
	j.waitOutput(t, regexp.MustCompile(`(?s)(pmi of rank.*){4}`), 2*time.Minute)
	wantEachRank(t, j, 4, "pmi of rank %d: PMI_FD=3 PMI_PORT=unset\n")
	strangerOnCCRun(t, j)
	release()
	if code := j.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d, want 0; stdout:\n%s\nstderr:\n%s", code, j.out, j.err)
	}
	wantEachRank(t, j, 4, "rank %d of 4\n")
}

// TestE2EForcedPMI: --pmi serves a program ccrun does not recognize (a bash script
// speaking PMI-1 over PMI_FD); without it the script finds neither PMI_FD nor PMI_PORT.
func TestE2EForcedPMI(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	j, release := gated(t, "", "-np", "2", "--oversubscribe", "--pmi", "bash", "-c", aliasScript)
	release()
	if code := j.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d; stdout:\n%s\nstderr:\n%s", code, j.out, j.err)
	}
	if want := " (vector,(0,1,2))\n"; strings.Count(j.out.String(), want) != 2 {
		t.Errorf("stdout:\n%s\nwant two lines ending %q", j.out, want)
	}
	j, release = gated(t, "", "-np", "1", "bash", "-c", `echo "PMI_FD=${PMI_FD-unset} PMI_PORT=${PMI_PORT-unset}"`)
	release()
	if code := j.wait(t, time.Minute); code != 0 || j.out.String() != "PMI_FD=unset PMI_PORT=unset\n" {
		t.Errorf("without --pmi: exit %d, stdout %q, want PMI_FD and PMI_PORT unset", code, j.out)
	}
}

// hostListeners is `ss -Hltnp` in testbed host k's network namespace: one line per
// listening TCP socket, with its process.
func (tb *testbed) hostListeners(t *testing.T, k int) []string {
	t.Helper()
	out, err := exec.Command(tb.tool, "exec", fmt.Sprintf("tb%d", k), "ss", "-Hltnp").CombinedOutput()
	if err != nil {
		t.Fatalf("ss on tb%d: %v: %s", k, err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestTestbedMPICHPrivatePMI: the MPICH hello on two testbed hosts, 2 ranks each. Through
// agents every rank has PMI_FD and nothing listens for PMI anywhere: ccrun listens on the
// bootstrap root's socket alone, the hosts on sshd's port 22 alone. With --no-agent the
// ranks have PMI_PORT on their host's loopback, which sshd forwards to ccrun, and again
// nothing of the job listens on a routable address. A stranger's abort on ccrun's socket
// does not end either job.
func TestTestbedMPICHPrivatePMI(t *testing.T) {
	tb := needTestbed(t)
	dir := t.TempDir() // the testbed hosts share this machine's file system
	mpiProgram(t, "mpicc.mpich", dir, "mpich_job")
	sshd := regexp.MustCompile(`^LISTEN\s+\d+\s+\d+\s+(\S+)\s+\S+\s+users:\(\("sshd(?:-session)?",`)
	for _, mode := range []struct {
		name  string
		args  []string
		rank  *regexp.Regexp // what every rank prints of its PMI variables
		ports int            // sshd's loopback listeners per host: the forwards
	}{
		{"agents", nil, regexp.MustCompile(`^PMI_FD=3 PMI_PORT=unset$`), 0},
		{"no-agent", []string{"--no-agent"}, regexp.MustCompile(`^PMI_FD=unset PMI_PORT=127\.0\.0\.1:\d+$`), 1},
	} {
		t.Run(mode.name, func(t *testing.T) {
			gate := filepath.Join(t.TempDir(), "gate")
			if err := syscall.Mkfifo(gate, 0o600); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"-H", fmt.Sprintf("%s:2,%s:2", tb.addr(1), tb.addr(2)), "--ssh-config", tb.sshConfig, "-v"}, mode.args...)
			j := startCCRun(t, append(args, filepath.Join(dir, "mpich_job"), "wait", gate)...)
			j.waitOutput(t, regexp.MustCompile(`(?s)(pmi of rank.*){4}`), 2*time.Minute)
			for _, l := range regexp.MustCompile(`pmi of rank \d: (.*)`).FindAllStringSubmatch(j.out.String(), -1) {
				if !mode.rank.MatchString(l[1]) {
					t.Errorf("a rank has %q, want %v", l[1], mode.rank)
				}
			}
			for k := 1; k <= 2; k++ {
				forwards := 0
				for _, l := range tb.hostListeners(t, k) {
					sm := sshd.FindStringSubmatch(l)
					switch {
					case sm != nil && sm[1] == tb.addr(k)+":22":
					case sm != nil && strings.HasPrefix(sm[1], "127.0.0.1:"):
						forwards++
					case strings.Contains(l, `"ccrun"`) || sm != nil:
						t.Errorf("tb%d: %s: a listener of the job outside the loopback", k, l)
					}
				}
				if forwards != mode.ports {
					t.Errorf("tb%d: %d loopback forwards, want %d", k, forwards, mode.ports)
				}
			}
			strangerOnCCRun(t, j)
			releaseGate(t, j, gate)
			if strings.Contains(j.err.String(), "open TCP port") {
				t.Errorf("PMI fell back to an open port:\n%s", j.err)
			}
		})
	}
}

// TestE2ESlurmMPICHOpenPort: under --launcher srun no SSH connection can carry PMI, so
// the MPICH job falls back to one open port, says so under -v, and accepts the
// allocation's hosts only: a stranger from this machine is dropped with one line and
// the job runs to exit 0.
func TestE2ESlurmMPICHOpenPort(t *testing.T) {
	needSlurm(t)
	ccrun, _ := binaries(t)
	dir := t.TempDir() // the testbed hosts share this machine's file system
	mpiProgram(t, "mpicc.mpich", dir, "mpich_job")
	gate := filepath.Join(dir, "gate")
	if err := syscall.Mkfifo(gate, 0o600); err != nil {
		t.Fatal(err)
	}
	j := startCmd(t, "salloc", "-N", "2", "-n", "4", ccrun, "--launcher", "srun", "-v", filepath.Join(dir, "mpich_job"), "wait", gate)
	j.waitOutput(t, regexp.MustCompile(`(?s)(pmi of rank.*){4}`), 2*time.Minute)
	wantEachRank(t, j, 4, "pmi of rank %d: PMI_FD=unset PMI_PORT=10.252.0.254:")
	open := regexp.MustCompile(`ccrun: PMI server: ranks on tb\d, tb\d reach it on an open TCP port, (10\.252\.0\.254:\d+), accepting 10\.252\.0\.\d, 10\.252\.0\.\d only \(host tb\d: no agent and no SSH connection to forward a port over; host tb\d: [^)]*\)\n`)
	m := j.waitStderr(t, open, time.Minute)
	impersonate(t, netip.MustParseAddrPort(m[1]))
	releaseGate(t, j, gate)
	wantEachRank(t, j, 4, "rank %d of 4\n")
	if want := "ccrun: PMI server: dropped a connection from 10.252.0.254:"; strings.Count(j.err.String(), want) != 1 {
		t.Errorf("stderr should say once %q:\n%s", want, j.err)
	}
}
