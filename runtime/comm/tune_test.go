package comm

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/hw"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
	"github.com/seed-760dd1f1/cc/runtime/tune"
)

// childDecisions runs 30 all-gathers of growing sizes, hashes how each
// ran (algorithm, protocol, channels), all-gathers the hashes and checks
// that every rank's equals rank 0's; it prints the hash.
func childDecisions(c *Comm) error {
	h := fnv.New64a()
	n := c.NRanks()
	for i := range 30 {
		count := 1 << (i % 20) >> 2
		send, recv := make([]byte, 4*count), make([]byte, 4*n*count)
		if err := c.AllGather(send, recv, count, reduce.Int32); err != nil {
			return err
		}
		a, p, ch, _ := c.Ran()
		fmt.Fprintf(h, "%d %s/%s/%d;", count, a, p, ch)
	}
	mine := binary.LittleEndian.AppendUint64(nil, h.Sum64())
	all := make([]byte, 8*n)
	if err := c.Control().AllGather(mine, all, 8, reduce.Uint8); err != nil {
		return err
	}
	for r := range n {
		if got := binary.LittleEndian.Uint64(all[8*r:]); got != h.Sum64() {
			return fmt.Errorf("rank %d's decisions hash %x, rank %d's %x", r, got, c.Rank(), h.Sum64())
		}
	}
	fmt.Printf("decisions %x\n", h.Sum64())
	return nil
}

// decisionsHash runs the decisions mode on n ranks with env(r) and
// returns the hash every rank printed (failing unless all printed it).
func decisionsHash(t *testing.T, n int, env func(int) []string) string {
	t.Helper()
	procs := startRanks(t, n, "decisions", env)
	var hash string
	for r, p := range procs {
		var line string
		hangGuard(t, 60*time.Second, fmt.Sprintf("rank %d", r), func() { line = <-p.lines })
		if !strings.HasPrefix(line, "decisions ") || (hash != "" && line != hash) {
			t.Fatalf("rank %d printed %q, want the hash rank 0 printed (%q); stderr:\n%s", r, line, hash, p.cmd.Stderr.(*syncWriter).String())
		}
		hash = line
	}
	waitOK(t, procs)
	return hash
}

// TestDecisionsAgree: every rank takes the tuner's decisions from rank 0's
// constants: with CC_TUNE_FILE set on rank 0 only (the others name a file
// that does not exist, which they never read), 30 all-gathers run the same
// way on every rank (their hashes, all-gathered, are equal), and the
// decisions differ from those of the built-in constants, so rank 0's file
// was used.
func TestDecisionsAgree(t *testing.T) {
	c := tune.Default()
	c.Source = "test: LL everywhere"
	for cl := range c.Class {
		k := &c.Class[cl]
		k.Alpha[0] = 0 // LL costs no latency ...
		k.Beta[0] = 1e6
		k.BetaMax[0] = 1e6 // ... and no bandwidth: the tuner always picks it
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "tune.json")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	const n = 3
	hosts := func(r int) string { return fmt.Sprintf("CC_HOST_ID=h%d", r) } // TCP: the built-in constants pick LL128 and Simple
	builtIn := decisionsHash(t, n, func(r int) []string { return []string{hosts(r)} })
	fromRank0 := decisionsHash(t, n, func(r int) []string {
		if r == 0 {
			return []string{hosts(r), "CC_TUNE_FILE=" + file}
		}
		return []string{hosts(r), "CC_TUNE_FILE=/nonexistent/never-read.json"}
	})
	if builtIn == fromRank0 {
		t.Errorf("rank 0's constants changed no decision (%s): were they used?", builtIn)
	}
}

// TestBadTuneFile: rank 0's unreadable CC_TUNE_FILE or malformed
// NCCL_TUNER_CONFIG_FILE fails Init on every rank with rank 0's message.
func TestBadTuneFile(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.conf")
	if err := os.WriteFile(bad, []byte("allreduce,0,100,ring,simple,0,-1,-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ env, want string }{
		{"CC_TUNE_FILE=/nonexistent/tune.json", "rank 0: CC_TUNE_FILE: open /nonexistent/tune.json"},
		{"NCCL_TUNER_CONFIG_FILE=" + bad, "rank 0: NCCL_TUNER_CONFIG_FILE: " + bad + `:1: channels "0"`},
	} {
		procs := startRanks(t, 2, "allreduce-matrix", func(int) []string { return []string{c.env} })
		for r, p := range procs {
			var err error
			hangGuard(t, 60*time.Second, fmt.Sprintf("rank %d", r), func() { err = <-p.done; p.done <- err })
			if stderr := p.cmd.Stderr.(*syncWriter).String(); err == nil || !strings.Contains(stderr, c.want) {
				t.Errorf("%s: rank %d: exit %v, stderr:\n%s\nwant %q", c.env, r, err, stderr, c.want)
			}
		}
	}
}

// TestSHMDisablePricesTCP: with NCCL_SHM_DISABLE=1 the ranks of one host
// talk TCP, and the tuner prices their links as the net class: two ranks
// of one host pick, at every size, the all-reduce and all-gather that two
// ranks on two hosts pick (same algorithm, protocol and predicted time),
// and the class is net. With shared memory the picks differ at some size,
// so the comparison can fail.
func TestSHMDisablePricesTCP(t *testing.T) {
	picks := func(cs []*Comm) []string {
		var out []string
		for size := 8; size <= 1<<20; size *= 4 {
			count := size / 4
			mustEach(t, cs, "all-reduce", func(c *Comm) error {
				b := make([]byte, size)
				return c.AllReduce(b, b, count, reduce.Int32, reduce.Sum)
			})
			a, p, _, pred := cs[0].Ran()
			out = append(out, fmt.Sprintf("all_reduce %d B: %s/%s %.2f us", size, a, p, pred))
			mustEach(t, cs, "all-gather", func(c *Comm) error {
				return c.AllGather(make([]byte, size), make([]byte, size*len(cs)), count, reduce.Int32)
			})
			a, p, _, pred = cs[0].Ran()
			out = append(out, fmt.Sprintf("all_gather %d B: %s/%s %.2f us", size, a, p, pred))
		}
		return out
	}
	env := map[string]string{"NCCL_SHM_DISABLE": "1", "NCCL_PAT_ENABLE": "0", "NCCL_NCHANNELS": "1"}
	oneHost := withHosts(t, []string{"h", "h"}, testParams(t, env))
	twoHosts := withHosts(t, []string{"h0", "h1"}, testParams(t, env))
	env["NCCL_SHM_DISABLE"] = "0"
	shm := withHosts(t, []string{"h", "h"}, testParams(t, env))
	if cl := oneHost[0].model.Class(); cl != tune.Net {
		t.Errorf("one host, NCCL_SHM_DISABLE=1: class %s, want %s", cl, tune.Net)
	}
	got, want, onSHM := picks(oneHost), picks(twoHosts), picks(shm)
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("one host over TCP: %s; two hosts: %s", got[i], want[i])
		}
	}
	if strings.Join(onSHM, ";") == strings.Join(want, ";") {
		t.Errorf("shared memory picks what TCP picks at every size: the test shows nothing\n%s", strings.Join(onSHM, "\n"))
	}
}

// TestTCPSpinNeedsACore: a TCP receive polls its socket (CC_TCP_SPIN_US)
// only when the ranks of the machine do not outnumber its cores, counting
// fake hosts of one machine (CC_HOST_ID) as the machine's: 1 rank per
// core polls, twice as many ranks as cores do not.
func TestTCPSpinNeedsACore(t *testing.T) {
	cores, err := hw.Cores(hw.Root())
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{cores, 2 * cores} {
		hosts := make([]string, n)
		for r := range hosts {
			hosts[r] = fmt.Sprintf("h%d", r)
		}
		cs := withHosts(t, hosts, testParams(t, map[string]string{"CC_TCP_SPIN_US": "70"}))
		want := 70 * time.Microsecond
		if n > cores {
			want = 0
		}
		for _, c := range cs {
			if got := c.tr.Spin(); got != want {
				t.Errorf("%d ranks on %d fake hosts, %d cores: rank %d spins %v, want %v", n, n, cores, c.Rank(), got, want)
			}
		}
	}
}
