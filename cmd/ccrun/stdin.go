package main

import (
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/seed-760dd1f1/cc/cmd/internal/cli"
	"github.com/seed-760dd1f1/cc/launch"
	"golang.org/x/sys/unix"
)

// stdinFile is ccrun's stdin (a variable for the in-process tests, which give /dev/null).
var stdinFile = os.Stdin

// stdinTarget reads --stdin for a job of nranks ranks.
func stdinTarget(s string, nranks int) (launch.StdinTarget, error) {
	t, err := launch.ParseStdinTarget(s)
	if err != nil {
		return 0, cli.WithCode(exitUsage, err)
	}
	if int(t) >= nranks {
		return 0, usagef("bad --stdin %d: the job has %d rank(s), 0-%d", int(t), nranks, nranks-1)
	}
	return t, nil
}

// ranksStdin is what the ranks read of ccrun's stdin f. A terminal is read only while
// ccrun is in its foreground process group, as mpirun does: a read from the background
// (ccrun ... &) would stop ccrun with SIGTTIN; so in the background ccrun waits, and looks
// again on each SIGCONT (fg sends one).
func ranksStdin(f *os.File) io.Reader {
	if !cli.IsTerminal(f) {
		return f
	}
	return &foreground{f: f}
}

// foreground reads a terminal only while ccrun is in the foreground.
type foreground struct {
	f    *os.File
	cont chan os.Signal
}

func (r *foreground) Read(p []byte) (int, error) {
	for !r.inForeground() {
		if r.cont == nil {
			r.cont = make(chan os.Signal, 1)
			signal.Notify(r.cont, syscall.SIGCONT)
		}
		<-r.cont
	}
	if r.cont != nil {
		signal.Stop(r.cont)
		r.cont = nil
	}
	return r.f.Read(p)
}

// inForeground reports whether ccrun's process group is the terminal's foreground group.
func (r *foreground) inForeground() bool {
	pgrp, err := unix.IoctlGetInt(int(r.f.Fd()), unix.TIOCGPGRP)
	return err != nil || pgrp == unix.Getpgrp()
}
