// Package fabric judges a cluster from pairwise measurements: which host,
// which direction of a host, or which link is slow, lossy or dead. It is
// the pure core of `cc-perf fabric` (issue 21, study
// shared/reference/cluster-acceptance.md): schedules (which hosts meet in
// which round), the judge (host scores, modified z, verdicts), the
// baseline file, and the writers of the table and the JSON record. It has
// no sockets, clocks or goroutines: the runner (package fabric/measure)
// measures what a Plan asks for and hands the Measurements back.
//
// Vocabulary: a host is one rank of the job (one rank per host); a test is
// one pair (or one group, for bisect) measured together; a round is a set
// of tests that run at the same time, each host in at most one test
// (directed rounds: at most one send and one receive); ratio is a
// measured bandwidth over the reference; a host's score is the median
// ratio over its own tests.
//
// # A run
//
//	cfg := fabric.DefaultConfig() // then the flags; cfg.Validate(len(hosts))
//	plan, err := fabric.NewPlan(cfg, len(hosts))
//	for r, ok := plan.Next(ms); ok; r, ok = plan.Next(ms) {
//		for _, sub := range fabric.SplitRound(r, cfg.MaxConcurrent) {
//			got := measure(sub) // the runner
//			ms = append(ms, got...)
//			rec.Add(sub, got) // -J, rewritten after each round
//		}
//		fmt.Fprintln(stderr, fabric.ProgressLine(hosts, r, ms))
//	}
//	v := fabric.Judge(hosts, unreachable, ms, counters, cfg)
//	fabric.WriteTable(stdout, hosts, ms, v) // exit 8 when v.Fail
//
// The schedules are Neighbor (quick), Circle (full), Shift (directed),
// Random and the bisection of Plan; Plan adds confirm rounds (quick,
// bisect: each suspect against Confirm known-good partners) and retests
// of slow links.
//
// # The judge
//
// The reference is the baseline, else --expect, else the fleet: the median
// of the schedule's tests. A host's score is the median ratio over its
// tests, leaving out tests with a partner that is clearly slow (score
// below (1-tolerance) squared): such a test says nothing about this host.
// Its modified z is 0.6745 (ln score - median) / max(MAD, floor) over the
// hosts that are not clearly slow, on a log scale because faults and the
// noise of concurrent tests are factors; the floor is MADFloor and the
// MAD of single tests within hosts, so that a host is accused when its
// typical test lies beyond the noise of single tests, not when eight
// medians happen to agree. A host is slow-host when its score is below
// 1-tolerance and its z below -zmax; against a baseline or --expect the
// ratio gate is taken against it, with that z or more than half the
// host's tests beyond the noise. When the whole fleet is below the gate of a
// given reference, the verdict is "fabric degraded" and the hosts are
// judged against the fleet. quick and bisect have 2 to 4 tests per
// suspect: there a host is slow when more than half its tests lie beyond
// the noise and its z is below -zmax. directed judges what a host sends
// (slow-tx) apart from what it receives (slow-rx); latency is judged the
// same way on ref/latency, never below --lat-floor. A link is
// suspect-link when its tests are slow while both hosts pass, confirmed by
// a retest, its log-scale z below -zmax. A host whose tests mostly timed
// out is timeout (mostly wrong data: error); a single such pair between
// passing hosts is a link verdict. With --counters, a host whose TCP
// retransmits or interface errors and drops grow beyond max(floor, 4x the
// hosts' median) is lossy. When the passing hosts' scores spread more
// than tolerance/2 (MAD/median) the run is noisy, and a host whose tests
// are not beyond the noise is inconclusive, never accused.
//
// How often this is wrong was measured on synthetic fabrics with +-50%
// uniform noise on every test (TestNoiseRates, 400 runs each, 8 hosts):
// full, directed: no healthy host accused; a host at 0.15 named in 398
// runs of 400, two such hosts in 392; quick: a healthy host accused in 1
// run of 400, a host at 0.05 (100 Mbit among 1 GB/s pairs is 0.0125)
// named in 396, at 0.15 in 362; random (3 rounds) and bisect accuse a
// healthy host in 11 and 8 runs of 400 at that noise, and bisect names a
// host at 0.05 in 336. At +-90% noise full accused a healthy host in 1
// run of 400 and a link in 9, quick a host in 16 and a link in 15. Prefer
// full, or a quieter run (--max-concurrent 1).
package fabric

// Host is one host of the run. Index i of a []Host is host i in every
// Test, Measurement and verdict; hosts are in the job's rank order.
type Host struct {
	Name   string `json:"name"`              // hostname as the rank reports it
	Addr   string `json:"addr"`              // the address its rank bootstrapped from
	Rank   int    `json:"rank"`              // its rank in the job
	BootID string `json:"boot_id,omitempty"` // /proc/sys/kernel/random/boot_id
}

// Test is one measurement a round asks for: the pair A, B (A sends to B
// only when Dir), or, for bisect, the group of hosts in Group (A = B = -1)
// running one collective together.
type Test struct {
	A     int   `json:"a"`
	B     int   `json:"b"`
	Dir   bool  `json:"dir,omitempty"`
	Group []int `json:"group,omitempty"`
}

// Phase names why a round runs.
type Phase string

// The phases of a run.
const (
	PhaseSchedule Phase = "schedule" // the schedule's own rounds
	PhaseConfirm  Phase = "confirm"  // suspects against known-good partners
	PhaseRetest   Phase = "retest"   // a suspect link measured again
	PhaseBisect   Phase = "bisect"   // a group of hosts of the bisection
)

// Round is a set of tests run at once; no host is in two tests (directed
// rounds: no host sends twice or receives twice).
type Round struct {
	Index int    `json:"i"` // 0, 1, ... over the whole run
	Phase Phase  `json:"phase"`
	Tests []Test `json:"tests"`
}

// Status is how one test ended.
type Status string

// Test outcomes.
const (
	StatusOK      Status = "ok"
	StatusTimeout Status = "timeout" // --pair-timeout expired; that pair's communicator was aborted
	StatusError   Status = "error"   // wrong data (-c) or a runtime error confined to the pair
)

// Measurement is the result of one Test in one round.
type Measurement struct {
	Round int   `json:"round"` // Round.Index
	Phase Phase `json:"phase"`
	Test
	// Bandwidth at the bandwidth size: Bytes per direction per
	// iteration, the median iteration time (the slower of the two ranks),
	// and GBps = Bytes / TMedUS / 1e3 (1e9 bytes per second).
	Bytes  int64   `json:"bytes"`
	Iters  int     `json:"iters"`
	TMedUS float64 `json:"t_med_us"`
	GBps   float64 `json:"gbps"`
	// Latency at the latency size (LatBytes 0: not measured): the median
	// iteration time.
	LatBytes int64   `json:"lat_bytes,omitempty"`
	LatIters int     `json:"lat_iters,omitempty"`
	LatUS    float64 `json:"lat_us,omitempty"`
	Status   Status  `json:"status"`
	Err      string  `json:"err,omitempty"`
}

// Counters are one host's counter deltas over one round (--counters):
// TCP RetransSegs from /proc/net/snmp and the interface's
// /sys/class/net/IF/statistics/{rx,tx}_{errors,dropped}.
type Counters struct {
	Host        int    `json:"host"`
	Round       int    `json:"round"`
	Iface       string `json:"iface,omitempty"`
	RetransSegs uint64 `json:"retrans_segs"`
	RxErrors    uint64 `json:"rx_errors"`
	TxErrors    uint64 `json:"tx_errors"`
	RxDropped   uint64 `json:"rx_dropped"`
	TxDropped   uint64 `json:"tx_dropped"`
}
