package bootstrap

import (
	"fmt"
	"strconv"
	"strings"
)

// FirstHost returns the first host of a Slurm hostlist expression, checking the whole
// expression's syntax on the way:
//
//	tb[1-4]                 -> tb1
//	node[01-04,07],gpu3     -> node01   (zero padding is kept)
//	gpu3,node[1-2]          -> gpu3
//	rack[2-3]-n[08-09]      -> rack2-n08
//
// Hosts are separated by commas or whitespace; a host is text ([A-Za-z0-9._-]) and
// bracketed range lists (N or N-M with N <= M, comma separated, not nested).
func FirstHost(nodelist string) (string, error) {
	first := ""
	i, n := 0, 0
	for {
		for i < len(nodelist) && isSpace(nodelist[i]) {
			i++
		}
		if i == len(nodelist) {
			break
		}
		host, next, err := parseHost(nodelist, i)
		if err != nil {
			return "", fmt.Errorf("nodelist %q: %w", nodelist, err)
		}
		if n == 0 {
			first = host
		}
		n++
		i = next
		for i < len(nodelist) && isSpace(nodelist[i]) {
			i++
		}
		if i < len(nodelist) && nodelist[i] == ',' {
			i++
			if j := skipSpace(nodelist, i); j == len(nodelist) || nodelist[j] == ',' {
				return "", fmt.Errorf("nodelist %q: empty host name at offset %d", nodelist, i)
			}
		}
	}
	if n == 0 {
		return "", fmt.Errorf("nodelist %q: no hosts", nodelist)
	}
	return first, nil
}

// parseHost reads one host expression starting at s[i] and returns its first expansion
// and the offset after it.
func parseHost(s string, i int) (string, int, error) {
	var b strings.Builder
	start := i
	for i < len(s) && s[i] != ',' && !isSpace(s[i]) {
		c := s[i]
		switch {
		case c == '[':
			lo, next, err := parseRanges(s, i+1)
			if err != nil {
				return "", 0, err
			}
			b.WriteString(lo)
			i = next
		case c == ']':
			return "", 0, fmt.Errorf("unmatched ']' at offset %d", i)
		case isHostChar(c):
			b.WriteByte(c)
			i++
		default:
			return "", 0, fmt.Errorf("invalid character %q at offset %d, want letters, digits, '.', '_', '-' or [ranges]", c, i)
		}
	}
	if i == start {
		return "", 0, fmt.Errorf("empty host name at offset %d", i)
	}
	return b.String(), i, nil
}

// parseRanges reads "lo[-hi](,lo[-hi])*]" starting after '[' and returns the first lo
// (as written) and the offset after ']'.
func parseRanges(s string, i int) (string, int, error) {
	first := ""
	for k := 0; ; k++ {
		lo, j := digits(s, i)
		if lo == "" {
			return "", 0, fmt.Errorf("want a number at offset %d inside [ ]", i)
		}
		i = j
		if i < len(s) && s[i] == '-' {
			hi, j := digits(s, i+1)
			if hi == "" {
				return "", 0, fmt.Errorf("want a number after '-' at offset %d", i+1)
			}
			l, errL := strconv.ParseUint(lo, 10, 64)
			h, errH := strconv.ParseUint(hi, 10, 64)
			if errL != nil || errH != nil {
				return "", 0, fmt.Errorf("range %s-%s at offset %d is out of bounds", lo, hi, i)
			}
			if l > h {
				return "", 0, fmt.Errorf("range %s-%s at offset %d runs backwards", lo, hi, i)
			}
			i = j
		}
		if k == 0 {
			first = lo
		}
		if i >= len(s) {
			return "", 0, fmt.Errorf("missing ']' at the end")
		}
		switch s[i] {
		case ',':
			i++
		case ']':
			return first, i + 1, nil
		default:
			return "", 0, fmt.Errorf("invalid character %q at offset %d inside [ ], want digits, '-', ',' or ']'", s[i], i)
		}
	}
}

func digits(s string, i int) (string, int) {
	j := i
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	return s[i:j], j
}

func skipSpace(s string, i int) int {
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return i
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isHostChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// TasksOnNode returns the number of tasks Slurm placed on node index node (SLURM_NODEID),
// from a SLURM_STEP_TASKS_PER_NODE / SLURM_TASKS_PER_NODE value such as "2(x3),1": three
// nodes with 2 tasks, then one node with 1.
func TasksOnNode(spec string, node int) (int, error) {
	if node < 0 {
		return 0, fmt.Errorf("node index %d is negative", node)
	}
	if spec == "" {
		return 0, fmt.Errorf("tasks-per-node %q is empty", spec)
	}
	seen, found := 0, 0
	for _, item := range strings.Split(spec, ",") {
		count, reps := item, "1"
		if k := strings.IndexByte(item, '('); k >= 0 {
			if !strings.HasPrefix(item[k:], "(x") || !strings.HasSuffix(item, ")") {
				return 0, fmt.Errorf("tasks-per-node %q: item %q, want N or N(xM)", spec, item)
			}
			count, reps = item[:k], item[k+2:len(item)-1]
		}
		c, err1 := strconv.Atoi(count)
		r, err2 := strconv.Atoi(reps)
		if err1 != nil || err2 != nil || c < 1 || r < 1 || count[0] == '+' || reps[0] == '+' {
			return 0, fmt.Errorf("tasks-per-node %q: item %q, want N or N(xM) with N, M >= 1", spec, item)
		}
		if found == 0 && node-seen < r {
			found = c
		}
		seen = min(seen+min(r, node+1), node+1) // saturates past node: only "beyond it" matters
	}
	if found == 0 {
		return 0, fmt.Errorf("tasks-per-node %q covers %d nodes, node index %d is beyond it", spec, seen, node)
	}
	return found, nil
}
