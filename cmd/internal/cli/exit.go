package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
)

// ExitError is an error that carries the process exit status it should produce.
type ExitError struct {
	Code int   // exit status, 1..255
	Err  error // what went wrong; nil means the failure was already reported
}

// Error returns the wrapped error's text.
func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

// Unwrap returns the wrapped error.
func (e *ExitError) Unwrap() error { return e.Err }

// WithCode wraps err so that [Fail] exits with code. A nil err stays nil.
func WithCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &ExitError{Code: code, Err: err}
}

// Errorf formats an error (%w works) that makes [Fail] exit with code.
func Errorf(code int, format string, args ...any) error {
	return &ExitError{Code: code, Err: fmt.Errorf(format, args...)}
}

// Silent returns an error that exits with code and prints nothing: use it when
// the command has already told the user what happened.
func Silent(code int) error { return &ExitError{Code: code} }

// SignalError is the cancel cause of the context [Main] passes to a command
// when the process receives SIGINT or SIGTERM.
type SignalError struct{ Signal os.Signal }

// Error names the signal.
func (e *SignalError) Error() string {
	if s, ok := e.Signal.(syscall.Signal); ok {
		return fmt.Sprintf("interrupted by signal %d (%s)", int(s), s)
	}
	return "interrupted by " + e.Signal.String()
}

// Code returns the exit status for err: 0 for nil, the code of the outermost
// [ExitError], 128+signo for a [SignalError] (130 for SIGINT), 130 for a bare
// context cancellation, and 1 otherwise.
func Code(err error) int {
	if err == nil {
		return 0
	}
	var ee *ExitError
	if errors.As(err, &ee) && ee.Code > 0 {
		return ee.Code
	}
	var se *SignalError
	if errors.As(err, &se) {
		if s, ok := se.Signal.(syscall.Signal); ok {
			return 128 + int(s)
		}
		return 130
	}
	if errors.Is(err, context.Canceled) {
		return 130
	}
	return 1
}

// Fail prints err as one line "prog: message" on stderr (nothing for a silent
// error) and returns its exit status (see [Code]).
func Fail(stderr io.Writer, prog string, err error) int {
	if err == nil {
		return 0
	}
	var ee *ExitError
	if !(errors.As(err, &ee) && ee.Err == nil) {
		msg := strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", "; ")
		fmt.Fprintf(stderr, "%s: %s\n", prog, msg)
	}
	return Code(err)
}
