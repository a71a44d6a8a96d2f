package protocols

import "fmt"

// NSteps is NCCL_STEPS (NVIDIA/nccl src/include/device.h), a compile-time
// constant, not a knob: every connection's FIFO has NSteps slots of
// buffSize/NSteps bytes, whatever the protocol, and chunks and slices are
// counted in these slots (steps).
const NSteps = 8

// Proto is a protocol, numbered in NCCL's order (NCCL_PROTO_LL = 0,
// NCCL_PROTO_LL128 = 1, NCCL_PROTO_SIMPLE = 2), so that it indexes NCCL's
// [algo][proto] tables and NCCL_PROTO's bit sets the way NCCL's does.
type Proto uint8

// The protocols.
const (
	LL Proto = iota
	LL128
	Simple

	// NumProtos is the number of protocols.
	NumProtos = int(Simple) + 1
)

var names = [NumProtos]string{LL: "LL", LL128: "LL128", Simple: "Simple"}

// String returns NCCL's name for the protocol: "Simple", "LL" or "LL128".
func (p Proto) String() string {
	if int(p) >= NumProtos {
		return fmt.Sprintf("Proto(%d)", uint8(p))
	}
	return names[p]
}

// Valid reports whether p is one of the three protocols.
func (p Proto) Valid() bool { return int(p) < NumProtos }

// DefaultBuffSize is NCCL's default FIFO size of one connection in bytes
// (NVIDIA/nccl src/init.cc):
//
//	Simple  DEFAULT_BUFFSIZE       = 1 << 22                       = 4194304
//	LL      DEFAULT_LL_BUFFSIZE    = 8 lines/thread x 512 threads
//	                                 x 8 steps x 16 B              = 524288
//	LL128   DEFAULT_LL128_BUFFSIZE = 120 elems/thread x 640 threads
//	                                 x 8 steps x 8 B               = 4915200
func (p Proto) DefaultBuffSize() int {
	switch p {
	case Simple:
		return 1 << 22
	case LL:
		return 8 * 512 * 8 * LLLineBytes
	case LL128:
		return 120 * 640 * 8 * 8
	}
	return 0
}

// LL128NetBuffSize is the LL128 FIFO size cc uses by default where a job's
// ranks talk TCP and some machine of the job has more ranks than cores: 8
// steps of 144000 payload bytes instead of NCCL's 576000. Over TCP an
// LL128 step is one frame with its payload as it is, and the engine cuts
// an Op into slices of at most a step. Where every rank has a core, the
// chunk is cut for frames instead (algos.FramedChunk), and NCCL's size is
// faster: 2 ranks on one machine over TCP (NCCL_SHM_DISABLE=1), 6
// interleaved pairs, medians, 2026-11-29 (frames aligned): 0.80-0.95x
// the time at 1-16 MiB for all-reduce, all-gather and reduce-scatter,
// 0.92-1.11x at 256-512 KiB. Where ranks outnumber the cores that
// cutting does not apply, and the smaller steps pipeline: 4 ranks on 4
// fake hosts on 2 cores, 4 interleaved pairs, a FIFO of twice this size
// (2457600) cost 1.05-1.13x at 512 KiB-1 MiB. On shared memory the
// smaller size costs: a ring all-reduce of 2 ranks took 1.5-2.4x NCCL's
// size's time at 32 KiB-8 MiB (4x the flag handshakes), so jobs on one
// host over shared memory keep NCCL's size.
const LL128NetBuffSize = 1228800

// DefaultBuffSizeFor is the FIFO size of protocol p where the user set
// none: DefaultBuffSize, but LL128NetBuffSize for LL128 when the job's
// ranks talk TCP (tcp) and not every machine of the job has a core per
// rank (roomy).
func (p Proto) DefaultBuffSizeFor(tcp, roomy bool) int {
	if p == LL128 && tcp && !roomy {
		return LL128NetBuffSize
	}
	return p.DefaultBuffSize()
}

// LineBytes is the size of the protocol's line in the FIFO: 16 for LL, 128
// for LL128, and 1 for Simple, which has no lines.
func (p Proto) LineBytes() int {
	switch p {
	case LL:
		return LLLineBytes
	case LL128:
		return LL128LineBytes
	}
	return 1
}

// LinePayload is the number of payload bytes one line carries: 8 for LL,
// 120 for LL128, 1 for Simple.
func (p Proto) LinePayload() int {
	switch p {
	case LL:
		return LLLinePayload
	case LL128:
		return LL128LinePayload
	}
	return 1
}

// Payload is the number of payload bytes one FIFO step of stepBytes bytes
// carries: whole lines only, each line's flags subtracted. For example, with
// NCCL's defaults (stepBytes = buffSize/8):
//
//	Simple.Payload(524288) = 524288
//	LL.Payload(65536)      = 4096 lines x 8   = 32768
//	LL128.Payload(614400)  = 4800 lines x 120 = 576000
//
// It is 0 for a step smaller than one line.
func (p Proto) Payload(stepBytes int) int {
	if stepBytes <= 0 || !p.Valid() {
		return 0
	}
	return stepBytes / p.LineBytes() * p.LinePayload()
}

// Grain is NCCL's ncclProtoGrainSize (NVIDIA/nccl src/include/device.h),
// the unit chunk sizes are rounded down to, in payload bytes:
//
//	Simple  512
//	LL      16                                  (two lines' payload)
//	LL128   1920 = 32 threads x 8 words / 16 x 15 data words x 8 B
func (p Proto) Grain() int {
	switch p {
	case Simple:
		return 512
	case LL:
		return 16
	case LL128:
		return 32 * 8 / LL128LineWords * (LL128LineWords - 1) * 8
	}
	return 0
}

// Lines is the number of lines the protocol needs to carry n payload bytes
// (for Simple, n itself).
func (p Proto) Lines(n int) int {
	if n <= 0 {
		return 0
	}
	lp := p.LinePayload()
	return (n + lp - 1) / lp
}
