package param

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
)

// Params is every knob after Load: defaults where the environment is
// silent, the user's values where it speaks, all validated.
type Params struct {
	// Algo is NCCL_ALGO: the algorithms allowed per collective function.
	Algo AlgoMatrix
	// Proto is NCCL_PROTO: the protocols allowed per collective function.
	Proto ProtoMatrix

	// BuffSize is NCCL_BUFFSIZE: bytes of one connection's Simple FIFO
	// (NCCL_STEPS slots of BuffSize/8 bytes each).
	BuffSize int
	// LLBuffSize is NCCL_LL_BUFFSIZE: bytes of one connection's LL FIFO.
	LLBuffSize int
	// LL128BuffSize is NCCL_LL128_BUFFSIZE: bytes of one connection's LL128
	// FIFO.
	LL128BuffSize int

	// MinChannels is the channel minimum from NCCL_MIN_NCHANNELS (or its
	// alias NCCL_MIN_NRINGS, or NCCL_NCHANNELS); 0 means not set.
	MinChannels int
	// MaxChannels is the channel maximum from NCCL_MAX_NCHANNELS (or its
	// alias NCCL_MAX_NRINGS, or NCCL_NCHANNELS); 0 means not set.
	MaxChannels int

	// SocketIfname is NCCL_SOCKET_IFNAME.
	SocketIfname IfFilter
	// SocketFamily is NCCL_SOCKET_FAMILY.
	SocketFamily SocketFamily
	// SocketNThreads is NCCL_SOCKET_NTHREADS: helper goroutines per TCP
	// connection.
	SocketNThreads int
	// NSocksPerThread is NCCL_NSOCKS_PERTHREAD: sockets per helper.
	NSocksPerThread int
	// SocketRetryCnt is NCCL_SOCKET_RETRY_CNT: connect attempts after the
	// first before giving up.
	SocketRetryCnt int
	// SocketRetrySleep is NCCL_SOCKET_RETRY_SLEEP_MSEC: the base of the
	// linear back-off between connect attempts (attempt i sleeps i times it).
	SocketRetrySleep time.Duration

	// CommID is NCCL_COMM_ID, zero when unset.
	CommID CommID

	// Debug is NCCL_DEBUG.
	Debug DebugLevel
	// DebugSubsys is NCCL_DEBUG_SUBSYS.
	DebugSubsys Subsys
	// DebugFile is NCCL_DEBUG_FILE as given, before %h/%p expansion; ""
	// means stderr.
	DebugFile string

	// TunerConfigFile is NCCL_TUNER_CONFIG_FILE: tuner config rows (rank
	// 0's file is used by every rank); "" means none.
	TunerConfigFile string

	// TuneFile is CC_TUNE_FILE: the tuner's constants (rank 0's file is
	// used by every rank); "" means the built-in ones.
	TuneFile string

	// PatEnable is NCCL_PAT_ENABLE: 0 (PAT off), 1 (on) or 2 (auto: on when
	// every rank is alone on its host).
	PatEnable int

	// NVLSEnable is NCCL_NVLS_ENABLE: 0 (NVLS off), 1 (on wherever it can
	// run) or 2 (auto: on for the collectives NCCL_ALGO names it for).
	NVLSEnable int
	// NVLSChunkSize is NCCL_NVLS_CHUNKSIZE in bytes: NVLS's chunk and the
	// slot of a multicast region.
	NVLSChunkSize int

	// OneShotBytes is CC_ONESHOT_BYTES: the bytes of one slot of the
	// OneShot rows' staging area; 0 turns them off.
	OneShotBytes int

	// SHMDisable is NCCL_SHM_DISABLE.
	SHMDisable bool
	// SHMSpin is CC_SHM_SPIN_US: how long a shared-memory wait spins before
	// it sleeps on a futex.
	SHMSpin time.Duration
	// TCPSpin is CC_TCP_SPIN_US: how long a TCP receive polls its socket
	// before it blocks.
	TCPSpin time.Duration
	// HostID is CC_HOST_ID: the host identity that groups ranks for shared
	// memory; "" means hostname + boot id.
	HostID string

	// CollNetEnable is NCCL_COLLNET_ENABLE.
	CollNetEnable bool
	// CollNetServer is CC_COLLNET_SERVER: the aggregation server's
	// host:port, "" when unset.
	CollNetServer string
	// CollNetNHeads is CC_COLLNET_NHEADS: heads per host of CollNet
	// all-reduce, 0 for as many as possible.
	CollNetNHeads int

	// CTRing is the ctring algorithm's knobs: the twelve
	// NCCL_CTRAN_ALLREDUCE_RING_* CVARs and CC_CTRING_ARCH, consistent
	// (algos.CTRingKnobs.Check passed).
	CTRing algos.CTRingKnobs

	// channel knobs as read, resolved into MinChannels/MaxChannels by
	// checkChannels; 0 means unset.
	minNChannels, maxNChannels, minNRings, maxNRings, nChannels int

	set []Setting
}

// Setting is one variable the environment set, as Load read it.
type Setting struct {
	Name  string
	Value string
}

// Overrides returns the variables the environment set (non-empty), in table
// order, for NCCL_DEBUG_SUBSYS=ENV's "NCCL_X set by environment to Y".
func (p *Params) Overrides() []Setting { return append([]Setting(nil), p.set...) }

// IsSet reports whether the environment set the variable name.
func (p *Params) IsSet(name string) bool {
	for _, s := range p.set {
		if s.Name == name {
			return true
		}
	}
	return false
}

// raw returns the text the environment gave name, or its default.
func (p *Params) raw(name string) string {
	for _, s := range p.set {
		if s.Name == name {
			return s.Value
		}
	}
	for _, k := range knobs {
		if k.name == name {
			return k.def
		}
	}
	return ""
}

// AlgosFor returns the algorithms NCCL_ALGO allows for c.
func (p *Params) AlgosFor(c algos.Coll) AlgoSet { return p.Algo.For(c) }

// ProtosFor returns the protocols NCCL_PROTO allows for c.
func (p *Params) ProtosFor(c algos.Coll) ProtoSet { return p.Proto.For(c) }

// BuffSizeFor returns the FIFO size in bytes of protocol pr: NCCL_BUFFSIZE,
// NCCL_LL_BUFFSIZE or NCCL_LL128_BUFFSIZE. One FIFO slot (step) is
// BuffSizeFor(pr)/protocols.NSteps bytes.
func (p *Params) BuffSizeFor(pr protocols.Proto) int {
	switch pr {
	case protocols.LL:
		return p.LLBuffSize
	case protocols.LL128:
		return p.LL128BuffSize
	}
	return p.BuffSize
}

// Error is one bad variable: its name, the value as given and why it was
// rejected (which names what is allowed).
type Error struct {
	Name  string
	Value string
	Err   error
}

// Error returns `NAME="value": reason`.
func (e *Error) Error() string { return fmt.Sprintf("%s=%q: %v", e.Name, e.Value, e.Err) }

// Unwrap returns the reason.
func (e *Error) Unwrap() error { return e.Err }

// Load reads every knob through lookup (os.LookupEnv in a program, a map in
// a test) and validates it. It never falls back silently: each bad value is
// an *Error, and several are joined with errors.Join. A variable set to ""
// counts as unset, as in NCCL. Load itself does no I/O.
func Load(lookup func(string) (string, bool)) (*Params, error) {
	p := &Params{}
	var errs []error
	for _, k := range knobs {
		v, ok := lookup(k.name)
		if !ok || v == "" {
			if k.def == "" {
				continue
			}
			if err := k.parse(p, k.def); err != nil {
				// The table test parses every default; this is a broken table.
				panic(fmt.Sprintf("param: default of %s: %v", k.name, err))
			}
			continue
		}
		p.set = append(p.set, Setting{k.name, v})
		if err := k.parse(p, v); err != nil {
			errs = append(errs, &Error{Name: k.name, Value: v, Err: err})
		}
	}
	if len(errs) == 0 {
		for _, check := range checks {
			if err := check(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return p, nil
}

// Defaults returns the parameters of an empty environment: every knob at
// its default. Tests of other packages use it.
func Defaults() *Params {
	p, err := Load(func(string) (string, bool) { return "", false })
	if err != nil {
		panic(fmt.Sprintf("param: defaults do not load: %v", err)) // the table test forbids this
	}
	return p
}

// Kind says what sort of value a knob takes.
type Kind int

// The knob kinds.
const (
	KindInt    Kind = iota // a decimal integer in a range
	KindBool               // 0 or 1
	KindEnum               // one word from a fixed set
	KindList               // a list with its own grammar
	KindString             // free text (a path or an address)
)

// String returns the kind's name as Knobs documents it, e.g. "int".
func (k Kind) String() string {
	switch k {
	case KindInt:
		return "int"
	case KindBool:
		return "bool"
	case KindEnum:
		return "enum"
	case KindList:
		return "list"
	case KindString:
		return "string"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Knob documents one variable of the table.
type Knob struct {
	Name    string
	Kind    Kind
	Default string // as text; "" means unset
	Allowed string // what values are accepted
	Doc     string // one line
}

// Knobs returns every variable the runtime reads, in table order.
func Knobs() []Knob {
	out := make([]Knob, len(knobs))
	for i, k := range knobs {
		out[i] = Knob{Name: k.name, Kind: k.kind, Default: k.def, Allowed: k.allowed, Doc: k.doc}
	}
	return out
}

// String renders the knob as one line: "NAME (kind, default D): doc; allowed: A".
func (k Knob) String() string {
	def := k.Default
	if def == "" {
		def = "unset"
	}
	return fmt.Sprintf("%s (%s, default %s): %s; allowed: %s", k.Name, k.Kind, def, k.Doc, k.Allowed)
}

// joinAllowed is the "allowed" text of a list: comma-separated tokens.
func joinAllowed(tokens []string) string { return strings.Join(tokens, ", ") }
