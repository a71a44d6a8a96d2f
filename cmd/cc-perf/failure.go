package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
	"github.com/seed-760dd1f1/cc/cmd/internal/cli"
	"github.com/seed-760dd1f1/cc/hw"
	"github.com/seed-760dd1f1/cc/runtime/bootstrap"
)

// failed reports what stopped the run on the table and in the -J file
// (rec: rank 0's process; nil elsewhere) and returns the error with its
// exit status: 4 for a timeout anywhere in the job, 128+n for a signal, 3
// for a runtime failure.
//
// A timeout while joining the job says what the runtime knew: on a rank
// that had joined, the ranks that never did and the hosts of those that did
// ("# vm: Test timeout (2s) joining the job: rank 1 of 2 never joined the
// bootstrap root at 10.0.0.1:29500; joined: 0 (vm)"); elsewhere the
// runtime's error (a rank that could not reach the root names it).
//
// Every local rank may fail with the same error (errors.Join puts one per
// line): the report and the returned error say each distinct message once,
// naming the ranks that share it (see distinctLines). On the table every
// line is a '#' line of its own, "host: Test failure: ranks 0-2: ...", so
// that parsers skipping '#' lines never read it as data; on stderr the
// returned error is one line.
func failed(err error, rec *recorder) error {
	host := readHostFacts().host
	host, _, _ = strings.Cut(host, ".")
	lines := distinctLines(err)
	var te *bench.TimeoutError
	var se *cli.SignalError
	var missing *bootstrap.MissingError
	code, what := exitRuntime, "Test failure"
	switch {
	case errors.As(err, &te):
		code, what = exitTimeout, fmt.Sprintf("Test timeout (%ds) %s", int(te.Timeout/time.Second), te.Phase)
		if err == error(te) {
			lines = nil // the phase says it all; stderr keeps te's own message
		}
	case errors.As(err, &se) || errors.Is(err, context.Canceled):
		code, what = 0, "Test interrupted" // cli.Code: 128+n
	case strings.Contains(err.Error(), "test timeout ("):
		// Another process of the job timed out and aborted it; the cause
		// reached us as text.
		code, what = exitTimeout, "Test timeout in another process"
	}
	stderr := strings.Join(lines, "\n")
	if code == exitTimeout && errors.As(err, &missing) {
		// The join timed out: who never came is the message.
		lines = []string{missing.Summary()}
		stderr = strings.ToLower(what[:1]) + what[1:] + ": " + lines[0]
	}
	if rec != nil {
		msg := []string{host + ": " + what}
		if lines != nil {
			msg = msg[:0]
			for _, l := range lines {
				msg = append(msg, host+": "+what+": "+l)
			}
		}
		rec.abort(msg)
	}
	if lines != nil {
		err = &distinctError{msg: stderr, err: err}
	}
	if code == 0 {
		return err
	}
	return cli.WithCode(code, err)
}

// distinctError is err with the message distinctLines makes of it.
type distinctError struct {
	msg string
	err error
}

func (e *distinctError) Error() string { return e.msg }
func (e *distinctError) Unwrap() error { return e.err }

// rankPrefix is how the runtime starts a rank's error: "rank 3: ".
var rankPrefix = regexp.MustCompile(`^rank (\d+): `)

// distinctLines splits err's message into its lines (errors.Join puts each
// rank's error on one) and says each once, in the order of first
// appearance. Lines that differ only in their "rank N: " prefix become one
// naming every such rank: "rank 0: x", "rank 1: x", "rank 3: x" and
// "rank 2: y" become "ranks 0-1,3: x" and "rank 2: y".
func distinctLines(err error) []string {
	type message struct {
		text   string
		ranked bool  // the lines started with "rank N: "
		ranks  []int // their ranks
	}
	var order []*message
	seen := map[string]*message{}
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		m := &message{text: line}
		if sub := rankPrefix.FindStringSubmatch(line); sub != nil {
			r, _ := strconv.Atoi(sub[1])
			m = &message{text: line[len(sub[0]):], ranked: true, ranks: []int{r}}
		}
		key := strconv.FormatBool(m.ranked) + m.text
		if prev, ok := seen[key]; ok {
			prev.ranks = append(prev.ranks, m.ranks...)
			continue
		}
		seen[key] = m
		order = append(order, m)
	}
	lines := make([]string, 0, len(order))
	for _, m := range order {
		slices.Sort(m.ranks)
		m.ranks = slices.Compact(m.ranks)
		switch {
		case !m.ranked:
			lines = append(lines, m.text)
		case len(m.ranks) == 1:
			lines = append(lines, fmt.Sprintf("rank %d: %s", m.ranks[0], m.text))
		default:
			lines = append(lines, "ranks "+hw.CPUList(m.ranks).String()+": "+m.text) // a CPU list's notation: 0-2,5
		}
	}
	if len(lines) == 0 {
		lines = append(lines, "unknown error")
	}
	return lines
}
