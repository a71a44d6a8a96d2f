package comm

// Split is NCCL's ncclCommSplit: the ranks of a communicator that pass the
// same color form a new communicator, ranked by key.
//
// It is built on the parent's bootstrap, in one round: every rank
// all-gathers "color key addr" through the parent's root, where addr is a
// listener the rank opened for the case it becomes its group's root. Every
// rank then knows every group: the members of its color ordered by (key,
// parent rank); the first one hosts the new communicator's bootstrap root
// on its listener (the others close theirs), and every member calls Init
// with that root, its new rank and the group's size. The new job id is
// derived from the parent's (so every member computes the same one without
// a second round, and shared-memory segments stay apart); the secret is
// the parent's.
//
//	parent ranks   0    1    2    3    4
//	color          0    1    0    1   -1 (SplitNoColor: no communicator)
//	key            0    0    1    1
//	new comms     {0,2} as ranks 0,1   {1,3} as ranks 0,1

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/seed-760dd1f1/cc/runtime/bootstrap"
	"github.com/seed-760dd1f1/cc/runtime/wire"
)

// SplitNoColor is the color of a rank that takes part in Split but joins
// no new communicator (NCCL_SPLIT_NOCOLOR); any negative color does the same.
const SplitNoColor = -1

// splitMember is one parent rank's entry in the Split exchange.
type splitMember struct {
	parent, color, key int
	addr               string // its listener, "" with no color
}

// Split creates a communicator of the ranks of c that pass the same color,
// ordered by key (ties by rank in c), as NCCL's ncclCommSplit. Every rank of
// c must call it, in the same order relative to c's other calls, like a
// collective. A rank with a negative color (SplitNoColor) takes part but
// gets nil and no error. The new communicator is independent of c: it has
// its own connections and bootstrap root (hosted by its rank 0), its own
// failure domain, and must be closed on its own; c stays usable. It takes
// c's settings (Params). Since the ranks of other colors run beside it, it
// counts on a share of each host's cores proportional to its ranks there
// (where ranks outnumber cores, waits then sleep sooner instead of
// spinning).
func (c *Comm) Split(ctx context.Context, color, key int) (*Comm, error) {
	nc, err := c.split(ctx, color, key)
	if err != nil {
		return nil, fmt.Errorf("rank %d: split: %w", c.rank, err)
	}
	return nc, nil
}

func (c *Comm) split(ctx context.Context, color, key int) (*Comm, error) {
	if c.group.depth > 0 {
		return nil, fmt.Errorf("inside a group (GroupStart without GroupEnd)")
	}
	if err := c.Err(); err != nil {
		return nil, err
	}
	if color < 0 {
		color = SplitNoColor
	}
	seq := c.splits
	c.splits++

	// An abort of c ends the exchange and the new communicator's Init.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(c.ctx, func() { cancel(context.Cause(c.ctx)) })
	defer stop()

	var ln net.Listener
	addr := ""
	if color != SplitNoColor {
		host, _, err := net.SplitHostPort(c.tr.Addr())
		if err != nil {
			return nil, err
		}
		if ln, err = net.Listen("tcp", net.JoinHostPort(host, "0")); err != nil {
			return nil, fmt.Errorf("listen for the new bootstrap root: %w", err)
		}
		addr = ln.Addr().String()
	}
	closeLn := func() {
		if ln != nil {
			ln.Close()
		}
	}
	parts, err := c.boot.AllGather(ctx, fmt.Appendf(nil, "%d %d %s", color, key, addr))
	if err != nil {
		closeLn()
		return nil, err
	}
	group, err := splitGroup(parts, color)
	if err != nil {
		closeLn()
		return nil, err
	}
	if color == SplitNoColor {
		return nil, nil
	}
	rank := slices.IndexFunc(group, func(m splitMember) bool { return m.parent == c.rank })
	o := Options{Rank: rank, NRanks: len(group), RootAddr: group[0].addr, Job: splitJob(c.job, seq, color), Params: c.p,
		hostRanks: c.hostRanks, baseJob: c.collnet.job}
	if rank == 0 {
		o.root = bootstrap.NewRoot(ln, len(group), o.Job, c.warnf)
	} else {
		closeLn()
	}
	nc, err := Init(ctx, o)
	if err != nil && o.root != nil {
		o.root.Close() // Init may fail before it owns the root; Close is idempotent
	}
	return nc, err
}

// splitGroup parses the exchange (parts[r] is parent rank r's "color key
// addr") and returns the members of color in their new rank order: by key,
// then by parent rank. No color has no group.
func splitGroup(parts [][]byte, color int) ([]splitMember, error) {
	var group []splitMember
	for r, p := range parts {
		m, ok := parseSplitMember(r, string(p))
		if !ok {
			return nil, fmt.Errorf("rank %d sent a malformed split entry %q: is it running another version of cc?", r, p)
		}
		if color != SplitNoColor && m.color == color {
			group = append(group, m)
		}
	}
	slices.SortStableFunc(group, func(a, b splitMember) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.parent, b.parent))
	})
	return group, nil
}

// parseSplitMember reads parent rank r's "color key addr" ("color key"
// with no color).
func parseSplitMember(r int, s string) (splitMember, bool) {
	f := strings.Fields(s)
	if len(f) < 2 || len(f) > 3 {
		return splitMember{}, false
	}
	color, err1 := strconv.Atoi(f[0])
	key, err2 := strconv.Atoi(f[1])
	m := splitMember{parent: r, color: color, key: key}
	if len(f) == 3 {
		m.addr = f[2]
	}
	ok := err1 == nil && err2 == nil && (color == SplitNoColor) == (m.addr == "") && color >= SplitNoColor
	return m, ok
}

// splitJob is the job identity of the communicator that split number seq
// of parent makes for color: the same on every member, distinct from the
// parent's and from every other split's, within wire.MaxJobIDLen.
func splitJob(parent wire.Job, seq, color int) wire.Job {
	sum := sha256.Sum256([]byte(parent.ID + "\x00" + strconv.Itoa(seq) + "\x00" + strconv.Itoa(color)))
	return wire.Job{ID: "split-" + hex.EncodeToString(sum[:16]), Secret: parent.Secret}
}
