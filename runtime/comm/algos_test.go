package comm

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
	"github.com/seed-760dd1f1/cc/runtime/param"
	"github.com/seed-760dd1f1/cc/runtime/reduce"
)

// allReduceAlgos are the algorithms besides the ring that the table can
// run AllReduce with, as NCCL_ALGO tokens, with the protocols each runs.
func allReduceAlgos(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, row := range algos.Algorithms {
		if row.Coll != algos.AllReduce || row.Algo == algos.Ring || row.Algo == algos.CollNetDirect {
			continue // CollNet needs its server: collnet_test.go
		}
		var protos []string
		for p := range protocols.Proto(protocols.NumProtos) {
			if row.Runs(p) {
				protos = append(protos, p.String())
			}
		}
		out[strings.ToLower(row.Algo.String())] = protos
	}
	if len(out) == 0 {
		t.Fatal("no AllReduce algorithm besides the ring in the table")
	}
	return out
}

// hostLayouts are the host identities of in-process ranks: every rank on
// one host (shared memory between all), each rank alone (TCP between all),
// and hosts of two ranks (chains inside hosts, a tree between them; both
// transports at once).
func hostLayouts(n int) map[string][]string {
	one, alone, pairs := make([]string, n), make([]string, n), make([]string, n)
	for r := range n {
		one[r] = "h"
		alone[r] = fmt.Sprintf("h%d", r)
		pairs[r] = fmt.Sprintf("h%d", r/2)
	}
	return map[string][]string{"onehost": one, "alone": alone, "pairs": pairs}
}

// TestAllReduceAlgorithms runs every AllReduce algorithm of the table
// over real connections, with each protocol it runs, for several rank
// counts and host layouts, in and out of place, at counts around chunk and
// partition boundaries, and checks every element.
func TestAllReduceAlgorithms(t *testing.T) {
	const buffSize = 8 * 512 // 512-byte slots: chunks of 128 int32, so counts span many
	for algo, protos := range allReduceAlgos(t) {
		for _, n := range []int{2, 3, 4, 5, 8} {
			for layout, hosts := range hostLayouts(n) {
				if n > 5 && layout != "pairs" {
					continue // 8 ranks: the mixed layout covers both transports
				}
				if !algoRuns(algo, hosts) {
					continue // NVLS inside one host, NVLS_TREE across hosts
				}
				for _, proto := range protos {
					t.Run(fmt.Sprintf("%s/n%d/%s/%s", algo, n, layout, proto), func(t *testing.T) {
						p := testParams(t, map[string]string{"NCCL_ALGO": algo, "NCCL_PROTO": proto, "NCCL_BUFFSIZE": strconv.Itoa(buffSize),
							"NCCL_LL_BUFFSIZE": strconv.Itoa(buffSize), "NCCL_LL128_BUFFSIZE": strconv.Itoa(2 * buffSize),
							"NCCL_NCHANNELS": strconv.Itoa(1 + n%2)})
						cs := withHosts(t, hosts, p)
						cc := collCases()[0]
						for _, count := range []int{0, 1, n - 1, 1009, 4099} {
							runCase(t, cs, cc, count, false)
							runCase(t, cs, cc, count, true)
						}
					})
				}
			}
		}
	}
}

// withHosts runs InitLocalHosts and closes every comm at the end.
func withHosts(t testing.TB, hosts []string, p *param.Params) []*Comm {
	t.Helper()
	cs, err := InitLocalHosts(t.Context(), hosts, p)
	if err != nil {
		t.Fatalf("InitLocalHosts(%v): %v", hosts, err)
	}
	t.Cleanup(func() { closeAll(t, cs) })
	return cs
}

// TestAlgorithmsEveryDataTypeAndOp runs each AllReduce algorithm for every
// data type x op on two hosts of two ranks, comparing bytes exactly.
func TestAlgorithmsEveryDataTypeAndOp(t *testing.T) {
	const n, count, scalar = 4, 301, 2.0
	for algo := range allReduceAlgos(t) {
		t.Run(algo, func(t *testing.T) {
			cs := withHosts(t, hostsFor(algo, n), testParams(t, map[string]string{"NCCL_ALGO": algo, "NCCL_BUFFSIZE": "8192"}))
			for _, dt := range reduce.DataTypes() {
				for _, op := range reduce.Ops() {
					es := dt.Size()
					want := exactResults(dt, op, n, 0, count, scalar)
					outs := make([][]byte, n)
					mustEach(t, cs, "AllReduce", func(c *Comm) error {
						r := c.Rank()
						send := exactValues(dt, op, r, count)
						o, done, err := testOp(c, op, dt, scalar)
						if err != nil {
							return err
						}
						defer done()
						outs[r] = make([]byte, count*es)
						return c.AllReduce(send, outs[r], count, dt, o)
					})
					for r := range n {
						if !bytes.Equal(outs[r], want) {
							t.Errorf("%s/%s rank %d: %s", dt, op, r, firstDiff(dt, outs[r], want))
						}
					}
				}
			}
		})
	}
}

// TestAlgorithmAbort: one rank aborts while the others are in a stream of
// all-reduces with each algorithm; every other rank's call fails naming
// it, and (TestMain's goleak) no lane goroutine is left behind.
func TestAlgorithmAbort(t *testing.T) {
	for algo := range allReduceAlgos(t) {
		t.Run(algo, func(t *testing.T) {
			const n, count = 4, 1 << 14
			cs := withHosts(t, hostsFor(algo, n), testParams(t, map[string]string{"NCCL_ALGO": algo, "NCCL_BUFFSIZE": "8192"}))
			abortMidStream(t, cs, func(c *Comm) func() error {
				send, recv := make([]byte, 4*count), make([]byte, 4*count)
				return func() error { return c.AllReduce(send, recv, count, reduce.Int32, reduce.Sum) }
			})
		})
	}
}

// abortMidStream has rank 2 abort while every rank runs a stream of the
// calls stream(c) returns; every other rank's call must fail naming it.
func abortMidStream(t *testing.T, cs []*Comm, stream func(c *Comm) func() error) {
	t.Helper()
	const victim = 2
	errs := each(cs, func(c *Comm) error {
		call := stream(c)
		for i := 0; ; i++ {
			if c.Rank() == victim && i == 3 {
				c.Abort(errors.New("killed by the test"))
			}
			if err := call(); err != nil {
				return err
			}
		}
	})
	for r, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "rank 2 aborted: killed by the test") {
			t.Errorf("rank %d: %v, want the abort of rank 2", r, err)
		}
	}
}

// withAlgo adds NCCL_ALGO to a transport's environment.
func withAlgo(algo string, env func(int) []string) func(int) []string {
	return func(r int) []string { return append(env(r), "NCCL_ALGO="+algo) }
}

// TestAlgorithmsAsProcesses runs each AllReduce algorithm with every rank
// its own OS process, in and out of place (the log-step rows also every
// data type x op, as TestOneShotAsProcesses does OneShot): for
// n = 2, 3, 4, 5, 8 with hosts of two ranks (CC_HOST_ID: shared memory
// inside a host, TCP between), and for n = 4 over shared memory only and
// TCP only (the log-step rows, made for TCP, for every n over TCP only
// too).
func TestAlgorithmsAsProcesses(t *testing.T) {
	for algo := range allReduceAlgos(t) {
		if algo == "nvls" || algo == "nvlstree" || algo == "oneshot" {
			continue // TestNVLSAsProcesses, TestOneShotAsProcesses
		}
		for _, tr := range transports {
			ns := []int{4}
			if tr.name == "mixed" || (tr.name == "tcp" && logStep(algo)) {
				ns = []int{2, 3, 4, 5, 8}
				if testing.Short() {
					ns = []int{3, 4}
				}
			}
			for _, n := range ns {
				t.Run(fmt.Sprintf("%s/%s/n%d", algo, tr.name, n), func(t *testing.T) {
					mode := "allreduce-matrix"
					if logStep(algo) {
						mode = "allreduce-types" // new rows: every type x op here too
					}
					procs := startRanks(t, n, mode, withAlgo(algo, tr.env))
					waitOK(t, procs)
					if left := shmFiles(t, procs[0].job); left != "" {
						t.Errorf("the job left segments in %s: %s", shmDir, left)
					}
				})
			}
		}
	}
}

// TestKilledPeerAlgorithms kills a rank with SIGKILL in the middle of a
// stream of all-reduces run by each algorithm, over each transport: every
// other rank's call fails naming the dead rank, and every process exits.
func TestKilledPeerAlgorithms(t *testing.T) {
	for algo := range allReduceAlgos(t) {
		for _, tr := range transports {
			if nvlsSkips(algo, tr.name) {
				continue // NVLS runs inside one host over shared memory, NVLS_TREE across hosts
			}
			t.Run(algo+"/"+tr.name, func(t *testing.T) { killPeer(t, "forever", withAlgo(algo, tr.env)) })
		}
	}
}

// TestCTRingKnobs runs CTRING with its CVARs forcing small rounds and few
// of them, so that a call crosses many partitions with several rounds per
// shard, with the bidirectional all-gather off and on, over both
// transports at once.
func TestCTRingKnobs(t *testing.T) {
	for _, bidir := range []string{"0", "-1"} {
		for _, n := range []int{3, 4, 5} {
			t.Run(fmt.Sprintf("bidir=%s/n%d", bidir, n), func(t *testing.T) {
				p := testParams(t, map[string]string{"NCCL_ALGO": "allreduce:ctring", "NCCL_BUFFSIZE": "8192",
					"NCCL_CTRAN_ALLREDUCE_RING_TMPBUF_CHUNK_SIZE": "64", "NCCL_CTRAN_ALLREDUCE_RING_TMPBUF_NUM_CHUNKS": "3",
					"NCCL_CTRAN_ALLREDUCE_RING_BIDIR_AG_MAX_SIZE": bidir})
				cs := withHosts(t, hostLayouts(n)["pairs"], p)
				cc := collCases()[0]
				for _, count := range []int{1, 16*3*n - 1, 16*3*n + 5, 10007} {
					runCase(t, cs, cc, count, false)
					runCase(t, cs, cc, count, true)
				}
			})
		}
	}
}

// TestRanksDisagreeOnAlgo: one rank runs with another NCCL_ALGO (or
// NCCL_PROTO) than the others. Running, the ranks would wait for each other
// forever (a tree against a ring; an LL connection against a Simple one);
// instead Init fails on every rank, naming the variable and both values.
func TestRanksDisagreeOnAlgo(t *testing.T) {
	for _, c := range []struct{ name, mine, odd, want0, wantOdd string }{
		{"NCCL_ALGO", "tree", "ring", `NCCL_ALGO differs between ranks: "tree" on rank 0 (host `, `"ring" on rank 2`},
		{"NCCL_PROTO", "Simple", "LL", `NCCL_PROTO differs between ranks: "Simple" on rank 0 (host `, `"LL" on rank 2`},
	} {
		procs := startRanks(t, 3, "allreduce-matrix", func(r int) []string {
			if r == 2 {
				return []string{c.name + "=" + c.odd}
			}
			return []string{c.name + "=" + c.mine}
		})
		for r, p := range procs {
			var err error
			hangGuard(t, 60*time.Second, fmt.Sprintf("rank %d", r), func() { err = <-p.done; p.done <- err })
			stderr := p.cmd.Stderr.(*syncWriter).String()
			if err == nil || !strings.Contains(stderr, c.want0) || !strings.Contains(stderr, c.wantOdd) {
				t.Errorf("rank %d: exit %v, stderr:\n%s\nwant an init error naming %s on every rank", r, err, stderr, c.name)
			}
		}
	}
}

// TestDebugNamesAlgorithm: NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=COLL,GRAPH,TUNING
// prints, for every call, the algorithm, protocol and channels it ran with
// and the tuner's prediction; at Init the trees as NCCL prints them, what
// each collective may run, and (rank 0) the tuner's table and NCCL's
// TUNING line per call.
func TestDebugNamesAlgorithm(t *testing.T) {
	names := map[string]string{"tree": "Tree", "ring": "Ring", "ctring": "CTRing"}
	for _, algo := range []string{"tree", "ring", "ctring"} {
		t.Run(algo, func(t *testing.T) {
			procs := startRanks(t, 4, "allreduce-matrix", func(r int) []string {
				return []string{"NCCL_ALGO=allreduce:" + algo, "NCCL_DEBUG=INFO", "NCCL_DEBUG_SUBSYS=COLL,GRAPH,TUNING",
					fmt.Sprintf("CC_HOST_ID=h%d", r/2)}
			})
			waitOK(t, procs)
			name := names[algo]
			check := func(rank int, want []string) {
				stderr := procs[rank].cmd.Stderr.(*syncWriter).String()
				for _, w := range want {
					if !strings.Contains(stderr, w) {
						t.Errorf("rank %d's NCCL_DEBUG output lacks %q:\n%s", rank, w, stderr)
					}
				}
			}
			want := []string{
				"AllReduce: 4 bytes int32 -> algo " + name + " proto ",
				"AllReduce: 1200000 bytes int32 -> algo " + name + " proto ",
				`; NCCL_ALGO="allreduce:` + algo + `")`,
				"AllReduce may run " + name + "/",
				"Tree 0 : 0 -> 1 -> -1/-1/-1", // rank 1 is rank 0's chain child on host h0
			}
			if algo == "ctring" {
				want = append(want, "; AutoTune ranks 4, msg 1200000B: blocks ")
			}
			check(1, want)
			check(0, []string{"tuner constants: built-in", "  Algorithm   |", "     AllReduce |",
				"AllReduce: 1200000 Bytes -> Algo " + name + " proto "})
			// Which protocol the tuner picks at 1.2 MB follows its
			// constants; that the line names one and its prediction does not.
			for rank, re := range map[int]*regexp.Regexp{
				1: regexp.MustCompile(`AllReduce: 1200000 bytes int32 -> algo ` + name + ` proto (LL|LL128|Simple) \(tuner: `),
				0: regexp.MustCompile(`AllReduce: 1200000 Bytes -> Algo ` + name + ` proto (LL|LL128|Simple) channel\{Lo\.\.Hi\}=\{0\.\.0\} \(model `),
			} {
				if stderr := procs[rank].cmd.Stderr.(*syncWriter).String(); !re.MatchString(stderr) {
					t.Errorf("rank %d's NCCL_DEBUG output lacks %s:\n%s", rank, re, stderr)
				}
			}
		})
	}
}

// logStep reports whether NCCL_ALGO token algo names a log-step row.
func logStep(algo string) bool {
	return algo == "recdbl" || algo == "rabenseifner" || algo == "hierrecdbl"
}
