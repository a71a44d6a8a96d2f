package pmi

import (
	"strconv"
	"strings"
	"testing"
)

func TestProcessMapping(t *testing.T) {
	tests := []struct {
		nodes []int
		want  string
	}{
		{[]int{0}, "(vector,(0,1,1))"},
		{[]int{0, 0, 0, 0}, "(vector,(0,1,4))"},
		{[]int{0, 0, 1, 1}, "(vector,(0,2,2))"},
		{[]int{0, 1, 0, 1}, "(vector,(0,2,1))"},
		{[]int{0, 1, 2, 0, 1, 2, 0, 1}, "(vector,(0,3,1),(0,3,1),(0,2,1))"},
		{[]int{0, 0, 0, 1}, "(vector,(0,1,3),(1,1,1))"},
		{[]int{0, 0, 1, 1, 2, 3}, "(vector,(0,2,2),(2,2,1))"},
		{[]int{1, 1, 0, 0}, "(vector,(1,1,2),(0,1,2))"},
	}
	for _, tt := range tests {
		if got := ProcessMapping(tt.nodes); got != tt.want {
			t.Errorf("ProcessMapping(%v) = %s, want %s", tt.nodes, got, tt.want)
		}
		if got := expand(t, ProcessMapping(tt.nodes), len(tt.nodes)); !equal(got, tt.nodes) {
			t.Errorf("ProcessMapping(%v) reads back as %v", tt.nodes, got)
		}
	}
}

// TestProcessMappingReadsBack: every placement ccrun makes (by slot, by node, N per
// node, uneven hosts) reads back, as MPICH reads it, as the same nodes.
func TestProcessMappingReadsBack(t *testing.T) {
	for nhosts := 1; nhosts <= 5; nhosts++ {
		for per := 1; per <= 4; per++ {
			for extra := 0; extra < nhosts*per; extra++ {
				n := nhosts*per - extra
				var bySlot, byNode []int
				for r := range n {
					bySlot = append(bySlot, r/per)
					byNode = append(byNode, r%nhosts)
				}
				for _, nodes := range [][]int{bySlot, byNode} {
					if got := expand(t, ProcessMapping(nodes), n); !equal(got, nodes) {
						t.Errorf("%v: %s reads back as %v", nodes, ProcessMapping(nodes), got)
					}
				}
			}
		}
	}
}

// expand reads a mapping as MPICH's MPL_rankmap_str_to_array does: blocks (S,N,K) in
// order, repeated from the first until n ranks have a node.
func expand(t *testing.T, mapping string, n int) []int {
	t.Helper()
	var blocks [][3]int
	rest := mapping
	if len(rest) < len("(vector)") || rest[:7] != "(vector" {
		t.Fatalf("bad mapping %q", mapping)
	}
	rest = rest[7:]
	for len(rest) > 1 {
		end := strings.Index(rest, ")")
		f := strings.Split(strings.TrimPrefix(rest[:max(end, 0)], ",("), ",")
		if end < 0 || len(f) != 3 {
			t.Fatalf("bad mapping %q at %q", mapping, rest)
		}
		var b [3]int
		for i := range b {
			v, err := strconv.Atoi(f[i])
			if err != nil {
				t.Fatalf("bad mapping %q: %v", mapping, err)
			}
			b[i] = v
		}
		blocks = append(blocks, b)
		rest = rest[end+1:]
	}
	var out []int
	for len(out) < n {
		for _, b := range blocks {
			for node := b[0]; node < b[0]+b[1]; node++ {
				for k := 0; k < b[2] && len(out) < n; k++ {
					out = append(out, node)
				}
			}
		}
	}
	return out
}

func equal(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
