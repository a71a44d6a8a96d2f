package collnet

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/engine"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
	"github.com/seed-760dd1f1/cc/runtime/transport/tcp"
	"github.com/seed-760dd1f1/cc/runtime/wire"
)

// Options configure a Server.
type Options struct {
	Job  wire.Job
	Addr string // host:port to listen on; port 0 picks one
	// Logf gets one line per dropped connection (a stranger, a wrong
	// secret, a bad join) and per group that ends in an error; nil
	// discards them.
	Logf func(format string, args ...any)
}

// Server is the aggregation server: it accepts heads, groups them by
// (communicator, rail, channel) and runs each group's collectives.
type Server struct {
	o  Options
	ln net.Listener
	wg sync.WaitGroup

	mu     sync.Mutex
	groups map[groupKey]*group
	socks  map[net.Conn]struct{} // every socket not yet closed, for Close
	closed bool
}

// groupKey identifies the heads the server serves together: one rail of
// one channel of one communicator, a head per host.
type groupKey struct {
	comm          string
	rail, channel int
}

func (k groupKey) String() string {
	return fmt.Sprintf("communicator %s rail %d channel %d", k.comm, k.rail, k.channel)
}

// group is the heads of one groupKey, by host, as they join.
type group struct {
	key       groupKey
	nnodes    int
	stepBytes int
	socks     []net.Conn
	joins     []Join
	joined    int
}

// Listen opens the server's socket and starts serving; Close stops it.
func Listen(o Options) (*Server, error) {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("%s: listen on %s: %w", Name, o.Addr, err)
	}
	s := &Server{o: o, ln: ln, groups: map[groupKey]*group{}, socks: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops accepting, closes every connection (the heads of a running
// collective fail, naming the server) and waits for the server's
// goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for c := range s.socks {
		c.Close()
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.wg.Wait()
	return err
}

// accept runs until the listener closes.
func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			s.o.Logf("%s: accept: %v", Name, err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if !s.track(c) {
			c.Close()
			return
		}
		s.wg.Add(1)
		go s.admit(c)
	}
}

// track records an open socket; false once the server is closed.
func (s *Server) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.socks[c] = struct{}{}
	return true
}

// drop closes a socket that is not served, with one log line.
func (s *Server) drop(c net.Conn, format string, args ...any) {
	s.o.Logf("%s: dropped connection from %s: %s", Name, c.RemoteAddr(), fmt.Sprintf(format, args...))
	s.untrack(c)
}

func (s *Server) untrack(c net.Conn) {
	c.Close()
	s.mu.Lock()
	delete(s.socks, c)
	s.mu.Unlock()
}

// admit runs the handshake and reads the join record of one socket, then
// files it in its group, and serves the group once every host's head has
// joined. It exits within the handshake and join deadlines, or when the
// group it completed ends.
func (s *Server) admit(c net.Conn) {
	defer s.wg.Done()
	h, err := wire.Server(c, s.o.Job, time.Now().Add(wire.HandshakeTimeout))
	if err != nil {
		s.drop(c, "%v", err)
		return
	}
	if h.Kind != wire.KindCollNet {
		s.drop(c, "kind %v, want %v", h.Kind, wire.KindCollNet)
		return
	}
	if h.Channel == watchChannel {
		// A watcher (Watch): keep the connection until it or the server
		// closes it; its keepalives tell it if this host is lost.
		tcp.SetLiveness(c, tcp.DuplexTimeout)
		io.Copy(io.Discard, c)
		s.untrack(c)
		return
	}
	var b [JoinSize]byte
	c.SetReadDeadline(time.Now().Add(wire.HandshakeTimeout))
	if _, err := io.ReadFull(c, b[:]); err != nil {
		s.drop(c, "read join record: %v", err)
		return
	}
	c.SetReadDeadline(time.Time{})
	j, err := DecodeJoin(b[:])
	if err != nil {
		s.drop(c, "%v", err)
		return
	}
	g, why := s.join(c, j)
	switch {
	case why != "":
		s.drop(c, "%s", why)
	case g != nil:
		s.serve(g)
	}
}

// join files socket c of head j in its group and returns the group when
// it is complete, or why the head does not fit its group.
func (s *Server) join(c net.Conn, j Join) (*group, string) {
	k := groupKey{comm: j.Comm, rail: j.Rail, channel: j.Channel}
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.groups[k]
	if g == nil {
		g = &group{key: k, nnodes: j.NNodes, stepBytes: j.StepBytes, socks: make([]net.Conn, j.NNodes), joins: make([]Join, j.NNodes)}
		s.groups[k] = g
	}
	switch {
	case j.NNodes != g.nnodes || j.StepBytes != g.stepBytes:
		return nil, fmt.Sprintf("%v: rank %d says %d hosts and %d-byte slots, the group has %d and %d", k, j.Rank, j.NNodes, j.StepBytes, g.nnodes, g.stepBytes)
	case g.socks[j.Node] != nil:
		return nil, fmt.Sprintf("%v: host %d has joined already (rank %d)", k, j.Node, g.joins[j.Node].Rank)
	}
	g.socks[j.Node], g.joins[j.Node] = c, j
	if g.joined++; g.joined < g.nnodes {
		return nil, ""
	}
	delete(s.groups, k) // a later join of the same key starts a new group
	return g, ""
}

// serve runs a complete group's collectives until a head leaves or an
// error ends it; then it closes the group's sockets, so that every head
// still waiting fails.
func (s *Server) serve(g *group) {
	n := g.nnodes
	heads := make([]int, n)
	byRank := map[int]int{}
	gc := &groupConns{send: make([]*tcp.SendConn, n), recv: make([]*tcp.RecvConn, n), byRank: byRank}
	for x, c := range g.socks {
		heads[x] = g.joins[x].Rank
		byRank[heads[x]] = x
		gc.send[x], gc.recv[x] = tcp.Duplex(c, g.stepBytes, fmt.Sprintf("rank %d (%s)", heads[x], c.RemoteAddr()), nil)
	}
	runner := engine.NewRunner(func(err error) { gc.fail(err) })
	defer func() {
		runner.Close()
		gc.close()
		for _, c := range g.socks {
			s.untrack(c)
		}
	}()
	var scratch []byte
	for seq := 0; ; seq++ {
		descs, err := gc.descs()
		if err != nil {
			if !(seq > 0 && errors.Is(err, errLeft)) { // a head leaving between collectives is the normal end
				s.o.Logf("%s: %v: %v", Name, g.key, err)
			}
			return
		}
		msg := agree(descs, heads)
		if err := gc.ack(msg); err != nil {
			s.o.Logf("%s: %v: %v", Name, g.key, err)
			return
		}
		if msg != "" {
			s.o.Logf("%s: %v: %s", Name, g.key, msg)
			// Closing at once could reset the heads' connections before
			// they read the answer (they are still sending data).
			time.Sleep(ackLinger)
			return
		}
		t, err := task(descs[0], heads, g.key.rail, g.stepBytes, &scratch)
		if err == nil {
			err = runner.Run(t, gc)
		}
		if err != nil {
			s.o.Logf("%s: %v: collective %d: %v", Name, g.key, descs[0].Seq, err)
			return
		}
	}
}

// agree checks the heads' descriptors against each other and what the
// server can run, and returns the error every head gets, or "".
func agree(descs []Desc, heads []int) string {
	for x := 1; x < len(descs); x++ {
		if f, a, b := descs[x].differ(descs[0]); f != "" {
			return fmt.Sprintf("descriptor mismatch: host %d (rank %d) has %s %s, host 0 (rank %d) has %s", x, heads[x], f, a, heads[0], b)
		}
	}
	if d := descs[0]; d.NNodes != len(heads) {
		return fmt.Sprintf("descriptor: %d hosts, but %d joined", d.NNodes, len(heads))
	}
	return ""
}

// task is the engine task of one collective for rail: the server's
// schedule, its scratch (all-reduce: the part, grown as needed) and the
// reduction.
func task(d Desc, heads []int, rail, stepBytes int, scratch *[]byte) (*engine.Task, error) {
	if rail >= d.NHeads {
		return nil, fmt.Errorf("rail %d of %d heads", rail, d.NHeads)
	}
	t := &engine.Task{Type: d.Type, StepPayload: protocols.Simple.Payload(stepBytes), ChunkSteps: d.ChunkSteps, SliceSteps: d.SliceSteps}
	if d.Coll != algos.AllGather {
		fn, err := reduce.NewFunc(d.Type, d.Op, len(heads), 0)
		if err != nil {
			return nil, err
		}
		t.Fn = fn
	}
	t.Sched = algos.CollNetServer(d.Coll, heads, rail, d.NHeads, d.Count, d.Part, d.Part.Offset)
	if d.Coll == algos.AllReduce {
		need := int(d.Part.Count) * d.Type.Size()
		if cap(*scratch) < need {
			*scratch = make([]byte, need)
		}
		t.Out = (*scratch)[:need]
	}
	return t, nil
}

// ackLinger is how long the server keeps a group's connections open after
// it refused a collective, so that every head reads why.
const ackLinger = time.Second

// errLeft is a head that closed its connection.
var errLeft = errors.New("a head left")

// groupConns are a group's connections, the engine's view of them: the
// server sends to and receives from each head on its one socket, whatever
// the connection index.
type groupConns struct {
	send   []*tcp.SendConn
	recv   []*tcp.RecvConn
	byRank map[int]int
}

func (gc *groupConns) SendTo(peer, _ int) (engine.SendConn, error) {
	x, ok := gc.byRank[peer]
	if !ok {
		return nil, fmt.Errorf("no head is rank %d", peer)
	}
	return gc.send[x], nil
}

func (gc *groupConns) RecvFrom(peer, _ int) (engine.RecvConn, error) {
	x, ok := gc.byRank[peer]
	if !ok {
		return nil, fmt.Errorf("no head is rank %d", peer)
	}
	return gc.recv[x], nil
}

// descs reads every head's next descriptor, in host order.
func (gc *groupConns) descs() ([]Desc, error) {
	out := make([]Desc, len(gc.recv))
	for x, r := range gc.recv {
		b, err := r.Wait(1, DescSize)
		if err != nil {
			if errors.Is(err, io.EOF) || isClosed(err) {
				return nil, fmt.Errorf("%w: host %d: %v", errLeft, x, err)
			}
			return nil, fmt.Errorf("host %d: %w", x, err)
		}
		out[x], err = DecodeDesc(b)
		r.Release()
		if err != nil {
			return nil, fmt.Errorf("host %d: %w", x, err)
		}
	}
	return out, nil
}

// isClosed reports the tcp transport's "closed by the peer".
func isClosed(err error) bool { return strings.Contains(err.Error(), "closed by the peer") }

// ack sends every head the answer to its descriptor.
func (gc *groupConns) ack(msg string) error {
	a := encodeAck(msg)
	for x, sc := range gc.send {
		b, err := sc.Acquire(1)
		if err != nil {
			return fmt.Errorf("host %d: %w", x, err)
		}
		copy(b, a[:])
		if err := sc.Post(AckSize); err != nil {
			return fmt.Errorf("host %d: %w", x, err)
		}
	}
	for _, sc := range gc.send {
		if err := sc.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// fail makes every connection of the group return err.
func (gc *groupConns) fail(err error) {
	for x := range gc.send {
		gc.send[x].Fail(err)
		gc.recv[x].Fail(err)
	}
}

func (gc *groupConns) close() {
	for x := range gc.send {
		gc.recv[x].SetClosing()
		gc.send[x].Close()
		gc.recv[x].Close()
	}
}
