package pmi

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"sync"
)

// Limits the server announces in cmd=maxes (Hydra's values) and enforces on put.
const (
	KVSNameMax = 256
	KeyLenMax  = 64
	ValLenMax  = 1024
	// maxLine bounds one message; PMI-1 clients keep theirs under 1024 bytes.
	maxLine = 64 << 10
)

// Config is one job's PMI service.
type Config struct {
	// NRanks is the job size: the barrier waits for that many ranks, PMI_ID is 0..NRanks-1.
	NRanks int
	// KVSName names the job's one key-value space (get_my_kvsname).
	KVSName string
	// Mapping is the PMI_process_mapping value (see ProcessMapping); "" leaves it unset.
	Mapping string
	// Logf receives one line per connection the server drops; nil discards them.
	Logf func(format string, args ...any)
}

// EventKind says what the server saw happen to a rank.
type EventKind int

// The events; each rank produces at most one, and the job should end on any of them.
const (
	// EventAbort: the rank sent cmd=abort (MPI_Abort); Err is an *AbortError.
	EventAbort EventKind = iota + 1
	// EventLost: the rank's connection closed before cmd=finalize (it exited or crashed
	// inside MPI); Err is a *LostError.
	EventLost
	// EventFailed: the rank sent something the server does not serve or understand
	// (PMI-2, MPI_Comm_spawn, a malformed message); its connection was closed.
	EventFailed
)

// Event is a rank's failure, as the PMI server saw it.
type Event struct {
	Kind EventKind
	Rank int
	Err  error
}

// AbortError is a rank's cmd=abort: MPI_Abort(comm, Code).
type AbortError struct {
	Rank int
	// Code is the exit code the rank asked the job to end with.
	Code int
	// Message is the abort message, when the client sent one.
	Message string
}

func (e *AbortError) Error() string {
	s := fmt.Sprintf("rank %d called MPI_Abort with exit code %d", e.Rank, e.Code)
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// LostError is a rank whose PMI connection closed before it called PMI finalize.
type LostError struct {
	Rank int
	Err  error // the read error, io.EOF for a plain close
}

func (e *LostError) Error() string {
	return fmt.Sprintf("rank %d closed its PMI connection without MPI_Finalize", e.Rank)
}

func (e *LostError) Unwrap() error { return e.Err }

// Server serves the PMI-1 wire protocol to one job's ranks: over connections handed to it
// (ServeConn: PMI_FD) and over TCP (Serve: PMI_PORT).
type Server struct {
	cfg    Config
	events chan Event

	mu      sync.Mutex
	lns     []net.Listener
	closed  bool
	conns   map[*conn]bool
	claimed []bool // PMI_ID r has connected
	private []bool // rank r connects through ServeConn only (Reserve)
	done    []bool // rank r produced its event
	gone    []bool // rank r's process has ended (Exited)
	kvs     map[string]string
	keys    []string // kvs keys in put order, for getbyidx
	barrier []*conn  // ranks in the current barrier, by rank (nil: not in it)
	waiting int
	wg      sync.WaitGroup
}

// conn is one client connection; rank is -1 until its cmd=initack.
type conn struct {
	nc      net.Conn
	peer    string
	rank    int
	private bool // a ServeConn connection
	// spoke: a message came; a private connection that closes before any is a rank
	// that never used PMI (it exited before MPI_Init, or is no MPI program).
	spoke     bool
	finalized bool
	aborted   bool
	wmu       sync.Mutex
}

// NewServer returns a server for cfg; Serve starts it.
func NewServer(cfg Config) *Server {
	if cfg.Logf == nil {
		cfg.Logf = func(string, ...any) {}
	}
	return &Server{
		cfg:     cfg,
		events:  make(chan Event, cfg.NRanks), // at most one per rank: sends never block
		conns:   map[*conn]bool{},
		claimed: make([]bool, cfg.NRanks),
		private: make([]bool, cfg.NRanks),
		done:    make([]bool, cfg.NRanks),
		gone:    make([]bool, cfg.NRanks),
		kvs:     map[string]string{},
		barrier: make([]*conn, cfg.NRanks),
	}
}

// Events delivers each rank's failure; it is never closed.
func (s *Server) Events() <-chan Event { return s.events }

// Serve accepts connections on ln until Close, serving each in its own goroutine. It
// returns nil after Close, or the accept error. A server may serve several listeners at
// once, each with its own Serve.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ln.Close()
		return nil
	}
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	for {
		nc, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			return fmt.Errorf("pmi: accept: %w", err)
		}
		if !s.start(&conn{nc: nc, peer: nc.RemoteAddr().String(), rank: -1}) {
			return nil
		}
	}
}

// ServeConn serves rank's end of a private connection (a PMI_FD socketpair, a stream an
// agent relays) in its own goroutine, until Close. The connection is rank's already:
// the client sends no cmd=initack (MPICH's simple PMI skips it under PMI_FD and reads
// PMI_RANK and PMI_SIZE from its environment) and starts with cmd=init. A rank is
// served once: a second connection for it is refused.
func (s *Server) ServeConn(nc net.Conn, rank int) {
	c := &conn{nc: nc, peer: fmt.Sprintf("PMI_FD of rank %d", rank), rank: -1, private: true}
	if rank < 0 || rank >= s.cfg.NRanks || !s.claim(rank) {
		s.refuse(c, fmt.Errorf("rank %d is not a rank of this job or is already connected", rank))
		nc.Close()
		return
	}
	c.rank = rank
	s.start(c)
}

// start serves c in its own goroutine; false (and c closed) once the server is closed.
func (s *Server) start(c *conn) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.nc.Close()
		return false
	}
	s.conns[c] = true
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		s.serveConn(c)
	}()
	return true
}

// Reserve makes rank r's PMI_ID unclaimable by cmd=initack: the rank connects through
// ServeConn, and a stranger who reaches a PMI port cannot take its place first.
func (s *Server) Reserve(r int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r >= 0 && r < s.cfg.NRanks {
		s.private[r] = true
	}
}

// claim marks PMI_ID r connected; false if it already was.
func (s *Server) claim(r int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claimed[r] {
		return false
	}
	s.claimed[r] = true
	return true
}

// Close stops accepting, closes every connection (a rank still in a barrier or waiting
// for a reply gets an error) and waits for the connections' goroutines. No event is
// sent after Close.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	for _, ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		c.nc.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// serveConn reads c's messages until it closes, misbehaves, or the server closes.
func (s *Server) serveConn(c *conn) {
	defer s.drop(c)
	br := bufio.NewReaderSize(c.nc, maxLine)
	if head, err := br.Peek(6); err == nil && isPMI2(head) {
		s.refuse(c, errors.New("the program speaks the PMI-2 wire protocol (length-prefixed cmd=fullinit); ccrun serves PMI-1 only"))
		return
	}
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			s.refuse(c, fmt.Errorf("PMI message longer than %d bytes", maxLine))
			return
		}
		if err != nil {
			s.hangUp(c, err)
			return
		}
		m, err := Parse(string(line))
		if err != nil {
			s.refuse(c, err)
			return
		}
		c.spoke = true
		if !s.handle(c, m) {
			return
		}
	}
}

// drop forgets c and closes it.
func (s *Server) drop(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	if c.rank >= 0 && s.barrier[c.rank] == c {
		s.barrier[c.rank] = nil
		s.waiting--
	}
	s.mu.Unlock()
	c.nc.Close()
}

// who names c in log lines and errors.
func (c *conn) who() string {
	if c.rank >= 0 {
		return fmt.Sprintf("rank %d (%s)", c.rank, c.peer)
	}
	return "connection from " + c.peer
}

// refuse drops c for err: one log line, and the rank's EventFailed once it is known.
func (s *Server) refuse(c *conn, err error) {
	s.cfg.Logf("pmi: %s: %v; closing it", c.who(), err)
	if c.rank >= 0 {
		s.report(c, EventFailed, fmt.Errorf("rank %d: %w", c.rank, err))
	}
}

// hangUp handles the end of c's input: expected after finalize (or abort), a failure of
// the rank before.
func (s *Server) hangUp(c *conn, err error) {
	if c.rank < 0 || c.finalized || c.aborted || c.private && !c.spoke {
		return
	}
	if !errors.Is(err, io.EOF) {
		s.cfg.Logf("pmi: %s: %v", c.who(), err)
	}
	s.report(c, EventLost, &LostError{Rank: c.rank, Err: err})
}

// report sends rank c.rank's event, unless it already has one or the server is closed.
func (s *Server) report(c *conn, kind EventKind, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reportLocked(c.rank, kind, err)
}

func (s *Server) reportLocked(r int, kind EventKind, err error) {
	if s.closed || s.done[r] {
		return
	}
	s.done[r] = true
	s.events <- Event{Kind: kind, Rank: r, Err: err}
}

// Exited tells the server that rank r's process has ended. If other ranks wait in a
// barrier r has not entered, the barrier can never complete: that is r's EventLost (a
// rank that ended before MPI_Init, or after MPI_Finalize while others still need it).
func (s *Server) Exited(r int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r < 0 || r >= s.cfg.NRanks {
		return
	}
	s.gone[r] = true
	s.checkBarrier()
}

// checkBarrier reports a rank that has ended outside the barrier others wait in.
func (s *Server) checkBarrier() {
	if s.waiting == 0 {
		return
	}
	waiter := slices.IndexFunc(s.barrier, func(c *conn) bool { return c != nil })
	for r, gone := range s.gone {
		if gone && s.barrier[r] == nil {
			s.reportLocked(r, EventLost, fmt.Errorf("rank %d ended without entering the PMI barrier that rank %d waits in", r, waiter))
		}
	}
}

// send writes text to c; a write error surfaces as the read side's end.
func (c *conn) send(text string) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	io.WriteString(c.nc, text)
}

// handle serves one message; false means c is done (refused, or aborted and waiting to
// be torn down).
func (s *Server) handle(c *conn, m Msg) bool {
	if c.rank < 0 {
		return s.initack(c, m)
	}
	switch m.Cmd {
	case "init":
		v, _ := m.Get("pmi_version")
		sub, _ := m.Get("pmi_subversion")
		if v != "1" || (sub != "0" && sub != "1") {
			c.send(Format("response_to_init", "pmi_version", "1", "pmi_subversion", "1", "rc", "-1"))
			s.refuse(c, fmt.Errorf("PMI version %s.%s is not served: ccrun serves PMI 1.1", v, sub))
			return false
		}
		c.send(Format("response_to_init", "pmi_version", "1", "pmi_subversion", "1", "rc", "0"))
	case "get_maxes":
		c.send(Format("maxes", "kvsname_max", strconv.Itoa(KVSNameMax),
			"keylen_max", strconv.Itoa(KeyLenMax), "vallen_max", strconv.Itoa(ValLenMax)))
	case "get_appnum":
		c.send(Format("appnum", "appnum", "0"))
	case "get_my_kvsname":
		c.send(Format("my_kvsname", "kvsname", s.cfg.KVSName))
	case "get_universe_size":
		c.send(Format("universe_size", "size", strconv.Itoa(s.cfg.NRanks)))
	case "barrier_in":
		return s.barrierIn(c)
	case "put":
		c.send(s.put(m))
	case "get":
		c.send(s.get(m))
	case "getbyidx":
		c.send(s.getByIdx(m))
	case "finalize":
		c.finalized = true
		c.send(Format("finalize_ack"))
	case "abort":
		c.aborted = true
		code, err := strconv.Atoi(firstOf(m, "exitcode"))
		if err != nil {
			code = 1
		}
		msg := firstOf(m, "message", "msg", "error_msg")
		s.cfg.Logf("pmi: %s: abort, exit code %d", c.who(), code)
		s.report(c, EventAbort, &AbortError{Rank: c.rank, Code: code, Message: msg})
		// No reply: the client waits for the job's teardown, as under Hydra.
	default:
		what := "PMI command " + strconv.Quote(m.Cmd)
		if m.Cmd == "spawn" || m.Multi {
			what += " (MPI_Comm_spawn)"
		}
		s.refuse(c, fmt.Errorf("%s is not served by ccrun", what))
		return false
	}
	return true
}

// initack is the first message of a PMI_PORT connection: "cmd=initack pmiid=ID", the
// PMI_ID ccrun gave the rank. The reply carries the job size and the rank.
func (s *Server) initack(c *conn, m Msg) bool {
	id, hasID := m.Get("pmiid")
	r, err := strconv.Atoi(id)
	switch {
	case m.Cmd == "init" && firstOf(m, "pmi_version") != "1":
		// MPICH's PMI-2 and PMIx clients open with this PMI-1 line, then fullinit.
		s.refuse(c, fmt.Errorf("the program speaks PMI %s.%s (cmd=init pmi_version=%[1]s); ccrun serves PMI-1 only",
			firstOf(m, "pmi_version"), firstOf(m, "pmi_subversion")))
		return false
	case m.Cmd != "initack" || !hasID:
		s.refuse(c, fmt.Errorf("first message is cmd=%s, want cmd=initack pmiid=RANK (is PMI_ID set?)", m.Cmd))
		return false
	case err != nil || r < 0 || r >= s.cfg.NRanks:
		s.refuse(c, fmt.Errorf("bad pmiid %q: want 0 to %d", id, s.cfg.NRanks-1))
		return false
	}
	s.mu.Lock()
	private := s.private[r]
	s.mu.Unlock()
	if private {
		s.refuse(c, fmt.Errorf("pmiid %d has a private connection (PMI_FD), not this port", r))
		return false
	}
	if !s.claim(r) {
		s.refuse(c, fmt.Errorf("pmiid %d is already connected", r))
		return false
	}
	c.rank = r
	c.send(Format("initack") + Format("set", "size", strconv.Itoa(s.cfg.NRanks)) +
		Format("set", "rank", strconv.Itoa(r)) + Format("set", "debug", "0"))
	return true
}

// barrierIn enters c into the barrier; the last rank in releases everyone.
func (s *Server) barrierIn(c *conn) bool {
	s.mu.Lock()
	if s.barrier[c.rank] != nil {
		s.mu.Unlock()
		s.refuse(c, errors.New("cmd=barrier_in twice in one barrier"))
		return false
	}
	s.barrier[c.rank] = c
	s.waiting++
	var out []*conn
	if s.waiting == s.cfg.NRanks {
		out = append(out, s.barrier...)
		clear(s.barrier)
		s.waiting = 0
	}
	s.checkBarrier()
	s.mu.Unlock()
	for _, w := range out {
		w.send(Format("barrier_out"))
	}
	return true
}

// put stores one key in the job's space; a key is put once.
func (s *Server) put(m Msg) string {
	reply := func(rc, msg string) string { return Format("put_result", "rc", rc, "msg", msg) }
	key, val := firstOf(m, "key"), firstOf(m, "value")
	switch {
	case firstOf(m, "kvsname") != s.cfg.KVSName:
		return reply("-1", "kvs_"+firstOf(m, "kvsname")+"_not_found")
	case key == "" || len(key) > KeyLenMax:
		return reply("-1", "bad_key_length")
	case len(val) > ValLenMax:
		return reply("-1", "value_too_long")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.kvs[key]; dup || key == mappingKey {
		return reply("-1", "duplicate_key_"+key)
	}
	s.kvs[key] = val
	s.keys = append(s.keys, key)
	return reply("0", "success")
}

// mappingKey is the job attribute MPICH reads to learn which ranks share a node.
const mappingKey = "PMI_process_mapping"

func (s *Server) get(m Msg) string {
	key := firstOf(m, "key")
	if firstOf(m, "kvsname") != s.cfg.KVSName {
		return Format("get_result", "rc", "-1", "msg", "kvs_"+firstOf(m, "kvsname")+"_not_found")
	}
	if key == mappingKey && s.cfg.Mapping != "" {
		return Format("get_result", "rc", "0", "msg", "success", "value", s.cfg.Mapping)
	}
	s.mu.Lock()
	v, ok := s.kvs[key]
	s.mu.Unlock()
	if !ok {
		return Format("get_result", "rc", "-1", "msg", "key_"+key+"_not_found")
	}
	return Format("get_result", "rc", "0", "msg", "success", "value", v)
}

func (s *Server) getByIdx(m Msg) string {
	idx, err := strconv.Atoi(firstOf(m, "idx"))
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || idx < 0 || idx >= len(s.keys) {
		return Format("getbyidx_results", "rc", "-2", "reason", "no_more_keyvals")
	}
	k := s.keys[idx]
	return Format("getbyidx_results", "rc", "0", "nextidx", strconv.Itoa(idx+1), "key", k, "val", s.kvs[k])
}

// firstOf returns the value of the first of keys m has, or "".
func firstOf(m Msg, keys ...string) string {
	for _, k := range keys {
		if v, ok := m.Get(k); ok {
			return v
		}
	}
	return ""
}
