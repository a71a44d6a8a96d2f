package launch

import (
	"bytes"
	"strings"
	"syscall"
	"testing"

	"github.com/seed-760dd1f1/cc/runtime/bootstrap"
)

// TestKilledPeerOutranksItsVictimsAbort: rank 0 aborts because its peer, rank 2, was
// killed from outside (kill -9, the OOM killer); the abort reaches ccrun before rank 2's
// exit status. The job's cause is rank 2's death, not rank 0's abort; a rank that died of
// the SIGTERM ccrun sent it, or crashed after ccrun's SIGKILL, is no such cause.
func TestKilledPeerOutranksItsVictimsAbort(t *testing.T) {
	for _, tc := range []struct {
		name      string
		sent      syscall.Signal
		exit      Exit
		wantCause int
	}{
		{"SIGKILL within the grace", syscall.SIGTERM, Exit{Signal: syscall.SIGKILL}, 2},
		{"a signal before ccrun sent any", 0, Exit{Signal: syscall.SIGSEGV}, 2},
		{"ccrun's SIGTERM", syscall.SIGTERM, Exit{Signal: syscall.SIGTERM}, 0},
		{"ccrun's SIGKILL", syscall.SIGKILL, Exit{Signal: syscall.SIGKILL}, 0},
		{"crashed in its SIGTERM handler", syscall.SIGTERM, Exit{Signal: syscall.SIGSEGV}, 0},
		{"exited with a code", syscall.SIGTERM, Exit{Code: 3}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &job{o: Options{Logf: func(string, ...any) {}}, slots: []Slot{{Rank: 0, Host: "a"}, {Rank: 1, Host: "a"}, {Rank: 2, Host: "b"}}}
			s := newSupervisor(j, nil)
			s.phase = terminating // teardown under way: fail records, signals nothing
			s.handleRoot(bootstrap.Event{Kind: bootstrap.EventFailed, Rank: 0,
				Err: &bootstrap.RankError{Rank: 0, Host: "a", Pid: 10, How: bootstrap.Failed, Cause: "rank 2: connection reset by peer"}})
			if c := s.rep.Cause; c == nil || c.Kind != CauseAbort || c.Rank != 0 {
				t.Fatalf("cause after rank 0's abort: %+v, want rank 0's abort", c)
			}
			s.rep.Ranks[2].Sent = tc.sent
			s.handle(event{kind: evExited, rank: 2, exit: tc.exit})
			if c := s.rep.Cause; c.Rank != tc.wantCause {
				t.Fatalf("cause after rank 2 ended with %v (sent %v): rank %d (%+v), want rank %d", tc.exit, tc.sent, c.Rank, c, tc.wantCause)
			}
			var sum bytes.Buffer
			s.rep.WriteSummary(&sum)
			if tc.wantCause == 2 && !strings.Contains(sum.String(), "rank 2 with PID") {
				t.Errorf("summary does not name rank 2's death:\n%s", sum.String())
			}
		})
	}
}
