package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Progress modes of --progress.
const (
	progressAuto   = "auto"   // on a terminal, outside CI
	progressAlways = "always" // whatever stderr is
	progressNever  = "never"
)

// envProgressTerminal is set to 1 by a ccrun whose stderr is a terminal: it
// keeps a rank's carriage-return line there as its status line
// (launch.EnvProgressTerminal).
const envProgressTerminal = "CC_PROGRESS_TERMINAL"

// sweepProgressDelay is how long a benchmark sweep runs before its progress
// line appears: short sweeps print their table and nothing else.
const sweepProgressDelay = 3 * time.Second

// progressFlag is --progress's value: a bad one is refused when it is set,
// from the command line or from CC_PERF_PROGRESS.
type progressFlag struct{ mode *string }

func (f progressFlag) String() string { return *f.mode }
func (f progressFlag) Type() string   { return "auto|always|never" }

func (f progressFlag) Set(s string) error {
	switch s {
	case progressAuto, progressAlways, progressNever:
		*f.mode = s
		return nil
	}
	return fmt.Errorf("want auto, always or never")
}

// wantProgress says whether rank 0 draws a progress line on stderr: never
// with --progress=never, always with --progress=always, and with auto only
// when stderr is a terminal, or a pipe to a ccrun that keeps the line on its
// terminal (CC_PROGRESS_TERMINAL=1), and the environment is not CI's (CI set
// to anything but "", "0" or "false", as CI services set it).
func wantProgress(e *env) bool {
	switch e.progress {
	case progressNever:
		return false
	case progressAlways:
		return true
	}
	if ci, ok := e.lookup("CI"); ok && ci != "" && ci != "0" && ci != "false" {
		return false
	}
	if v, _ := e.lookup(envProgressTerminal); v == "1" {
		return true
	}
	return e.isTerminal != nil && e.isTerminal(e.stderr)
}

// progress is rank 0's one progress line on stderr: what runs, done/total,
// elapsed time and the estimate of what is left, redrawn in place
// (schollz/progressbar). A nil *progress draws nothing, so callers need
// not ask. The line appears only once delay has passed since it was made,
// and is erased (hide) before anything else is written to the terminal.
type progress struct {
	mu    sync.Mutex
	bar   *progressbar.ProgressBar
	gate  *gateWriter
	start time.Time
	delay time.Duration
	now   func() time.Time
}

// newProgress is a progress line for a task of total steps (-1: unknown)
// described by what, or nil when e does not want one.
func newProgress(e *env, what string, total int, delay time.Duration) *progress {
	if !wantProgress(e) {
		return nil
	}
	now := e.now
	if now == nil {
		now = time.Now
	}
	g := &gateWriter{w: e.stderr}
	p := &progress{gate: g, start: now(), delay: delay, now: now}
	p.bar = progressbar.NewOptions(total,
		progressbar.OptionSetWriter(g),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionSetWidth(10),                // the whole line fits 80 columns
		progressbar.OptionSetSpinnerChangeInterval(0), // no goroutine redraws an unknown total
		progressbar.OptionClearOnFinish(),
	)
	return p
}

// set records done steps, with what as the description ("" keeps it), and
// redraws the line once the delay has passed.
func (p *progress) set(done int, what string) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if what != "" {
		p.bar.Describe(what)
	}
	if !p.gate.open && p.now().Sub(p.start) >= p.delay {
		p.gate.open = true
	}
	_ = p.bar.Set(done) // redraws, also when the count is unchanged
}

// add records n more steps done.
func (p *progress) add(n int) {
	if p == nil {
		return
	}
	p.set(int(p.bar.State().CurrentNum)+n, "")
}

// hide erases the line (before a table row or a round's line is written);
// the next set draws it again.
func (p *progress) hide() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gate.open {
		_ = p.bar.Clear()
	}
}

// done erases the line for good.
func (p *progress) done() {
	if p == nil {
		return
	}
	p.hide()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gate.open = false
	_ = p.bar.Exit()
}

// gateWriter drops what the bar draws until the delay has passed.
type gateWriter struct {
	w    io.Writer
	open bool
}

func (g *gateWriter) Write(b []byte) (int, error) {
	if !g.open {
		return len(b), nil
	}
	return g.w.Write(b)
}
