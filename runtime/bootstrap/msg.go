package bootstrap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Limits on what travels over a bootstrap connection. Every length read from the peer is
// checked against one of these before anything is allocated.
const (
	// MaxPayload is the largest AllGather contribution of one rank.
	MaxPayload = 1 << 20
	// MaxRanks is the largest job the bootstrap accepts.
	MaxRanks = 1 << 16
	// MaxInfoString bounds RankInfo.Addr, HostID, Host, Machine and CPUs.
	MaxInfoString = 1024
	// maxCause bounds an abort cause or reject reason; longer ones are cut.
	maxCause = 4096
)

// A message is an 8-byte header, then the payload:
//
//	off len field
//	  0   1 type (msgJoin..msgRollCall)
//	  1   3 reserved, zero
//	  4   4 payload length, big endian
//
// Payload fields are big-endian integers; a string is a uint16 length then bytes; a byte
// slice is a uint32 length then bytes.
const headerSize = 8

type msgType uint8

const (
	msgJoin     msgType = 1 // rank -> root: nranks, RankInfo (the rank itself is in the hello)
	msgWelcome  msgType = 2 // root -> rank: every rank's RankInfo, sent once all have joined
	msgReject   msgType = 3 // root -> rank: why the join was refused; the root then closes
	msgGather   msgType = 4 // rank -> root: round, op, data
	msgGathered msgType = 5 // root -> rank: round, every rank's data
	msgAbort    msgType = 6 // rank -> root: the cause of this rank's fatal error
	msgAborted  msgType = 7 // root -> rank: the job is aborted; which rank failed first, and why
	msgLeave    msgType = 8 // rank -> root: clean close
	msgRollCall msgType = 9 // root -> rank: the ranks that joined, before the aborted of a job aborted before the welcome
)

func (t msgType) String() string {
	names := [...]string{"", "join", "welcome", "reject", "gather", "gathered", "abort", "aborted", "leave", "roll call"}
	if int(t) < len(names) && t != 0 {
		return names[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// op says which collective a round belongs to, so that mismatched calls are caught.
type op uint8

const (
	opAllGather op = 1
	opBarrier   op = 2
)

func (o op) String() string {
	switch o {
	case opAllGather:
		return "allgather"
	case opBarrier:
		return "barrier"
	}
	return fmt.Sprintf("op(%d)", uint8(o))
}

var errProtocol = errors.New("bootstrap protocol error")

// encodeMsg frames a payload.
func encodeMsg(t msgType, payload []byte) []byte {
	b := make([]byte, headerSize, headerSize+len(payload))
	b[0] = byte(t)
	binary.BigEndian.PutUint32(b[4:], uint32(len(payload)))
	return append(b, payload...)
}

// readMsg reads one message whose payload is at most maxLen bytes.
func readMsg(r io.Reader, maxLen int) (msgType, []byte, error) {
	var h [headerSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	t, n, err := decodeHeader(h, maxLen)
	if err != nil {
		return 0, nil, err
	}
	var p []byte
	if n <= eagerAlloc {
		p = make([]byte, n)
		_, err = io.ReadFull(r, p)
	} else {
		// Grow with what actually arrives, so a header that lies about its length costs
		// no more memory than the bytes behind it.
		var b bytes.Buffer
		_, err = io.CopyN(&b, r, int64(n))
		p = b.Bytes()
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, fmt.Errorf("read %s payload: %w", t, err)
	}
	return t, p, nil
}

// eagerAlloc is the largest payload allocated in full before it arrives.
const eagerAlloc = 64 << 10

func decodeHeader(h [headerSize]byte, maxLen int) (msgType, int, error) {
	t := msgType(h[0])
	if t < msgJoin || t > msgRollCall {
		return 0, 0, fmt.Errorf("%w: unknown message %s", errProtocol, t)
	}
	if h[1]|h[2]|h[3] != 0 {
		return 0, 0, fmt.Errorf("%w: reserved header bytes %x are not zero", errProtocol, h[1:4])
	}
	n := binary.BigEndian.Uint32(h[4:])
	if uint64(n) > uint64(maxLen) {
		return 0, 0, fmt.Errorf("%w: %s payload of %d bytes, at most %d allowed", errProtocol, t, n, maxLen)
	}
	return t, int(n), nil
}

// encoder appends fields.
type encoder struct{ b []byte }

func (e *encoder) u8(v uint8)   { e.b = append(e.b, v) }
func (e *encoder) u32(v uint32) { e.b = binary.BigEndian.AppendUint32(e.b, v) }
func (e *encoder) u64(v uint64) { e.b = binary.BigEndian.AppendUint64(e.b, v) }
func (e *encoder) str(s string) {
	e.b = binary.BigEndian.AppendUint16(e.b, uint16(len(s)))
	e.b = append(e.b, s...)
}
func (e *encoder) bytes(p []byte) { e.u32(uint32(len(p))); e.b = append(e.b, p...) }

// decoder consumes fields; the first error sticks and later reads return zero values.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int, what string) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = fmt.Errorf("%w: %s needs %d bytes, %d left", errProtocol, what, n, len(d.b))
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) u8(what string) uint8 {
	if p := d.take(1, what); p != nil {
		return p[0]
	}
	return 0
}

func (d *decoder) u32(what string) uint32 {
	if p := d.take(4, what); p != nil {
		return binary.BigEndian.Uint32(p)
	}
	return 0
}

func (d *decoder) u64(what string) uint64 {
	if p := d.take(8, what); p != nil {
		return binary.BigEndian.Uint64(p)
	}
	return 0
}

func (d *decoder) str(what string, max int) string {
	p := d.take(2, what)
	if p == nil {
		return ""
	}
	n := int(binary.BigEndian.Uint16(p))
	if n > max {
		d.err = fmt.Errorf("%w: %s is %d bytes, at most %d allowed", errProtocol, what, n, max)
		return ""
	}
	return string(d.take(n, what))
}

func (d *decoder) bytes(what string, max int) []byte {
	n := d.u32(what)
	if d.err != nil {
		return nil
	}
	if uint64(n) > uint64(max) {
		d.err = fmt.Errorf("%w: %s is %d bytes, at most %d allowed", errProtocol, what, n, max)
		return nil
	}
	return d.take(int(n), what)
}

// done returns the sticky error, or an error if bytes are left over.
func (d *decoder) done(what string) error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d stray bytes after %s", errProtocol, len(d.b), what)
	}
	return d.err
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}

// rankInfo fields, without the rank.
func (e *encoder) info(ri RankInfo) {
	e.str(cut(ri.Addr, MaxInfoString))
	e.str(cut(ri.HostID, MaxInfoString))
	e.str(cut(ri.Host, MaxInfoString))
	e.u64(uint64(int64(ri.Pid)))
	e.str(cut(ri.Machine, MaxInfoString))
	e.str(cut(ri.CPUs, MaxInfoString))
}

func (d *decoder) info(rank int) RankInfo {
	return RankInfo{
		Rank:    rank,
		Addr:    d.str("addr", MaxInfoString),
		HostID:  d.str("host id", MaxInfoString),
		Host:    d.str("host", MaxInfoString),
		Pid:     int(int64(d.u64("pid"))),
		Machine: d.str("machine", MaxInfoString),
		CPUs:    d.str("cpus", MaxInfoString),
	}
}

// maxInfoBytes bounds one encoded RankInfo with its rank.
const maxInfoBytes = 4 + 5*(2+MaxInfoString) + 8

// join: nranks u32, info.
func encodeJoin(nranks int, me RankInfo) []byte {
	var e encoder
	e.u32(uint32(nranks))
	e.info(me)
	return encodeMsg(msgJoin, e.b)
}

func decodeJoin(p []byte, rank int) (nranks int, ri RankInfo, err error) {
	d := decoder{b: p}
	nranks = int(d.u32("nranks"))
	ri = d.info(rank)
	return nranks, ri, d.done("join")
}

// welcome: n u32, n x (rank u32, info).
func encodeWelcome(peers []RankInfo) []byte {
	var e encoder
	e.u32(uint32(len(peers)))
	for _, p := range peers {
		e.u32(uint32(p.Rank))
		e.info(p)
	}
	return encodeMsg(msgWelcome, e.b)
}

func decodeWelcome(p []byte, nranks int) ([]RankInfo, error) {
	d := decoder{b: p}
	if n := int(d.u32("rank count")); d.err == nil && n != nranks {
		return nil, fmt.Errorf("%w: welcome lists %d ranks, want %d", errProtocol, n, nranks)
	}
	peers := make([]RankInfo, 0, nranks)
	for i := 0; i < nranks && d.err == nil; i++ {
		if r := int(d.u32("rank")); d.err == nil && r != i {
			return nil, fmt.Errorf("%w: welcome entry %d is rank %d", errProtocol, i, r)
		}
		peers = append(peers, d.info(i))
	}
	return peers, d.done("welcome")
}

func maxWelcome(nranks int) int { return 4 + nranks*maxInfoBytes }

// reject and abort: one string.
func encodeText(t msgType, s string) []byte {
	var e encoder
	e.str(cut(s, maxCause))
	return encodeMsg(t, e.b)
}

func decodeText(p []byte, what string) (string, error) {
	d := decoder{b: p}
	s := d.str(what, maxCause)
	return s, d.done(what)
}

const maxText = 2 + maxCause

// gather: round u64, op u8, data.
func encodeGather(round uint64, o op, data []byte) []byte {
	var e encoder
	e.u64(round)
	e.u8(uint8(o))
	e.bytes(data)
	return encodeMsg(msgGather, e.b)
}

func decodeGather(p []byte) (round uint64, o op, data []byte, err error) {
	d := decoder{b: p}
	round = d.u64("round")
	o = op(d.u8("op"))
	data = d.bytes("data", MaxPayload)
	if err := d.done("gather"); err != nil {
		return 0, 0, nil, err
	}
	if o != opAllGather && o != opBarrier {
		return 0, 0, nil, fmt.Errorf("%w: unknown collective %s", errProtocol, o)
	}
	return round, o, data, nil
}

const maxGather = 8 + 1 + 4 + MaxPayload

// gathered: round u64, n u32, n x data.
func encodeGathered(round uint64, parts [][]byte) []byte {
	var e encoder
	e.u64(round)
	e.u32(uint32(len(parts)))
	for _, p := range parts {
		e.bytes(p)
	}
	return encodeMsg(msgGathered, e.b)
}

func decodeGathered(p []byte, nranks int) (uint64, [][]byte, error) {
	d := decoder{b: p}
	round := d.u64("round")
	if n := int(d.u32("part count")); d.err == nil && n != nranks {
		return 0, nil, fmt.Errorf("%w: round %d has %d parts, want %d", errProtocol, round, n, nranks)
	}
	parts := make([][]byte, 0, nranks)
	for i := 0; i < nranks && d.err == nil; i++ {
		parts = append(parts, d.bytes("data", MaxPayload))
	}
	if err := d.done("gathered"); err != nil {
		return 0, nil, err
	}
	return round, parts, nil
}

func maxGathered(nranks int) int { return 8 + 4 + nranks*(4+MaxPayload) }

// aborted: rank u32, how u8, host, pid u64, cause.
func encodeAborted(e *RankError) []byte {
	var enc encoder
	enc.u32(uint32(e.Rank))
	enc.u8(uint8(e.How))
	enc.str(cut(e.Host, MaxInfoString))
	enc.u64(uint64(int64(e.Pid)))
	enc.str(cut(e.Cause, maxCause))
	return encodeMsg(msgAborted, enc.b)
}

func decodeAborted(p []byte, nranks int) (*RankError, error) {
	d := decoder{b: p}
	e := &RankError{
		Rank: int(d.u32("rank")),
		How:  Failure(d.u8("how")),
		Host: d.str("host", MaxInfoString),
		Pid:  int(int64(d.u64("pid"))),
	}
	e.Cause = d.str("cause", maxCause)
	if err := d.done("aborted"); err != nil {
		return nil, err
	}
	if e.Rank < 0 || e.Rank >= nranks {
		return nil, fmt.Errorf("%w: abort names rank %d of %d", errProtocol, e.Rank, nranks)
	}
	if e.How < Failed || e.How > LeftEarly {
		return nil, fmt.Errorf("%w: abort has unknown kind %d", errProtocol, uint8(e.How))
	}
	return e, nil
}

const maxAborted = 4 + 1 + 2 + MaxInfoString + 8 + 2 + maxCause

// roll call: n u32, n x (rank u32, host), ranks ascending.
func encodeRollCall(joined []RankInfo) []byte {
	var e encoder
	e.u32(uint32(len(joined)))
	for _, ri := range joined {
		e.u32(uint32(ri.Rank))
		e.str(cut(ri.Host, MaxInfoString))
	}
	return encodeMsg(msgRollCall, e.b)
}

// decodeRollCall returns the ranks that joined, with Rank and Host set.
func decodeRollCall(p []byte, nranks int) ([]RankInfo, error) {
	d := decoder{b: p}
	n := int(d.u32("rank count"))
	if d.err == nil && n > nranks {
		return nil, fmt.Errorf("%w: roll call lists %d ranks of %d", errProtocol, n, nranks)
	}
	joined := make([]RankInfo, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		r := int(d.u32("rank"))
		if d.err == nil && (r >= nranks || i > 0 && r <= joined[i-1].Rank) {
			return nil, fmt.Errorf("%w: roll call entry %d is rank %d of %d, out of order or range", errProtocol, i, r, nranks)
		}
		joined = append(joined, RankInfo{Rank: r, Host: d.str("host", MaxInfoString)})
	}
	return joined, d.done("roll call")
}

func maxRollCall(nranks int) int { return 4 + nranks*(4+2+MaxInfoString) }

// maxFromRoot bounds any message a rank reads from the root of an nranks job.
func maxFromRoot(nranks int) int {
	return max(maxWelcome(nranks), maxGathered(nranks), maxAborted, maxText, maxRollCall(nranks))
}

// maxFromRank bounds any message the root reads from a rank.
const maxFromRank = max(4+maxInfoBytes, maxGather, maxText)
