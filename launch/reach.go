package launch

import (
	"context"
	"errors"
	"strings"
	"sync"

	"github.com/seed-760dd1f1/cc/launch/hostfile"
)

// Unreachable reports whether err says a host could not be reached at all: an error in its
// chain has a method Unreachable() bool that reports true (sshspawn.UnreachableError: no
// TCP connection, no SSH handshake). A host that answered and refused (its key, the login)
// is not unreachable: that is a setting to fix, not a host to skip.
func Unreachable(err error) bool {
	var u interface{ Unreachable() bool }
	return errors.As(err, &u) && u.Unreachable()
}

// skipUnreachable connects to every remote host of o.Hosts, o.MaxParallel at a time, each
// on its own, before ranks are placed (Options.SkipUnreachable). It returns the hosts that
// answered and the local ones, in their order, and the names of the unreachable ones, each
// told to o.Skipped; reached gets the names connected. Any other error is returned as it is:
// the job does not start.
func skipUnreachable(ctx context.Context, o Options, reached map[string]bool) (kept []hostfile.Host, skipped []string, err error) {
	errs := make([]error, len(o.Hosts))
	sem := make(chan struct{}, o.MaxParallel)
	var wg sync.WaitGroup
	for i, h := range o.Hosts {
		if o.IsLocal(h.Name) {
			continue
		}
		if o.Remote == nil {
			return nil, nil, errNoRemote(h.Name)
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = o.Remote.Connect(ctx, []RemoteHost{{Name: h.Name, User: h.User, Port: h.Port}})
		})
	}
	wg.Wait()
	for i, h := range o.Hosts { // all of them first: the caller closes what was reached
		if errs[i] == nil && !o.IsLocal(h.Name) {
			reached[h.Name] = true
		}
	}
	for i, h := range o.Hosts {
		switch err := errs[i]; {
		case err == nil:
			kept = append(kept, h)
		case Unreachable(err) && ctx.Err() == nil:
			skipped = append(skipped, h.Name)
			if o.Skipped != nil {
				o.Skipped(h.Name, errors.New(strings.TrimPrefix(err.Error(), "host "+h.Name+": ")))
			}
		default:
			return nil, nil, err
		}
	}
	return kept, skipped, nil
}
