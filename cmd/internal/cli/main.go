package cli

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// RunFunc is a whole command: it reads args (args[0] is the program name as
// invoked), the environment as "KEY=value" entries, writes to the two streams,
// and returns the exit status. ctx is cancelled, with a [SignalError] cause,
// when the process is interrupted.
type RunFunc func(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int

// Main runs run with the real process arguments, environment and streams and a
// context cancelled by SIGINT or SIGTERM, and returns the exit status, so a
// binary's main is one line: func main() { os.Exit(cli.Main(run)) }.
func Main(run RunFunc) int {
	ctx, stop := SignalContext(context.Background())
	defer stop()
	return run(ctx, os.Args, os.Environ(), os.Stdout, os.Stderr)
}

// SignalContext returns a context that is cancelled with a [SignalError] cause
// on the first SIGINT or SIGTERM. A second signal is left to the default
// action (the process dies), so a stuck teardown can always be interrupted.
// stop releases the signal handler.
func SignalContext(parent context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			signal.Stop(ch)
			cancel(&SignalError{Signal: s})
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel(context.Canceled)
	}
}

// Lookup returns a lookup function over environ ("KEY=value" entries; the last
// entry for a key wins, as in os/exec).
func Lookup(environ []string) func(string) (string, bool) {
	m := make(map[string]string, len(environ))
	for _, kv := range environ {
		k, v, ok := cutEnv(kv)
		if ok {
			m[k] = v
		}
	}
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func cutEnv(kv string) (key, value string, ok bool) {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			if i == 0 {
				return "", "", false
			}
			return kv[:i], kv[i+1:], true
		}
	}
	return "", "", false
}
