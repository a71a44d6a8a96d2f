package main

// NCCL_TESTS_SPLIT and NCCL_TESTS_SPLIT_MASK split the job's ranks into
// groups, as nccl-tests does (common.cu, run(): the color of MPI process
// proc, then MPI_Comm_split and one NCCL communicator per color). Each
// group measures the collective on a communicator of its own
// (comm.Split), all groups at once; the bookkeeping (barriers, the time
// each row prints, #wrong, the device list) stays over the whole job, as
// nccl-tests' stays over MPI_COMM_WORLD. Rank 0 prints one table: its
// group's counts and bus factor, the time combined over every rank of
// every group, #wrong summed over the job, and each rank's color in the
// device lines' Group column.
//
//	NCCL_TESTS_SPLIT="AND 1", 4 ranks:  color = rank & 1
//	rank   0  1  2  3
//	color  0  1  0  1   -> groups {0, 2} and {1, 3}, each a 2-rank communicator

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/seed-760dd1f1/cc/cmd/cc-perf/internal/bench"
)

// splitRule is how a rank's color (its group) follows from its rank.
type splitRule struct {
	env, value string // the variable and its value, for messages
	op         string // AND, OR, MOD or DIV
	arg        uint64
}

// splitOps are NCCL_TESTS_SPLIT's operators with their symbols, in the
// order nccl-tests tries them.
var splitOps = []struct{ name, sym string }{{"AND", "&"}, {"OR", "|"}, {"MOD", "%"}, {"DIV", "/"}}

// parseSplit reads the split variables; nil means one group. As in
// nccl-tests, NCCL_TESTS_SPLIT_MASK wins over NCCL_TESTS_SPLIT, and an
// empty value splits nothing. Unlike nccl-tests, which falls back to one
// group (or divides by zero), a value it cannot read is an error.
func parseSplit(lookup func(string) (string, bool)) (*splitRule, error) {
	if v, ok := lookup("NCCL_TESTS_SPLIT_MASK"); ok {
		s := strings.TrimSpace(v)
		if s == "" {
			return nil, nil
		}
		hex := strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
		mask, err := strconv.ParseUint(hex, 16, 64)
		if err != nil {
			return nil, usagef("NCCL_TESTS_SPLIT_MASK=%q: want a hexadecimal mask such as 0x3 (color = rank & mask)", v)
		}
		return &splitRule{env: "NCCL_TESTS_SPLIT_MASK", value: v, op: "AND", arg: mask}, nil
	}
	v, ok := lookup("NCCL_TESTS_SPLIT")
	s := strings.TrimSpace(v)
	if !ok || s == "" {
		return nil, nil
	}
	bad := func(why string) error {
		return usagef("NCCL_TESTS_SPLIT=%q: %s", v, why)
	}
	for _, o := range splitOps {
		var rest string
		switch up := strings.ToUpper(s); {
		case strings.HasPrefix(up, o.name):
			rest = s[len(o.name):]
		case strings.HasPrefix(s, o.sym):
			rest = s[len(o.sym):]
		default:
			continue
		}
		arg, ok := splitNumber(rest)
		switch {
		case !ok:
			return nil, bad(fmt.Sprintf("%q is not a number: want a value >= 0 such as 2, 0x3, 0b11 or 010 (octal)", strings.TrimSpace(rest)))
		case arg == 0 && (o.name == "MOD" || o.name == "DIV"):
			return nil, bad(fmt.Sprintf("%s by 0: want a value >= 1", o.name))
		}
		return &splitRule{env: "NCCL_TESTS_SPLIT", value: v, op: o.name, arg: arg}, nil
	}
	return nil, bad(`want "<op> <value>" with op AND, OR, MOD or DIV (or &, |, %, /), e.g. "AND 1"`)
}

// splitNumber reads a value as nccl-tests' parseInt does (strtoul with base
// 0, plus 0b for binary): decimal, 0x hex, 0b binary, a leading 0 octal;
// leading and trailing blanks allowed, nothing else. It fits an int32, like
// nccl-tests' int.
func splitNumber(s string) (uint64, bool) {
	s = strings.TrimSpace(s)
	base := 10
	switch low := strings.ToLower(s); {
	case strings.HasPrefix(low, "0x"):
		s, base = s[2:], 16
	case strings.HasPrefix(low, "0b"):
		s, base = s[2:], 2
	case len(s) > 1 && s[0] == '0':
		s, base = s[1:], 8
	}
	if s == "" || strings.ContainsAny(s, "+-_") {
		return 0, false
	}
	v, err := strconv.ParseUint(s, base, 31)
	return v, err == nil
}

// color is rank's group. nccl-tests computes it from the MPI process
// index; cc-perf from the rank, which is the same when each process runs
// one rank (mpirun -np N without -t/-g), and splits -t ranks too.
func (s *splitRule) color(rank int) int {
	r := uint64(rank)
	switch s.op {
	case "OR":
		r |= s.arg
	case "MOD":
		r %= s.arg
	case "DIV":
		r /= s.arg
	default:
		r &= s.arg
	}
	return int(r)
}

// groups returns the rank count of every color of nranks ranks, by color.
func (s *splitRule) groups(nranks int) map[int]int {
	g := map[int]int{}
	for r := range nranks {
		g[s.color(r)]++
	}
	return g
}

// checkGroups validates what depends on the groups' sizes: the collective
// must run on each, a root must exist in each, and -r all (every root in
// turn) needs groups of one size, since every group runs the same rows.
func (s *splitRule) checkGroups(o *bench.Options, nranks int) error {
	g := s.groups(nranks)
	colors := make([]int, 0, len(g))
	for c := range g {
		colors = append(colors, c)
	}
	slices.Sort(colors)
	smallest, largest := nranks, 0
	for _, c := range colors {
		if err := o.Coll.CheckRanks(g[c]); err != nil {
			return usagef("%s=%q: group %d: %v", s.env, s.value, c, err)
		}
		smallest, largest = min(smallest, g[c]), max(largest, g[c])
	}
	if !o.Coll.Rooted {
		return nil
	}
	if o.Root >= smallest {
		return usagef("-r/--root %d with %s=%q: the smallest group has %d ranks: want 0..%d", o.Root, s.env, s.value, smallest, smallest-1)
	}
	if o.Root < 0 && smallest != largest {
		return usagef("-r/--root all with %s=%q: the groups have %d to %d ranks, and every group must run the same roots: give one root below %d", s.env, s.value, smallest, largest, smallest)
	}
	return nil
}
