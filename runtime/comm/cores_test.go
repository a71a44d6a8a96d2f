package comm

import (
	"testing"

	"github.com/seed-760dd1f1/cc/hw"
	"github.com/seed-760dd1f1/cc/runtime/bootstrap"
)

// TestCoreShareCountsTheMachine: the ranks of one kernel (boot id) share its
// cores whatever their host identity and host name say, so 2 testbed hosts
// of 2 ranks each on 2 cores get 1 core per host (their waits yield), while
// 2 real machines of 2 ranks get 2 each.
func TestCoreShareCountsTheMachine(t *testing.T) {
	type peer struct{ hostID, host, machine string }
	for _, tc := range []struct {
		name          string
		peers         []peer
		parentRanks   int
		wantCores     int
		wantHostRanks int
	}{
		{"testbed hosts of one machine", []peer{{"h1", "tb1", "m"}, {"h1", "tb1", "m"}, {"h2", "tb2", "m"}, {"h2", "tb2", "m"}}, 0, 1, 4},
		{"two machines", []peer{{"h1", "a", "m1"}, {"h1", "a", "m1"}, {"h2", "b", "m2"}, {"h2", "b", "m2"}}, 0, 2, 2},
		{"fake hosts of one machine", []peer{{"x", "a", "m"}, {"y", "b", "m"}}, 0, 1, 2},
		{"fake hosts, machine unknown", []peer{{"x", "a", ""}, {"y", "a", ""}}, 0, 1, 2},
		{"hosts, machine unknown", []peer{{"h1", "a", ""}, {"h1", "a", ""}, {"h2", "b", ""}, {"h2", "b", ""}}, 0, 2, 2},
		{"one host", []peer{{"h", "a", "m"}, {"h", "a", "m"}, {"h", "a", "m"}, {"h", "a", "m"}}, 0, 2, 4},
		{"split of a 4-rank host", []peer{{"h", "a", "m"}, {"h", "a", "m"}}, 4, 1, 4},
	} {
		c := &Comm{rank: 0, host: tc.peers[0].host}
		for r, p := range tc.peers {
			c.peers = append(c.peers, bootstrap.RankInfo{Rank: r, HostID: p.hostID, Host: p.host, Machine: p.machine})
		}
		if got := c.coreShare(2, tc.parentRanks); got != tc.wantCores || c.hostRanks != tc.wantHostRanks {
			t.Errorf("%s: coreShare(2 cores) = %d cores, %d ranks on the machine; want %d, %d", tc.name, got, c.hostRanks, tc.wantCores, tc.wantHostRanks)
		}
	}
}

// TestMachineCoresCountsAllowedCPUs: a machine gives its ranks the union
// of the CPUs they may run on (taskset, cpusets), at most its online
// count; a rank of the machine with no list leaves the online count, and
// ranks of other machines do not count.
func TestMachineCoresCountsAllowedCPUs(t *testing.T) {
	type peer struct{ machine, cpus string }
	for _, tc := range []struct {
		name   string
		peers  []peer
		online int
		want   int
	}{
		{"both bound to CPU 0", []peer{{"m", "0"}, {"m", "0"}}, 2, 1},
		{"bound to CPUs 0 and 1", []peer{{"m", "0"}, {"m", "1"}}, 2, 2},
		{"unbound", []peer{{"m", "0-1"}, {"m", "0-1"}}, 2, 2},
		{"a cpuset of 3 of 8", []peer{{"m", "2-3"}, {"m", "3,5"}, {"m", "2"}}, 8, 3},
		{"one rank's list unknown", []peer{{"m", "0"}, {"m", ""}}, 4, 4},
		{"another machine's CPUs", []peer{{"m", "0"}, {"m", "0"}, {"m2", "0-63"}}, 64, 1},
		{"more than online", []peer{{"m", "0-7"}}, 2, 2},
	} {
		c := &Comm{rank: 0, host: "a" + tc.peers[0].machine}
		for r, p := range tc.peers {
			c.peers = append(c.peers, bootstrap.RankInfo{Rank: r, HostID: "h" + p.machine, Host: "a" + p.machine, Machine: p.machine, CPUs: p.cpus})
		}
		if got := c.machineCores(tc.online); got != tc.want {
			t.Errorf("%s: machineCores(%d online) = %d, want %d", tc.name, tc.online, got, tc.want)
		}
	}
}

// TestCPUsInfoFitsTheBootstrap: a CPU list longer than the bootstrap
// carries is sent as unknown, not refused at join.
func TestCPUsInfoFitsTheBootstrap(t *testing.T) {
	var odd hw.CPUList
	for c := 1; c < 2048; c += 2 {
		odd = append(odd, c)
	}
	if got := cpusInfo(odd); got != "" {
		t.Errorf("cpusInfo(1024 odd CPUs) = %d bytes, want empty (at most %d carried)", len(got), bootstrap.MaxInfoString)
	}
	if got := cpusInfo(hw.CPUList{0, 1, 2, 3, 8}); got != "0-3,8" {
		t.Errorf("cpusInfo(0-3,8) = %q", got)
	}
}
