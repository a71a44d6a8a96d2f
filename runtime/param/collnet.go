package param

// CollNet Direct's knobs: NCCL's NCCL_COLLNET_ENABLE, and the aggregation
// server's address and the heads per host, which NCCL takes from the
// network plugin and the topology (wave2-algorithms-design.md §2.4).

import (
	"errors"
	"net"
	"strconv"
)

// collnetKnobs are the table's rows for CollNet, appended to knobs.
var collnetKnobs = []knob{
	boolKnob("NCCL_COLLNET_ENABLE", "0", "1 lets CollNet Direct run when an aggregation server is given (CC_COLLNET_SERVER); 0, as in NCCL, keeps it off",
		func(p *Params, b bool) { p.CollNetEnable = b }),
	{
		name: "CC_COLLNET_SERVER", kind: KindString, allowed: "host:port",
		doc: "the CollNet aggregation server (ccrun --collnet-server sets it); unset: CollNet cannot run",
		parse: func(p *Params, v string) error {
			host, port, err := net.SplitHostPort(v)
			if err != nil {
				return errors.New("want host:port")
			}
			if n, err := strconv.Atoi(port); host == "" || err != nil || n < 1 || n > 65535 {
				return errors.New("want host:port with a host and a port in 1..65535")
			}
			p.CollNetServer = v
			return nil
		},
	},
	intKnob("CC_COLLNET_NHEADS", "0", 0, 8, "heads per host of CollNet Direct all-reduce; 0: min(ranks of the smallest host, 8). Reduce-scatter and all-gather make every rank a head",
		func(p *Params, n int) { p.CollNetNHeads = n }),
}
