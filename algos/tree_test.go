package algos_test

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/seed-760dd1f1/cc/algos"
)

// The trees are checked as graphs: every rank's parent lists it as a child
// and every child names its parent, there is one root, a walk down from the
// root reaches every rank once, and the depth is measured by that walk, not
// taken from the construction.

// treeShape is what checkTree measured of one tree over n ranks.
type treeShape struct {
	root     int
	depth    int    // most links from the root to a rank
	interior []bool // interior[r]: rank r has at least one child
	level    []int  // links from the root to each rank
}

// checkTree checks that node(r) for r in [0, n) is one rooted tree with at
// most maxKids children per rank, and measures it.
func checkTree(n, maxKids int, node func(r int) algos.TreeNode) (treeShape, error) {
	s := treeShape{root: algos.NoPeer, interior: make([]bool, n), level: make([]int, n)}
	nodes := make([]algos.TreeNode, n)
	for r := range n {
		nodes[r] = node(r)
	}
	for r, nd := range nodes {
		switch {
		case nd.Up == algos.NoPeer && s.root != algos.NoPeer:
			return s, fmt.Errorf("two roots: %d and %d", s.root, r)
		case nd.Up == algos.NoPeer:
			s.root = r
		case nd.Up < 0 || nd.Up >= n || nd.Up == r:
			return s, fmt.Errorf("rank %d: parent %d", r, nd.Up)
		case !slices.Contains(nodes[nd.Up].Down, r):
			return s, fmt.Errorf("rank %d names parent %d, whose children are %v", r, nd.Up, nodes[nd.Up].Down)
		}
		if len(nd.Down) > maxKids {
			return s, fmt.Errorf("rank %d: %d children %v, want at most %d", r, len(nd.Down), nd.Down, maxKids)
		}
		for i, c := range nd.Down {
			if c < 0 || c >= n || nodes[c].Up != r || slices.Contains(nd.Down[:i], c) {
				return s, fmt.Errorf("rank %d lists child %d (children %v), which does not name it as parent", r, c, nd.Down)
			}
		}
		s.interior[r] = len(nd.Down) > 0
	}
	if s.root == algos.NoPeer {
		return s, errors.New("no root")
	}
	// Walk down from the root, level by level.
	seen := 0
	for level, front := 0, []int{s.root}; len(front) > 0; level++ {
		var next []int
		for _, r := range front {
			s.level[r], s.depth = level, level
			seen++
			next = append(next, nodes[r].Down...)
		}
		front = next
	}
	if seen != n {
		return s, fmt.Errorf("%d of %d ranks reachable from root %d", seen, n, s.root)
	}
	return s, nil
}

// log2Up is ⌈log2 n⌉, 0 for n = 1.
func log2Up(n int) int { return bits.Len(uint(n - 1)) }

// inBoth counts the ranks interior (with at least one child) in both trees.
func inBoth(a, b treeShape) int {
	k := 0
	for r := range a.interior {
		if a.interior[r] && b.interior[r] {
			k++
		}
	}
	return k
}

// doubleTree measures both trees of DoubleTree over t.
func doubleTree(t *algos.Topo, maxKids int) ([2]treeShape, error) {
	var shapes [2]treeShape
	nodes := make([][2]algos.TreeNode, t.NRanks)
	for r := range nodes {
		nodes[r] = algos.DoubleTree(t, r)
	}
	for tr := range 2 {
		s, err := checkTree(t.NRanks, maxKids, func(r int) algos.TreeNode { return nodes[r][tr] })
		if err != nil {
			return shapes, fmt.Errorf("tree %d: %w", tr, err)
		}
		shapes[tr] = s
	}
	return shapes, nil
}

// TestDoubleTreeOneRankPerHost: for n = 1..1024, both trees are trees with
// at most two children per rank, depth ⌈log2 n⌉, and no rank is interior
// in both for even n (and n = 1, where no rank has children), exactly one
// for odd n >= 3.
func TestDoubleTreeOneRankPerHost(t *testing.T) {
	for n := 1; n <= 1024; n++ {
		shapes, err := doubleTree(algos.FlatTopo(n), 2)
		if err != nil {
			t.Fatalf("n=%d: %v", n, err)
		}
		for tr, s := range shapes {
			if s.depth != log2Up(n) {
				t.Errorf("n=%d tree %d: depth %d, want %d", n, tr, s.depth, log2Up(n))
			}
		}
		want := n % 2
		if n == 1 {
			want = 0
		}
		if got := inBoth(shapes[0], shapes[1]); got != want {
			t.Errorf("n=%d: %d ranks interior in both trees, want %d", n, got, want)
		}
		if shapes[0].root != 0 {
			t.Errorf("n=%d: tree 0 root %d, want 0", n, shapes[0].root)
		}
	}
}

// TestDoubleTreeDepthTable is the design study's Appendix A.
func TestDoubleTreeDepthTable(t *testing.T) {
	for _, tc := range []struct{ n, depth int }{
		{2, 1}, {3, 2}, {4, 2}, {5, 3}, {8, 3}, {9, 4}, {16, 4}, {17, 5}, {32, 5}, {33, 6}, {64, 6}, {100, 7}, {1000, 10}, {1024, 10},
	} {
		shapes, err := doubleTree(algos.FlatTopo(tc.n), 2)
		if err != nil {
			t.Fatalf("n=%d: %v", tc.n, err)
		}
		if shapes[0].depth != tc.depth || shapes[1].depth != tc.depth {
			t.Errorf("n=%d: depths %d, %d, want %d", tc.n, shapes[0].depth, shapes[1].depth, tc.depth)
		}
	}
}

// TestTreeChecksCanFail feeds the checks trees that break them.
func TestTreeChecksCanFail(t *testing.T) {
	const n = 8
	flat := algos.FlatTopo(n)
	tree0 := func(r int) algos.TreeNode { return algos.DoubleTree(flat, r)[0] }
	chain := func(r int) algos.TreeNode {
		nd := algos.TreeNode{Up: r - 1}
		if r+1 < n {
			nd.Down = []int{r + 1}
		}
		return nd
	}
	for _, tc := range []struct {
		name string
		node func(r int) algos.TreeNode
		want string
	}{
		{"orphan", func(r int) algos.TreeNode {
			nd := tree0(r)
			if r == 1 {
				nd.Up = 4
			}
			return nd
		}, "rank 1 names parent 4"},
		{"two roots", func(r int) algos.TreeNode {
			nd := tree0(r)
			switch r {
			case 0:
				nd.Down = nil
			case 4:
				nd.Up = algos.NoPeer
			}
			return nd
		}, "two roots"},
		{"cycle", func(r int) algos.TreeNode {
			// 0 alone, 1 → 2 → ... → 7 → 1.
			switch r {
			case 0:
				return algos.TreeNode{Up: algos.NoPeer}
			case 1:
				return algos.TreeNode{Up: n - 1, Down: []int{2}}
			case n - 1:
				return algos.TreeNode{Up: n - 2, Down: []int{1}}
			}
			return chain(r)
		}, "1 of 8 ranks reachable"},
		{"too many children", func(r int) algos.TreeNode {
			nd := algos.TreeNode{Up: 0}
			if r == 0 {
				nd = algos.TreeNode{Up: algos.NoPeer, Down: []int{1, 2, 3, 4, 5, 6, 7}}
			}
			return nd
		}, "rank 0: 7 children"},
	} {
		if _, err := checkTree(n, 2, tc.node); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: checkTree = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
	// A chain is a tree, but not of depth ⌈log2 n⌉.
	if s, err := checkTree(n, 2, chain); err != nil || s.depth != n-1 {
		t.Errorf("chain: depth %d, %v; want %d, nil", s.depth, err, n-1)
	}
	// Tree 0 twice (no mirror) has its inner ranks interior in both.
	s0, _ := checkTree(n, 2, tree0)
	if got := inBoth(s0, s0); got != 4 {
		t.Errorf("tree 0 twice: %d ranks interior in both, want 4 (0, 2, 4, 6)", got)
	}
}

// TestDoubleTreeHosts: with hosts, each host's ranks form a chain in rank
// order, only intra[0] links up to another host, child hosts attach at
// intra[1] (left) and intra[0] (right), and the depth that a walk over the
// links measures is the host tree's depth with left links counting two
// hops (BALANCED) plus the chain: for ppn ranks per host, ⌈log2 hosts⌉ +
// ppn-1 with one rank per host (TREE), and between that and 2⌈log2 hosts⌉ +
// ppn-1 otherwise (design study §4).
func TestDoubleTreeHosts(t *testing.T) {
	topos := []*algos.Topo{
		algos.NewTopo([]int{0, 1, 2, 0, 1, 2, 0}), // hosts {0,3,6}, {1,4}, {2,5}: chains skip ranks
		algos.NewTopo([]string{"a", "a", "b", "c", "c", "c"}),
	}
	for hosts := 1; hosts <= 33; hosts++ {
		for ppn := 1; ppn <= 5; ppn++ {
			topos = append(topos, algos.BlockTopo(hosts, ppn))
		}
	}
	for _, topo := range topos {
		name := fmt.Sprintf("hosts %v", topo.Hosts)
		if len(name) > 60 {
			name = fmt.Sprintf("%d hosts x %d ranks", topo.NHosts(), topo.MaxPerHost())
		}
		shapes, err := doubleTree(topo, 2)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for tr, s := range shapes {
			if err := checkAttachments(topo, tr); err != nil {
				t.Errorf("%s tree %d: %v", name, tr, err)
			}
			if want := hostTreeDepth(topo, tr); s.depth != want {
				t.Errorf("%s tree %d: depth %d, want %d", name, tr, s.depth, want)
			}
			if topo.NHosts()*topo.MaxPerHost() != topo.NRanks {
				continue // hosts of different sizes: §4's bounds assume one ppn
			}
			lo, hi := log2Up(topo.NHosts())+topo.MaxPerHost()-1, 2*log2Up(topo.NHosts())+topo.MaxPerHost()-1
			if topo.MaxPerHost() == 1 {
				hi = lo
			}
			if s.depth < lo || s.depth > hi {
				t.Errorf("%s tree %d: depth %d, want in [%d, %d]", name, tr, s.depth, lo, hi)
			}
		}
	}
}

// checkAttachments checks where tree tr's links leave and enter hosts.
func checkAttachments(topo *algos.Topo, tr int) error {
	for r := range topo.NRanks {
		h, i := topo.Host(r)
		intra := topo.Hosts[h]
		nd := algos.DoubleTree(topo, r)[tr]
		if i > 0 && nd.Up != intra[i-1] {
			return fmt.Errorf("rank %d, index %d on its host: parent %d, want the previous rank %d", r, i, nd.Up, intra[i-1])
		}
		if i+1 < len(intra) && (len(nd.Down) == 0 || nd.Down[0] != intra[i+1]) {
			return fmt.Errorf("rank %d: children %v, want the next rank %d first", r, nd.Down, intra[i+1])
		}
		hn := algos.Dtree(topo.NHosts(), h)[tr]
		for _, c := range nd.Down {
			ch, ci := topo.Host(c)
			if ch == h {
				continue
			}
			slot := slices.Index(hn.Down[:], ch)
			want := 0
			if slot == 0 && len(intra) > 1 {
				want = 1
			}
			switch {
			case slot < 0:
				return fmt.Errorf("rank %d has child %d on host %d, not a child host of host %d", r, c, ch, h)
			case ci != 0:
				return fmt.Errorf("rank %d has child %d, index %d on host %d: want that host's first rank", r, c, ci, ch)
			case i != want:
				return fmt.Errorf("rank %d (index %d) has the child host %d of slot %d: want it at index %d", r, i, ch, slot, want)
			}
		}
	}
	return nil
}

// hostTreeDepth is the depth of tree tr computed over the hosts: a host's
// first rank is one link below where it attaches, which is its parent
// host's first rank (right slot, or a one-rank parent) or second rank
// (left slot), and the last rank of a host's chain is len-1 links below
// its first.
func hostTreeDepth(topo *algos.Topo, tr int) int {
	nh := topo.NHosts()
	top := make([]int, nh) // depth of each host's first rank
	depth := 0
	var walk func(h int)
	walk = func(h int) {
		depth = max(depth, top[h]+len(topo.Hosts[h])-1)
		for slot, c := range algos.Dtree(nh, h)[tr].Down {
			if c == algos.NoPeer {
				continue
			}
			top[c] = top[h] + 1
			if slot == 0 && len(topo.Hosts[h]) > 1 {
				top[c]++
			}
			walk(c)
		}
	}
	root := 0
	for h := range nh {
		if algos.Dtree(nh, h)[tr].Up == algos.NoPeer {
			root = h
		}
	}
	walk(root)
	return depth
}

// TestDoubleTreeExamples are the drawings of tree.go, as NCCL's GRAPH lines.
func TestDoubleTreeExamples(t *testing.T) {
	for _, tc := range []struct {
		topo *algos.Topo
		want [2][]string
	}{
		{algos.FlatTopo(8), [2][]string{{
			"Tree 0 : -1 -> 0 -> 4/-1/-1", "Tree 0 : 2 -> 1 -> -1/-1/-1", "Tree 0 : 4 -> 2 -> 1/3/-1", "Tree 0 : 2 -> 3 -> -1/-1/-1",
			"Tree 0 : 0 -> 4 -> 2/6/-1", "Tree 0 : 6 -> 5 -> -1/-1/-1", "Tree 0 : 4 -> 6 -> 5/7/-1", "Tree 0 : 6 -> 7 -> -1/-1/-1",
		}, {
			"Tree 1 : 1 -> 0 -> -1/-1/-1", "Tree 1 : 3 -> 1 -> 2/0/-1", "Tree 1 : 1 -> 2 -> -1/-1/-1", "Tree 1 : 7 -> 3 -> 5/1/-1",
			"Tree 1 : 5 -> 4 -> -1/-1/-1", "Tree 1 : 3 -> 5 -> 6/4/-1", "Tree 1 : 5 -> 6 -> -1/-1/-1", "Tree 1 : -1 -> 7 -> 3/-1/-1",
		}}},
		{algos.FlatTopo(5), [2][]string{{
			"Tree 0 : -1 -> 0 -> 4/-1/-1", "Tree 0 : 2 -> 1 -> -1/-1/-1", "Tree 0 : 4 -> 2 -> 1/3/-1", "Tree 0 : 2 -> 3 -> -1/-1/-1",
			"Tree 0 : 0 -> 4 -> 2/-1/-1",
		}, {
			"Tree 1 : 1 -> 0 -> 3/-1/-1", "Tree 1 : -1 -> 1 -> 0/-1/-1", "Tree 1 : 3 -> 2 -> -1/-1/-1", "Tree 1 : 0 -> 3 -> 2/4/-1",
			"Tree 1 : 3 -> 4 -> -1/-1/-1",
		}}},
		// Three hosts of two ranks; host trees 0 → 2 → 1 and 1 → 0 → 2.
		{algos.BlockTopo(3, 2), [2][]string{{
			"Tree 0 : -1 -> 0 -> 1/4/-1", "Tree 0 : 0 -> 1 -> -1/-1/-1", "Tree 0 : 5 -> 2 -> 3/-1/-1",
			"Tree 0 : 2 -> 3 -> -1/-1/-1", "Tree 0 : 0 -> 4 -> 5/-1/-1", "Tree 0 : 4 -> 5 -> 2/-1/-1",
		}, {
			"Tree 1 : 2 -> 0 -> 1/-1/-1", "Tree 1 : 0 -> 1 -> 4/-1/-1", "Tree 1 : -1 -> 2 -> 3/0/-1",
			"Tree 1 : 2 -> 3 -> -1/-1/-1", "Tree 1 : 1 -> 4 -> 5/-1/-1", "Tree 1 : 4 -> 5 -> -1/-1/-1",
		}}},
	} {
		var got [2][]string
		for r := range tc.topo.NRanks {
			for tr, nd := range algos.DoubleTree(tc.topo, r) {
				got[tr] = append(got[tr], nd.GraphLine(tr, r))
			}
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("hosts %v (-want +got):\n%s", tc.topo.Hosts, diff)
		}
	}
}

func TestTreeTopologyPanicsOnBadArguments(t *testing.T) {
	checkPanics(t, []panicCase{
		{"btree", func() { algos.Btree(4, 4) }, "btree: node 4: must be in [0, 4)"},
		{"dtree", func() { algos.Dtree(4, -1) }, "dtree: node -1: must be in [0, 4)"},
		{"double tree", func() { algos.DoubleTree(algos.FlatTopo(4), 5) }, "double tree: rank 5"},
		{"no topology", func() { algos.DoubleTree(nil, 0) }, "double tree: rank 0: not in the topology"},
	})
}
