package launch

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/seed-760dd1f1/cc/hw"
)

// One machine is one node, whatever names it is listed under. Names of this machine
// (localhost, its host name, its addresses) are known before placement: OneNode makes
// them one host. Two names of one remote machine (tb1 and 10.252.0.1, an ssh config Host
// alias, an /etc/hosts alias, this machine under a name IsLocal does not know) are known
// only once ccrun has reached them: ranks are placed on the names as given (each name's
// slots, -N per name, --map-by node round-robin over names, as mpirun places them), then
// Renumber numbers the ranks of one machine as one node before any rank's environment is
// built:
//
//	-H tb1,10.252.0.1 -np 4 --map-by node     placed      renumbered
//	  rank 0  tb1                             node 0 0/1  node 0 0/4
//	  rank 1  10.252.0.1                      node 1 0/1  node 0 1/4
//	  rank 2  tb1                             ...         node 0 2/4
//	  rank 3  10.252.0.1                                  node 0 3/4
//
// A machine is its hw.HostID (host name + boot id), what the runtime compares to decide
// shared memory.

// HostIdentifier is a Remote that can tell which machine a connected host is. The
// agent's hello carries it (no extra round trip); a host without an agent answers one
// short command (see sshspawn.Spawner.HostID).
type HostIdentifier interface {
	HostID(ctx context.Context, host string) (hw.HostID, error)
}

// identifyTimeout bounds the wait for the hosts' identities; a host that has not answered
// by then keeps a node of its own.
const identifyTimeout = 10 * time.Second

// Renumber gives the ranks of host names that are one machine one node's numbering:
// machine maps a host name to its machine (hw.HostID.String()); a name it does not map is
// a machine of its own. Nodes keep the order of their first host's node rank, local
// ranks follow rank order, and LocalNRanks counts the machine's ranks. With no two names
// of one machine it returns the slots unchanged. It is pure.
func Renumber(slots []Slot, machine map[string]string) []Slot {
	key := func(host string) string {
		if m := machine[host]; m != "" {
			return "m\x00" + m
		}
		return "h\x00" + host
	}
	first := map[string]int{} // machine -> smallest node rank of its names
	size := map[string]int{}  // machine -> its ranks
	for _, s := range slots {
		k := key(s.Host)
		if n, ok := first[k]; !ok || s.NodeRank < n {
			first[k] = s.NodeRank
		}
		size[k]++
	}
	order := make([]string, 0, len(first))
	for k := range first {
		order = append(order, k)
	}
	slices.SortFunc(order, func(a, b string) int { return first[a] - first[b] })
	node := make(map[string]int, len(order))
	for i, k := range order {
		node[k] = i
	}
	out := slices.Clone(slots)
	seen := map[string]int{}
	for i := range out {
		k := key(out[i].Host)
		out[i].NodeRank, out[i].LocalRank, out[i].LocalNRanks = node[k], seen[k], size[k]
		seen[k]++
	}
	return out
}

// machines learns which machine each host that runs ranks is, when there is more than one
// such host and one of them is remote (local names are one host already, see OneNode):
// this machine's identity for local hosts, Remote's answer (HostIdentifier) for the
// others, asked concurrently. A host whose identity cannot be learned is left out (a node
// of its own, as before), with one line under -v saying why.
func (j *job) machines(ctx context.Context) map[string]string {
	var hosts []string
	for _, s := range j.slots {
		if !slices.Contains(hosts, s.Host) {
			hosts = append(hosts, s.Host)
		}
	}
	if len(hosts) < 2 || len(j.remote) == 0 {
		return nil
	}
	m := map[string]string{}
	if self, err := hw.HostIdentity(hw.Root()); err != nil {
		j.o.Logf("this machine: cannot tell its identity (%v): names of it that ccrun reaches over SSH are nodes of their own", err)
	} else {
		for _, h := range hosts {
			if j.local[h] {
				m[h] = self.String()
			}
		}
	}
	idf, ok := j.o.Remote.(HostIdentifier)
	if !ok {
		j.o.Logf("hosts are not identified with this launcher: each host name is a node of its own")
		return m
	}
	ctx, cancel := context.WithTimeoutCause(ctx, identifyTimeout, fmt.Errorf("no answer in %v", identifyTimeout))
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, j.o.MaxParallel)
	for _, h := range hosts {
		if j.local[h] {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			id, err := idf.HostID(ctx, h)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				j.o.Logf("host %s: cannot tell which machine it is (%v): its ranks are a node of their own", h, err)
				return
			}
			m[h] = id.String()
		})
	}
	wg.Wait()
	j.logMachines(hosts, m)
	return m
}

// logMachines says under -v which host names were found to be one machine.
func (j *job) logMachines(hosts []string, machine map[string]string) {
	var done []string
	for _, h := range hosts {
		id := machine[h]
		if id == "" || slices.Contains(done, id) {
			continue
		}
		done = append(done, id)
		var names []string
		for _, o := range hosts {
			if machine[o] == id {
				names = append(names, o)
			}
		}
		if len(names) > 1 {
			j.o.Logf("hosts %s are one machine (%s): one node", strings.Join(names, ", "), id)
		}
	}
}
