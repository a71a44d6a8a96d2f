package tune

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"

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
	// Alpha is the latency of one pipeline step (post, visible to the
	// peer, consumed), in µs.
	Alpha [NumClasses][protocols.NumProtos]float64
	// Beta is what one channel streams through a link, in GB/s.
	Beta [NumClasses][protocols.NumProtos]float64
	// BetaMax is what all channels together reach, in GB/s (the cores'
	// ceiling; channels beyond it add nothing).
	BetaMax [NumClasses][protocols.NumProtos]float64
	// Gamma is the cost of a call besides its steps, in µs (NCCL's base
	// latency: launch and hand-offs).
	Gamma [protocols.NumProtos]float64
	// AlgoLat is each algorithm's latency per call beyond its steps, in µs
	// (NCCL's base latency per algorithm): the tree's and CTRING's lanes
	// run on goroutines that must be woken.
	AlgoLat [algos.NumAlgos]float64
	// OpCost is the cost of one step of a program that runs many small
	// steps in order (PAT), beyond its links' latencies, in µs.
	OpCost float64
	// Eff is each algorithm's bandwidth relative to the ring's (NCCL's
	// .92 for the tree, .75 for PAT, refitted here); 0 for algorithms cc
	// does not have.
	Eff [algos.NumAlgos]float64
}

// Default returns the built-in constants, fitted to ring all-reduce,
// reduce-scatter and all-gather measured on the development machine
// (2 cores; ccrun -np 2 and 4 on shared memory, -np 2 over TCP loopback
// with a host identity per rank; every protocol forced, 8 B to 32 MiB,
// medians of 3 interleaved runs, 2026-11-24): alpha from the smallest
// sizes (time = gamma + steps x alpha), beta from the largest (bus
// bandwidth). With one channel per 2 cores here, the ceilings are a guess
// (1.5 channels' worth); a calibration file replaces all of it.
func Default() *Consts {
	c := &Consts{Source: "built-in (measured on the development machine, 2026-11-24)"}
	set := func(a *[protocols.NumProtos]float64, ll, ll128, simple float64) {
		a[protocols.LL], a[protocols.LL128], a[protocols.Simple] = ll, ll128, simple
	}
	set(&c.Alpha[SHM], 0.30, 0.32, 0.30)
	set(&c.Beta[SHM], 0.55, 2.6, 5.0)
	set(&c.BetaMax[SHM], 0.8, 3.9, 7.5)
	set(&c.Alpha[SHMBusy], 4.6, 5.0, 4.5)
	set(&c.Beta[SHMBusy], 0.25, 1.2, 2.0)
	set(&c.BetaMax[SHMBusy], 0.3, 1.4, 2.4)
	set(&c.Alpha[Net], 10.5, 10, 50)
	set(&c.Beta[Net], 0.22, 0.95, 1.15)
	set(&c.BetaMax[Net], 0.33, 1.4, 1.7)
	set(&c.Gamma, 0.2, 0.2, 0.2)
	c.OpCost = 0.5
	c.Eff[algos.Ring] = 1
	c.Eff[algos.Tree] = 0.85
	c.Eff[algos.PAT] = 0.75
	c.Eff[algos.CTRing] = 0.9
	c.AlgoLat[algos.Tree] = 15
	c.AlgoLat[algos.CTRing] = 30
	return c
}

// Check reports constants the model cannot use: a negative latency, a
// bandwidth that is not positive, a ceiling below one channel's.
func (c *Consts) Check() error {
	for cl := range Class(NumClasses) {
		for p := range protocols.Proto(protocols.NumProtos) {
			a, b, m := c.Alpha[cl][p], c.Beta[cl][p], c.BetaMax[cl][p]
			switch {
			case !(a >= 0) || math.IsInf(a, 0):
				return fmt.Errorf("alpha %s/%s = %v µs: want a finite latency >= 0", cl, p, a)
			case !(b > 0) || math.IsInf(b, 0):
				return fmt.Errorf("beta %s/%s = %v GB/s: want a finite bandwidth > 0", cl, p, b)
			case !(m >= b) || math.IsInf(m, 0):
				return fmt.Errorf("beta_max %s/%s = %v GB/s: want a finite ceiling >= beta (%v)", cl, p, m, b)
			}
		}
	}
	for p, g := range c.Gamma {
		if !(g >= 0) || math.IsInf(g, 0) {
			return fmt.Errorf("gamma %s = %v µs: want a finite latency >= 0", protocols.Proto(p), g)
		}
	}
	if !(c.OpCost >= 0) || math.IsInf(c.OpCost, 0) {
		return fmt.Errorf("op_cost = %v µs: want a finite cost >= 0", c.OpCost)
	}
	for a, e := range c.Eff {
		if !(e >= 0 && e <= 2) {
			return fmt.Errorf("efficiency %s = %v: want 0..2", algos.Algo(a), e)
		}
		if l := c.AlgoLat[a]; !(l >= 0) || math.IsInf(l, 0) {
			return fmt.Errorf("algo_lat %s = %v µs: want a finite latency >= 0", algos.Algo(a), l)
		}
	}
	return nil
}

// constsFile is the JSON form of Consts: tables keyed by names.
type constsFile struct {
	Source     string                        `json:"source"`
	Alpha      map[string]map[string]float64 `json:"alpha_us"`
	Beta       map[string]map[string]float64 `json:"beta_gbs"`
	BetaMax    map[string]map[string]float64 `json:"beta_max_gbs"`
	Gamma      map[string]float64            `json:"gamma_us"`
	OpCost     float64                       `json:"op_cost_us"`
	Efficiency map[string]float64            `json:"efficiency"`
	AlgoLat    map[string]float64            `json:"algo_lat_us"`
}

// MarshalJSON writes the tables keyed by class, protocol and algorithm
// names.
func (c *Consts) MarshalJSON() ([]byte, error) {
	f := constsFile{Source: c.Source, Alpha: perClass(&c.Alpha), Beta: perClass(&c.Beta), BetaMax: perClass(&c.BetaMax),
		Gamma: perProto(&c.Gamma), OpCost: c.OpCost, Efficiency: map[string]float64{}, AlgoLat: map[string]float64{}}
	for a, e := range c.Eff {
		if e != 0 {
			f.Efficiency[algos.Algo(a).String()] = e
		}
		if l := c.AlgoLat[a]; l != 0 {
			f.AlgoLat[algos.Algo(a).String()] = l
		}
	}
	return json.Marshal(f)
}

// UnmarshalJSON reads what MarshalJSON writes; every table entry must be
// present, and names it does not know are errors.
func (c *Consts) UnmarshalJSON(b []byte) error {
	var f constsFile
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&f); err != nil {
		return err
	}
	var n Consts
	n.Source, n.OpCost = f.Source, f.OpCost
	for _, t := range []struct {
		name string
		m    map[string]map[string]float64
		dst  *[NumClasses][protocols.NumProtos]float64
	}{{"alpha_us", f.Alpha, &n.Alpha}, {"beta_gbs", f.Beta, &n.Beta}, {"beta_max_gbs", f.BetaMax, &n.BetaMax}} {
		if len(t.m) != NumClasses {
			return fmt.Errorf("%s: want the classes %s, %s and %s", t.name, SHM, Net, SHMBusy)
		}
		for cl := range Class(NumClasses) {
			if err := fromProtos(t.name+"."+cl.String(), t.m[cl.String()], &t.dst[cl]); err != nil {
				return err
			}
		}
	}
	if err := fromProtos("gamma_us", f.Gamma, &n.Gamma); err != nil {
		return err
	}
	for _, t := range []struct {
		name string
		m    map[string]float64
		dst  *[algos.NumAlgos]float64
	}{{"efficiency", f.Efficiency, &n.Eff}, {"algo_lat_us", f.AlgoLat, &n.AlgoLat}} {
		for name, v := range t.m {
			a := -1
			for i := range algos.NumAlgos {
				if algos.Algo(i).String() == name {
					a = i
				}
			}
			if a < 0 {
				return fmt.Errorf("%s: unknown algorithm %q", t.name, name)
			}
			t.dst[a] = v
		}
	}
	*c = n
	return nil
}

func perClass(t *[NumClasses][protocols.NumProtos]float64) map[string]map[string]float64 {
	m := map[string]map[string]float64{}
	for cl := range Class(NumClasses) {
		m[cl.String()] = perProto(&t[cl])
	}
	return m
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
