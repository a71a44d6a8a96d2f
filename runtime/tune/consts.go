package tune

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
)

// Class is the kind of link a step crosses.
type Class int

const (
	// SHM is a link between ranks of one host (shared memory): NCCL's
	// NVLINK/PCI classes.
	SHM Class = iota
	// Net is a link between hosts (TCP): NCCL's NET class.
	Net
	// SHMBusy is SHM on a host with more ranks than cores, where waiting
	// ranks yield their core: every step pays for a reschedule.
	SHMBusy
	// NumClasses is the number of link classes.
	NumClasses = 3
)

var classNames = [NumClasses]string{"shm", "net", "shm-busy"}

func (c Class) String() string { return classNames[c] }

// Consts are the model's constants: NCCL's latency and bandwidth tables,
// per link class and protocol instead of per GPU generation.
type Consts struct {
	// Source says where the constants come from (built in, or a file).
	Source string
	// Class holds the constants of each link class.
	Class [NumClasses]ClassConsts
}

// ClassConsts are the constants of one link class. A collective's steps
// each cost the latency of the class of the link they cross; its
// bandwidth, its algorithm's efficiency and its per-call latency are
// those of its slowest class (Net as soon as it spans hosts).
type ClassConsts struct {
	// Source says where this class's numbers come from (a calibration
	// run: when, where, what it measured).
	Source string
	// Gamma is the cost of a call besides its steps, in µs (NCCL's base
	// latency: launch and hand-offs).
	Gamma [protocols.NumProtos]float64
	// Alpha is the latency of one pipeline step (post, visible to the
	// peer, consumed), in µs.
	Alpha [protocols.NumProtos]float64
	// AlphaCPU is what a step adds, in µs, per rank per core beyond one
	// where ranks outnumber the cores they share: with q ranks per core a
	// step takes Alpha + AlphaCPU x (q - 1) (their system calls and
	// wake-ups wait for a core; where each rank has a core that is part
	// of Alpha). The tuner does not read it (ranks outnumber cores only on
	// test machines); cc-perf predict's replay does. 0: not measured.
	AlphaCPU [protocols.NumProtos]float64
	// Beta is what one channel streams through a link, in GB/s (bus
	// bandwidth: the ring's data per link).
	Beta [protocols.NumProtos]float64
	// BetaMax is what all channels together reach, in GB/s (the cores'
	// ceiling; channels beyond it add nothing).
	BetaMax [protocols.NumProtos]float64
	// AlgoLat is each algorithm's latency per call beyond its steps, in µs
	// (NCCL's base latency per algorithm): the tree's and CTRING's lanes
	// run on goroutines that must be woken.
	AlgoLat [algos.NumAlgos]float64
	// AlgoGamma, where not 0, replaces Gamma for an algorithm whose calls
	// skip the engine's per-call machinery (OneShot's fast path), in µs.
	AlgoGamma [algos.NumAlgos]float64
	// Eff is each algorithm's bandwidth relative to the ring's (NCCL's
	// .92 for the tree, .75 for PAT, refitted here); 0 for algorithms cc
	// does not have.
	Eff [algos.NumAlgos]float64
	// MaxBytes, where not 0, is the largest call (NCCL's nBytes) the
	// tuner picks an algorithm for on its own: its line holds only up to
	// there (CMA's single copy wins over the ring's FIFO while the data
	// sits in caches, and loses beyond). Above it the entry is chosen only
	// when nothing else may run (NCCL_ALGO names it alone), as NCCL's old
	// NCCL_TREE_THRESHOLD did for the tree.
	MaxBytes [algos.NumAlgos]float64
	// OpCost is the cost of one step of a program that runs many small
	// steps in order (PAT), beyond its links' latencies, in µs.
	OpCost float64
}

// Default returns the built-in constants: cc-perf calibrate on the
// development machine (2 cores, 2026-11-24; 7 repetitions of 5 iterations
// of every entry, 8 B to 16 MiB x8, one channel): shm with ccrun -np 2,
// shm-busy with -np 4, net with -np 2 over TCP loopback with a host
// identity per rank (scripts/tune-check.sh's configurations), rounded to
// three digits. shm's alpha is 0: two processes on two idle cores see a
// call's fixed cost (gamma) and no measurable cost per step. With one
// channel measured, each ceiling keeps the ratio to beta of the constants
// before (about 1.5 channels' worth). A calibration file replaces all of
// it (CC_TUNE_FILE).
func Default() *Consts {
	const src = "built-in (cc-perf calibrate on the development machine, 2026-11-24)"
	c := &Consts{Source: src}
	type perProto = [protocols.NumProtos]float64 // LL, LL128, Simple
	class := func(cl Class, gamma, alpha, beta, betaMax perProto, tree, ctring, pat, treeLat, ctringLat, opCost float64) {
		c.Class[cl] = ClassConsts{Source: src, Gamma: gamma, Alpha: alpha, Beta: beta, BetaMax: betaMax, OpCost: opCost}
		k := &c.Class[cl]
		k.Eff[algos.Ring], k.Eff[algos.Tree], k.Eff[algos.CTRing], k.Eff[algos.PAT] = 1, tree, ctring, pat
		k.AlgoLat[algos.Tree], k.AlgoLat[algos.CTRing] = treeLat, ctringLat
	}
	//    class    gamma (µs)                 alpha (µs)                 beta (GB/s)                  beta_max (GB/s)
	//             efficiency tree, ctring, pat; algo_lat tree, ctring (µs); op_cost (µs)
	class(SHM, perProto{0.811, 0.626, 0.507}, perProto{0, 0, 0}, perProto{0.644, 2.34, 3.68}, perProto{0.936, 3.52, 5.51},
		0.275, 0.937, 0.75, 0.597, 0, 0.5)
	class(SHMBusy, perProto{0, 0, 0}, perProto{4.38, 4.13, 4.11}, perProto{0.379, 1.31, 2.57}, perProto{0.454, 1.53, 3.09},
		0.781, 0.85, 0.75, 72.8, 98.3, 0.5)
	class(Net, perProto{11.1, 8.55, 65.1}, perProto{5.08, 6.52, 36.5}, perProto{0.284, 1.11, 1.39}, perProto{0.426, 1.64, 2.05},
		0.951, 0.919, 0.677, 10.5, 0, 0)
	// NVLS, NVLS_TREE and CollNet Direct: see measuredNVLSCollNet. Where
	// one cannot run (NVLS across hosts, NVLS_TREE on one host) its entry
	// is never read; it keeps the tree's latency and half the ring's
	// bandwidth.
	for cl := range c.Class {
		k := &c.Class[cl]
		k.Eff[algos.NVLS], k.Eff[algos.NVLSTree] = 0.5, 0.5
		k.AlgoLat[algos.NVLS], k.AlgoLat[algos.NVLSTree] = k.AlgoLat[algos.Tree], k.AlgoLat[algos.Tree]
		// The log-step rows run the ring's engine path on the ring's
		// geometry: the ring's efficiency (their bytes are in Traffic)
		// and no latency beyond their steps. Inside one host they run
		// only where NCCL_ALGO names them (runtime/comm), so these
		// decide nothing there.
		k.Eff[algos.RecDbl], k.Eff[algos.Rabenseifner] = 1, 1
		// HierRecDbl runs the same engine path: the ring's
		// efficiency, its bytes in TrafficOn, until calibrated.
		k.Eff[algos.HierRecDbl] = 1
	}
	// Between hosts, measured 2026-11-27 (3 runs of cc-perf calibrate -b 8
	// -e 4M -f 8 -n 10 --reps 7, 2 ranks on 2 fake hosts over loopback,
	// with a load average of 12-28 from other work on the 2 cores): the
	// median efficiency against the ring measured in the same runs
	// (recursive doubling 0.876, 0.995, 0.93; Rabenseifner 0.818, 0.9,
	// 1.03). Their fitted algo_lat (7.8-12.4 µs and 0-7.3 µs) rests on a
	// gamma/alpha split that moved 10x between those runs, so it stays 0:
	// interleaved runs of the user's path had recursive doubling at
	// 0.31-0.69x the ring's time from 8 B to 256 KiB (README).
	c.Class[Net].Eff[algos.RecDbl], c.Class[Net].Eff[algos.Rabenseifner] = 0.93, 0.9
	// LL and LL128 frames over TCP carry their payload without lines and
	// flags since 2026-11-27 (runtime/transport/tcp), so the bandwidths
	// above, measured with the lines on the wire, undersold them. Two runs
	// of cc-perf calibrate -b 8 -e 4M -f 8 -n 10 --reps 5 --channels 1
	// (2 ranks on 2 fake hosts, load average 1-3) fitted beta LL 1.09 and
	// 0.955 GB/s, LL128 1.42 and 1.52 (Simple 1.35 and 1.57: unchanged);
	// their means, beta_max keeping the ratio above. Their gamma and alpha
	// moved 2-5x between the two runs (small calls are bimodal here) and
	// stay as they were.
	c.Class[Net].Beta[protocols.LL], c.Class[Net].BetaMax[protocols.LL] = 1.02, 1.53
	c.Class[Net].Beta[protocols.LL128], c.Class[Net].BetaMax[protocols.LL128] = 1.47, 2.17
	// OneShot runs on one host only (no net entry) and on its own fast
	// path: its own per-call cost (algo_gamma) in place of the engine's
	// gamma. Measured with cc-perf tune --all (interleaved medians of
	// per-iteration times, 2026-11-27, the 2 cores loaded by other work, so
	// fitted against the ring's times of the same run, not absolutely):
	// shm, 2 ranks: OneShot 0.8x the ring's Simple time at 64-512 B, 1.2x
	// at 4 KiB, 2.2-2.7x at 2-16 MiB (every rank reduces the whole buffer);
	// gamma 0.83 x the ring's small-call time, efficiency from 4 KiB.
	// shm-busy, 4 ranks on 2 cores: 7.5-12.4 µs at 8-512 B (ring 19-26 µs),
	// 32 µs at 32 KiB (ring 50), 253 µs at 256 KiB (ring 155-186).
	// Re-measured after the one-shot path got cheaper (2026-11-27 evening,
	// quiet machine, cc-perf tune --check -n 10 --reps 3 and interleaved
	// cc-perf runs, 2 ranks): OneShot 0.6-0.75x the ring's time at 2 KiB,
	// 0.8-1.0x at 8 KiB, 1.0x at 32 KiB for all-reduce and all-gather; its
	// per-call cost, extrapolated to 0 bytes, 0.4x the ring's (0.25
	// against 0.64 us). Gamma 0.2 and efficiency 0.95 put
	// the crossover at ~20 KiB for those two (it was ~1 KiB, where the
	// ring then cost up to 1.7x); large sizes still go to the ring.
	c.Class[SHM].AlgoGamma[algos.OneShot], c.Class[SHM].Eff[algos.OneShot] = 0.2, 0.95
	c.Class[SHMBusy].AlgoGamma[algos.OneShot], c.Class[SHMBusy].Eff[algos.OneShot] = 6, 1.3
	// CMA (the single-copy all-gather): see cmaConsts.
	cmaConsts(c)
	measuredNVLSCollNet(c)
	return c
}

// measuredNVLSCollNet sets the constants of NVLS, NVLS_TREE and CollNet
// Direct where they run, measured 2026-11-28 on a 2-core VM: 3 runs of
// cc-perf calibrate -b 8 -e 16M -f 8 -n 5 --reps 7 --channels 1 with
// NCCL_NVLS_ENABLE=1 and NCCL_COLLNET_ENABLE=1 (ccrun --collnet-server),
// each on 2 ranks of one host (shm), 4 ranks of one host (shm-busy), 2
// ranks on 2 host identities over loopback TCP (net) and 4 ranks on 2
// (net, NVLS_TREE's); medians, each run's value in brackets. An
// efficiency is against the ring measured in the same run, so it carries
// over to the ring's constants above (that VM's ring streamed about half
// as fast as the development machine's); an algo_lat is what a small call
// took beyond the ring's steps in that run. The tuner considers none of
// the three unless asked: NVLS and NVLS_TREE by default only where
// NCCL_ALGO names them (NCCL_NVLS_ENABLE=2, since they connect every pair
// of a host's ranks at Init), CollNet only with NCCL_COLLNET_ENABLE=1 and
// a server. Asked, with these constants it picks none of them on that VM
// (each measured slower than the ring or OneShot at every size).
func measuredNVLSCollNet(c *Consts) {
	// NVLS, one host: every rank reduces its share and stores it once
	// for all readers; 0.93 (0.95, 0.86, 0.93) of the ring's bandwidth
	// and 0.65 µs (0.71, 0.52, 0.65) per call beyond its steps with a
	// core per rank; 0.85 (0.96, 0.82, 0.85) and 14.9 µs (14.9, 7.6, 26)
	// with 4 ranks on 2 cores, where every stage's hand-off waits for
	// the scheduler.
	c.Class[SHM].Eff[algos.NVLS], c.Class[SHM].AlgoLat[algos.NVLS] = 0.93, 0.65
	c.Class[SHMBusy].Eff[algos.NVLS], c.Class[SHMBusy].AlgoLat[algos.NVLS] = 0.85, 14.9
	// NVLS_TREE, 2 hosts of 2 ranks: 0.91 (0.90, 1.03, 0.91) of the
	// ring's bandwidth, nothing beyond its steps (0 in each run).
	c.Class[Net].Eff[algos.NVLSTree], c.Class[Net].AlgoLat[algos.NVLSTree] = 0.91, 0
	// CollNet Direct, 2 hosts of one rank (the net class's own
	// configuration): 0.48 (0.48, 0.49, 0.44) of the ring's bandwidth,
	// 207 µs (91, 247, 207) per call beyond its steps: every call crosses
	// to the aggregation server and back, a third process on the 2
	// cores (with 2 ranks per host: 0.58-0.59 and 16-286 µs).
	c.Class[Net].Eff[algos.CollNetDirect], c.Class[Net].AlgoLat[algos.CollNetDirect] = 0.48, 207
	// CollNet Direct on one host (its hops to the server are TCP all the
	// same), measured apart with NCCL_ALGO=ring,collnetdirect, 3 runs each:
	// 2 ranks 0.19 (0.20, 0.19, 0.16) and 229 µs (212, 347, 229); 4 ranks
	// on 2 cores 0.32 (0.32, 0.33, 0.32) and 689 µs (689, 635, 786).
	c.Class[SHM].Eff[algos.CollNetDirect], c.Class[SHM].AlgoLat[algos.CollNetDirect] = 0.19, 229
	c.Class[SHMBusy].Eff[algos.CollNetDirect], c.Class[SHMBusy].AlgoLat[algos.CollNetDirect] = 0.32, 689
}

// Check reports constants the model cannot use: a negative latency, a
// bandwidth that is not positive, a ceiling below one channel's.
func (c *Consts) Check() error {
	for cl := range Class(NumClasses) {
		if err := c.Class[cl].check(); err != nil {
			return fmt.Errorf("class %s: %w", cl, err)
		}
	}
	return nil
}

func (k *ClassConsts) check() error {
	for p := range protocols.Proto(protocols.NumProtos) {
		g, a, b, m := k.Gamma[p], k.Alpha[p], k.Beta[p], k.BetaMax[p]
		switch {
		case !finite(g) || g < 0:
			return fmt.Errorf("gamma %s = %v µs: want a finite latency >= 0", p, g)
		case !finite(a) || a < 0:
			return fmt.Errorf("alpha %s = %v µs: want a finite latency >= 0", p, a)
		case !finite(b) || b <= 0:
			return fmt.Errorf("beta %s = %v GB/s: want a finite bandwidth > 0", p, b)
		case !finite(m) || m < b:
			return fmt.Errorf("beta_max %s = %v GB/s: want a finite ceiling >= beta (%v)", p, m, b)
		case !finite(k.AlphaCPU[p]) || k.AlphaCPU[p] < 0:
			return fmt.Errorf("alpha_cpu %s = %v µs: want a finite time >= 0", p, k.AlphaCPU[p])
		}
	}
	if !finite(k.OpCost) || k.OpCost < 0 {
		return fmt.Errorf("op_cost = %v µs: want a finite cost >= 0", k.OpCost)
	}
	for a, e := range k.Eff {
		if !(e >= 0 && e <= 2) {
			return fmt.Errorf("efficiency %s = %v: want 0..2", algos.Algo(a), e)
		}
		if l := k.AlgoLat[a]; !finite(l) || l < 0 {
			return fmt.Errorf("algo_lat %s = %v µs: want a finite latency >= 0", algos.Algo(a), l)
		}
		if g := k.AlgoGamma[a]; !finite(g) || g < 0 {
			return fmt.Errorf("algo_gamma %s = %v µs: want a finite latency >= 0", algos.Algo(a), g)
		}
		if b := k.MaxBytes[a]; !finite(b) || b < 0 {
			return fmt.Errorf("max_bytes %s = %v: want a finite size >= 0 (0: no bound)", algos.Algo(a), b)
		}
	}
	if k.Eff[algos.Ring] == 0 {
		return fmt.Errorf("efficiency ring = 0: want the ring's efficiency (1 unless measured otherwise)")
	}
	return nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// The JSON form of Consts: tables keyed by class, protocol and algorithm
// names.
type (
	constsFile struct {
		Source  string                `json:"source"`
		Classes map[string]*classFile `json:"classes"`
	}
	classFile struct {
		Source     string             `json:"source,omitempty"`
		Gamma      map[string]float64 `json:"gamma_us"`
		Alpha      map[string]float64 `json:"alpha_us"`
		AlphaCPU   map[string]float64 `json:"alpha_cpu_us,omitempty"`
		Beta       map[string]float64 `json:"beta_gbs"`
		BetaMax    map[string]float64 `json:"beta_max_gbs"`
		AlgoLat    map[string]float64 `json:"algo_lat_us"`
		AlgoGamma  map[string]float64 `json:"algo_gamma_us,omitempty"`
		Efficiency map[string]float64 `json:"efficiency"`
		MaxBytes   map[string]float64 `json:"max_bytes,omitempty"`
		OpCost     float64            `json:"op_cost_us"`
	}
)

// MarshalJSON writes the tables keyed by class, protocol and algorithm
// names (algorithms with no entry are left out).
func (c *Consts) MarshalJSON() ([]byte, error) {
	f := constsFile{Source: c.Source, Classes: map[string]*classFile{}}
	for cl := range Class(NumClasses) {
		k := &c.Class[cl]
		cf := &classFile{Source: k.Source, Gamma: perProto(&k.Gamma), Alpha: perProto(&k.Alpha), Beta: perProto(&k.Beta), BetaMax: perProto(&k.BetaMax),
			AlgoLat: map[string]float64{}, AlgoGamma: map[string]float64{}, Efficiency: map[string]float64{}, MaxBytes: map[string]float64{}, OpCost: k.OpCost}
		if k.AlphaCPU != ([protocols.NumProtos]float64{}) {
			cf.AlphaCPU = perProto(&k.AlphaCPU)
		}
		for a := range algos.Algo(algos.NumAlgos) {
			if e := k.Eff[a]; e != 0 {
				cf.Efficiency[a.String()] = e
			}
			if l := k.AlgoLat[a]; l != 0 {
				cf.AlgoLat[a.String()] = l
			}
			if g := k.AlgoGamma[a]; g != 0 {
				cf.AlgoGamma[a.String()] = g
			}
			if b := k.MaxBytes[a]; b != 0 {
				cf.MaxBytes[a.String()] = b
			}
		}
		f.Classes[cl.String()] = cf
	}
	return json.Marshal(f)
}

// UnmarshalJSON reads what MarshalJSON writes; every class and every
// protocol entry must be present, and names it does not know are errors.
func (c *Consts) UnmarshalJSON(b []byte) error {
	var f constsFile
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		return err
	}
	n := Consts{Source: f.Source}
	for name := range f.Classes {
		if _, ok := ParseClass(name); !ok {
			return fmt.Errorf("classes: unknown class %q: want %s, %s and %s", name, SHM, Net, SHMBusy)
		}
	}
	for cl := range Class(NumClasses) {
		cf := f.Classes[cl.String()]
		if cf == nil {
			return fmt.Errorf("classes: no %q: want the classes %s, %s and %s", cl, SHM, Net, SHMBusy)
		}
		k := &n.Class[cl]
		k.Source, k.OpCost = cf.Source, cf.OpCost
		for _, t := range []struct {
			name string
			m    map[string]float64
			dst  *[protocols.NumProtos]float64
		}{{"gamma_us", cf.Gamma, &k.Gamma}, {"alpha_us", cf.Alpha, &k.Alpha}, {"beta_gbs", cf.Beta, &k.Beta}, {"beta_max_gbs", cf.BetaMax, &k.BetaMax}} {
			if err := fromProtos(cl.String()+"."+t.name, t.m, t.dst); err != nil {
				return err
			}
		}
		if cf.AlphaCPU != nil { // optional: older files have none
			if err := fromProtos(cl.String()+".alpha_cpu_us", cf.AlphaCPU, &k.AlphaCPU); err != nil {
				return err
			}
		}
		for _, t := range []struct {
			name string
			m    map[string]float64
			dst  *[algos.NumAlgos]float64
		}{{"efficiency", cf.Efficiency, &k.Eff}, {"algo_lat_us", cf.AlgoLat, &k.AlgoLat}, {"algo_gamma_us", cf.AlgoGamma, &k.AlgoGamma}, {"max_bytes", cf.MaxBytes, &k.MaxBytes}} {
			var named [algos.NumAlgos]bool
			for name, v := range t.m {
				a, ok := algoByName(name)
				if !ok {
					return fmt.Errorf("%s.%s: unknown algorithm %q", cl, t.name, name)
				}
				if named[a] {
					// Which value won would depend on the map's order.
					return fmt.Errorf("%s.%s: algorithm %s named twice (names are not case sensitive)", cl, t.name, a)
				}
				named[a] = true
				t.dst[a] = v
			}
		}
	}
	*c = n
	return nil
}

// ParseClass returns the class named name (shm, net, shm-busy).
func ParseClass(name string) (Class, bool) {
	for cl, n := range classNames {
		if n == name {
			return Class(cl), true
		}
	}
	return 0, false
}

// algoByName returns the algorithm NCCL names name (any case).
func algoByName(name string) (algos.Algo, bool) {
	for a := range algos.Algo(algos.NumAlgos) {
		if strings.EqualFold(a.String(), name) {
			return a, true
		}
	}
	return 0, false
}

func perProto(t *[protocols.NumProtos]float64) map[string]float64 {
	m := map[string]float64{}
	for p := range protocols.Proto(protocols.NumProtos) {
		m[p.String()] = t[p]
	}
	return m
}

func fromProtos(what string, m map[string]float64, dst *[protocols.NumProtos]float64) error {
	if len(m) != protocols.NumProtos {
		return fmt.Errorf("%s: want exactly the protocols LL, LL128 and Simple, got %d entries", what, len(m))
	}
	for p := range protocols.Proto(protocols.NumProtos) {
		v, ok := m[p.String()]
		if !ok {
			return fmt.Errorf("%s: no %s entry", what, p)
		}
		dst[p] = v
	}
	return nil
}

// LoadConsts reads a constants file (JSON, in the form MarshalJSON
// writes it) and checks it.
func LoadConsts(path string) (*Consts, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseConsts(path, b)
}

// ParseConsts parses and checks calibration JSON; path names it in errors.
func ParseConsts(path string, b []byte) (*Consts, error) {
	var c Consts
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := c.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if c.Source == "" {
		c.Source = path
	}
	return &c, nil
}

// cmaConsts sets CMA's entries: the single-copy all-gather of one host.
// Measured 2026-11-28 on a quiet machine, 2 ranks (cc-perf tune
// all_gather --all -b 8K -e 2M, 7 interleaved repetitions, and
// compare-ompi.sh with CMA forced, 7 repetitions), its time over the
// ring's (Simple, one channel): 0.85 at 64 KiB (both runs), 0.69 and 0.24
// at 128 KiB (the ring's 47 µs there was an outlier), 0.76 and 0.66 at
// 256 KiB, then 1.30 and 1.19 at 512 KiB, 1.52 and 0.93 at 1 MiB, 2.27
// and 1.88 at 2 MiB: it wins while the data sits in the caches (the ring's FIFO
// copies every byte twice more, and the reader pulls lines the writer
// has just modified), and loses beyond, where the kernel's page pinning
// and copy cost more than memmove. So: efficiency 1.25 (the ring's time
// over its own, 0.8, in its window), a per-call cost of 2 µs (at 8 KiB it
// took 1.8 µs more than OneShot: two synchronizations and a system call
// per peer), which puts the crossover with OneShot near 50 KiB (OneShot
// measured 0.93 of CMA's time at 32 KiB, 1.15 at 64 KiB), and a bound of
// 384 KiB between the sizes it won and lost at (MaxBytes). With more
// ranks than cores it runs only where NCCL_ALGO names it (runtime/comm):
// there OneShot's constants, unmeasured for CMA.
//
// Where it stops winning depends on the machine's caches: on the VM of
// 2026-11-28 afternoon (cc-perf tune all_gather --all, 2 ranks,
// NCCL_ALGO=ring,cma, 20 iterations, 7 and 9 interleaved repetitions, and
// two scripts/tune-check.sh runs) CMA took 0.83-0.88 of the ring's time
// at 1 MiB, 0.66-0.71 at 2 MiB, 0.74-0.84 at 4 MiB, at 8 MiB 0.85 and
// 1.09 (and lost and won once each in the tune-check runs' confirmation
// rounds), 1.11-1.15 at 16 MiB; at 128-512 KiB 1.02-1.06 (a tie). So the
// bound is 6 MiB, between the last size it always won and the first it
// did not; cc-perf calibrate refits it on the user's machine.
func cmaConsts(c *Consts) {
	c.Class[SHM].AlgoGamma[algos.CMA], c.Class[SHM].Eff[algos.CMA], c.Class[SHM].MaxBytes[algos.CMA] = 2, 1.25, 6<<20
	c.Class[SHMBusy].AlgoGamma[algos.CMA], c.Class[SHMBusy].Eff[algos.CMA] = c.Class[SHMBusy].AlgoGamma[algos.OneShot], c.Class[SHMBusy].Eff[algos.OneShot]
}
