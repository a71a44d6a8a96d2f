package launch

import (
	"fmt"
	"strings"
	"testing"

	"github.com/seed-760dd1f1/cc/launch/hostfile"
)

// layout renders a placement as "host:rank/local/localN/node ..." for compact tables.
func layout(slots []Slot) string {
	var b strings.Builder
	for _, s := range slots {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s:%d/%d/%d/%d", s.Host, s.Rank, s.LocalRank, s.LocalNRanks, s.NodeRank)
	}
	return b.String()
}

func hosts(spec string) []hostfile.Host {
	h, err := hostfile.ParseList(spec)
	if err != nil {
		panic(err)
	}
	return h
}

func TestPlace(t *testing.T) {
	tests := []struct {
		name  string
		hosts string
		p     Placement
		want  string
	}{
		{"by slot fills hosts in order", "a:2,b:2", Placement{NP: 4},
			"a:0/0/2/0 a:1/1/2/0 b:2/0/2/1 b:3/1/2/1"},
		{"np 0 means all slots", "a:2,b:1", Placement{},
			"a:0/0/2/0 a:1/1/2/0 b:2/0/1/1"},
		{"fewer ranks than slots leave hosts unused", "a:2,b:2,c:2", Placement{NP: 3},
			"a:0/0/2/0 a:1/1/2/0 b:2/0/1/1"},
		{"by node round robin", "a:2,b:2", Placement{NP: 4, MapBy: ByNode},
			"a:0/0/2/0 b:1/0/2/1 a:2/1/2/0 b:3/1/2/1"},
		{"by node skips full hosts", "a:1,b:3", Placement{NP: 4, MapBy: ByNode},
			"a:0/0/1/0 b:1/0/3/1 b:2/1/3/1 b:3/2/3/1"},
		{"by node oversubscribed", "a:1,b:1", Placement{NP: 5, MapBy: ByNode, Oversubscribe: true},
			"a:0/0/3/0 b:1/0/2/1 a:2/1/3/0 b:3/1/2/1 a:4/2/3/0"},
		{"by slot oversubscribed deals extras round robin", "a:2,b:1", Placement{NP: 5, Oversubscribe: true},
			"a:0/0/3/0 a:1/1/3/0 a:2/2/3/0 b:3/0/2/1 b:4/1/2/1"},
		{"by slot oversubscribed evenly", "a:1,b:1", Placement{NP: 4, Oversubscribe: true},
			"a:0/0/2/0 a:1/1/2/0 b:2/0/2/1 b:3/1/2/1"},
		{"per node", "a:2,b:2,c:2", Placement{PerNode: 1},
			"a:0/0/1/0 b:1/0/1/1 c:2/0/1/2"},
		{"per node with np", "a:2,b:2,c:2", Placement{NP: 3, PerNode: 2},
			"a:0/0/2/0 a:1/1/2/0 b:2/0/1/1"},
		{"per node oversubscribed", "a,b", Placement{PerNode: 2, Oversubscribe: true},
			"a:0/0/2/0 a:1/1/2/0 b:2/0/2/1 b:3/1/2/1"},
		{"repeated host adds a slot", "a,a,b", Placement{},
			"a:0/0/2/0 a:1/1/2/0 b:2/0/1/1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Place(hosts(tt.hosts), tt.p)
			if err != nil {
				t.Fatalf("Place(%s, %+v): %v", tt.hosts, tt.p, err)
			}
			if l := layout(got); l != tt.want {
				t.Errorf("Place(%s, %+v)\n got %s\nwant %s", tt.hosts, tt.p, l, tt.want)
			}
		})
	}
}

func TestPlaceMaxSlots(t *testing.T) {
	h := []hostfile.Host{{Name: "a", Slots: 1, MaxSlots: 2}, {Name: "b", Slots: 1}}
	got, err := Place(h, Placement{NP: 5, Oversubscribe: true})
	if err != nil {
		t.Fatal(err)
	}
	if l, want := layout(got), "a:0/0/2/0 a:1/1/2/0 b:2/0/3/1 b:3/1/3/1 b:4/2/3/1"; l != want {
		t.Errorf("got %s\nwant %s", l, want)
	}
	h[1].MaxSlots = 1
	_, err = Place(h, Placement{NP: 4, Oversubscribe: true})
	if want := "4 ranks requested but the hosts' max_slots add up to 3, even with --oversubscribe"; err == nil || err.Error() != want {
		t.Errorf("error\n got %v\nwant %s", err, want)
	}
}

func TestPlaceErrors(t *testing.T) {
	tests := []struct {
		hosts string
		p     Placement
		want  string
	}{
		{"a:2,b:2", Placement{NP: 5},
			"5 ranks requested but the 2 hosts have 4 slots: use -np 4 or fewer, add slots, or add --oversubscribe"},
		{"a:2,b:2", Placement{NP: 5, MapBy: ByNode},
			"5 ranks requested but the 2 hosts have 4 slots: use -np 4 or fewer, add slots, or add --oversubscribe"},
		{"a:2,b:2", Placement{NP: 5, PerNode: 2},
			"5 ranks do not fit 2 per node on 2 hosts (at most 4): raise -N or add hosts"},
		{"a:2,b:1", Placement{PerNode: 2},
			"host b has 1 slots, fewer than 2 ranks per node: add --oversubscribe or give it slots=2"},
		{"a", Placement{NP: -1}, "bad number of ranks -1: want 1 or more"},
		{"a", Placement{MapBy: "core"}, `bad --map-by "core" (allowed: slot, node)`},
	}
	for _, tt := range tests {
		_, err := Place(hosts(tt.hosts), tt.p)
		if err == nil || err.Error() != tt.want {
			t.Errorf("Place(%s, %+v) error\n got %v\nwant %s", tt.hosts, tt.p, err, tt.want)
		}
	}
	if _, err := Place(nil, Placement{NP: 1}); err == nil {
		t.Error("Place with no hosts: want an error")
	}
}

func TestParseMapBy(t *testing.T) {
	tests := []struct {
		in      string
		m       MapBy
		perNode int
		bad     bool
	}{
		{"slot", BySlot, 0, false}, {"node", ByNode, 0, false}, {"", BySlot, 0, false},
		{"ppr:4:node", BySlot, 4, false}, {"ppr:0:node", "", 0, true}, {"ppr:x:node", "", 0, true},
		{"ppr:2:socket", "", 0, true}, {"core", "", 0, true}, {"ppr:02:node", "", 0, true},
	}
	for _, tt := range tests {
		m, n, err := ParseMapBy(tt.in)
		if (err != nil) != tt.bad || m != tt.m || n != tt.perNode {
			t.Errorf("ParseMapBy(%q) = %q, %d, %v; want %q, %d, error %v", tt.in, m, n, err, tt.m, tt.perNode, tt.bad)
		}
	}
}

// TestPlaceInvariants checks, over many shapes, that every rank lands on a host within its
// limits, local ranks count 0..n-1 per host and node ranks are dense.
func TestPlaceInvariants(t *testing.T) {
	for nh := 1; nh <= 5; nh++ {
		for slots := 1; slots <= 3; slots++ {
			for np := 1; np <= 12; np++ {
				for _, m := range []MapBy{BySlot, ByNode} {
					h := make([]hostfile.Host, nh)
					for i := range h {
						h[i] = hostfile.Host{Name: fmt.Sprint("h", i), Slots: slots}
					}
					p := Placement{NP: np, MapBy: m, Oversubscribe: true}
					got, err := Place(h, p)
					if err != nil {
						t.Fatalf("Place(%d hosts x %d, %+v): %v", nh, slots, p, err)
					}
					checkInvariants(t, got, np)
				}
			}
		}
	}
}

func checkInvariants(t *testing.T, got []Slot, np int) {
	t.Helper()
	if len(got) != np {
		t.Fatalf("got %d slots, want %d", len(got), np)
	}
	local := map[int]int{}
	maxNode := -1
	for r, s := range got {
		if s.Rank != r || s.LocalRank != local[s.HostIndex] {
			t.Fatalf("rank %d: %+v (layout %s)", r, s, layout(got))
		}
		local[s.HostIndex]++
		maxNode = max(maxNode, s.NodeRank)
	}
	for _, s := range got {
		if s.LocalNRanks != local[s.HostIndex] {
			t.Fatalf("local nranks %+v, want %d (layout %s)", s, local[s.HostIndex], layout(got))
		}
	}
	if maxNode != len(local)-1 {
		t.Fatalf("node ranks not dense: max %d over %d hosts (layout %s)", maxNode, len(local), layout(got))
	}
}

func FuzzParseMapBy(f *testing.F) {
	for _, s := range []string{"slot", "node", "ppr:4:node", "ppr:0:node", "core"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, n, err := ParseMapBy(s)
		if err != nil {
			return
		}
		if (m != BySlot && m != ByNode) || n < 0 || (n > 0 && m != BySlot) {
			t.Fatalf("ParseMapBy(%q) = %q, %d", s, m, n)
		}
	})
}
