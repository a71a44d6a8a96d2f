package main

import (
	"context"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/cmd/internal/cli"
)

// TestTrapSignals sends this process the signals ccrun traps: the first ending signal
// cancels the context, SIGPIPE does nothing, the next ending signal goes to kill.
func TestTrapSignals(t *testing.T) {
	ctx, kill, stop := trapSignals(context.Background())
	defer stop()
	syscall.Kill(os.Getpid(), syscall.SIGHUP)
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute): // a bound on a hang, not a timing assertion
		t.Fatal("SIGHUP did not cancel the context")
	}
	if got := cli.Code(context.Cause(ctx)); got != 129 {
		t.Errorf("Code(cause) = %d (cause %v), want 129", got, context.Cause(ctx))
	}
	syscall.Kill(os.Getpid(), syscall.SIGPIPE)
	syscall.Kill(os.Getpid(), syscall.SIGTERM)
	select {
	case s := <-kill:
		if s != syscall.SIGTERM {
			t.Errorf("kill got %v, want SIGTERM (SIGPIPE is not an ending signal)", s)
		}
	case <-time.After(time.Minute):
		t.Fatal("the second signal did not reach kill")
	}
}
