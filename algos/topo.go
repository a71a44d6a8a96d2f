package algos

import (
	"errors"
	"fmt"
)

// Topo says where the ranks are: which ranks share a host (and so memory).
// Algorithms that care (the tree: chains inside hosts, a double binary tree
// between them) read it; the ring does not.
//
// Hosts are numbered in order of their lowest rank and list their ranks in
// increasing order, so every rank derives the same Topo from the job's host
// identities.
type Topo struct {
	NRanks int
	Hosts  [][]int // Hosts[h]: the ranks of host h, increasing
	host   []int   // rank -> host
	local  []int   // rank -> index within its host
}

// NewTopo builds a Topo from each rank's host identity (any comparable
// label: equal labels share a host).
func NewTopo[K comparable](hostOf []K) *Topo {
	t := &Topo{NRanks: len(hostOf), host: make([]int, len(hostOf)), local: make([]int, len(hostOf))}
	index := map[K]int{}
	for r, k := range hostOf {
		h, ok := index[k]
		if !ok {
			h = len(t.Hosts)
			index[k] = h
			t.Hosts = append(t.Hosts, nil)
		}
		t.host[r], t.local[r] = h, len(t.Hosts[h])
		t.Hosts[h] = append(t.Hosts[h], r)
	}
	return t
}

// FlatTopo is n ranks, each alone on its host.
func FlatTopo(n int) *Topo {
	hosts := make([]int, n)
	for r := range hosts {
		hosts[r] = r
	}
	return NewTopo(hosts)
}

// BlockTopo is nhosts hosts of ppn ranks each, ranks numbered host by host.
func BlockTopo(nhosts, ppn int) *Topo {
	hosts := make([]int, nhosts*ppn)
	for r := range hosts {
		hosts[r] = r / ppn
	}
	return NewTopo(hosts)
}

// Host returns the host of rank and rank's index among that host's ranks.
func (t *Topo) Host(rank int) (host, local int) { return t.host[rank], t.local[rank] }

// NHosts is the number of hosts.
func (t *Topo) NHosts() int { return len(t.Hosts) }

// MaxPerHost is the largest number of ranks on one host.
func (t *Topo) MaxPerHost() int {
	m := 0
	for _, h := range t.Hosts {
		m = max(m, len(h))
	}
	return m
}

// Check validates a Topo built by hand.
func (t *Topo) Check() error {
	if t == nil {
		return errors.New("no topology")
	}
	if t.NRanks < 1 || len(t.host) != t.NRanks || len(t.local) != t.NRanks {
		return fmt.Errorf("topology of %d ranks: build it with NewTopo", t.NRanks)
	}
	seen := 0
	for h, rs := range t.Hosts {
		if len(rs) == 0 {
			return fmt.Errorf("host %d has no ranks", h)
		}
		for i, r := range rs {
			if r < 0 || r >= t.NRanks || t.host[r] != h || t.local[r] != i || (i > 0 && rs[i-1] >= r) {
				return fmt.Errorf("host %d: rank %d at %d is inconsistent", h, r, i)
			}
			seen++
		}
		if h > 0 && t.Hosts[h-1][0] >= rs[0] {
			return fmt.Errorf("hosts %d and %d are not in order of their lowest rank", h-1, h)
		}
	}
	if seen != t.NRanks {
		return fmt.Errorf("hosts hold %d ranks, want %d", seen, t.NRanks)
	}
	return nil
}
