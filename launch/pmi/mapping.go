package pmi

import (
	"fmt"
	"strings"
)

// ProcessMapping is the value of the PMI_process_mapping key, which tells an MPICH rank
// which ranks share its node (and so shared memory): nodes[r] is rank r's node (0-based,
// ccrun's node rank).
//
// The format is Hydra's: "(vector,(S,N,K),...)", each block meaning K consecutive ranks
// on node S, K on node S+1, ..., K on node S+N-1; MPICH repeats the block list from the
// start until every rank has a node. Worked examples:
//
//	nodes 0 0 1 1 (by slot, 2 per node)  -> (vector,(0,2,2))
//	nodes 0 1 0 1 (by node)              -> (vector,(0,2,1))
//	nodes 0 0 0 1 (3 + 1)                -> (vector,(0,1,3),(1,1,1))
//
// The shortest block list whose repetition gives nodes is used.
func ProcessMapping(nodes []int) string {
	type block struct{ start, n, k int }
	var runs []block // K consecutive ranks on one node
	for i := 0; i < len(nodes); {
		j := i
		for j < len(nodes) && nodes[j] == nodes[i] {
			j++
		}
		runs = append(runs, block{nodes[i], 1, j - i})
		i = j
	}
	var blocks []block // runs on consecutive nodes with the same K, merged
	for _, r := range runs {
		if n := len(blocks); n > 0 {
			last := &blocks[n-1]
			if last.k == r.k && last.start+last.n == r.start {
				last.n++
				continue
			}
		}
		blocks = append(blocks, r)
	}
	period := len(blocks)
	for p := 1; p < len(blocks); p++ {
		if len(blocks)%p != 0 {
			continue
		}
		ok := true
		for i := p; i < len(blocks) && ok; i++ {
			ok = blocks[i] == blocks[i%p]
		}
		if ok {
			period = p
			break
		}
	}
	var b strings.Builder
	b.WriteString("(vector")
	for _, bl := range blocks[:period] {
		fmt.Fprintf(&b, ",(%d,%d,%d)", bl.start, bl.n, bl.k)
	}
	b.WriteString(")")
	return b.String()
}
