// Package collnet is the CollNet Direct aggregation server and the heads'
// end of it: the switch that reduces, played by a process (design §7;
// shared/reference/wave2-algorithms-design.md §2.4).
//
// The server listens on one TCP address. Every head of a communicator
// (algos.CollNetAllReduce and friends) dials it once per channel with the
// runtime's handshake (wire.KindCollNet, the job's id and secret: a
// stranger or a wrong secret is dropped with one log line), then sends a
// Join record saying which communicator, rail (head index), channel and
// host it is. Once every host's head of a (communicator, rail, channel)
// has joined, the server serves that group:
//
//	for every collective:
//		each head sends a Desc (sequence number, collective, type, op,
//		count, part, chunk, hosts, heads); the server checks that all agree
//		and answers each with an Ack (or an error for every one of them)
//		the server runs algos.CollNetServer for the rail with the engine:
//		what each host's head sends is reduced in host order and returned
//
// Data, descriptors and acks travel as FIFO slices of the TCP transport
// (tcp.Duplex: one socket, both directions). Avg and premulsum reach the
// server as sum; the heads apply the pre- and post-operations, as NCCL's
// network plugin is given ncclSum.
//
// Usage, server side (ccrun's hidden collnet-server mode, tests):
//
//	s, err := collnet.Listen(collnet.Options{Job: job, Addr: ":0", Logf: log.Printf})
//	defer s.Close()
//
// Head side (runtime/comm): Dial, then per collective Begin before the
// engine runs the schedule over Sender and Receiver.
package collnet

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
	"github.com/seed-760dd1f1/cc/runtime/wire"
)

// Name is how errors and logs name the server.
const Name = "collnet aggregation server"

var (
	joinMagic = [4]byte{'C', 'C', 'N', 'J'}
	descMagic = [4]byte{'C', 'C', 'N', 'D'}
	ackMagic  = [4]byte{'C', 'C', 'N', 'A'}
)

// Sizes of the records. A Desc and an Ack are each one FIFO slice, so the
// smallest Simple slot (NCCL_BUFFSIZE 1024 / 8 = 128 bytes) must hold them.
const (
	JoinSize = 40 + wire.MaxJobIDLen
	DescSize = 80
	AckSize  = 128
)

// maxAckText is the longest error text an Ack carries.
const maxAckText = AckSize - 7

// Join is what a head says after the handshake: where it belongs.
type Join struct {
	Comm      string // the communicator's job id (distinct per Split)
	Rank      int    // the head's rank
	NNodes    int    // hosts of the communicator
	Node      int    // the head's host index
	Rail      int    // the head's index among its host's ranks
	Channel   int
	StepBytes int // bytes of one FIFO slot of the connection
}

// Encode returns the Join record.
func (j Join) Encode() ([JoinSize]byte, error) {
	var b [JoinSize]byte
	if err := j.check(); err != nil {
		return b, err
	}
	copy(b[:], joinMagic[:])
	for i, v := range []int{j.Rank, j.NNodes, j.Node, j.Rail, j.Channel, j.StepBytes} {
		binary.BigEndian.PutUint32(b[4+4*i:], uint32(v))
	}
	b[28] = byte(len(j.Comm))
	copy(b[40:], j.Comm)
	return b, nil
}

// DecodeJoin parses and checks a Join record.
func DecodeJoin(b []byte) (Join, error) {
	if len(b) != JoinSize {
		return Join{}, fmt.Errorf("join record of %d bytes, want %d", len(b), JoinSize)
	}
	if !bytes.Equal(b[:4], joinMagic[:]) {
		return Join{}, fmt.Errorf("join record starts %q, want %q", b[:4], joinMagic[:])
	}
	var v [6]int
	for i := range v {
		v[i] = int(int32(binary.BigEndian.Uint32(b[4+4*i:])))
	}
	n := int(b[28])
	if n > wire.MaxJobIDLen {
		return Join{}, fmt.Errorf("join record: communicator id of %d bytes, at most %d", n, wire.MaxJobIDLen)
	}
	if !zero(b[29:40]) || !zero(b[40+n:]) {
		return Join{}, errors.New("join record: padding is not zero")
	}
	j := Join{Rank: v[0], NNodes: v[1], Node: v[2], Rail: v[3], Channel: v[4], StepBytes: v[5], Comm: string(b[40 : 40+n])}
	return j, j.check()
}

func (j Join) check() error {
	switch {
	case len(j.Comm) > wire.MaxJobIDLen:
		return fmt.Errorf("join: communicator id of %d bytes, at most %d", len(j.Comm), wire.MaxJobIDLen)
	case j.Rank < 0:
		return fmt.Errorf("join: rank %d: want >= 0", j.Rank)
	case j.NNodes < 1 || j.NNodes > algos.MaxFan:
		return fmt.Errorf("join: %d hosts: want 1..%d", j.NNodes, algos.MaxFan)
	case j.Node < 0 || j.Node >= j.NNodes:
		return fmt.Errorf("join: host %d of %d", j.Node, j.NNodes)
	case j.Rail < 0 || j.Rail >= algos.MaxCollNetHeads:
		return fmt.Errorf("join: rail %d: want 0..%d", j.Rail, algos.MaxCollNetHeads-1)
	case j.Channel < 0:
		return fmt.Errorf("join: channel %d: want >= 0", j.Channel)
	case j.StepBytes < AckSize || j.StepBytes > 1<<30:
		return fmt.Errorf("join: FIFO slots of %d bytes: want %d..%d", j.StepBytes, AckSize, 1<<30)
	}
	return nil
}

// Desc describes one collective to the server; every host's head of a
// rail must send the same.
type Desc struct {
	Seq        uint64 // the communicator's CollNet collectives so far
	Coll       algos.Coll
	Type       reduce.DataType
	Op         reduce.Op // what the server reduces with: sum for avg and premulsum
	NNodes     int
	NHeads     int   // heads (rails) per host
	Count      int64 // the collective's count (of a block for reduce-scatter and all-gather)
	Part       algos.Part
	ChunkSteps int
	SliceSteps int
}

// ServerOp is the reduction the network applies for op: sum for avg and
// premulsum, whose pre- and post-operations the heads apply.
func ServerOp(op reduce.Op) reduce.Op {
	if op == reduce.Avg || op == reduce.PreMulSum {
		return reduce.Sum
	}
	return op
}

// Encode returns the descriptor's record.
func (d Desc) Encode() [DescSize]byte {
	var b [DescSize]byte
	copy(b[:], descMagic[:])
	binary.BigEndian.PutUint64(b[4:], d.Seq)
	b[12], b[13], b[14] = byte(d.Coll), byte(d.Type), byte(d.Op)
	binary.BigEndian.PutUint32(b[16:], uint32(d.NNodes))
	binary.BigEndian.PutUint32(b[20:], uint32(d.NHeads))
	for i, v := range []int64{d.Count, d.Part.Offset, d.Part.Count, d.Part.Chunk, d.Part.Align} {
		binary.BigEndian.PutUint64(b[24+8*i:], uint64(v))
	}
	binary.BigEndian.PutUint32(b[64:], uint32(d.ChunkSteps))
	binary.BigEndian.PutUint32(b[68:], uint32(d.SliceSteps))
	return b
}

// DecodeDesc parses and checks a descriptor record.
func DecodeDesc(b []byte) (Desc, error) {
	if len(b) != DescSize {
		return Desc{}, fmt.Errorf("descriptor of %d bytes, want %d", len(b), DescSize)
	}
	if !bytes.Equal(b[:4], descMagic[:]) {
		return Desc{}, fmt.Errorf("descriptor starts %q, want %q", b[:4], descMagic[:])
	}
	if b[15] != 0 || !zero(b[72:]) {
		return Desc{}, errors.New("descriptor: padding is not zero")
	}
	var v [5]int64
	for i := range v {
		v[i] = int64(binary.BigEndian.Uint64(b[24+8*i:]))
	}
	d := Desc{Seq: binary.BigEndian.Uint64(b[4:]), Coll: algos.Coll(b[12]), Type: reduce.DataType(b[13]), Op: reduce.Op(b[14]),
		NNodes: int(int32(binary.BigEndian.Uint32(b[16:]))), NHeads: int(int32(binary.BigEndian.Uint32(b[20:]))),
		Count: v[0], Part: algos.Part{Offset: v[1], Count: v[2], Chunk: v[3], Align: v[4]},
		ChunkSteps: int(int32(binary.BigEndian.Uint32(b[64:]))), SliceSteps: int(int32(binary.BigEndian.Uint32(b[68:])))}
	return d, d.check()
}

// maxElems bounds a collective's elements so that the server's buffers
// stay addressable.
const maxElems = 1 << 40

func (d Desc) check() error {
	p := d.Part
	switch {
	case d.Coll != algos.AllReduce && d.Coll != algos.ReduceScatter && d.Coll != algos.AllGather:
		return fmt.Errorf("descriptor: %v: want AllReduce, ReduceScatter or AllGather", d.Coll)
	case !d.Type.Valid():
		return fmt.Errorf("descriptor: data type %d is not valid", d.Type)
	case d.Coll != algos.AllGather && (!d.Op.Valid() || ServerOp(d.Op) != d.Op):
		return fmt.Errorf("descriptor: op %d: want sum, prod, min or max", d.Op)
	case d.NNodes < 1 || d.NNodes > algos.MaxFan:
		return fmt.Errorf("descriptor: %d hosts: want 1..%d", d.NNodes, algos.MaxFan)
	case d.NHeads < 1 || d.NHeads > algos.MaxCollNetHeads:
		return fmt.Errorf("descriptor: %d heads: want 1..%d", d.NHeads, algos.MaxCollNetHeads)
	case d.Count < 0 || d.Count > maxElems:
		return fmt.Errorf("descriptor: count %d: want 0..%d", d.Count, int64(maxElems))
	case p.Offset < 0 || p.Count < 0 || p.Offset > d.Count || p.Count > d.Count-p.Offset:
		return fmt.Errorf("descriptor: part [%d, +%d) outside count %d", p.Offset, p.Count, d.Count)
	case p.Chunk < 1 || p.Align < 0 || p.Align > math.MaxInt32:
		return fmt.Errorf("descriptor: chunk %d, align %d: want chunk >= 1, align >= 0", p.Chunk, p.Align)
	case d.SliceSteps < 1 || d.ChunkSteps < d.SliceSteps || d.ChunkSteps > 8:
		return fmt.Errorf("descriptor: chunk of %d slots, slice of %d: want 1 <= slice <= chunk <= 8", d.ChunkSteps, d.SliceSteps)
	}
	return nil
}

// differ names the first field in which d and e differ, with d's value
// and e's, or returns "" when they agree.
func (d Desc) differ(e Desc) (field, mine, theirs string) {
	for _, f := range []struct {
		name string
		a, b any
	}{
		{"sequence number", d.Seq, e.Seq}, {"collective", d.Coll, e.Coll}, {"data type", d.Type, e.Type},
		{"op", d.Op, e.Op}, {"hosts", d.NNodes, e.NNodes}, {"heads", d.NHeads, e.NHeads}, {"count", d.Count, e.Count},
		{"part", d.Part, e.Part}, {"chunk slots", d.ChunkSteps, e.ChunkSteps}, {"slice slots", d.SliceSteps, e.SliceSteps},
	} {
		if f.a != f.b {
			return f.name, fmt.Sprint(f.a), fmt.Sprint(f.b)
		}
	}
	return "", "", ""
}

// encodeAck is the server's answer to a descriptor: "" accepts it, any
// other text is the error every head reports (cut to fit).
func encodeAck(msg string) [AckSize]byte {
	var b [AckSize]byte
	copy(b[:], ackMagic[:])
	if msg != "" {
		b[4] = 1
		if len(msg) > maxAckText {
			msg = msg[:maxAckText]
		}
		binary.BigEndian.PutUint16(b[5:], uint16(len(msg)))
		copy(b[7:], msg)
	}
	return b
}

// decodeAck returns the server's error text, "" for an accepted
// descriptor, or an error for a malformed record.
func decodeAck(b []byte) (string, error) {
	if len(b) != AckSize || !bytes.Equal(b[:4], ackMagic[:]) {
		return "", errors.New("malformed answer to the descriptor")
	}
	if b[4] == 0 {
		return "", nil
	}
	n := int(binary.BigEndian.Uint16(b[5:]))
	if n > maxAckText {
		return "", errors.New("malformed answer to the descriptor: text too long")
	}
	return string(b[7 : 7+n]), nil
}

func zero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
