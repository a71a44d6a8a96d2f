package main

import (
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// seconds matches a plain decimal number of seconds.
var seconds = regexp.MustCompile(`^(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)$`)

// maxTimeout keeps a number of seconds inside time.Duration (about 292 years).
const maxTimeout = 100 * 365 * 24 * time.Hour

// parseTimeout parses a --timeout or MPIEXEC_TIMEOUT value; what names it in errors. A
// plain number is seconds (5, 1.5), as mpirun's and MPIEXEC_TIMEOUT's whole seconds always
// were; anything else is a Go duration (500ms, 2m, 1h30m). 0 means no timeout.
func parseTimeout(what, s string) (time.Duration, error) {
	bad := fmt.Errorf("bad %s %q: want seconds (5, 1.5) or a duration (500ms, 2m); 0: no timeout", what, s)
	if seconds.MatchString(s) {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f > maxTimeout.Seconds() {
			return 0, bad
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, bad
	}
	return d, nil
}
