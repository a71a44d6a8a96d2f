package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCode(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, 0},
		{"plain", errors.New("x"), 1},
		{"with code", WithCode(6, errors.New("bad flag")), 6},
		{"wrapped code", fmt.Errorf("run: %w", Errorf(4, "timeout")), 4},
		{"silent", Silent(7), 7},
		{"sigint", &SignalError{Signal: syscall.SIGINT}, 130},
		{"sigterm", fmt.Errorf("x: %w", &SignalError{Signal: syscall.SIGTERM}), 143},
		{"canceled", fmt.Errorf("wait: %w", context.Canceled), 130},
	}
	for _, tt := range tests {
		if got := Code(tt.err); got != tt.want {
			t.Errorf("%s: Code(%v) = %d, want %d", tt.name, tt.err, got, tt.want)
		}
	}
	if WithCode(3, nil) != nil {
		t.Error("WithCode(3, nil) != nil")
	}
}

func TestFail(t *testing.T) {
	var b bytes.Buffer
	if got := Fail(&b, "cc-perf", Errorf(6, "invalid -b %q:\nsecond line", "1X")); got != 6 {
		t.Errorf("Fail exit = %d, want 6", got)
	}
	if got, want := b.String(), "cc-perf: invalid -b \"1X\":; second line\n"; got != want {
		t.Errorf("Fail printed %q, want %q", got, want)
	}
	b.Reset()
	if got := Fail(&b, "cc-perf", Silent(7)); got != 7 || b.Len() != 0 {
		t.Errorf("Fail(Silent(7)) = %d and printed %q; want 7 and nothing", got, b.String())
	}
	if got := Fail(&b, "cc-perf", nil); got != 0 || b.Len() != 0 {
		t.Errorf("Fail(nil) = %d and printed %q; want 0 and nothing", got, b.String())
	}
}

func TestLookup(t *testing.T) {
	look := Lookup([]string{"A=1", "B=", "A=2", "=x", "junk", "C=a=b"})
	for _, tt := range []struct {
		k, v string
		ok   bool
	}{{"A", "2", true}, {"B", "", true}, {"C", "a=b", true}, {"D", "", false}, {"junk", "", false}} {
		v, ok := look(tt.k)
		if v != tt.v || ok != tt.ok {
			t.Errorf("lookup(%q) = %q, %v; want %q, %v", tt.k, v, ok, tt.v, tt.ok)
		}
	}
}

func TestBindFlags(t *testing.T) {
	newFlags := func() (*pflag.FlagSet, *int, *Size, *bool) {
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		iters := fs.IntP("iters", "n", 20, "")
		min := Size(32 << 20)
		fs.VarP(&min, "minbytes", "b", "")
		legacy := fs.Bool("legacy-format", false, "")
		return fs, iters, &min, legacy
	}
	env := []string{"CC_PERF_ITERS=5", "CC_PERF_MINBYTES=1K", "CC_PERF_LEGACY_FORMAT=1", "OTHER_ITERS=9", "CC_PERF_=x"}

	fs, iters, min, legacy := newFlags()
	if err := fs.Parse([]string{"-n", "7"}); err != nil {
		t.Fatal(err)
	}
	if err := BindFlags(fs, NewViper("CC_PERF", env), "CC_PERF"); err != nil {
		t.Fatal(err)
	}
	// The command line wins; the environment fills the rest.
	if *iters != 7 || *min != 1024 || !*legacy {
		t.Errorf("got iters=%d minbytes=%d legacy=%v, want 7 1024 true", *iters, *min, *legacy)
	}

	fs, _, _, _ = newFlags()
	_ = fs.Parse(nil)
	err := BindFlags(fs, NewViper("CC_PERF", []string{"CC_PERF_MINBYTES=1X"}), "CC_PERF")
	if err == nil {
		t.Fatal("BindFlags with CC_PERF_MINBYTES=1X = nil, want error")
	}
	if want := `CC_PERF_MINBYTES="1X" (for --minbytes): invalid size "1X"`; !bytes.HasPrefix([]byte(err.Error()), []byte(want)) {
		t.Errorf("error = %q, want prefix %q", err, want)
	}
}

func TestEnvName(t *testing.T) {
	for _, tt := range [][3]string{{"CC_PERF", "minbytes", "CC_PERF_MINBYTES"}, {"CC_PERF", "legacy-format", "CC_PERF_LEGACY_FORMAT"}, {"CCRUN", "warmup_iters", "CCRUN_WARMUP_ITERS"}} {
		if got := EnvName(tt[0], tt[1]); got != tt[2] {
			t.Errorf("EnvName(%q, %q) = %q, want %q", tt[0], tt[1], got, tt[2])
		}
	}
}

func TestSignalContext(t *testing.T) {
	ctx, stop := SignalContext(context.Background())
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second): // a bound on a hang, not a timing assertion
		t.Fatal("context not cancelled by SIGTERM")
	}
	if got := Code(context.Cause(ctx)); got != 143 {
		t.Errorf("Code(cause) = %d (cause %v), want 143", got, context.Cause(ctx))
	}
}

func TestSignalContextStop(t *testing.T) {
	ctx, stop := SignalContext(context.Background())
	stop()
	<-ctx.Done()
	if got := Code(context.Cause(ctx)); got != 130 {
		t.Errorf("after stop, Code(cause) = %d, want 130", got)
	}
}
