package main

// End-to-end tests of issue 15 item 2, remote half: names of one testbed host (the ssh
// config's Host tb1, its address 10.252.0.1, and a Host alias of our own) are one node,
// through agents and with a session per rank, in every per-node variable, the PMI process
// mapping and --display-map.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/launch/pmi"
)

// aliasScript prints a rank's per-node variables and the PMI_process_mapping it reads
// from ccrun's PMI-1 server (the same exchange as MPICH's simple PMI): over PMI_FD, or
// over PMI_PORT with bash's /dev/tcp and the initack handshake.
const aliasScript = `f=$PMI_FD
if [ -z "$f" ]; then
  f=3; exec 3<>/dev/tcp/${PMI_PORT%:*}/${PMI_PORT##*:}
  echo "cmd=initack pmiid=$PMI_ID" >&3
  for i in 1 2 3 4; do read -r l <&3; done
fi
echo cmd=get_my_kvsname >&$f; read -r l <&$f; kvs=${l##*kvsname=}
echo "cmd=get kvsname=$kvs key=PMI_process_mapping" >&$f; read -r l <&$f; map=${l##*value=}
echo cmd=finalize >&$f; read -r l <&$f
echo "rank $CC_RANK on $(hostname): $CC_NODE_RANK $CC_LOCAL_RANK $CC_LOCAL_NRANKS $LOCAL_RANK $LOCAL_WORLD_SIZE" \
  "$GROUP_RANK $NODE_RANK $GROUP_WORLD_SIZE $OMPI_COMM_WORLD_LOCAL_RANK $OMPI_COMM_WORLD_LOCAL_SIZE" \
  "$OMPI_COMM_WORLD_NODE_RANK $MPI_LOCALRANKID $MPI_LOCALNRANKS $map"`

// aliasRank is what aliasScript prints for a rank on host, local rank lr of ln on node
// node of nnodes, in a job whose ranks run on nodes.
func aliasRank(rank int, host string, node, lr, ln, nnodes int, nodes []int) string {
	return fmt.Sprintf("rank %d on %s: %d %d %d %d %d %d %d %d %d %d %d %d %d %s",
		rank, host, node, lr, ln, lr, ln, node, node, nnodes, lr, ln, lr, lr, ln, pmi.ProcessMapping(nodes))
}

func TestE2ERemoteAliases(t *testing.T) {
	tb := needTestbed(t)
	bin, _ := binaries(t)
	// tb1-alias: a third name of tb1, in an ssh config of our own (the testbed's files stay
	// untouched); ssh config takes the first Host block that matches.
	cfg := filepath.Join(t.TempDir(), "ssh_config")
	orig, err := os.ReadFile(tb.sshConfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, append([]byte("Host tb1-alias\n    HostName "+tb.addr(1)+"\n"), orig...), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		args  []string
		want  [][5]int // per rank: node, local rank, local ranks, nodes; [4] is the testbed host (k of tbk)
		table string   // --display-map's rows, joined by "|"
	}{
		{"two names", []string{"-H", "tb1," + tb.addr(1), "-np", "2"},
			[][5]int{{0, 0, 2, 1, 1}, {0, 1, 2, 1, 1}},
			"0 tb1 0 0 2|1 " + tb.addr(1) + " 0 1 2"},
		{"three names and another host, by node", []string{"-H", "tb1:2,tb2:2,tb1-alias:1," + tb.addr(1) + ":1", "--map-by", "node", "-np", "6"},
			[][5]int{{0, 0, 4, 2, 1}, {1, 0, 2, 2, 2}, {0, 1, 4, 2, 1}, {0, 2, 4, 2, 1}, {0, 3, 4, 2, 1}, {1, 1, 2, 2, 2}},
			"0 tb1 0 0 4|1 tb2 1 0 2|2 tb1-alias 0 1 4|3 " + tb.addr(1) + " 0 2 4|4 tb1 0 3 4|5 tb2 1 1 2"},
		{"per node counts per name", []string{"-H", "tb2," + tb.addr(1) + ",tb1", "-ppn", "2", "--oversubscribe"},
			[][5]int{{0, 0, 2, 2, 2}, {0, 1, 2, 2, 2}, {1, 0, 4, 2, 1}, {1, 1, 4, 2, 1}, {1, 2, 4, 2, 1}, {1, 3, 4, 2, 1}},
			"0 tb2 0 0 2|1 tb2 0 1 2|2 " + tb.addr(1) + " 1 0 4|3 " + tb.addr(1) + " 1 1 4|4 tb1 1 2 4|5 tb1 1 3 4"},
	}
	spaces := regexp.MustCompile(`\s+`)
	for _, mode := range teardownModes {
		for _, tt := range tests {
			t.Run(mode.name+"/"+tt.name, func(t *testing.T) {
				args := append([]string{"--ssh-config", cfg, "-v", "--display-map", "--pmi"}, mode.args...)
				args = append(append(args, tt.args...), "bash", "-c", aliasScript)
				cmd := exec.Command(bin, args...)
				var out, errb syncBuf
				cmd.Stdout, cmd.Stderr = &out, &errb
				if err := cmd.Run(); err != nil {
					t.Fatalf("%v; stdout:\n%s\nstderr:\n%s", err, out.String(), errb.String())
				}
				var nodes []int
				for _, w := range tt.want {
					nodes = append(nodes, w[0])
				}
				for r, w := range tt.want {
					want := aliasRank(r, fmt.Sprintf("tb%d", w[4]), w[0], w[1], w[2], w[3], nodes)
					if !strings.Contains(out.String(), want+"\n") {
						t.Errorf("no line %q in:\n%s", want, out.String())
					}
				}
				var rows []string
				for _, l := range strings.Split(out.String(), "\n") {
					if l = strings.TrimSpace(spaces.ReplaceAllString(l, " ")); l != "" && l[0] >= '0' && l[0] <= '9' {
						rows = append(rows, l)
					}
				}
				if got := strings.Join(rows, "|"); got != tt.table {
					t.Errorf("--display-map rows\n got %s\nwant %s", got, tt.table)
				}
				if !strings.Contains(errb.String(), "are one machine (tb1/") {
					t.Errorf("-v says nothing of one machine; stderr:\n%s", errb.String())
				}
			})
		}
	}
}

// TestE2ERemoteAliasesCCPerf: cc-perf over two names of tb1 is one node of 6 ranks: devices
// 0..5 (the local ranks), #wrong 0, with agents and without.
func TestE2ERemoteAliasesCCPerf(t *testing.T) {
	tb := needTestbed(t)
	_, perf := binaries(t)
	for _, mode := range teardownModes {
		t.Run(mode.name, func(t *testing.T) {
			args := append([]string{"--ssh-config", tb.sshConfig, "-H", "tb1:2," + tb.addr(1) + ":4", "-np", "6", "--map-by", "node"}, mode.args...)
			j := startCCRun(t, append(args, perf, "all_reduce", "-b", "8", "-e", "8K", "-f", "32", "-c", "1")...)
			if code := j.wait(t, 2*time.Minute); code != 0 {
				t.Fatalf("exit %d; stderr:\n%s", code, j.err)
			}
			checkRows(t, j.out.String(), 3) // 8 B, 256 B, 8 KiB
			for d := range 6 {
				if re := regexp.MustCompile(fmt.Sprintf(`(?m)^#  Rank  \d Group  0 Pid +\d+ on +tb1 device  %d `, d)); !re.MatchString(j.out.String()) {
					t.Errorf("no rank on tb1 device %d; output:\n%s", d, j.out)
				}
			}
		})
	}
}
