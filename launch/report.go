package launch

import (
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"
)

// CauseKind says what ended a job early.
type CauseKind int

// The ways a job ends early.
const (
	// CauseExit: a rank exited with a non-zero status or was killed by a signal.
	CauseExit CauseKind = iota + 1
	// CauseAbort: the bootstrap root reported a rank failed (it aborted, misused the
	// bootstrap, left early, or its bootstrap connection dropped).
	CauseAbort
	// CauseLost: the connection to a host was lost; its ranks' fate is unknown.
	CauseLost
	// CauseStart: a rank could not be started.
	CauseStart
	// CauseTimeout: --timeout expired.
	CauseTimeout
	// CauseInterrupt: ccrun was interrupted (Ctrl-C, SIGTERM, SIGHUP).
	CauseInterrupt
	// CauseOutput: ccrun's stdout or stderr is a pipe whose reader has gone (ccrun ... |
	// head): the job ends as a program writing there would, by SIGPIPE.
	CauseOutput
)

// Cause is the first thing that went wrong.
type Cause struct {
	Kind CauseKind
	// Rank is the rank concerned, or -1.
	Rank int
	// Host is the host concerned, or "".
	Host string
	// Err says what happened (for CauseInterrupt, the context's cause).
	Err error
}

// RankState is what ccrun knows about one rank.
type RankState struct {
	Slot Slot
	// Pid is the rank's process id on its host (0 before it started).
	Pid int
	// Started: the rank's process was created.
	Started bool
	// Joined: the rank joined the bootstrap root.
	Joined bool
	// Exited: Exit holds how the rank ended.
	Exited bool
	Exit   Exit
	// Sent is the last teardown signal ccrun sent the rank (0 if none).
	Sent syscall.Signal
}

// state describes a rank in a few words, for the timeout table.
func (s RankState) state() string {
	switch {
	case s.Exited:
		return s.Exit.String()
	case !s.Started:
		return "not started"
	case s.Joined:
		return "running (joined the bootstrap)"
	}
	return "running (has not joined the bootstrap)"
}

// Report is the outcome of a job.
type Report struct {
	JobID string
	Ranks []RankState
	// Cause is nil when every rank exited with status 0.
	Cause *Cause
	// Timeout and AtTimeout: the --timeout value and every rank's state when it expired.
	Timeout   time.Duration
	AtTimeout []RankState
	// KillNow names the signal ("SIGINT") that made ccrun SIGKILL every rank without
	// waiting for the grace period (Options.Kill), or is "".
	KillNow string
}

// ExitCode is ccrun's exit status: 0; the first failing rank's status (its exit code, or
// 128+signal; for MPI_Abort, the code given to it, modulo 256); 110 (ETIMEDOUT, as Open
// MPI) for a timeout; 130 for an interrupt (the caller may refine it from Cause.Err); 141
// (128+SIGPIPE) when ccrun's output was closed; 1 for a lost host or a rank that could not
// start.
func (r *Report) ExitCode() int {
	c := r.Cause
	if c == nil {
		return 0
	}
	switch c.Kind {
	case CauseTimeout:
		return 110
	case CauseInterrupt:
		return 130
	case CauseOutput:
		return 128 + int(syscall.SIGPIPE)
	case CauseExit, CauseAbort:
		if code, ok := abortCode(c.Err); ok {
			return code
		}
		if c.Rank >= 0 && c.Rank < len(r.Ranks) {
			if st := r.Ranks[c.Rank]; st.Exited && st.Exit.Err == nil && st.Exit.Status() != 0 {
				return st.Exit.Status()
			}
		}
	}
	return 1
}

const rule = "--------------------------------------------------------------------------"

// WriteSummary prints what went wrong, Open MPI style: the first failure naming rank, host,
// pid and exit code or signal. It prints nothing for a job that succeeded.
func (r *Report) WriteSummary(w io.Writer) {
	c := r.Cause
	if c == nil {
		return
	}
	var st RankState
	if c.Rank >= 0 && c.Rank < len(r.Ranks) {
		st = r.Ranks[c.Rank]
	}
	fmt.Fprintln(w, rule)
	switch c.Kind {
	case CauseExit:
		if st.Exit.Signal != 0 {
			fmt.Fprintf(w, "ccrun noticed that rank %d with PID %d on host %s exited on\nsignal %d (%s).\n",
				c.Rank, st.Pid, st.Slot.Host, int(st.Exit.Signal), st.Exit.Signal)
			break
		}
		fmt.Fprintf(w, "ccrun detected that one or more ranks exited with non-zero status,\n"+
			"thus causing the job to be terminated. The first rank to do so was:\n\n")
		fmt.Fprintf(w, "  Rank:       %d\n  Host:       %s\n  PID:        %d\n  Exit code:  %d%s\n",
			c.Rank, st.Slot.Host, st.Pid, st.Exit.Code, exitHint(st.Exit.Code))
	case CauseAbort:
		fmt.Fprintf(w, "rank %d on host %s (PID %d) failed and the job was aborted:\n  %v\n",
			c.Rank, st.Slot.Host, st.Pid, c.Err)
		if st.Exited {
			fmt.Fprintf(w, "rank %d then ended with %s\n", c.Rank, st.Exit)
		}
	case CauseLost:
		fmt.Fprintf(w, "ccrun lost its connection to host %s (ranks %s):\n  %v\n",
			c.Host, r.ranksOn(c.Host), c.Err)
		fmt.Fprintf(w, "Ranks there may still run until the host is reachable again; they exit\n"+
			"by themselves once they notice ccrun is gone.\n")
	case CauseStart:
		fmt.Fprintf(w, "ccrun could not start rank %d on host %s:\n  %v\n", c.Rank, c.Host, c.Err)
	case CauseTimeout:
		fmt.Fprintf(w, "The job timed out after %v (--timeout). State of each rank at that moment:\n\n", r.Timeout)
		r.writeStates(w, r.AtTimeout)
	case CauseInterrupt:
		fmt.Fprintf(w, "ccrun was interrupted (%v) and terminated the job.\n", c.Err)
	case CauseOutput:
		fmt.Fprintf(w, "ccrun terminated the job: %v.\n", c.Err)
	}
	if r.KillNow != "" {
		fmt.Fprintf(w, "%s during the teardown: every rank was killed at once (SIGKILL).\n", r.KillNow)
	}
	switch n := r.killed(c.Rank); {
	case n > 0 && c.Rank >= 0:
		fmt.Fprintf(w, "\n%d other rank(s) were terminated by ccrun.\n", n)
	case n > 0:
		fmt.Fprintf(w, "\n%d rank(s) were terminated by ccrun.\n", n)
	}
	fmt.Fprintln(w, rule)
}

// exitHint explains the exit codes a shell reserves.
func exitHint(code int) string {
	switch code {
	case 126:
		return " (the program or its working directory was not usable there)"
	case 127:
		return " (the program was not found on that host)"
	}
	return ""
}

func (r *Report) writeStates(w io.Writer, states []RankState) {
	fmt.Fprintf(w, "  %5s  %-20s %8s  %s\n", "rank", "host", "pid", "state")
	for _, s := range states {
		fmt.Fprintf(w, "  %5d  %-20s %8d  %s\n", s.Slot.Rank, s.Slot.Host, s.Pid, s.state())
	}
}

// ranksOn lists the ranks of host, "4,5".
func (r *Report) ranksOn(host string) string {
	var ids []string
	for _, s := range r.Ranks {
		if s.Slot.Host == host {
			ids = append(ids, fmt.Sprint(s.Slot.Rank))
		}
	}
	return strings.Join(ids, ",")
}

// killed counts the ranks other than first that ended by ccrun's teardown: ccrun sent them
// a signal and they died of a signal, exited with 128+the signal sent (a shell's way of
// reporting it), or never reported. A rank that exited with a status of its own, whether
// or not ccrun had signalled it meanwhile, ended by itself.
func (r *Report) killed(first int) int {
	n := 0
	for _, s := range r.Ranks {
		if s.Slot.Rank == first || s.Sent == 0 {
			continue
		}
		e := s.Exit
		if !s.Exited || e.Err != nil || e.Signal != 0 ||
			e.Code == 128+int(syscall.SIGTERM) || e.Code == 128+int(s.Sent) {
			n++
		}
	}
	return n
}
