package algos

// NVLS with registered buffers (NCCL's NVLS user-buffer registration; the
// design study's "cc, direct (registered buffers)"). When every local rank
// called with a send buffer it registered (comm.MemAlloc + Register), the
// ranks of a host map each other's buffers, and the scatter through the
// connection-1 FIFOs goes away:
//
//   - reduce-scatter: head h load-reduces Input_r[h*count+o] of every
//     local rank r in place (one Op with Fan.Direct) into its Output;
//   - all-reduce: head h load-reduces share h of every Input in place and
//     multicast-stores the result as in the staged schedule; the gather is
//     unchanged; NVLS_TREE keeps its links between hosts;
//   - all-gather: a rank copies every other rank's Input into its Output
//     (a direct gather): nothing goes through a FIFO or multicast region.
//
// The runtime makes it safe: no head reads an Input before its owner has
// entered the call, and no rank returns (and reuses its Input) before every
// head has read it (the host's arrive/depart counter, runtime/comm).

// nvlsGen is the NVLS (tree: NVLS_TREE) row's generator: the direct
// schedule when a.Direct, else the staged one.
func nvlsGen(a *Args, coll Coll, tree bool) Schedule {
	switch {
	case tree && a.Direct:
		mustCheck("nvls_tree all-reduce", checkNvls(a.Rank, a.Topo, a.Part, true))
		return nvlsAllReduce(a.Rank, a.Topo, a.Part, a.ElemSize, true)
	case tree:
		return NvlsTreeAllReduce(a.Rank, a.Topo, a.Part, a.ElemSize)
	case coll == AllReduce && a.Direct:
		mustCheck("nvls all-reduce", checkNvls(a.Rank, a.Topo, a.Part, false))
		return nvlsAllReduce(a.Rank, a.Topo, a.Part, a.ElemSize, true)
	case coll == AllReduce:
		return NvlsAllReduce(a.Rank, a.Topo, a.Part, a.ElemSize)
	case coll == ReduceScatter && a.Direct:
		return NvlsReduceScatterDirect(a.Rank, a.Topo, a.Count, a.Part)
	case coll == ReduceScatter:
		return NvlsReduceScatter(a.Rank, a.Topo, a.Count, a.Part)
	case a.Direct:
		return NvlsAllGatherDirect(a.Rank, a.Topo, a.Count, a.Part)
	}
	return NvlsAllGather(a.Rank, a.Topo, a.Count, a.Part)
}

// NvlsReduceScatterDirect is NvlsReduceScatter over registered buffers:
// one load-reduce lane that reads the other local ranks' Input in place,
// one Op per chunk.
func NvlsReduceScatterDirect(rank int, t *Topo, count int64, p Part) Schedule {
	mustCheck("nvls reduce-scatter", checkNvls(rank, t, p, false))
	heads, me := nvlsHeads(t, rank)
	if len(heads) == 1 {
		return nvlsCopy(p.Offset, p.Offset, p.Count, true)
	}
	fan := &Fan{Direct: without(heads, me)}
	var reduce []Op
	for o, n := range chunks(p.Offset, p.Count, p.Chunk) {
		reduce = append(reduce, Op{RecvFrom: NoPeer, SendTo: NoPeer, Fan: fan, Src: Input, SrcOff: int64(rank)*count + o,
			Dst: Output, DstOff: o, Count: n, Reduce: true, PostOp: true})
	}
	return Single(reduce)
}

// NvlsAllGatherDirect is NvlsAllGather over registered buffers: a rank
// copies its Input into its block of Output and every other local rank's
// Input into theirs, one direct gather per chunk.
func NvlsAllGatherDirect(rank int, t *Topo, count int64, p Part) Schedule {
	others, offs, alone := nvlsGatherPeers(rank, t, count, p)
	if others == nil {
		return alone
	}
	own := int64(rank) * count
	fan := &Fan{Direct: others, DirectOff: offs}
	var ops []Op
	for o, n := range chunks(p.Offset, p.Count, p.Chunk) {
		ops = append(ops,
			Op{RecvFrom: NoPeer, SendTo: NoPeer, Src: Input, SrcOff: o, Dst: Output, DstOff: own + o, Count: n},
			Op{RecvFrom: NoPeer, SendTo: NoPeer, Fan: fan, Src: Input, SrcOff: o, Dst: Output, DstOff: o, Count: n})
	}
	return Single(ops)
}
