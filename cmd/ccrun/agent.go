package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/seed-760dd1f1/cc/hw"
	"github.com/seed-760dd1f1/cc/launch/agent"
)

// runAgent is ccrun's hidden agent mode (ccrun --ccrun-agent), which ccrun starts on each
// remote host over one SSH session: it speaks the agent protocol on stdin and stdout (see
// launch/agent) until the session ends. SIGTERM, SIGINT and SIGHUP end it as the end of
// the session does (its ranks are ended first); SIGPIPE is caught, so that a write to a
// session that is gone fails instead of killing the agent before it has ended its ranks.
func runAgent(ctx context.Context, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	pipe := make(chan os.Signal, 1)
	signal.Notify(pipe, syscall.SIGPIPE)
	defer signal.Stop(pipe)
	host, _ := os.Hostname()
	var boot string
	if id, err := hw.HostIdentity(hw.Root()); err == nil {
		host, boot = id.Hostname, id.BootID
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(stderr, "ccrun agent on "+host+": "+format+"\n", args...)
	}
	if err := agent.Serve(ctx, os.Stdin, os.Stdout, agent.ServeOptions{Environ: os.Environ(), Host: host, BootID: boot, Logf: logf}); err != nil {
		logf("%v", err)
		return 1
	}
	return 0
}
