package param

import (
	"fmt"
	"math/bits"
	"strings"
)

// Func is a collective function, the row index of the NCCL_ALGO and
// NCCL_PROTO matrices. The order is NCCL's (ncclFunc_t).
type Func int

// The collective functions NCCL_ALGO and NCCL_PROTO can name in a prefix.
const (
	FuncBroadcast Func = iota
	FuncReduce
	FuncAllGather
	FuncReduceScatter
	FuncAllReduce

	// NumFuncs is the number of collective functions.
	NumFuncs = int(FuncAllReduce) + 1
)

var funcNames = [NumFuncs]string{"Broadcast", "Reduce", "AllGather", "ReduceScatter", "AllReduce"}

// String returns NCCL's name for the function, e.g. "AllReduce".
func (f Func) String() string {
	if f < 0 || int(f) >= NumFuncs {
		return fmt.Sprintf("Func(%d)", int(f))
	}
	return funcNames[f]
}

// Prefix returns the lower-case prefix NCCL_ALGO and NCCL_PROTO accept for
// the function, e.g. "allreduce".
func (f Func) Prefix() string { return strings.ToLower(f.String()) }

// Algo is a collective algorithm. The first seven are NCCL's, in NCCL's
// order (NCCL_ALGO_TREE .. NCCL_ALGO_PAT); AlgoCTRing is our extension, the
// CTRAN ring all-reduce (seed 002).
type Algo int

// The algorithms NCCL_ALGO can name.
const (
	AlgoTree Algo = iota
	AlgoRing
	AlgoCollNetDirect
	AlgoCollNetChain
	AlgoNVLS
	AlgoNVLSTree
	AlgoPAT
	AlgoCTRing

	// NumAlgos is the number of algorithms.
	NumAlgos = int(AlgoCTRing) + 1
)

var algoNames = [NumAlgos]string{"Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT", "CTRing"}

// String returns NCCL's name for the algorithm, e.g. "CollNetDirect".
func (a Algo) String() string {
	if a < 0 || int(a) >= NumAlgos {
		return fmt.Sprintf("Algo(%d)", int(a))
	}
	return algoNames[a]
}

// Token returns the lower-case token NCCL_ALGO accepts, e.g. "collnetdirect".
func (a Algo) Token() string { return strings.ToLower(a.String()) }

// Proto is a protocol, in NCCL's order (NCCL_PROTO_LL, LL128, SIMPLE).
type Proto int

// The protocols NCCL_PROTO can name.
const (
	ProtoLL Proto = iota
	ProtoLL128
	ProtoSimple

	// NumProtos is the number of protocols.
	NumProtos = int(ProtoSimple) + 1
)

var protoNames = [NumProtos]string{"LL", "LL128", "Simple"}

// String returns NCCL's name for the protocol, e.g. "Simple".
func (p Proto) String() string {
	if p < 0 || int(p) >= NumProtos {
		return fmt.Sprintf("Proto(%d)", int(p))
	}
	return protoNames[p]
}

// Token returns the lower-case token NCCL_PROTO accepts, e.g. "ll128".
func (p Proto) Token() string { return strings.ToLower(p.String()) }

// AlgoSet is a set of algorithms, bit a for Algo a.
type AlgoSet uint16

// AllAlgos holds every algorithm.
const AllAlgos = AlgoSet(1<<NumAlgos - 1)

// Has reports whether a is in the set.
func (s AlgoSet) Has(a Algo) bool { return s&(1<<a) != 0 }

// Len returns the number of algorithms in the set.
func (s AlgoSet) Len() int { return bits.OnesCount32(uint32(s)) }

// Algos returns the members in Algo order.
func (s AlgoSet) Algos() []Algo {
	var out []Algo
	for a := range Algo(NumAlgos) {
		if s.Has(a) {
			out = append(out, a)
		}
	}
	return out
}

// String returns the members as NCCL_ALGO tokens joined by commas, e.g.
// "tree,ring", or "" for the empty set.
func (s AlgoSet) String() string { return joinTokens(uint32(s), algoSpec.tokens) }

// ProtoSet is a set of protocols, bit p for Proto p.
type ProtoSet uint8

// AllProtos holds every protocol.
const AllProtos = ProtoSet(1<<NumProtos - 1)

// Has reports whether p is in the set.
func (s ProtoSet) Has(p Proto) bool { return s&(1<<p) != 0 }

// Len returns the number of protocols in the set.
func (s ProtoSet) Len() int { return bits.OnesCount32(uint32(s)) }

// Protos returns the members in Proto order.
func (s ProtoSet) Protos() []Proto {
	var out []Proto
	for p := range Proto(NumProtos) {
		if s.Has(p) {
			out = append(out, p)
		}
	}
	return out
}

// String returns the members as NCCL_PROTO tokens joined by commas, e.g.
// "ll,simple", or "" for the empty set.
func (s ProtoSet) String() string { return joinTokens(uint32(s), protoSpec.tokens) }

// AlgoMatrix is NCCL_ALGO parsed: for each collective function, the set of
// algorithms the user allows. The zero value (variable unset) allows every
// algorithm for every function.
type AlgoMatrix struct {
	// Set reports that the user set NCCL_ALGO.
	Set bool
	// Raw is the text as given, "" when unset.
	Raw string

	m matrix
}

// For returns the algorithms allowed for f: the user's row when an entry of
// NCCL_ALGO applied to f, otherwise AllAlgos.
func (m AlgoMatrix) For(f Func) AlgoSet {
	if !m.m.forced[f] {
		return AllAlgos
	}
	return AlgoSet(m.m.rows[f])
}

// Forced reports whether an entry of NCCL_ALGO applied to f, i.e. the user
// restricted f's algorithms (NCCL's tuningContext.forced).
func (m AlgoMatrix) Forced(f Func) bool { return m.m.forced[f] }

// String returns a canonical NCCL_ALGO value with the same meaning: one
// "func:algo,..." entry per forced function, or "" when nothing is forced.
func (m AlgoMatrix) String() string { return m.m.format(algoSpec) }

// ProtoMatrix is NCCL_PROTO parsed: for each collective function, the set of
// protocols the user allows. The zero value (variable unset) allows every
// protocol for every function; whether LL128 is then used is the tuner's
// decision (NCCL enables it by default only on some hardware).
type ProtoMatrix struct {
	// Set reports that the user set NCCL_PROTO.
	Set bool
	// Raw is the text as given, "" when unset.
	Raw string

	m matrix
}

// For returns the protocols allowed for f: the user's row when an entry of
// NCCL_PROTO applied to f, otherwise AllProtos.
func (m ProtoMatrix) For(f Func) ProtoSet {
	if !m.m.forced[f] {
		return AllProtos
	}
	return ProtoSet(m.m.rows[f])
}

// Forced reports whether an entry of NCCL_PROTO applied to f.
func (m ProtoMatrix) Forced(f Func) bool { return m.m.forced[f] }

// String returns a canonical NCCL_PROTO value with the same meaning.
func (m ProtoMatrix) String() string { return m.m.format(protoSpec) }

// ParseAlgoList parses an NCCL_ALGO value with NCCL's parseList grammar
// (see the package doc). The empty string means unset.
func ParseAlgoList(s string) (AlgoMatrix, error) {
	if s == "" {
		return AlgoMatrix{}, nil
	}
	m, err := parseList(s, algoSpec)
	if err != nil {
		return AlgoMatrix{}, err
	}
	return AlgoMatrix{Set: true, Raw: s, m: m}, nil
}

// ParseProtoList parses an NCCL_PROTO value with NCCL's parseList grammar
// (see the package doc). The empty string means unset.
func ParseProtoList(s string) (ProtoMatrix, error) {
	if s == "" {
		return ProtoMatrix{}, nil
	}
	m, err := parseList(s, protoSpec)
	if err != nil {
		return ProtoMatrix{}, err
	}
	return ProtoMatrix{Set: true, Raw: s, m: m}, nil
}

// listSpec names the elements of one parseList matrix.
type listSpec struct {
	what   string   // "algorithm" or "protocol", for messages
	tokens []string // lower-case element tokens, bit i for tokens[i]
}

var (
	algoSpec  = listSpec{"algorithm", lowerAll(algoNames[:])}
	protoSpec = listSpec{"protocol", lowerAll(protoNames[:])}
	// funcTokens are the function prefixes, bit i for Func i.
	funcTokens = lowerAll(funcNames[:])
)

// matrix is the shared representation of AlgoMatrix and ProtoMatrix: one
// element bitmask per function, and whether an entry applied to it.
type matrix struct {
	rows   [NumFuncs]uint32
	forced [NumFuncs]bool
}

// parseList is NCCL's parseList (src/graph/tuning.cc), stricter where NCCL
// is silent: empty entries, empty elements, a lone '^', more than one ':' in
// an entry and a row left with no element at all are errors here.
//
//	list  := entry (';' entry)*
//	entry := [func ':'] ['^'] elem (',' elem)*
//
// Only the first entry may omit func (it then applies to every function).
// Each row an entry applies to is first reset (to nothing for a positive
// list, to everything for '^'), then each named element is set (cleared for
// '^'). Later entries overwrite earlier ones row by row. Tokens are matched
// case-insensitively after trimming spaces.
func parseList(s string, spec listSpec) (matrix, error) {
	var m matrix
	for i, entry := range strings.Split(s, ";") {
		if strings.TrimSpace(entry) == "" {
			return matrix{}, fmt.Errorf("empty entry %d (want [func:][^]%s[,%s...] separated by ';')", i+1, spec.what, spec.what)
		}
		prefix, elems, hasPrefix := strings.Cut(entry, ":")
		if !hasPrefix {
			if i > 0 {
				return matrix{}, fmt.Errorf("entry %q has no function prefix: all entries except the first must have one (allowed: %s; e.g. allreduce:%s)",
					entry, strings.Join(funcTokens, ", "), strings.TrimSpace(entry))
			}
			elems = entry
		}
		if strings.Contains(elems, ":") {
			return matrix{}, fmt.Errorf("entry %q has more than one ':' (want [func:][^]%s[,%s...])", entry, spec.what, spec.what)
		}
		rows := allFuncs
		if hasPrefix {
			f, ok := lookupToken(prefix, funcTokens)
			if !ok {
				return matrix{}, fmt.Errorf("unknown function prefix %q (allowed: %s)", strings.TrimSpace(prefix), strings.Join(funcTokens, ", "))
			}
			rows = 1 << f
		}
		row, err := parseElems(elems, spec)
		if err != nil {
			return matrix{}, err
		}
		for f := range NumFuncs {
			if rows&(1<<f) != 0 {
				m.rows[f] = row
				m.forced[f] = true
			}
		}
	}
	for f := range NumFuncs {
		if m.forced[f] && m.rows[f] == 0 {
			return matrix{}, fmt.Errorf("no %s left for %s (allowed: %s)", spec.what, funcTokens[f], strings.Join(spec.tokens, ", "))
		}
	}
	return m, nil
}

const allFuncs = 1<<NumFuncs - 1

// parseElems parses "[^]elem(,elem)*" into the row it leaves.
func parseElems(list string, spec listSpec) (uint32, error) {
	all := uint32(1)<<len(spec.tokens) - 1
	row, set := uint32(0), true
	body := strings.TrimSpace(list)
	if rest, ok := strings.CutPrefix(body, "^"); ok {
		row, set, body = all, false, rest
		if strings.TrimSpace(body) == "" {
			return 0, fmt.Errorf("%q names no %s after '^' (allowed: %s)", list, spec.what, strings.Join(spec.tokens, ", "))
		}
	}
	for _, tok := range strings.Split(body, ",") {
		e, ok := lookupToken(tok, spec.tokens)
		switch {
		case strings.TrimSpace(tok) == "":
			return 0, fmt.Errorf("empty %s in %q (allowed: %s)", spec.what, list, strings.Join(spec.tokens, ", "))
		case !ok:
			return 0, fmt.Errorf("unknown %s %q (allowed: %s)", spec.what, strings.TrimSpace(tok), strings.Join(spec.tokens, ", "))
		case set:
			row |= 1 << e
		default:
			row &^= 1 << e
		}
	}
	return row, nil
}

// format writes the canonical form: "func:elem,elem;func:elem" for every
// forced row, rows in Func order.
func (m matrix) format(spec listSpec) string {
	var entries []string
	for f := range NumFuncs {
		if m.forced[f] {
			entries = append(entries, funcTokens[f]+":"+joinTokens(m.rows[f], spec.tokens))
		}
	}
	return strings.Join(entries, ";")
}

// lookupToken finds tok (trimmed, any case) in tokens.
func lookupToken(tok string, tokens []string) (int, bool) {
	tok = strings.TrimSpace(tok)
	for i, t := range tokens {
		if strings.EqualFold(tok, t) {
			return i, true
		}
	}
	return 0, false
}

func joinTokens(mask uint32, tokens []string) string {
	var b strings.Builder
	for i, t := range tokens {
		if mask&(1<<i) == 0 {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(t)
	}
	return b.String()
}

func lowerAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = strings.ToLower(n)
	}
	return out
}
