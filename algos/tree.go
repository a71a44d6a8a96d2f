package algos

// The double binary tree (NVIDIA/nccl src/graph/trees.cc ncclGetBtree and
// ncclGetDtree, src/graph/connect.cc connectTrees; the design study
// shared/reference/wave2-algorithms-design.md §2.1).
//
// A binary tree over n nodes has depth about log2 n, so a reduction up it
// and a broadcast down it cost 2 log2 n latencies instead of the ring's
// 2(n-1). But half its nodes are leaves, which only send up and receive
// down: their links carry half of what they could. NCCL therefore builds
// two trees at once, the second one the mirror image of the first (or, for
// odd n, the first shifted by one), so that the leaves of one tree are the
// inner nodes of the other: with half the data on each tree, every node
// sends and receives about as much as in a ring.
//
// The trees are built over hosts, not ranks. Inside a host the ranks form a
// chain in rank order, and each host joins the trees of the hosts through
// its first rank (intra[0]), which links to the parent host. A host's child
// hosts attach at intra[0] or intra[1] (NCCL's tree patterns, below), so
// the links that leave a host are spread over two of its ranks.

import (
	"fmt"
	"math/bits"
	"slices"
)

// The first tree (NCCL's btree) over n = 8 nodes. A node's lowest set bit
// is its level: odd nodes are leaves, node 2^k·(2j+1) has children at
// distance 2^(k-1) below and above it, node 0 is the root with one child,
// the largest power of two below n. Where a node's place in the complete
// tree lies beyond n, its parent or right child moves closer:
//
//	tree 0 (btree)                  tree 1, n even: mirror x -> n-1-x
//
//	      0                                7
//	      └─────── 4                 3 ────┘
//	           ┌───┴───┐         ┌───┴───┐
//	           2       6         5       1
//	          ┌┴┐     ┌┴┐       ┌┴┐     ┌┴┐
//	          1 3     5 7       6 4     2 0
//
// Tree 1 for odd n is tree 0 with every node x renamed (x+1) mod n: for
// n = 5, tree 0 is 0 → 4 → 2 → {1, 3} and tree 1 is 1 → 0 → 3 → {2, 4}.
// Both trees have depth ⌈log2 n⌉, and every node has children in at most
// one of them, except one node when n is odd.
//
// A node's two child slots are kept apart (Down[0] is the left child,
// smaller in tree 0, Down[1] the right one) because hosts attach their
// children by slot.

// BtreeNode is a node's place in one binary tree over node indices (hosts):
// its parent and its two child slots, NoPeer where there is none.
type BtreeNode struct {
	Up   int
	Down [2]int
}

// Btree returns node's place in NCCL's binary tree over n nodes (tree 0).
// It panics unless 0 <= node < n.
func Btree(n, node int) BtreeNode {
	if node < 0 || node >= n {
		panic(fmt.Sprintf("algos: btree: node %d: must be in [0, %d)", node, n))
	}
	b := BtreeNode{Up: NoPeer, Down: [2]int{NoPeer, NoPeer}}
	if node == 0 {
		// The root's one child is the largest power of two below n.
		if n > 1 {
			b.Down[1] = 1 << (bits.Len(uint(n-1)) - 1)
		}
		return b
	}
	bit := node & -node // the node's level
	b.Up = node ^ bit | bit<<1
	if b.Up >= n {
		b.Up = node ^ bit
	}
	if half := bit >> 1; half > 0 {
		b.Down[0] = node - half
		for half > 0 && node+half >= n {
			half >>= 1
		}
		if half > 0 {
			b.Down[1] = node + half
		}
	}
	return b
}

// Dtree returns node's place in both of NCCL's trees over n nodes: tree 0
// is Btree, tree 1 its mirror (n even) or its shift by one (n odd). It
// panics unless 0 <= node < n.
func Dtree(n, node int) [2]BtreeNode {
	if node < 0 || node >= n {
		panic(fmt.Sprintf("algos: dtree: node %d: must be in [0, %d)", node, n))
	}
	if n%2 == 0 {
		mirror := func(x int) int { return n - 1 - x }
		return [2]BtreeNode{Btree(n, node), Btree(n, mirror(node)).renamed(mirror)}
	}
	shift := func(x int) int { return (x + 1) % n }
	return [2]BtreeNode{Btree(n, node), Btree(n, (node+n-1)%n).renamed(shift)}
}

// renamed applies f to every node b names.
func (b BtreeNode) renamed(f func(int) int) BtreeNode {
	g := func(x int) int {
		if x == NoPeer {
			return NoPeer
		}
		return f(x)
	}
	return BtreeNode{Up: g(b.Up), Down: [2]int{g(b.Down[0]), g(b.Down[1])}}
}

// The trees over ranks. Inside a host the ranks are a chain, intra[0] at
// the top. intra[0] links up to the parent host; child hosts link up to
// their parent host's intra[0] or intra[1] (NCCL's tree patterns,
// connect.cc): BALANCED when the host has several ranks (the left child
// host at intra[1], the right one at intra[0]), TREE when it has one (both
// at intra[0]). Three hosts of two ranks, tree 0 (hosts 0 → 2 → 1, host 2
// the right child of host 0 and host 1 the left child of host 2):
//
//	host 0      host 2      host 1
//	  0 ───────── 4
//	  │           │
//	  1           5 ───────── 2
//	                          │
//	                          3
//
// So a rank has at most two children: the next rank of its chain and one
// child host, or two child hosts when it is alone on its host. (NCCL's
// arity is three: TREE with several ranks per host, which we do not build,
// puts the chain and both child hosts on intra[0].)

// TreeNode is a rank's place in one tree: its parent (NoPeer at the root)
// and its children, the next rank of its host's chain first, then the
// first ranks of its child hosts, left slot before right.
type TreeNode struct {
	Up   int
	Down []int
}

// DoubleTree returns rank's place in both trees over the ranks of t. It
// panics if rank is not one of t's.
func DoubleTree(t *Topo, rank int) [2]TreeNode {
	if t == nil || rank < 0 || rank >= t.NRanks {
		panic(fmt.Sprintf("algos: double tree: rank %d: not in the topology", rank))
	}
	h, i := t.Host(rank)
	intra := t.Hosts[h]
	hosts := Dtree(t.NHosts(), h)
	var out [2]TreeNode
	for tr, hn := range hosts {
		node := TreeNode{Up: NoPeer}
		// The chain inside the host.
		if i > 0 {
			node.Up = intra[i-1]
		}
		if i+1 < len(intra) {
			node.Down = append(node.Down, intra[i+1])
		}
		// intra[0] links up to where the parent host attaches this host.
		if i == 0 && hn.Up != NoPeer {
			siblings := Dtree(t.NHosts(), hn.Up)[tr].Down
			slot := slices.Index(siblings[:], h)
			parent := t.Hosts[hn.Up]
			node.Up = parent[attachAt(len(parent), slot)]
		}
		// Child hosts attached here link up from their intra[0].
		for slot, c := range hn.Down {
			if c != NoPeer && attachAt(len(intra), slot) == i {
				node.Down = append(node.Down, t.Hosts[c][0])
			}
		}
		out[tr] = node
	}
	return out
}

// attachAt is the index inside a host of ppn ranks of the rank that the
// child host in slot (0 left, 1 right) links up to: BALANCED_TREE with
// several ranks (left at intra[1], right at intra[0]), TREE with one.
func attachAt(ppn, slot int) int {
	if ppn > 1 && slot == 0 {
		return 1
	}
	return 0
}

// GraphLine is NCCL's NCCL_DEBUG_SUBSYS=GRAPH line for rank's place in a
// tree (connect.cc): "Tree 0 : -1 -> 0 -> 1/4/-1" is tree 0's root with
// children 1 and 4. NCCL numbers the trees by channel (c for tree 0 and
// c+nChannels for tree 1); index is whatever the caller numbers them by.
func (n TreeNode) GraphLine(index, rank int) string {
	d := [3]int{NoPeer, NoPeer, NoPeer}
	copy(d[:], n.Down)
	return fmt.Sprintf("Tree %d : %d -> %d -> %d/%d/%d", index, n.Up, rank, d[0], d[1], d[2])
}
