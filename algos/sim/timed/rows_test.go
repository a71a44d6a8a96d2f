package timed_test

import (
	"fmt"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/algos/sim"
	"github.com/seed-760dd1f1/cc/algos/sim/timed"
	"github.com/seed-760dd1f1/cc/protocols"
)

// Modelled reports whether the timed simulator replays row: rows of Ops
// between ranks. PAT's slot programs, NVLS's multicast regions, the
// CollNet server and the flat one-shot rows are not modelled (Run
// refuses them).
func modelled(row *algos.Algorithm) bool {
	switch {
	case row.Flat != nil, row.Algo == algos.PAT, row.Algo == algos.NVLS, row.Algo == algos.NVLSTree, row.Algo == algos.CollNetDirect, row.Algo == algos.CollNetChain:
		return false
	}
	return true
}

// TestRowsAgreeWithRoundSim runs every modelled row of the table on both
// clocks, with every protocol it has, and requires the same messages and
// elements on every link: the timed replay runs the Ops the round
// simulator checks, no more, no fewer. It also checks the timed replay
// cut every Op as algos.SliceElems says.
func TestRowsAgreeWithRoundSim(t *testing.T) {
	topos := []*algos.Topo{algos.FlatTopo(2), algos.FlatTopo(3), algos.FlatTopo(5), algos.FlatTopo(8),
		algos.BlockTopo(2, 2), algos.BlockTopo(3, 2), algos.BlockTopo(2, 3)}
	rows := 0
	for i := range algos.Algorithms {
		row := &algos.Algorithms[i]
		if !modelled(row) {
			continue
		}
		rows++
		for _, topo := range topos {
			for _, p := range row.Protos() {
				for _, count := range []int64{1, 37, 3000} {
					name := fmt.Sprintf("%s/%s/%s n=%d hosts=%d count=%d", row.Algo, row.Coll, p, topo.NRanks, topo.NHosts(), count)
					agree(t, name, row, topo, p, count)
				}
			}
		}
	}
	if rows < 10 {
		t.Errorf("%d rows modelled: want the 5 ring rows, the tree, CTRING and the 3 log-step rows", rows)
	}
}

func agree(t *testing.T, name string, row *algos.Algorithm, topo *algos.Topo, p protocols.Proto, count int64) {
	t.Helper()
	n := topo.NRanks
	const esize = 8
	step := p.Payload(2048) // small slots: several slices and loops
	g := row.Geometry[p]
	chunk := row.ChunkFor(&algos.ChunkArgs{Proto: p, Geometry: g, StepPayload: step, ElemSize: esize, Align: 2,
		Bytes: count * esize, NChannels: 1, Topo: topo})
	inb, outb := count, count
	switch row.Coll {
	case algos.ReduceScatter:
		inb = count * int64(n)
	case algos.AllGather:
		outb = count * int64(n)
	}
	ranks := make([]sim.Rank, n)
	scheds := make([]algos.Schedule, n)
	for r := range n {
		ranks[r] = sim.Rank{In: make([]int64, inb), Out: make([]int64, outb)}
		scheds[r] = row.Gen(&algos.Args{Rank: r, Topo: topo, Count: count, ElemSize: esize,
			Part: algos.Part{Count: count, Chunk: chunk, Align: 2}})
	}
	red := sim.Reduction{Op: func(a, b int64) int64 { return a + b }}
	st, err := sim.RunSchedules(ranks, [][]algos.Schedule{scheds}, red, protocols.NSteps)
	if err != nil {
		t.Fatalf("%s: round simulator: %v", name, err)
	}
	res, err := timed.Run(&timed.Params{Topo: topo, Geometry: g, StepPayload: step, ElemSize: esize,
		Intra: timed.Class{Alpha: 500, Beta: 3}, Inter: timed.Class{Alpha: 20000, Beta: 1}, Uplink: 0.1, Downlink: 0.1, Cores: 1},
		[][]algos.Schedule{scheds})
	if err != nil {
		t.Fatalf("%s: timed: %v", name, err)
	}
	if len(res.Links) != len(st.Links) {
		t.Errorf("%s: timed %d links, round simulator %d", name, len(res.Links), len(st.Links))
	}
	for l, want := range st.Links {
		got := res.Links[l]
		if got.Messages != want.Messages || got.Elements != want.Elements {
			t.Errorf("%s: link %+v: timed %d messages of %d elements, round simulator %d of %d", name, l, got.Messages, got.Elements, want.Messages, want.Elements)
		}
	}
	var slices int64
	for r := range n {
		for _, lane := range scheds[r].Lanes {
			for _, o := range lane.Ops {
				slices += int64(o.NumSends()) * algos.NumSlices(g, step, o.Count, esize)
			}
		}
	}
	var got int64
	for _, tr := range res.Links {
		got += tr.Slices
	}
	if got != slices {
		t.Errorf("%s: timed posted %d slices, SliceElems cuts %d", name, got, slices)
	}
	if res.Time <= 0 {
		t.Errorf("%s: time %.1f ns, want > 0", name, res.Time)
	}
}
