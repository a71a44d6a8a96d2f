package comm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/runtime/bootstrap"
)

// errDeadline is the cause the tests end Init's ctx with, as cc-perf -T does.
var errDeadline = errors.New("join deadline")

// TestInitDeadlineNamesMissingRank: ranks 0 (hosting the root) and 1 of 3
// join, rank 2 never comes; when their ctx ends, both fail naming rank 2
// and the hosts of those that joined, with the ctx's cause.
func TestInitDeadlineNamesMissingRank(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	job, _ := NewJob()
	root := bootstrap.NewRoot(ln, 3, job, nil)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	go func() { // end the join once ranks 0 and 1 are in
		joined := 0
		for ev := range root.Events() {
			if joined += b2i(ev.Kind == bootstrap.EventJoined); joined == 2 {
				cancel(errDeadline)
			}
		}
	}()
	p := testParams(t, nil)
	errs := make([]error, 2)
	hangGuard(t, 30*time.Second, "Init with a missing rank", func() {
		var wg sync.WaitGroup
		for r := range errs {
			o := Options{Rank: r, NRanks: 3, RootAddr: root.Addr(), Job: job, Params: p}
			if r == 0 {
				o.root = root
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[r] = Init(ctx, o)
			}()
		}
		wg.Wait()
	})
	for r, err := range errs {
		var me *bootstrap.MissingError
		if !errors.As(err, &me) || !slices.Equal(me.Missing(), []int{2}) || len(me.Joined) != 2 {
			t.Errorf("rank %d: got %v, want a *bootstrap.MissingError naming rank 2", r, err)
			continue
		}
		if want := fmt.Sprintf("rank 2 of 3 never joined the bootstrap root at %s; joined: 0-1 (", root.Addr()); !strings.Contains(err.Error(), want) {
			t.Errorf("rank %d: %q does not say %q", r, err, want)
		}
	}
	// The rank whose ctx ended first carries its cause; the other may have
	// learnt of it from the root's abort.
	if !errors.Is(errs[0], errDeadline) && !errors.Is(errs[1], errDeadline) {
		t.Errorf("neither rank carries the ctx's cause: %v; %v", errs[0], errs[1])
	}
}

// TestInitDeadlineCoversConnect: the bootstrap completes, but rank 1 (a
// fake, on another host) never answers on its data port; Init's ctx ends
// the connection set-up too, naming rank 1.
func TestInitDeadlineCoversConnect(t *testing.T) {
	job, _ := NewJob()
	p := testParams(t, map[string]string{"CC_HOST_ID": "host-a"})
	data, err := net.Listen("tcp", "127.0.0.1:0") // the fake's data port: accepts, never speaks
	if err != nil {
		t.Fatal(err)
	}
	defer data.Close()
	dialled := make(chan struct{})
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := data.Accept()
			if err != nil {
				return
			}
			if held = append(held, c); len(held) == 1 {
				close(dialled)
			}
		}
	}()
	rootLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	root := bootstrap.NewRoot(rootLn, 2, job, nil)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)

	var ierr error
	initDone := make(chan struct{})
	go func() {
		defer close(initDone)
		_, ierr = Init(ctx, Options{Rank: 0, NRanks: 2, RootAddr: root.Addr(), Job: job, Params: p, root: root})
	}()
	fake, err := bootstrap.Join(context.Background(), root.Addr(), job,
		bootstrap.RankInfo{Rank: 1, Addr: data.Addr().String(), HostID: "host-b", Host: "fake", Pid: 1}, 2, 10, 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	// The fake does its part of Init's bootstrap rounds: the settings
	// exchange (agree), then shm.Open's two barriers.
	if _, err := fake.AllGather(context.Background(), append([]byte("1 1 1\n-\n"), p.AgreedText()...)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := fake.Barrier(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	hangGuard(t, 30*time.Second, "rank 0 dialling the fake's data port", func() { <-dialled })
	cancel(errDeadline)
	hangGuard(t, 30*time.Second, "Init after its ctx ended in the connection set-up", func() { <-initDone })
	if !errors.Is(ierr, errDeadline) || !strings.Contains(ierr.Error(), "rank 1") {
		t.Errorf("got %v, want an error naming rank 1 with the ctx's cause", ierr)
	}
}
