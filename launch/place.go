package launch

import (
	"fmt"
	"strings"

	"github.com/seed-760dd1f1/cc/launch/hostfile"
)

// MapBy is how ranks are spread over hosts (Open MPI's --map-by).
type MapBy string

// The placement policies.
const (
	// BySlot fills each host's slots before moving to the next host: ranks 0,1 on host A,
	// 2,3 on host B (Open MPI's default).
	BySlot MapBy = "slot"
	// ByNode deals ranks round-robin over hosts: rank 0 on A, 1 on B, 2 on A, ...
	ByNode MapBy = "node"
)

// ParseMapBy parses a --map-by value: "slot", "node", or Open MPI's "ppr:N:node", which
// means N ranks per node mapped by slot (perNode > 0).
func ParseMapBy(s string) (m MapBy, perNode int, err error) {
	switch s {
	case "", "slot":
		return BySlot, 0, nil
	case "node":
		return ByNode, 0, nil
	}
	if rest, ok := strings.CutPrefix(s, "ppr:"); ok {
		if n, obj, ok := strings.Cut(rest, ":"); ok && obj == "node" {
			var k int
			if _, err := fmt.Sscanf(n, "%d", &k); err == nil && k > 0 && fmt.Sprint(k) == n {
				return BySlot, k, nil
			}
		}
	}
	return "", 0, fmt.Errorf("bad --map-by %q (allowed: slot, node, ppr:N:node)", s)
}

// Placement is the input of Place.
type Placement struct {
	// NP is the number of ranks; 0 means one per slot (or PerNode per host).
	NP int
	// MapBy is the policy; the zero value is BySlot.
	MapBy MapBy
	// PerNode, when > 0, puts exactly that many ranks on each host (-N/--npernode/-ppn).
	PerNode int
	// Oversubscribe allows more ranks on a host than its slots (never more than max_slots).
	Oversubscribe bool
}

// Slot is where one rank runs.
type Slot struct {
	Rank int
	// Host is the host's name as given by the user.
	Host string
	// HostIndex is the host's index in the list given to Place.
	HostIndex int
	// NodeRank is the index of the host among the hosts that run at least one rank.
	NodeRank int
	// LocalRank is the rank's index among the ranks of its host, in rank order.
	LocalRank int
	// LocalNRanks is how many ranks its host runs.
	LocalNRanks int
}

// Place assigns ranks to hosts. It is pure; errors name the numbers that do not fit and the
// flag that would make them fit.
func Place(hosts []hostfile.Host, p Placement) ([]Slot, error) {
	if len(hosts) == 0 {
		return nil, fmt.Errorf("no hosts to place ranks on")
	}
	if p.NP < 0 {
		return nil, fmt.Errorf("bad number of ranks %d: want 1 or more", p.NP)
	}
	if p.PerNode < 0 {
		return nil, fmt.Errorf("bad ranks per node %d: want 1 or more", p.PerNode)
	}
	totalSlots := 0
	for _, h := range hosts {
		totalSlots += h.Slots
	}
	var hostOf []int // hostOf[rank] = host index
	var err error
	switch {
	case p.PerNode > 0:
		hostOf, err = placePerNode(hosts, p)
	case p.MapBy == ByNode:
		hostOf, err = placeByNode(hosts, p, totalSlots)
	case p.MapBy == BySlot || p.MapBy == "":
		hostOf, err = placeBySlot(hosts, p, totalSlots)
	default:
		err = fmt.Errorf("bad --map-by %q (allowed: slot, node)", p.MapBy)
	}
	if err != nil {
		return nil, err
	}
	return number(hosts, hostOf), nil
}

// placePerNode puts PerNode consecutive ranks on each host in order.
func placePerNode(hosts []hostfile.Host, p Placement) ([]int, error) {
	max := p.PerNode * len(hosts)
	np := p.NP
	if np == 0 {
		np = max
	}
	if np > max {
		return nil, fmt.Errorf("%d ranks do not fit %d per node on %d hosts (at most %d): raise -N or add hosts",
			np, p.PerNode, len(hosts), max)
	}
	for _, h := range hosts {
		if h.MaxSlots > 0 && p.PerNode > h.MaxSlots {
			return nil, fmt.Errorf("host %s: %d ranks per node exceed its max_slots=%d", h.Name, p.PerNode, h.MaxSlots)
		}
		if p.PerNode > h.Slots && !p.Oversubscribe {
			return nil, fmt.Errorf("host %s has %d slots, fewer than %d ranks per node: add --oversubscribe or give it slots=%d",
				h.Name, h.Slots, p.PerNode, p.PerNode)
		}
	}
	hostOf := make([]int, np)
	for r := range hostOf {
		hostOf[r] = r / p.PerNode
	}
	return hostOf, nil
}

// capacity returns how many ranks host h may take: its slots, or with oversubscription
// its max_slots (-1 = unlimited).
func capacity(h hostfile.Host, over bool) int {
	switch {
	case !over:
		return h.Slots
	case h.MaxSlots > 0:
		return h.MaxSlots
	default:
		return -1
	}
}

// checkFit returns the too-many-ranks error, or nil when np ranks fit.
func checkFit(hosts []hostfile.Host, np, totalSlots int, over bool) error {
	if !over {
		if np > totalSlots {
			return fmt.Errorf("%d ranks requested but the %d hosts have %d slots: use -np %d or fewer, add slots, or add --oversubscribe",
				np, len(hosts), totalSlots, totalSlots)
		}
		return nil
	}
	limit := 0
	for _, h := range hosts {
		if h.MaxSlots == 0 {
			return nil
		}
		limit += h.MaxSlots
	}
	if np > limit {
		return fmt.Errorf("%d ranks requested but the hosts' max_slots add up to %d, even with --oversubscribe", np, limit)
	}
	return nil
}

// placeBySlot fills hosts in order up to their slots; oversubscribed ranks are then dealt
// round-robin over hosts below their max_slots.
func placeBySlot(hosts []hostfile.Host, p Placement, totalSlots int) ([]int, error) {
	np := p.NP
	if np == 0 {
		np = totalSlots
	}
	if err := checkFit(hosts, np, totalSlots, p.Oversubscribe); err != nil {
		return nil, err
	}
	counts := make([]int, len(hosts))
	left := np
	for i, h := range hosts {
		counts[i] = min(h.Slots, left)
		left -= counts[i]
	}
	for left > 0 { // only with --oversubscribe; checkFit guarantees progress
		for i, h := range hosts {
			if left > 0 && (capacity(h, true) < 0 || counts[i] < capacity(h, true)) {
				counts[i]++
				left--
			}
		}
	}
	hostOf := make([]int, 0, np)
	for i, c := range counts {
		for range c {
			hostOf = append(hostOf, i)
		}
	}
	return hostOf, nil
}

// placeByNode deals ranks one per host per round, skipping full hosts; with
// --oversubscribe, once every host is full it keeps dealing below max_slots.
func placeByNode(hosts []hostfile.Host, p Placement, totalSlots int) ([]int, error) {
	np := p.NP
	if np == 0 {
		np = totalSlots
	}
	if err := checkFit(hosts, np, totalSlots, p.Oversubscribe); err != nil {
		return nil, err
	}
	counts := make([]int, len(hosts))
	hostOf := make([]int, 0, np)
	for over := false; len(hostOf) < np; over = true {
		for progress := true; progress && len(hostOf) < np; {
			progress = false
			for i, h := range hosts {
				c := capacity(h, over)
				if len(hostOf) < np && (c < 0 || counts[i] < c) {
					counts[i]++
					hostOf = append(hostOf, i)
					progress = true
				}
			}
		}
	}
	return hostOf, nil
}

// number turns hostOf[rank] into Slots with local and node ranks.
func number(hosts []hostfile.Host, hostOf []int) []Slot {
	perHost := make([]int, len(hosts))
	for _, h := range hostOf {
		perHost[h]++
	}
	nodeRank := make([]int, len(hosts))
	next := 0
	for i, n := range perHost {
		nodeRank[i] = -1
		if n > 0 {
			nodeRank[i] = next
			next++
		}
	}
	seen := make([]int, len(hosts))
	slots := make([]Slot, len(hostOf))
	for r, h := range hostOf {
		slots[r] = Slot{
			Rank: r, Host: hosts[h].Name, HostIndex: h, NodeRank: nodeRank[h],
			LocalRank: seen[h], LocalNRanks: perHost[h],
		}
		seen[h]++
	}
	return slots
}
