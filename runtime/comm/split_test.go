package comm

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// The tests' split of n parent ranks: two colors interleaved, keys that
// reverse the parent order, and with n odd the last rank without a color.
//
//	n = 5:  rank   0  1  2  3  4
//	        color  0  1  0  1  -1
//	        key    5  4  3  2  1
//	        -> {2, 0} and {3, 1} (parent ranks in new rank order)
func splitColor(r, n int) int {
	if n%2 == 1 && r == n-1 {
		return SplitNoColor
	}
	return r % 2
}

func splitKey(r, n int) int { return n - r }

// splitMembers returns the parent ranks of color's communicator in new rank
// order, by the rule Split documents (key, then parent rank).
func splitMembers(n int, color, key func(r, n int) int, c int) []int {
	var ms []int
	for r := range n {
		if color(r, n) == c {
			ms = append(ms, r)
		}
	}
	slices.SortStableFunc(ms, func(a, b int) int { return key(a, n) - key(b, n) })
	return ms
}

// checkSplit splits c with color and key, then checks on the new
// communicator its rank, its size, its members' order (an all-gather of
// their parent ranks) and an all-reduce at counts of each protocol's size
// class whose every element must be the sum of the members' inputs, keyed
// by parent rank. A rank without a color must get nil. It returns the new
// communicator, for the caller to close.
func checkSplit(c *Comm, color, key func(r, n int) int) (*Comm, error) {
	r, n := c.Rank(), c.NRanks()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	nc, err := c.Split(ctx, color(r, n), key(r, n))
	if err != nil {
		return nil, err
	}
	if color(r, n) < 0 {
		if nc != nil {
			nc.Close()
			return nil, fmt.Errorf("rank %d: no color, got a communicator of %d ranks", r, nc.NRanks())
		}
		return nil, nil
	}
	members := splitMembers(n, color, key, color(r, n))
	if nc == nil || nc.NRanks() != len(members) || nc.Rank() != slices.Index(members, r) {
		return nc, fmt.Errorf("rank %d: got %v, want rank %d of %d", r, describe(nc), slices.Index(members, r), len(members))
	}
	got := make([]byte, 4*len(members))
	if err := nc.AllGather(i32s(1, func(int) int32 { return int32(r) }), got, 1, reduce.Int32); err != nil {
		return nc, err
	}
	for i, m := range members {
		if getI32(got, i) != int32(m) {
			return nc, fmt.Errorf("rank %d: new rank %d is parent rank %d, want %d", r, i, getI32(got, i), m)
		}
	}
	for _, count := range []int{1, 1000, 20000, 300000} {
		send := i32s(count, func(i int) int32 { return input(r, i) })
		recv := make([]byte, 4*count)
		if err := nc.AllReduce(send, recv, count, reduce.Int32, reduce.Sum); err != nil {
			return nc, err
		}
		for i := range count {
			var want int32
			for _, m := range members {
				want += input(m, i)
			}
			if getI32(recv, i) != want {
				return nc, fmt.Errorf("rank %d (new rank %d): count %d: element %d = %d, want %d", r, nc.Rank(), count, i, getI32(recv, i), want)
			}
		}
	}
	return nc, nil
}

func describe(c *Comm) string {
	if c == nil {
		return "no communicator"
	}
	return fmt.Sprintf("rank %d of %d", c.Rank(), c.NRanks())
}

// childSplit is a rank process of TestSplitProcesses: split, check, close
// the new communicator, then check that the parent still works.
func childSplit(c *Comm) error {
	nc, err := checkSplit(c, splitColor, splitKey)
	if nc != nil {
		err = errors.Join(err, nc.Close())
	}
	if err != nil {
		return err
	}
	return childAllReduceThrice(c)
}

// TestSplit splits 5 in-process ranks twice, both new communicators alive
// at once: the interleaved split with a rank without color, and one color
// for all with reversed keys (the parent's ranks reversed). Data is exact
// on every new communicator, and the parent keeps working.
func TestSplit(t *testing.T) {
	const n = 5
	cs := withComms(t, n, testParams(t, nil))
	splits := []struct {
		color, key func(r, n int) int
	}{
		{splitColor, splitKey},
		{func(int, int) int { return 7 }, splitKey},
	}
	news := make([][]*Comm, len(splits))
	for i, s := range splits {
		news[i] = make([]*Comm, n)
		mustEach(t, cs, fmt.Sprintf("split %d", i), func(c *Comm) error {
			nc, err := checkSplit(c, s.color, s.key)
			news[i][c.Rank()] = nc
			return err
		})
	}
	t.Cleanup(func() {
		for _, group := range news {
			var live []*Comm
			for _, c := range group {
				if c != nil {
					live = append(live, c)
				}
			}
			closeAll(t, live)
		}
	})
	if news[0][n-1] != nil {
		t.Errorf("rank %d without a color got a communicator", n-1)
	}
	mustEach(t, cs, "parent all-reduce", childAllReduceThrice)
}

// TestSplitNoColorEverywhere: when no rank passes a color, Split makes
// nothing and fails nowhere.
func TestSplitNoColorEverywhere(t *testing.T) {
	cs := withComms(t, 3, testParams(t, nil))
	mustEach(t, cs, "split", func(c *Comm) error {
		nc, err := c.Split(context.Background(), -5, 0)
		if nc != nil {
			nc.Close()
			return fmt.Errorf("got a communicator")
		}
		return err
	})
}

// TestSplitBadState: Split inside a group and after an abort fails at once,
// naming why.
func TestSplitBadState(t *testing.T) {
	c := withComms(t, 1, testParams(t, nil))[0]
	c.GroupStart()
	_, err := c.Split(context.Background(), 0, 0)
	if err == nil || !strings.Contains(err.Error(), "inside a group") {
		t.Errorf("Split in a group: %v, want an error naming the group", err)
	}
	if err := c.GroupEnd(); err != nil {
		t.Fatal(err)
	}
	c.Abort(fmt.Errorf("test abort"))
	if _, err := c.Split(context.Background(), 0, 0); err == nil || !strings.Contains(err.Error(), "test abort") {
		t.Errorf("Split after abort: %v, want the abort's cause", err)
	}
}

// TestSplitProcesses splits ranks that are OS processes (5 ranks: two
// groups of two and a rank without color), over each transport.
func TestSplitProcesses(t *testing.T) {
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			procs := startRanks(t, 5, "split", tr.env)
			waitOK(t, procs)
			if left := shmFiles(t, "split-"); left != "" {
				t.Errorf("split communicators left segments in %s: %s", shmDir, left)
			}
		})
	}
}

// TestSplitMembers checks the ordering rule on the tests' own split.
func TestSplitMembers(t *testing.T) {
	for _, tt := range []struct {
		n, color int
		want     []int
	}{
		{5, 0, []int{2, 0}},
		{5, 1, []int{3, 1}},
		{5, SplitNoColor, []int{4}},
		{4, 1, []int{3, 1}},
	} {
		if got := splitMembers(tt.n, splitColor, splitKey, tt.color); !slices.Equal(got, tt.want) {
			t.Errorf("n %d color %d: got %v, want %v", tt.n, tt.color, got, tt.want)
		}
	}
}

// TestSplitGroupParse checks the exchange's parser: ties on key go by
// parent rank, and malformed entries are errors naming the rank.
func TestSplitGroupParse(t *testing.T) {
	parts := [][]byte{[]byte("3 1 a:1"), []byte("3 0 b:2"), []byte("-1 9"), []byte("3 1 d:4"), []byte("2 0 e:5")}
	g, err := splitGroup(parts, 3)
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for _, m := range g {
		got = append(got, m.parent)
	}
	if want := []int{1, 0, 3}; !slices.Equal(got, want) || g[0].addr != "b:2" {
		t.Errorf("group %v (root %q), want %v (root b:2)", got, g[0].addr, want)
	}
	for _, bad := range []string{"x 1 a:1", "1 1", "-1 0 a:1", "1", "-2 0", "1 2 a:1 extra"} {
		if _, err := splitGroup([][]byte{[]byte("0 0 z:1"), []byte(bad)}, 0); err == nil || !strings.Contains(err.Error(), "rank 1") {
			t.Errorf("entry %q: %v, want an error naming rank 1", bad, err)
		}
	}
}
