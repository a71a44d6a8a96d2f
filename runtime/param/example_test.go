package param_test

import (
	"fmt"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/runtime/param"
)

func ExampleLoad() {
	env := map[string]string{
		"NCCL_ALGO":      "ring;allreduce:tree,ctring",
		"NCCL_PROTO":     "^LL128",
		"NCCL_NCHANNELS": "4",
	}
	p, err := param.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.AlgosFor(algos.AllReduce), p.AlgosFor(algos.AllGather), p.ProtosFor(algos.AllReduce))
	fmt.Println(p.Algo.Forced(algos.Broadcast), p.MinChannels, p.MaxChannels, p.BuffSize)
	// Output:
	// tree,ctring ring ll,simple
	// true 4 4 4194304
}

func ExampleLoad_errors() {
	env := map[string]string{"NCCL_BUFFSIZE": "abc", "NCCL_PROTO": "LL;simple", "NCCL_DEBUG_SUBSYS": "INIT,TUNE"}
	_, err := param.Load(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	fmt.Println(err)
	// Output:
	// NCCL_PROTO="LL;simple": entry "simple" has no function prefix: all entries except the first must have one (allowed: broadcast, reduce, allgather, reducescatter, allreduce; e.g. allreduce:simple)
	// NCCL_BUFFSIZE="abc": want a positive integer number of bytes
	// NCCL_DEBUG_SUBSYS="INIT,TUNE": unknown subsystem "TUNE" (allowed: INIT, COLL, P2P, SHM, NET, GRAPH, TUNING, ENV, ALLOC, CALL, PROXY, NVLS, BOOTSTRAP, REG, PROFILE, RAS, DESTROY, ALLOC_HOST, ALL)
}
