package comm

import (
	"testing"

	"github.com/seed-760dd1f1/cc/hw"
	"github.com/seed-760dd1f1/cc/protocols"
)

// TestLL128BuffSizeFollowsTransport: LL128's FIFO is NCCL's size on one
// host over shared memory and where the ranks talk TCP (between hosts, or
// NCCL_SHM_DISABLE=1) with a core each, and protocols.LL128NetBuffSize
// where they talk TCP and outnumber the machine's cores, unless
// NCCL_LL128_BUFFSIZE says otherwise; the other protocols keep their
// sizes. Where the ranks talk TCP with a core each, LL128's chunks are
// framed (algos.FramedChunk). An LL128 all-reduce that spans several of
// the steps runs and is right in every case.
func TestLL128BuffSizeFollowsTransport(t *testing.T) {
	nccl := protocols.LL128.DefaultBuffSize()
	cores, err := hw.Cores(hw.Root())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, layout string
		n            int
		env          map[string]string
		set          int  // NCCL_LL128_BUFFSIZE, 0: unset
		tcp          bool // the ranks talk TCP
	}{
		{"shm", "onehost", 4, nil, 0, false},
		{"tcp", "alone", 4, nil, 0, true},
		{"tcp, 2 ranks", "alone", 2, nil, 0, true},
		{"mixed", "pairs", 4, nil, 0, true},
		{"shm disabled", "onehost", 4, map[string]string{"NCCL_SHM_DISABLE": "1"}, 0, true},
		{"tcp, set", "alone", 4, map[string]string{"NCCL_LL128_BUFFSIZE": "4915200"}, 4915200, true},
		{"tcp, 2 ranks, set", "alone", 2, map[string]string{"NCCL_LL128_BUFFSIZE": "1228800"}, 1228800, true},
		{"shm, set", "onehost", 4, map[string]string{"NCCL_LL128_BUFFSIZE": "1228800"}, 1228800, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"NCCL_PROTO": "LL128", "NCCL_ALGO": "ring"}
			for k, v := range tc.env {
				env[k] = v
			}
			cs := withHosts(t, hostLayouts(tc.n)[tc.layout], testParams(t, env))
			roomy := cs[0].hostRanks <= cores // every rank of the job is on this machine
			want := tc.set
			switch {
			case want != 0:
			case tc.tcp && !roomy:
				want = protocols.LL128NetBuffSize
			default:
				want = nccl
			}
			for r, c := range cs {
				if got := c.buffSize[protocols.LL128]; got != want {
					t.Errorf("rank %d: LL128 FIFO %d bytes, want %d (%d ranks on %d cores)", r, got, want, c.hostRanks, cores)
				}
				if got, want := c.buffSize[protocols.Simple], protocols.Simple.DefaultBuffSize(); got != want {
					t.Errorf("rank %d: Simple FIFO %d bytes, want %d", r, got, want)
				}
				if got, want := c.payloadStep(protocols.LL128), protocols.LL128.Payload(want/protocols.NSteps); got != want {
					t.Errorf("rank %d: LL128 step %d payload bytes, want %d", r, got, want)
				}
				// Framed needs a core per rank too (algos.FramedLinks).
				if want := tc.tcp && roomy; c.framed != want {
					t.Errorf("rank %d: chunks framed %v, want %v (%d ranks on %d cores)", r, c.framed, want, c.hostRanks, cores)
				}
			}
			cc := collCases()[0]
			count := 3*protocols.LL128.Payload(want/protocols.NSteps)/4 + 5 // several steps of int32
			runCase(t, cs, cc, count, false)
			runCase(t, cs, cc, count, true)
		})
	}
}
