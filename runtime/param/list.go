package param

import (
	"fmt"
	"math/bits"
	"strings"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
)

// AlgoSet is a set of algorithms, bit a for algos.Algo a.
type AlgoSet uint16

// AllAlgos holds every algorithm.
const AllAlgos = AlgoSet(1<<algos.NumAlgos - 1)

// Has reports whether a is in the set.
func (s AlgoSet) Has(a algos.Algo) bool { return s&(1<<a) != 0 }

// Len returns the number of algorithms in the set.
func (s AlgoSet) Len() int { return bits.OnesCount32(uint32(s)) }

// Algos returns the members in algos.Algo order.
func (s AlgoSet) Algos() []algos.Algo {
	var out []algos.Algo
	for a := range algos.Algo(algos.NumAlgos) {
		if s.Has(a) {
			out = append(out, a)
		}
	}
	return out
}

// String returns the members as NCCL_ALGO tokens joined by commas, e.g.
// "tree,ring", or "" for the empty set.
func (s AlgoSet) String() string { return joinTokens(uint32(s), algoSpec.tokens) }

// ProtoSet is a set of protocols, bit p for protocols.Proto p (NCCL's
// order: LL, LL128, Simple).
type ProtoSet uint8

// AllProtos holds every protocol.
const AllProtos = ProtoSet(1<<protocols.NumProtos - 1)

// Has reports whether p is in the set.
func (s ProtoSet) Has(p protocols.Proto) bool { return s&(1<<p) != 0 }

// Len returns the number of protocols in the set.
func (s ProtoSet) Len() int { return bits.OnesCount32(uint32(s)) }

// Protos returns the members in protocols.Proto order.
func (s ProtoSet) Protos() []protocols.Proto {
	var out []protocols.Proto
	for p := range protocols.Proto(protocols.NumProtos) {
		if s.Has(p) {
			out = append(out, p)
		}
	}
	return out
}

// String returns the members as NCCL_PROTO tokens joined by commas, e.g.
// "ll,simple", or "" for the empty set.
func (s ProtoSet) String() string { return joinTokens(uint32(s), protoSpec.tokens) }

// AlgoMatrix is NCCL_ALGO parsed: for each collective function (algos.Coll,
// NCCL's ncclFunc order), the set of algorithms the user allows. The zero
// value (variable unset) allows every algorithm for every function.
type AlgoMatrix struct {
	// Set reports that the user set NCCL_ALGO.
	Set bool
	// Raw is the text as given, "" when unset.
	Raw string

	m matrix
}

// For returns the algorithms allowed for c: the user's row when an entry of
// NCCL_ALGO applied to c, otherwise AllAlgos.
func (m AlgoMatrix) For(c algos.Coll) AlgoSet {
	if !m.m.forced[c] {
		return AllAlgos
	}
	return AlgoSet(m.m.rows[c])
}

// Forced reports whether an entry of NCCL_ALGO applied to c, i.e. the user
// restricted c's algorithms (NCCL's tuningContext.forced).
func (m AlgoMatrix) Forced(c algos.Coll) bool { return m.m.forced[c] }

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

// For returns the protocols allowed for c: the user's row when an entry of
// NCCL_PROTO applied to c, otherwise AllProtos.
func (m ProtoMatrix) For(c algos.Coll) ProtoSet {
	if !m.m.forced[c] {
		return AllProtos
	}
	return ProtoSet(m.m.rows[c])
}

// Forced reports whether an entry of NCCL_PROTO applied to c.
func (m ProtoMatrix) Forced(c algos.Coll) bool { return m.m.forced[c] }

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

// The grammar's tokens are the lower-case names of algos.Algo,
// protocols.Proto and algos.Coll, e.g. "collnetdirect", "ll128",
// "allreduce".
var (
	algoSpec  = listSpec{"algorithm", tokens[algos.Algo](algos.NumAlgos)}
	protoSpec = listSpec{"protocol", tokens[protocols.Proto](protocols.NumProtos)}
	// funcTokens are the function prefixes, bit i for algos.Coll i.
	funcTokens = tokens[algos.Coll](algos.NumColls)
)

// matrix is the shared representation of AlgoMatrix and ProtoMatrix: one
// element bitmask per collective function, and whether an entry applied to
// it.
type matrix struct {
	rows   [algos.NumColls]uint32
	forced [algos.NumColls]bool
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
		for f := range algos.NumColls {
			if rows&(1<<f) != 0 {
				m.rows[f] = row
				m.forced[f] = true
			}
		}
	}
	for f := range algos.NumColls {
		if m.forced[f] && m.rows[f] == 0 {
			return matrix{}, fmt.Errorf("no %s left for %s (allowed: %s)", spec.what, funcTokens[f], strings.Join(spec.tokens, ", "))
		}
	}
	return m, nil
}

const allFuncs = 1<<algos.NumColls - 1

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
// forced row, rows in algos.Coll order.
func (m matrix) format(spec listSpec) string {
	var entries []string
	for f := range algos.NumColls {
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

// tokens lists the lower-case names of the n members of an enum, token i
// for member i.
func tokens[E interface {
	~int | ~uint8
	String() string
}](n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = strings.ToLower(E(i).String())
	}
	return out
}
