package launch

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/seed-760dd1f1/cc/launch/pmi"
	"github.com/seed-760dd1f1/cc/runtime/bootstrap"
)

// The supervisor is the only goroutine that changes a job's state. Everything else talks
// to it through s.events:
//
//   - one goroutine per rank start (bounded by MaxParallel): ends after Start returns;
//   - one goroutine per started rank waiting for it: ends when the rank has ended (or its
//     host's connection is closed by Run after the supervisor gave up on it);
//   - one goroutine per signal sent: ends when the spawner has delivered it.
//
// All of them are counted in s.wg, which Run waits for after closing the remote side.
// s.events has room for every message they can send, so none blocks after run returns.

type eventKind int

const (
	evStarted eventKind = iota // proc is set
	evStartFailed
	evSkipped // teardown began before the start
	evExited
	evOutputClosed // ccrun's stdout or stderr is a closed pipe; err says which
)

type event struct {
	kind eventKind
	rank int
	proc Proc
	exit Exit
	err  error
}

type phase int

const (
	running     phase = iota
	terminating       // SIGTERM sent, grace period running
	killing           // SIGKILL sent, waiting for exit statuses
)

type supervisor struct {
	j       *job
	rep     *Report
	procs   []Proc
	events  chan event
	root    <-chan bootstrap.Event
	pmi     <-chan pmi.Event // the PMI-1 server's rank failures (see handlePMI)
	streams *streams
	stdin   *stdinFan

	phase       phase
	stopping    chan struct{} // closed at teardown: starts not yet begun are skipped
	cancelStart context.CancelFunc
	settled     []bool           // the rank's end (or failed start) is known, or ccrun gave up on it
	forwarded   []syscall.Signal // signals passed on so far; a rank started later gets them too
	open        int              // ranks not settled
	wg          sync.WaitGroup

	grace, giveUp *time.Timer

	srv        *server     // the CollNet aggregation server, or nil
	serverWait *time.Timer // the server died: the ranks' time to fail by themselves
}

func newSupervisor(j *job, root <-chan bootstrap.Event) *supervisor {
	n := len(j.slots)
	s := &supervisor{
		j:      j,
		rep:    &Report{JobID: j.id, Ranks: make([]RankState, n), Timeout: j.o.Timeout},
		procs:  make([]Proc, n),
		events: make(chan event, 2*n+2), // per rank a start and an exit; per stream one close
		root:   root,

		stopping: make(chan struct{}),
		settled:  make([]bool, n),
		open:     n,
	}
	for i, sl := range j.slots {
		s.rep.Ranks[i].Slot = sl
	}
	s.stdin = newStdinFan(j.o.Stdin, j.o.StdinTo, n)
	s.streams = newStreams(j.o.Output, func(err error) { s.events <- event{kind: evOutputClosed, rank: -1, err: err} })
	return s
}

// run starts every rank and supervises the job until every rank has ended (or, after
// SIGKILL, stopped answering).
func (s *supervisor) run(ctx context.Context) *Report {
	startCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.cancelStart = cancel
	s.startAll(startCtx)
	var timeout <-chan time.Time
	if s.j.o.Timeout > 0 {
		t := time.NewTimer(s.j.o.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	done := ctx.Done()
	for s.open > 0 {
		select {
		case ev := <-s.events:
			s.handle(ev)
		case ev, ok := <-s.root:
			if !ok {
				s.root = nil
				continue
			}
			s.handleRoot(ev)
		case ev := <-s.pmi:
			s.handlePMI(ev)
		case <-done:
			done = nil
			s.fail(&Cause{Kind: CauseInterrupt, Rank: -1, Err: context.Cause(ctx)})
		case <-timeout:
			timeout = nil
			s.rep.AtTimeout = append([]RankState(nil), s.rep.Ranks...)
			s.fail(&Cause{Kind: CauseTimeout, Rank: -1, Err: fmt.Errorf("timed out after %v", s.j.o.Timeout)})
		case sig := <-s.j.o.Kill:
			s.killNow(ctx, sig)
		case sig := <-s.j.o.Forward:
			if ss, ok := sig.(syscall.Signal); ok {
				s.j.o.Logf("forwarding %s to every rank", SignalName(ss))
				s.forwarded = append(s.forwarded, ss)
				s.signalAll(ss, false)
			}
		case <-timerC(s.grace):
			s.grace = nil
			s.kill()
		case <-timerC(s.giveUp):
			s.giveUp = nil
			s.abandon()
		case ex := <-s.serverExit():
			s.srv.exited = true
			s.serverDied(ex)
		case err, ok := <-s.serverLost():
			if !ok {
				s.srv.lost = nil
				continue
			}
			s.serverDied(Exit{Err: err})
		case <-timerC(s.serverWait):
			s.serverWait = nil
			s.fail(s.rep.Cause)
		}
	}
	stopTimer(s.grace)
	stopTimer(s.giveUp)
	return s.rep
}

// startAll starts every rank in the background, MaxParallel at a time.
func (s *supervisor) startAll(ctx context.Context) {
	sem := make(chan struct{}, s.j.o.MaxParallel)
	for _, sl := range s.j.slots {
		s.wg.Go(func() {
			select {
			case sem <- struct{}{}:
			case <-s.stopping:
				s.events <- event{kind: evSkipped, rank: sl.Rank}
				return
			}
			defer func() { <-sem }()
			select {
			case <-s.stopping:
				s.events <- event{kind: evSkipped, rank: sl.Rank}
				return
			default:
			}
			out, errw, err := s.streams.rankWriters(sl.Rank)
			if err != nil {
				s.events <- event{kind: evStartFailed, rank: sl.Rank, err: err}
				return
			}
			spec := s.j.spec(sl, out, errw)
			spec.Stdin = s.stdin.reader(sl.Rank)
			p, err := s.j.spawner(sl.Host).Start(ctx, spec)
			if err != nil {
				out.Close()
				errw.Close()
				s.events <- event{kind: evStartFailed, rank: sl.Rank, err: err}
				return
			}
			s.events <- event{kind: evStarted, rank: sl.Rank, proc: p}
			s.wg.Go(func() {
				ex := p.Wait()
				out.Close()
				errw.Close()
				s.events <- event{kind: evExited, rank: sl.Rank, exit: ex}
			})
		})
	}
}

// settle marks rank r as no longer awaited.
func (s *supervisor) settle(r int) {
	if !s.settled[r] {
		s.settled[r] = true
		s.open--
		s.stdin.drop(r)
	}
}

func (s *supervisor) handle(ev event) {
	if ev.kind == evOutputClosed {
		s.fail(&Cause{Kind: CauseOutput, Rank: -1, Err: ev.err})
		return
	}
	st := &s.rep.Ranks[ev.rank]
	late := s.settled[ev.rank] // ccrun gave up on this rank earlier
	switch ev.kind {
	case evSkipped:
		s.settle(ev.rank)
	case evStartFailed:
		s.settle(ev.rank)
		if !late {
			s.fail(&Cause{Kind: CauseStart, Rank: ev.rank, Host: st.Slot.Host, Err: ev.err})
		}
	case evStarted:
		s.procs[ev.rank] = ev.proc
		st.Started, st.Pid = true, ev.proc.Pid()
		switch {
		case late || s.phase == killing:
			s.signal(ev.rank, syscall.SIGKILL, true)
		case s.phase == terminating:
			s.signal(ev.rank, syscall.SIGTERM, true)
		default:
			for _, sig := range s.forwarded {
				s.signal(ev.rank, sig, false)
			}
		}
	case evExited:
		st.Exited, st.Exit = true, ev.exit
		if late {
			return // its late status is still the truth, for the report
		}
		s.settle(ev.rank)
		s.j.pmiExited(ev.rank)
		s.j.o.Logf("rank %d on %s (pid %d): %s", ev.rank, st.Slot.Host, st.Pid, ev.exit)
		if ev.exit.Failed() && s.rep.Cause == nil {
			s.drainRoot()
		}
		c := s.rep.Cause
		switch {
		case ev.exit.Err != nil:
			s.fail(&Cause{Kind: CauseLost, Rank: ev.rank, Host: st.Slot.Host, Err: ev.exit.Err})
		case !ev.exit.Failed():
		case c != nil && c.Kind == CauseAbort && c.Rank == ev.rank && (lostOnly(c.Err) || pmiLost(c.Err)):
			// The root (or the PMI server) saw the connection drop first; the exit status says more.
			c.Kind = CauseExit
		case c != nil && c.Kind == CauseAbort && c.Rank != ev.rank && externalKill(st):
			// Another rank's abort came first, but this rank was killed by a
			// signal ccrun did not send (kill -9, the OOM killer): the other
			// rank failed because its peer vanished, so this rank is the cause.
			s.rep.Cause = &Cause{Kind: CauseExit, Rank: ev.rank, Host: st.Slot.Host}
		default:
			s.fail(&Cause{Kind: CauseExit, Rank: ev.rank, Host: st.Slot.Host})
		}
	}
}

// drainRoot handles the bootstrap root's events already queued. A rank that
// fails because the root told it another rank aborted exits only after the
// root queued that abort (the root emits before it broadcasts), so handling
// the queue first makes the abort, not the exit it caused, the job's cause
// however the select below picks between two ready channels.
func (s *supervisor) drainRoot() {
	for s.root != nil {
		select {
		case ev, ok := <-s.root:
			if !ok {
				s.root = nil
				return
			}
			s.handleRoot(ev)
		default:
			return
		}
	}
}

// externalKill reports whether the rank of st died of a signal ccrun did not send it:
// any signal before ccrun signalled it, or SIGKILL while ccrun had sent it only SIGTERM
// (within the grace period ccrun itself sends no SIGKILL).
func externalKill(st *RankState) bool {
	e := st.Exit
	if !st.Exited || e.Err != nil || e.Signal == 0 {
		return false
	}
	return st.Sent == 0 || e.Signal == syscall.SIGKILL && st.Sent != syscall.SIGKILL
}

// lostOnly reports whether err is a bootstrap "lost connection" report.
func lostOnly(err error) bool {
	var re *bootstrap.RankError
	return errors.As(err, &re) && re.How == bootstrap.Lost
}

func (s *supervisor) handleRoot(ev bootstrap.Event) {
	if ev.Rank < 0 || ev.Rank >= len(s.rep.Ranks) {
		return
	}
	st := &s.rep.Ranks[ev.Rank]
	switch ev.Kind {
	case bootstrap.EventJoined:
		st.Joined = true
	case bootstrap.EventFailed, bootstrap.EventLost:
		if !st.Exited || st.Exit.Failed() {
			s.fail(&Cause{Kind: CauseAbort, Rank: ev.Rank, Host: st.Slot.Host, Err: ev.Err})
		}
	}
}

// fail records the first cause and begins the teardown: SIGTERM now, SIGKILL after Grace.
func (s *supervisor) fail(c *Cause) {
	if s.rep.Cause == nil {
		s.rep.Cause = c
	}
	if s.phase != running || s.letRanksFail(c) {
		return
	}
	s.stopStarts()
	s.phase = terminating
	s.j.o.Logf("ending the job: SIGTERM to every rank, SIGKILL in %v", s.j.o.Grace)
	s.signalAll(syscall.SIGTERM, true)
	s.grace = time.NewTimer(s.j.o.Grace)
}

// stopStarts makes the starts not yet begun skip their rank.
func (s *supervisor) stopStarts() {
	close(s.stopping)
	s.cancelStart()
}

// killNow ends the job at once on sig (a second Ctrl-C): SIGKILL to every rank now, then
// the last wait, as after the grace period.
func (s *supervisor) killNow(ctx context.Context, sig os.Signal) {
	name := sig.String()
	if ss, ok := sig.(syscall.Signal); ok {
		name = SignalName(ss)
	}
	if s.rep.Cause == nil {
		err := context.Cause(ctx)
		if err == nil {
			err = fmt.Errorf("%s received", name)
		}
		s.rep.Cause = &Cause{Kind: CauseInterrupt, Rank: -1, Err: err}
	}
	s.rep.KillNow = name
	s.j.o.Logf("%s during the teardown: SIGKILL to every rank now", name)
	switch s.phase {
	case running:
		s.stopStarts()
	case killing:
		return // SIGKILL already sent; the last wait is running
	}
	stopTimer(s.grace)
	s.grace = nil
	s.kill()
}

// kill sends SIGKILL to what is left and starts the last wait.
func (s *supervisor) kill() {
	s.phase = killing
	s.signalAll(syscall.SIGKILL, true)
	s.giveUp = time.NewTimer(killWait)
}

// abandon stops waiting for ranks that did not report after SIGKILL: their hosts stopped
// answering. Run closes the connections, which ends their Waits.
func (s *supervisor) abandon() {
	for r := range s.rep.Ranks {
		if s.settled[r] {
			continue
		}
		st := &s.rep.Ranks[r]
		s.settle(r)
		if st.Started {
			st.Exited = true
			st.Exit = Exit{Err: fmt.Errorf("no exit status %v after SIGKILL (host %s not answering)", killWait, st.Slot.Host)}
		}
	}
}

// signalAll signals every started rank that has not ended.
func (s *supervisor) signalAll(sig syscall.Signal, teardown bool) {
	for r := range s.rep.Ranks {
		if st := s.rep.Ranks[r]; st.Started && !st.Exited {
			s.signal(r, sig, teardown)
		}
	}
}

// signal sends sig to rank r in the background (a remote signal costs a round trip).
func (s *supervisor) signal(r int, sig syscall.Signal, teardown bool) {
	if teardown {
		s.rep.Ranks[r].Sent = sig
	}
	p, host, logf := s.procs[r], s.rep.Ranks[r].Slot.Host, s.j.o.Logf
	s.wg.Go(func() {
		if err := p.Signal(sig); err != nil {
			logf("rank %d on %s: %s: %v", r, host, SignalName(sig), err)
		}
	})
}

func timerC(t *time.Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C
}

func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}
