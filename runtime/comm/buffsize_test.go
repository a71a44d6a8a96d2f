package comm

import (
	"testing"

	"github.com/seed-760dd1f1/cc/hw"
	"github.com/seed-760dd1f1/cc/protocols"
)

// TestLL128BuffSizeFollowsTransport: LL128's FIFO is NCCL's size on one
// host over shared memory and protocols.LL128NetBuffSize where the ranks
// talk TCP (between hosts, or NCCL_SHM_DISABLE=1), unless
// NCCL_LL128_BUFFSIZE says otherwise; the other protocols keep their
// sizes. Where the ranks talk TCP, LL128's chunks are framed
// (algos.FramedChunk). An LL128 all-reduce that spans several of the
// smaller steps runs and is right in every case.
func TestLL128BuffSizeFollowsTransport(t *testing.T) {
	nccl := protocols.LL128.DefaultBuffSize()
	cores, err := hw.Cores(hw.Root())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, layout string
		env          map[string]string
		want         int
		framed       bool
	}{
		{"shm", "onehost", nil, nccl, false},
		{"tcp", "alone", nil, protocols.LL128NetBuffSize, true},
		{"mixed", "pairs", nil, protocols.LL128NetBuffSize, true},
		{"shm disabled", "onehost", map[string]string{"NCCL_SHM_DISABLE": "1"}, protocols.LL128NetBuffSize, true},
		{"tcp, set", "alone", map[string]string{"NCCL_LL128_BUFFSIZE": "4915200"}, 4915200, true},
		{"shm, set", "onehost", map[string]string{"NCCL_LL128_BUFFSIZE": "1228800"}, 1228800, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"NCCL_PROTO": "LL128", "NCCL_ALGO": "ring"}
			for k, v := range tc.env {
				env[k] = v
			}
			cs := withHosts(t, hostLayouts(4)[tc.layout], testParams(t, env))
			for r, c := range cs {
				if got := c.buffSize[protocols.LL128]; got != tc.want {
					t.Errorf("rank %d: LL128 FIFO %d bytes, want %d", r, got, tc.want)
				}
				if got, want := c.buffSize[protocols.Simple], protocols.Simple.DefaultBuffSize(); got != want {
					t.Errorf("rank %d: Simple FIFO %d bytes, want %d", r, got, want)
				}
				if got, want := c.payloadStep(protocols.LL128), protocols.LL128.Payload(tc.want/protocols.NSteps); got != want {
					t.Errorf("rank %d: LL128 step %d payload bytes, want %d", r, got, want)
				}
				// Framed needs a core per rank too (algos.FramedLinks).
				if want := tc.framed && c.hostRanks <= cores; c.framed != want {
					t.Errorf("rank %d: chunks framed %v, want %v (%d ranks on %d cores)", r, c.framed, want, c.hostRanks, cores)
				}
			}
			cc := collCases()[0]
			count := 3*protocols.LL128.Payload(tc.want/protocols.NSteps)/4 + 5 // several steps of int32
			runCase(t, cs, cc, count, false)
			runCase(t, cs, cc, count, true)
		})
	}
}
