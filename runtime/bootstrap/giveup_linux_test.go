package bootstrap

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A rank that gives up after its root has sent the roll call and the verdict and hung up
// with a reset (rank 0's deadline came first, in the root's process) cannot write its abort,
// and still reads the roll call from its socket: it names the missing rank as the others do.
func TestGiveUpReadsARootThatHungUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	root := &RankError{Rank: 0, How: Failed, Host: "node00", Pid: 1000, Cause: "gave up waiting for every rank to join: test timeout"}
	server.Write(append(encodeRollCall([]RankInfo{info(0), info(1)}), encodeAborted(root)...))
	// Both messages are in the client's buffer before the reset, and the reset before giveUp.
	waitPoll(t, client, unix.POLLIN)
	server.(*net.TCPConn).SetLinger(0)
	server.Close()
	waitPoll(t, client, 0) // POLLHUP or POLLERR only
	var joined []RankInfo
	err = giveUp(client, errors.New("test timeout"), 3, &joined)
	if len(joined) != 2 || strings.Contains(err.Error(), "did not say") {
		t.Errorf("giveUp: %v, joined %v; want the root's roll call of ranks 0 and 1", err, joined)
	}
	if me := (&MissingError{Addr: "root", NRanks: 3, Joined: joined, Err: err}).Summary(); !strings.Contains(me, "rank 2 of 3 never joined") {
		t.Errorf("summary %q, want rank 2 missing", me)
	}
}

// waitPoll blocks until c's socket reports events (with 0: a hang-up or an error).
func waitPoll(t *testing.T, c net.Conn, events int16) {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: events}}
		for {
			if n, err := unix.Poll(fds, int(hangGuard/time.Millisecond)); err != unix.EINTR {
				if n != 1 || (events != 0 && fds[0].Revents&events == 0) {
					t.Errorf("poll for %#x: %d ready, revents %#x, %v", events, n, fds[0].Revents, err)
				}
				return
			}
		}
	})
}
