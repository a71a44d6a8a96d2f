package main

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/seed-760dd1f1/cc/cmd/internal/cli"
)

// ccrun must outlive every signal that ends it until its ranks are gone, so it takes over
// the signals that would otherwise kill it:
//
//   - the first SIGINT, SIGTERM or SIGHUP (a closed terminal or SSH session) cancels the
//     run's context with a cli.SignalError cause: the job is torn down (SIGTERM to every
//     rank, --grace, SIGKILL) and ccrun exits with 128+the signal;
//   - each later one goes to the kill channel (launch.Options.Kill): every rank's process
//     group gets SIGKILL at once, ccrun waits for them, then exits, as srun and prterun do
//     on a second Ctrl-C;
//   - SIGPIPE is caught, so that a write to a closed stdout or stderr fails with EPIPE
//     instead of killing ccrun; launch sees that error and ends the job (exit 141);
//   - SIGUSR1 and SIGUSR2 are forwarded to every rank (forwardSignals).
//
// cli.Main also cancels the context on the first SIGINT or SIGTERM; that is the same
// cancellation, and the trap keeps later signals from taking their default action.

// trapSignals returns ctx, cancelled on the first ending signal, and the channel of the
// later ones. stop releases the signals and ends the trap's goroutine.
func trapSignals(parent context.Context) (ctx context.Context, kill <-chan os.Signal, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 4)
	again := make(chan os.Signal, 4)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		first := true
		for {
			select {
			case s := <-ch:
				switch {
				case s == syscall.SIGPIPE: // the failed write tells whoever made it
				case first:
					first = false
					cancel(&cli.SignalError{Signal: s})
				default:
					select {
					case again <- s:
					default: // a kill is already pending
					}
				}
			case <-done:
				return
			}
		}
	})
	return ctx, again, func() {
		signal.Stop(ch)
		close(done)
		wg.Wait()
		cancel(context.Canceled)
	}
}

// forwardSignals returns a channel of SIGUSR1 and SIGUSR2 for the supervisor to pass on.
func forwardSignals() (<-chan os.Signal, func()) {
	ch := make(chan os.Signal, 4)
	signal.Notify(ch, syscall.SIGUSR1, syscall.SIGUSR2)
	return ch, func() { signal.Stop(ch) }
}
