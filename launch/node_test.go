package launch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/seed-760dd1f1/cc/hw"
	"github.com/seed-760dd1f1/cc/launch/pmi"
)

func TestRenumber(t *testing.T) {
	tests := []struct {
		name    string
		hosts   string
		p       Placement
		machine map[string]string
		want    string
	}{
		{"no machines known: unchanged", "a:2,b:2", Placement{NP: 4}, nil,
			"a:0/0/2/0 a:1/1/2/0 b:2/0/2/1 b:3/1/2/1"},
		{"different machines: unchanged", "a:2,b:2", Placement{NP: 4}, map[string]string{"a": "x", "b": "y"},
			"a:0/0/2/0 a:1/1/2/0 b:2/0/2/1 b:3/1/2/1"},
		{"two names of one machine", "a,b", Placement{NP: 2}, map[string]string{"a": "x", "b": "x"},
			"a:0/0/2/0 b:1/1/2/0"},
		{"by node: local ranks in rank order", "a:2,b:2,c:2", Placement{NP: 6, MapBy: ByNode}, map[string]string{"a": "x", "c": "x"},
			"a:0/0/4/0 b:1/0/2/1 c:2/1/4/0 a:3/2/4/0 b:4/1/2/1 c:5/3/4/0"},
		{"later nodes close up", "a,b,c,d", Placement{NP: 4}, map[string]string{"b": "x", "d": "x"},
			"a:0/0/1/0 b:1/0/2/1 c:2/0/1/2 d:3/1/2/1"},
		{"unknown (empty) machine is a node of its own", "a,b,c", Placement{NP: 3}, map[string]string{"a": "", "b": "", "c": "x"},
			"a:0/0/1/0 b:1/0/1/1 c:2/0/1/2"},
		{"per node on aliases", "a,b", Placement{PerNode: 2, Oversubscribe: true}, map[string]string{"a": "x", "b": "x"},
			"a:0/0/4/0 a:1/1/4/0 b:2/2/4/0 b:3/3/4/0"},
		{"two machines of two names each", "a,b,c,d", Placement{NP: 8, MapBy: ByNode, Oversubscribe: true},
			map[string]string{"a": "x", "b": "y", "c": "x", "d": "y"},
			"a:0/0/4/0 b:1/0/4/1 c:2/1/4/0 d:3/1/4/1 a:4/2/4/0 b:5/2/4/1 c:6/3/4/0 d:7/3/4/1"},
		{"unused name of a machine", "a,b,c", Placement{NP: 2}, map[string]string{"a": "x", "c": "x"},
			"a:0/0/1/0 b:1/0/1/1"},
	}
	for _, tt := range tests {
		slots, err := Place(hosts(tt.hosts), tt.p)
		if err != nil {
			t.Fatalf("%s: Place: %v", tt.name, err)
		}
		before := layout(slots)
		got := Renumber(slots, tt.machine)
		if layout(got) != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, layout(got), tt.want)
		}
		if layout(slots) != before {
			t.Errorf("%s: Renumber changed its input to %s", tt.name, layout(slots))
		}
		checkNodes(t, tt.name, got, tt.machine)
	}
}

// checkNodes checks Renumber's invariants: node ranks 0..n-1 in order of first
// appearance, one node per machine, local ranks 0..k-1 in rank order, LocalNRanks = k.
func checkNodes(t *testing.T, name string, slots []Slot, machine map[string]string) {
	t.Helper()
	key := func(s Slot) string {
		if m := machine[s.Host]; m != "" {
			return m
		}
		return "host " + s.Host
	}
	nodeOf := map[string]int{}
	count := map[int]int{}
	for _, s := range slots {
		n, ok := nodeOf[key(s)]
		if !ok {
			n = s.NodeRank
			nodeOf[key(s)] = n
		}
		if s.NodeRank != n {
			t.Errorf("%s: rank %d on %s: node %d, want %d (its machine's)", name, s.Rank, s.Host, s.NodeRank, n)
		}
		if s.LocalRank != count[n] {
			t.Errorf("%s: rank %d: local rank %d, want %d", name, s.Rank, s.LocalRank, count[n])
		}
		count[n]++
	}
	for _, s := range slots {
		if s.LocalNRanks != count[s.NodeRank] || s.NodeRank >= len(count) {
			t.Errorf("%s: rank %d: %d local ranks on node %d of %d, want %d", name, s.Rank, s.LocalNRanks, s.NodeRank, len(count), count[s.NodeRank])
		}
	}
}

// identRemote is a fakeRemote that tells hosts' identities (HostIdentifier).
type identRemote struct {
	*fakeRemote
	ids  map[string]hw.HostID
	errs map[string]error
}

func (r identRemote) HostID(_ context.Context, host string) (hw.HostID, error) {
	if err := r.errs[host]; err != nil {
		return hw.HostID{}, err
	}
	return r.ids[host], nil
}

// nodeVars are the per-node variables a rank gets.
var nodeVars = []string{
	EnvNodeRank, EnvLocalRank, EnvLocalNRanks, "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "GROUP_WORLD_SIZE",
	"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "OMPI_COMM_WORLD_NODE_RANK", "MPI_LOCALRANKID", "MPI_LOCALNRANKS",
}

// wantNodeVars is what nodeVars should read for a rank that is local rank lr of ln on node
// node of nnodes.
func wantNodeVars(node, lr, ln, nnodes int) string {
	return fmt.Sprintf("%d %d %d %d %d %d %d %d %d %d %d %d %d", node, lr, ln, lr, ln, node, node, nnodes, lr, ln, lr, lr, ln)
}

// aliasJob runs fake ranks on o's hosts that record their per-node variables and the PMI
// process mapping; it returns them by rank, the slots Placed got and the -v lines.
func aliasJob(t *testing.T, o Options, f *fakeRemote) (vars map[int]string, placed []Slot, logs string) {
	t.Helper()
	var mu sync.Mutex
	vars = map[int]string{}
	f.body = pmiRank(t, func(p *fakeProc, c *pmiClient) Exit {
		env := lookupIn(p.spec.Env)
		var vs []string
		for _, k := range nodeVars {
			v, _ := env(k)
			vs = append(vs, v)
		}
		kvs := strings.TrimPrefix(c.call("cmd=get_my_kvsname"), "cmd=my_kvsname kvsname=")
		m := strings.TrimPrefix(c.call("cmd=get kvsname="+kvs+" key=PMI_process_mapping"), "cmd=get_result rc=0 msg=success value=")
		c.call("cmd=finalize")
		mu.Lock()
		vars[p.spec.Slot.Rank] = strings.Join(vs, " ") + " " + m
		mu.Unlock()
		return Exit{}
	})
	var lb strings.Builder
	o.Logf = func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(&lb, format+"\n", args...)
		mu.Unlock()
	}
	o.Placed = func(s []Slot) { placed = s }
	o.PMI = true
	runClean(t, o, f)
	return vars, placed, lb.String()
}

// TestRunRemoteAliases: a and c are one machine, b's identity is unknown. Every per-node
// variable and the PMI process mapping number a and c as one node; b stays a node of its
// own, and -v says why.
func TestRunRemoteAliases(t *testing.T) {
	x := hw.HostID{Hostname: "x", BootID: "5a3c8f0e-1b2d-4c6e-9f70-8a1b2c3d4e5f"}
	f := &fakeRemote{}
	r := identRemote{fakeRemote: f, ids: map[string]hw.HostID{"a": x, "c": x}, errs: map[string]error{"b": errors.New("no answer")}}
	o := fakeJob(5, f)
	o.Hosts, o.Placement, o.Remote = hosts("a:2,b:1,c:2"), Placement{NP: 5, MapBy: ByNode}, r
	vars, placed, logs := aliasJob(t, o, f)
	if want := "a:0/0/4/0 b:1/0/1/1 c:2/1/4/0 a:3/2/4/0 c:4/3/4/0"; layout(placed) != want {
		t.Errorf("placed %s, want %s", layout(placed), want)
	}
	mapping := pmi.ProcessMapping([]int{0, 1, 0, 0, 0})
	for r, want := range []string{
		wantNodeVars(0, 0, 4, 2), wantNodeVars(1, 0, 1, 2), wantNodeVars(0, 1, 4, 2), wantNodeVars(0, 2, 4, 2), wantNodeVars(0, 3, 4, 2),
	} {
		if got := vars[r]; got != want+" "+mapping {
			t.Errorf("rank %d: %s\n got %s\nwant %s %s", r, strings.Join(nodeVars, " "), got, want, mapping)
		}
	}
	for _, want := range []string{"host b: cannot tell which machine it is (no answer): its ranks are a node of their own",
		"hosts a, c are one machine (" + x.String() + "): one node"} {
		if !strings.Contains(logs, want+"\n") {
			t.Errorf("-v lines:\n%s\nwant %q", logs, want)
		}
	}
}

// TestRunAliasOfThisMachine: a name ccrun reaches over SSH that is this machine (an
// /etc/hosts alias IsLocal does not know) is the local ranks' node.
func TestRunAliasOfThisMachine(t *testing.T) {
	self, err := hw.HostIdentity(hw.Root())
	if err != nil {
		t.Skipf("no host identity here: %v", err)
	}
	f := &fakeRemote{}
	o := fakeJob(3, f)
	o.Hosts, o.Placement = hosts("localhost:1,me:2"), Placement{NP: 3}
	o.Remote = identRemote{fakeRemote: f, ids: map[string]hw.HostID{"me": self}}
	o.IsLocal = func(h string) bool { return h == "localhost" }
	o.Argv = []string{"true"} // the local rank
	vars, placed, _ := aliasJob(t, o, f)
	if want := "localhost:0/0/3/0 me:1/1/3/0 me:2/2/3/0"; layout(placed) != want {
		t.Errorf("placed %s, want %s", layout(placed), want)
	}
	mapping := pmi.ProcessMapping([]int{0, 0, 0})
	for r := 1; r < 3; r++ {
		if want := wantNodeVars(0, r, 3, 1) + " " + mapping; vars[r] != want {
			t.Errorf("rank %d: got %s, want %s", r, vars[r], want)
		}
	}
}

// TestRunHostsNotIdentified: a Remote that cannot tell identities (srun) keeps a node per
// host name, and -v says so.
func TestRunHostsNotIdentified(t *testing.T) {
	f := &fakeRemote{}
	vars, placed, logs := aliasJob(t, fakeJob(2, f), f)
	if want := "h1:0/0/1/0 h2:1/0/1/1"; layout(placed) != want {
		t.Errorf("placed %s, want %s", layout(placed), want)
	}
	if want := wantNodeVars(1, 0, 1, 2); !strings.HasPrefix(vars[1], want+" ") {
		t.Errorf("rank 1: got %s, want %s ...", vars[1], want)
	}
	if want := "hosts are not identified with this launcher: each host name is a node of its own\n"; !strings.Contains(logs, want) {
		t.Errorf("-v lines:\n%s\nwant %q", logs, want)
	}
}
