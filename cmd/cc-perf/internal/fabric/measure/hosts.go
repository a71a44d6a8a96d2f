package measure

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/fabric"
	"github.com/seed-760dd1f1/cc/hw"
	"github.com/seed-760dd1f1/cc/runtime/comm"
)

// Hosts returns the job's hosts in rank order (host i is rank i): each
// rank's host name, the address its rank listens on (the one it
// bootstrapped with), its rank and boot id. Every rank calls it, like a
// collective, and gets the same list.
//
// The name is the runtime's host identity: the host name up to its first
// dot, or CC_HOST_ID where that names the host (tests give each rank of
// one machine its own); the boot id is read on each rank.
func Hosts(c *comm.Comm) ([]fabric.Host, error) {
	boot, err := os.ReadFile("/" + hw.BootIDFile)
	if err != nil {
		err = fmt.Errorf("rank %d: %w", c.Rank(), err)
		c.Abort(err) // the others must not wait for this rank's boot id
		return nil, err
	}
	all, err := allGather(c, []byte(strings.TrimSpace(string(boot))))
	if err != nil {
		return nil, err
	}
	hosts := make([]fabric.Host, c.NRanks())
	for _, p := range c.Peers() {
		addr, _, err := net.SplitHostPort(p.Addr)
		if err != nil {
			addr = p.Addr
		}
		hosts[p.Rank] = fabric.Host{Name: hostName(p.HostID), Addr: addr, Rank: p.Rank, BootID: string(all[p.Rank])}
	}
	return hosts, nil
}

// hostName is the host a runtime host identity names: "node1.example.com/<boot
// id>" (hw.HostID) is node1; any other identity (CC_HOST_ID) is itself.
func hostName(id string) string {
	name, boot, ok := strings.Cut(id, "/")
	if !ok {
		return id
	}
	if _, err := hw.ParseHostID(name, boot); err != nil {
		return id
	}
	name, _, _ = strings.Cut(name, ".")
	return name
}

// DuplicateHosts names the hosts of c's job that run more than one rank,
// with their ranks ("tb1 (ranks 0, 1)"); none when each host runs one.
func DuplicateHosts(c *comm.Comm) []string {
	ranks := map[string][]string{}
	var order []string
	for _, p := range c.Peers() {
		if ranks[p.HostID] == nil {
			order = append(order, p.HostID)
		}
		ranks[p.HostID] = append(ranks[p.HostID], fmt.Sprint(p.Rank))
	}
	var out []string
	for _, id := range order {
		if rs := ranks[id]; len(rs) > 1 {
			out = append(out, fmt.Sprintf("%s (ranks %s)", hostName(id), strings.Join(rs, ", ")))
		}
	}
	return out
}

// marshal is json.Marshal of plain data, which cannot fail.
func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}
