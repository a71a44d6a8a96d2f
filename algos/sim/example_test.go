package sim_test

import (
	"fmt"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/algos/sim"
)

// A ring all-reduce of six elements on three ranks, one chunk of one
// element per ring step.
func ExampleRun() {
	const n, count = 3, 6
	ranks := make([]sim.Rank, n)
	scheds := make([][]algos.Op, n)
	for r := range n {
		ranks[r] = sim.Rank{In: make([]int64, count), Out: make([]int64, count)}
		for i := range ranks[r].In {
			ranks[r].In[i] = int64(10*r + i)
		}
		scheds[r] = algos.RingAllReduce(r, n, algos.Part{Count: count, Chunk: 1})
	}
	sum := sim.Reduction{Op: func(a, b int64) int64 { return a + b }}
	stats, err := sim.Run(ranks, scheds, sum, 8)
	if err != nil {
		fmt.Println(err)
		return
	}
	for r := range n {
		fmt.Println("rank", r, ranks[r].Out)
	}
	fmt.Printf("rank 0 -> 1: %+v\n", stats.Between(0, 1))
	fmt.Println("rounds:", stats.Rounds)
	// Output:
	// rank 0 [30 33 36 39 42 45]
	// rank 1 [30 33 36 39 42 45]
	// rank 2 [30 33 36 39 42 45]
	// rank 0 -> 1: {Messages:8 Elements:8 MaxDepth:1}
	// rounds: 10
}
