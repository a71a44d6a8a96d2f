package algos_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/algos/sim"
)

// NVLS over registered buffers (algos.Args.Direct): the same exact-data
// checks as the staged schedules, and no message on any connection-1 FIFO
// between two ranks of a host (the staging FIFOs of the scatter).

// stagedMessages counts the messages on connection-1 links between two
// ranks of one host (multicast regions and links between hosts excluded).
func stagedMessages(st sim.Stats, topo *algos.Topo) int64 {
	var n int64
	for l, tr := range st.Links {
		if l.Conn != 1 || l.Src >= topo.NRanks || l.Dst >= topo.NRanks {
			continue
		}
		if hs, _ := topo.Host(l.Src); hs == hostOf(topo, l.Dst) {
			n += tr.Messages
		}
	}
	return n
}

func hostOf(t *algos.Topo, r int) int { h, _ := t.Host(r); return h }

// directCases are nvlsCases over registered buffers.
func directCases(algo algos.Algo, coll algos.Coll, topo *algos.Topo, seed int) []nvlsCase {
	cases := nvlsCases(algo, coll, topo, seed)
	for i := range cases {
		cases[i].direct = true
	}
	return cases
}

// runTwins runs direct case c and its staged twin, checking both, and
// checks that nothing of c went through a staging FIFO.
func runTwins(c nvlsCase) (direct, staged sim.Stats, err error) {
	if direct, err = runNvls(c); err != nil {
		return direct, staged, err
	}
	if got := stagedMessages(direct, c.topo); got != 0 {
		return direct, staged, fmt.Errorf("%d messages through staging FIFOs, want 0", got)
	}
	twin := c
	twin.direct = false
	if staged, err = runNvls(twin); err != nil {
		return direct, staged, fmt.Errorf("staged twin: %w", err)
	}
	return direct, staged, nil
}

// TestNvlsDirect: reduce-scatter, all-reduce and all-gather over
// registered buffers at n up to 64, exact, with no staged message; the
// staged schedule of the same case does stage (so the count can fail).
func TestNvlsDirect(t *testing.T) {
	for _, coll := range []algos.Coll{algos.ReduceScatter, algos.AllReduce, algos.AllGather} {
		t.Run(coll.String(), func(t *testing.T) {
			var cases []nvlsCase
			for _, n := range []int{1, 2, 3, 4, 5, 8, 17, 32, 63, 64} {
				cases = append(cases, directCases(algos.NVLS, coll, algos.BlockTopo(1, n), n)...)
			}
			runAll(t, cases, checkDirect)
		})
	}
}

// checkDirect checks the data and traffic of a direct case against its
// staged twin.
func checkDirect(c nvlsCase) error {
	st, st2, err := runTwins(c)
	if err != nil {
		return err
	}
	var errs []error
	if c.coll == algos.AllGather && st.McastWrites != 0 {
		errs = append(errs, fmt.Errorf("all-gather stored %d multicast messages, want 0", st.McastWrites))
	}
	moves := c.count > 0 && c.topo.MaxPerHost() > 1
	if got := stagedMessages(st2, c.topo); moves != (got > 0) && c.coll != algos.AllGather {
		errs = append(errs, fmt.Errorf("staged twin: %d staged messages", got))
	}
	if moves != (st.DirectElems > 0) {
		errs = append(errs, fmt.Errorf("%d elements read in place", st.DirectElems))
	}
	if c.coll == algos.AllReduce && st.McastWrites != st2.McastWrites {
		errs = append(errs, fmt.Errorf("%d multicast stores, staged %d: the store should stay", st.McastWrites, st2.McastWrites))
	}
	return errors.Join(errs...)
}

// TestNvlsTreeDirect: NVLS_TREE over registered buffers inside every
// host: exact, nothing staged inside a host, and the links between hosts
// carry exactly what the staged schedule's do.
func TestNvlsTreeDirect(t *testing.T) {
	var cases []nvlsCase
	for hosts := 2; hosts <= 8; hosts += 3 {
		for _, ppn := range []int{2, 3, 8} {
			cases = append(cases, directCases(algos.NVLSTree, algos.AllReduce, algos.BlockTopo(hosts, ppn), hosts*8+ppn)...)
		}
	}
	runAll(t, cases, func(c nvlsCase) error {
		st, st2, err := runTwins(c)
		if err != nil {
			return err
		}
		var errs []error
		between := func(l sim.Link) bool {
			return l.Src < c.topo.NRanks && l.Dst < c.topo.NRanks && hostOf(c.topo, l.Src) != hostOf(c.topo, l.Dst)
		}
		for _, links := range []map[sim.Link]sim.Traffic{st.Links, st2.Links} {
			for l := range links {
				if between(l) && st.Links[l] != st2.Links[l] {
					errs = append(errs, fmt.Errorf("link %+v between hosts: %+v, staged %+v", l, st.Links[l], st2.Links[l]))
				}
			}
		}
		return errors.Join(errs...)
	})
}
