package pmi

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// waitLimit bounds each wait of these tests: a hang fails the test; it is no speed limit.
const waitLimit = 20 * time.Second

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// collectLogs returns a Logf that keeps the server's lines, and what it kept so far.
func collectLogs() (func(string, ...any), func() string) {
	var mu sync.Mutex
	var b strings.Builder
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(&b, format+"\n", args...)
	}
	return logf, func() string {
		mu.Lock()
		defer mu.Unlock()
		return b.String()
	}
}
