//go:build linux

package shm

import (
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/seed-760dd1f1/cc/protocols"
)

// A segment is laid out as
//
//	[0, headerBytes)          header: geometry, one owner entry per local rank, one call descriptor entry per local rank
//	[ctlOff, mcastCtlOff)     one control block per connection
//	[mcastCtlOff, fifoOff)    one control block per multicast region (none without NVLS)
//	[fifoOff, mcastOff)       the FIFOs: per channel, per directed pair, Simple, LL, LL128
//	[mcastOff, oneShotOff)    the multicast regions: per channel, per local rank (its head)
//	[oneShotOff, size)        the one-shot area (oneshot.go): a sequence line per local rank, then two slots each
//
// Every region starts on a page; each FIFO is a whole number of pages, so a
// FIFO that is never used costs no memory (tmpfs allocates on first touch).
const (
	pageSize = 4096

	// segMagic opens a valid header ("ccshmv01" in memory order); it is
	// stored last, so a header with the magic is complete.
	segMagic   uint64 = 0x3130766d68736363
	segVersion uint32 = 3 // 2: the call descriptors (desc.go) after the owners; 3: the one-shot area

	// Header fields.
	hMagic    = 0
	hVersion  = 8  // uint32
	hNRanks   = 12 // uint32
	hChannels = 16 // uint32
	hBuff     = 24 // [3]uint64, in layoutOrder
	hSize     = 48
	hCreated  = 56 // unix nanoseconds
	hMcast    = 64 // uint64: bytes of one multicast slot (0: no multicast regions)
	hOneShot  = 72 // uint64: bytes of one one-shot slot (0: no one-shot area)
	hOwners   = 128

	// An owner entry: the process of one local rank. It is claimed (CAS
	// on oClaim), filled, and its pid stored last.
	ownerBytes = 32
	oPid       = 0
	oStart     = 8  // start time, clock ticks since boot (/proc/<pid>/stat field 22)
	oPidNS     = 16 // inode of its pid namespace
	oClaim     = 24

	// A connection's control block. Words written by different sides sit
	// on different cache-line pairs.
	ctlBytes  = 384
	cTail     = 0   // uint64, written by the sender: steps posted (Simple only)
	cTailWait = 64  // uint32, set by the receiver while it sleeps
	cTailSeq  = 68  // uint32, the receiver's futex word: bumped to wake it
	cHead     = 128 // uint64, written by the receiver: steps freed
	cHeadWait = 192 // uint32, set by the sender while it sleeps
	cHeadSeq  = 196 // uint32, the sender's futex word
	cSizes    = 256 // [NSteps]uint64: bytes<<4 | nsteps of the slice starting in each slot

	// A multicast region's control block (see mcast.go): the writer's
	// words, then one reader entry per local rank.
	mTail       = 0   // uint64, written by the head: steps posted
	mHeadWait   = 64  // uint32, set by the head while it sleeps
	mHeadSeq    = 68  // uint32, the head's futex word
	mSizes      = 128 // [NSteps]uint64, as cSizes
	mReaders    = 256 // the reader entries
	readerBytes = 128
	rHead       = 0  // uint64, written by the reader: steps freed
	rTailWait   = 64 // uint32, set by the reader while it sleeps
	rTailSeq    = 68 // uint32, the reader's futex word

	// maxLocalRanks bounds LocalNRanks (NCCL allows 72).
	maxLocalRanks = 1024
	// maxSegment bounds the segment size (64 TiB), far above any /dev/shm.
	maxSegment = 1 << 46
)

// geometry is the segment's layout, a pure function of the local rank
// count, the channel count and the three buffer sizes.
type geometry struct {
	nranks, channels int
	buff             [protocols.NumProtos]int
	stepBytes        [protocols.NumProtos]int // one slot in the FIFO (whole lines)
	fifoBytes        [protocols.NumProtos]int // NSteps slots, rounded up to pages
	pairBytes        int                      // the three FIFOs of one directed pair and channel
	headerBytes      int
	ctlOff, fifoOff  int
	size             int64

	mcastStep     int   // bytes of one multicast slot; 0: no multicast regions
	mcastCtlBytes int   // one multicast region's control block
	mcastCtlOff   int   // the first of them
	mcastBytes    int64 // one multicast region: NSteps slots, rounded up to pages
	mcastOff      int64 // the first of them

	oneShotSlot  int   // bytes of one one-shot slot, as asked (0: no one-shot area)
	oneShotStep  int64 // one slot's place: oneShotSlot rounded up to pages
	oneShotOff   int64 // the sequence lines, one per local rank
	oneShotSlots int64 // the slots: per local rank, two
}

// layoutOrder is the order of the protocols in a segment: the header's
// buffer sizes, and each pair's control blocks and FIFOs. It is part of the
// segment format (segVersion 1), so it stays Simple, LL, LL128 whatever
// protocols.Proto's numbering.
var layoutOrder = [protocols.NumProtos]protocols.Proto{protocols.Simple, protocols.LL, protocols.LL128}

// layoutSlot is p's position in layoutOrder; p must be valid.
func layoutSlot(p protocols.Proto) int {
	for i, q := range layoutOrder {
		if q == p {
			return i
		}
	}
	panic(fmt.Sprintf("shm: protocol %v has no place in the segment", p))
}

var protoKnob = [protocols.NumProtos]string{
	protocols.Simple: "NCCL_BUFFSIZE",
	protocols.LL:     "NCCL_LL_BUFFSIZE",
	protocols.LL128:  "NCCL_LL128_BUFFSIZE",
}

func newGeometry(nranks, channels int, buff [protocols.NumProtos]int, mcastStep int) (geometry, error) {
	g := geometry{nranks: nranks, channels: channels, buff: buff, mcastStep: mcastStep}
	if mcastStep < 0 || mcastStep > 1<<30 || mcastStep%16 != 0 {
		return g, fmt.Errorf("multicast slot of %d bytes (NCCL_NVLS_CHUNKSIZE): want a multiple of 16 up to %d", mcastStep, 1<<30)
	}
	if nranks < 1 || nranks > maxLocalRanks {
		return g, fmt.Errorf("local rank count %d: want 1..%d", nranks, maxLocalRanks)
	}
	if channels < 1 || channels > 1<<16 {
		return g, fmt.Errorf("channel count %d: want 1..%d", channels, 1<<16)
	}
	for _, p := range layoutOrder {
		step := buff[p] / protocols.NSteps
		if p.Payload(step) < 1 {
			return g, fmt.Errorf("%s buffer size %d (%s): want at least %d bytes (%d steps of one %d-byte line)",
				p, buff[p], protoKnob[p], protocols.NSteps*p.LineBytes(), protocols.NSteps, p.LineBytes())
		}
		if buff[p] > 1<<34 {
			return g, fmt.Errorf("%s buffer size %d (%s): want at most %d bytes", p, buff[p], protoKnob[p], 1<<34)
		}
		g.stepBytes[p] = step / p.LineBytes() * p.LineBytes()
		g.fifoBytes[p] = roundUp(protocols.NSteps*g.stepBytes[p], pageSize)
		g.pairBytes += g.fifoBytes[p]
	}
	g.headerBytes = roundUp(descOff(nranks)+nranks*descBytes, pageSize)
	g.ctlOff = g.headerBytes
	nconn := int64(g.nconns())
	g.mcastCtlOff = g.ctlOff + roundUp(int(nconn)*ctlBytes, pageSize)
	nmcast := int64(g.nmcast())
	if nmcast > 0 {
		g.mcastCtlBytes = mReaders + nranks*readerBytes
		g.mcastBytes = int64(roundUp(protocols.NSteps*mcastStep, pageSize))
	}
	g.fifoOff = g.mcastCtlOff + roundUp(int(nmcast)*g.mcastCtlBytes, pageSize)
	npairs := int64(channels) * int64(nranks) * int64(nranks-1)
	g.mcastOff = int64(g.fifoOff) + npairs*int64(g.pairBytes)
	g.size = g.mcastOff + nmcast*g.mcastBytes
	if g.size > maxSegment {
		var sizes [protocols.NumProtos]int
		for i, p := range layoutOrder {
			sizes[i] = buff[p]
		}
		return g, fmt.Errorf("segment of %d bytes for %d local ranks, %d channels and buffer sizes %v: want at most %d", g.size, nranks, channels, sizes, int64(maxSegment))
	}
	return g, nil
}

// addOneShot appends the one-shot area of slots of slot bytes each to the
// segment (oneshot.go); 0 adds none.
func (g *geometry) addOneShot(slot int) error {
	if slot == 0 || g.nranks < 2 {
		return nil
	}
	if slot < 0 || slot > 1<<30 || slot%oneShotAlign != 0 {
		return fmt.Errorf("one-shot slot of %d bytes (CC_ONESHOT_BYTES): want a multiple of %d up to %d", slot, oneShotAlign, 1<<30)
	}
	g.oneShotSlot = slot
	g.oneShotStep = int64(roundUp(slot, pageSize))
	g.oneShotOff = g.size
	g.oneShotSlots = g.oneShotOff + int64(roundUp(g.nranks*oneShotLine, pageSize))
	g.size = g.oneShotSlots + int64(g.nranks)*2*g.oneShotStep
	if g.size > maxSegment {
		return fmt.Errorf("segment of %d bytes with one-shot slots of %d bytes (CC_ONESHOT_BYTES) for %d local ranks: want at most %d", g.size, slot, g.nranks, int64(maxSegment))
	}
	return nil
}

// oneShotSlotOff is the offset of local rank r's one-shot slot of parity
// q (0 or 1).
func (g *geometry) oneShotSlotOff(r, q int) int64 {
	return g.oneShotSlots + int64(2*r+q)*g.oneShotStep
}

func (g *geometry) nconns() int {
	return g.channels * g.nranks * (g.nranks - 1) * protocols.NumProtos
}

// nmcast is the number of multicast regions: one per channel and local
// rank, when the segment has them.
func (g *geometry) nmcast() int {
	if g.mcastStep == 0 || g.nranks < 2 {
		return 0
	}
	return g.channels * g.nranks
}

// mcastCtl and mcastFifo are the offsets of head's multicast region's
// control block and slots on channel ch.
func (g *geometry) mcastCtl(ch, head int) int {
	return g.mcastCtlOff + (ch*g.nranks+head)*g.mcastCtlBytes
}

func (g *geometry) mcastFifo(ch, head int) int64 {
	return g.mcastOff + int64(ch*g.nranks+head)*g.mcastBytes
}

// pair numbers the directed pair from -> to on channel ch.
func (g *geometry) pair(ch, from, to int) int {
	t := to
	if to > from {
		t--
	}
	return (ch*g.nranks+from)*(g.nranks-1) + t
}

// check validates a connection's coordinates.
func (g *geometry) check(ch, from, to int, p protocols.Proto) error {
	switch {
	case g.nranks < 2:
		return fmt.Errorf("no shared-memory connections with a single local rank")
	case ch < 0 || ch >= g.channels:
		return fmt.Errorf("channel %d: want 0..%d", ch, g.channels-1)
	case from < 0 || from >= g.nranks || to < 0 || to >= g.nranks:
		return fmt.Errorf("local ranks %d -> %d: want 0..%d", from, to, g.nranks-1)
	case from == to:
		return fmt.Errorf("local rank %d cannot connect to itself", from)
	case !p.Valid():
		return fmt.Errorf("protocol %v: want Simple, LL or LL128", p)
	}
	return nil
}

// ctl is the offset of a connection's control block.
func (g *geometry) ctl(ch, from, to int, p protocols.Proto) int {
	return g.ctlOff + (g.pair(ch, from, to)*protocols.NumProtos+layoutSlot(p))*ctlBytes
}

// fifo is the offset of a connection's FIFO.
func (g *geometry) fifo(ch, from, to int, p protocols.Proto) int64 {
	off := int64(g.fifoOff) + int64(g.pair(ch, from, to))*int64(g.pairBytes)
	for _, q := range layoutOrder[:layoutSlot(p)] {
		off += int64(g.fifoBytes[q])
	}
	return off
}

func roundUp(n, m int) int { return (n + m - 1) / m * m }

// namePrefix starts the name of every segment, so CleanStale finds them.
const namePrefix = "cc-shm-"

// segmentName is the file name of a job's segment on a host: readable
// parts of both, and a hash of the exact strings so that two ids that read
// alike never share a name.
func segmentName(job, host string) string {
	h := fnv.New64a()
	h.Write([]byte(job))
	h.Write([]byte{0})
	h.Write([]byte(host))
	return fmt.Sprintf("%s%s-%s-%016x", namePrefix, readable(job), readable(host), h.Sum64())
}

// readable keeps at most 40 bytes of s, letters, digits, '.', '_' and '-'.
func readable(s string) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < 40; i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
			b.WriteByte(c)
		default:
			b.WriteByte('_')
		}
	}
	return b.String()
}
