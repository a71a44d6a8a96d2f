package launch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/seed-760dd1f1/cc/launch/hostfile"
)

// reachRemote is a fakeRemote whose Connect fails for the hosts in fail, recording every
// host it was asked to reach.
type reachRemote struct {
	*fakeRemote
	fail map[string]error

	mu       sync.Mutex
	connects []string
	closed   bool
}

func (r *reachRemote) Connect(_ context.Context, hosts []RemoteHost) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, h := range hosts {
		r.connects = append(r.connects, h.Name)
	}
	for _, h := range hosts {
		if err := r.fail[h.Name]; err != nil {
			return err
		}
	}
	return nil
}

func (r *reachRemote) Close() error {
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	return r.fakeRemote.Close()
}

// timeoutErr is an unreachable host, as sshspawn.UnreachableError says it.
type timeoutErr struct{ host string }

func (e timeoutErr) Error() string     { return "host " + e.host + ": dial tcp: i/o timeout" }
func (e timeoutErr) Unreachable() bool { return true }

// reachJob is a job of one rank per host on h1..h4 (h3 on this machine), 2 slots each.
func reachJob(r *reachRemote) Options {
	o := fakeJob(0, r.fakeRemote)
	o.Hosts = []hostfile.Host{{Name: "h1", Slots: 2}, {Name: "h2", Slots: 2}, {Name: "h3", Slots: 2}, {Name: "h4", Slots: 2}}
	o.Placement = Placement{PerNode: 1}
	o.Remote = r
	o.IsLocal = func(h string) bool { return h == "h3" }
	o.Argv = []string{"true"}
	return o
}

func TestSkipUnreachable(t *testing.T) {
	r := &reachRemote{fakeRemote: &fakeRemote{body: func(*fakeProc) Exit { return Exit{} }}, fail: map[string]error{"h2": timeoutErr{"h2"}}}
	o := reachJob(r)
	o.SkipUnreachable = true
	var skipped []string
	o.Skipped = func(host string, why error) { skipped = append(skipped, host+": "+why.Error()) }
	if _, err := Run(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	r.wg.Wait()
	if want := []string{"h2: dial tcp: i/o timeout"}; !slices.Equal(skipped, want) {
		t.Errorf("Skipped got %q, want %q", skipped, want)
	}
	// Each remote host is reached once: the hosts reached before placement are not dialled again.
	slices.Sort(r.connects)
	if want := []string{"h1", "h2", "h4"}; !slices.Equal(r.connects, want) {
		t.Errorf("Connect got %q, want %q", r.connects, want)
	}
	var got []string
	for _, p := range r.procs {
		v, _ := lookupIn(p.spec.Env)(EnvUnreachableHosts)
		got = append(got, fmt.Sprintf("%d %s %s=%s", p.spec.Slot.Rank, p.spec.Slot.Host, EnvUnreachableHosts, v))
	}
	slices.Sort(got)
	if want := []string{"0 h1 CC_UNREACHABLE_HOSTS=h2", "2 h4 CC_UNREACHABLE_HOSTS=h2"}; !slices.Equal(got, want) {
		t.Errorf("remote ranks got %q, want %q (rank 1 runs on h3, this machine)", got, want)
	}
}

func TestSkipUnreachableErrors(t *testing.T) {
	auth := errors.New("host h4: authentication as root failed")
	for _, c := range []struct {
		name string
		skip bool
		np   int
		fail map[string]error
		want string
	}{
		{"without the flag an unreachable host fails the job", false, 0, map[string]error{"h2": timeoutErr{"h2"}}, "host h2: dial tcp: i/o timeout"},
		{"too few hosts left", true, 4, map[string]error{"h2": timeoutErr{"h2"}}, "--skip-unreachable dropped h2: "},
		{"a refused login is not skipped", true, 0, map[string]error{"h2": timeoutErr{"h2"}, "h4": auth}, auth.Error()},
		{"a refused login first", true, 0, map[string]error{"h1": auth}, auth.Error()},
		{"wrapped, still unreachable", true, 4, map[string]error{"h1": fmt.Errorf("agent: %w", timeoutErr{"h1"})}, "--skip-unreachable dropped h1: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &reachRemote{fakeRemote: &fakeRemote{body: func(*fakeProc) Exit { return Exit{} }}, fail: c.fail}
			o := reachJob(r)
			o.SkipUnreachable = c.skip
			o.Placement.NP = c.np
			_, err := Run(context.Background(), o)
			if err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("got %v, want an error starting %q", err, c.want)
			}
			if !r.closed {
				t.Errorf("the connections were not closed")
			}
		})
	}
}

type notReally struct{}

func (notReally) Error() string     { return "no" }
func (notReally) Unreachable() bool { return false }

func TestUnreachable(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{timeoutErr{"h"}, true},
		{fmt.Errorf("agent: %w", timeoutErr{"h"}), true},
		{errors.New("host h: dial tcp: i/o timeout"), false},
		{notReally{}, false},
		{nil, false},
	} {
		if got := Unreachable(c.err); got != c.want {
			t.Errorf("Unreachable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
