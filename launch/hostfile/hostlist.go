package hostfile

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// maxExpand bounds how many names one expression may expand to; a typo such as
// node[1-99999999] must fail, not allocate gigabytes.
const maxExpand = 1 << 16

// Expand expands a Slurm hostlist expression into host names, in order:
//
//	node[01-04,07]      -> node01 node02 node03 node04 node07   (zero padding kept)
//	tux[0-1],login      -> tux0 tux1 login                      (comma or space separated)
//	rack[1-2]-n[1-2]    -> rack1-n1 rack1-n2 rack2-n1 rack2-n2  (several bracket groups)
//
// Padding follows the low bound of each range: [08-10] gives 08 09 10, [8-10] gives 8 9 10.
// Names are not deduplicated.
func Expand(expr string) ([]string, error) {
	items, err := splitTop(expr)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, it := range items {
		names, err := expandOne(it)
		if err != nil {
			return nil, fmt.Errorf("hostlist %q: %w", expr, err)
		}
		if len(out)+len(names) > maxExpand {
			return nil, fmt.Errorf("hostlist %q: more than %d hosts", expr, maxExpand)
		}
		out = append(out, names...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("hostlist %q: no hosts", expr)
	}
	return out, nil
}

// splitTop splits s at commas and white space outside brackets.
func splitTop(s string) ([]string, error) {
	var items []string
	depth, start := 0, 0
	flush := func(end int) error {
		if it := s[start:end]; it != "" {
			items = append(items, it)
		} else if end < len(s) && s[end] == ',' {
			return fmt.Errorf("empty host name in %q", s)
		}
		return nil
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '[':
			if depth > 0 {
				return nil, fmt.Errorf("nested '[' at offset %d in %q", i, s)
			}
			depth++
		case c == ']':
			if depth == 0 {
				return nil, fmt.Errorf("unmatched ']' at offset %d in %q", i, s)
			}
			depth--
		case depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n'):
			if err := flush(i); err != nil {
				return nil, err
			}
			start = i + 1
		}
	}
	if depth > 0 {
		return nil, fmt.Errorf("unclosed '[' in %q", s)
	}
	if err := flush(len(s)); err != nil {
		return nil, err
	}
	if strings.HasSuffix(s, ",") {
		return nil, fmt.Errorf("empty host name at the end of %q", s)
	}
	return items, nil
}

// expandOne expands one item without top-level separators, e.g. "rack[1-2]-n[01-02]".
func expandOne(item string) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		return []string{item}, nil
	}
	end := open + strings.IndexByte(item[open:], ']')
	prefix, body, rest := item[:open], item[open+1:end], item[end+1:]
	values, err := expandRanges(body)
	if err != nil {
		return nil, err
	}
	tails, err := expandOne(rest)
	if err != nil {
		return nil, err
	}
	if len(values)*len(tails) > maxExpand {
		return nil, fmt.Errorf("more than %d hosts", maxExpand)
	}
	out := make([]string, 0, len(values)*len(tails))
	for _, v := range values {
		for _, t := range tails {
			out = append(out, prefix+v+t)
		}
	}
	return out, nil
}

// expandRanges expands the inside of one bracket: "01-04,07" -> 01 02 03 04 07.
func expandRanges(body string) ([]string, error) {
	if body == "" {
		return nil, errors.New("empty brackets []")
	}
	var out []string
	for _, r := range strings.Split(body, ",") {
		loS, hiS, isRange := strings.Cut(r, "-")
		if !isRange {
			hiS = loS
		}
		lo, err := parseIndex(loS, r)
		if err != nil {
			return nil, err
		}
		hi, err := parseIndex(hiS, r)
		if err != nil {
			return nil, err
		}
		if hi < lo {
			return nil, fmt.Errorf("range %q runs backwards", r)
		}
		if hi-lo >= maxExpand || len(out)+hi-lo+1 > maxExpand {
			return nil, fmt.Errorf("range %q: more than %d hosts", r, maxExpand)
		}
		for v := lo; v <= hi; v++ {
			out = append(out, fmt.Sprintf("%0*d", len(loS), v))
		}
	}
	return out, nil
}

// parseIndex parses one bound of a bracket range: decimal digits only.
func parseIndex(s, rangeText string) (int, error) {
	if s == "" || len(s) > 9 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("bad range %q: want N or N-M with decimal N, M (e.g. [01-04,07])", rangeText)
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("bad range %q: %w", rangeText, err)
	}
	return n, nil
}

// TasksPerNode expands SLURM_TASKS_PER_NODE, e.g. "2(x3),1" -> [2 2 2 1].
func TasksPerNode(s string) ([]int, error) {
	var out []int
	for _, item := range strings.Split(s, ",") {
		count, rep := item, "1"
		if i := strings.IndexByte(item, '('); i >= 0 {
			if !strings.HasPrefix(item[i:], "(x") || !strings.HasSuffix(item, ")") {
				return nil, fmt.Errorf("SLURM_TASKS_PER_NODE %q: bad item %q: want N or N(xM)", s, item)
			}
			count, rep = item[:i], item[i+2:len(item)-1]
		}
		if strings.HasPrefix(count, "+") || strings.HasPrefix(rep, "+") {
			// As the ranks' bootstrap reads it: Slurm writes plain digits.
			return nil, fmt.Errorf("SLURM_TASKS_PER_NODE %q: bad item %q: want N or N(xM) in plain digits", s, item)
		}
		n, err := parseCount("task count", count)
		if err != nil {
			return nil, fmt.Errorf("SLURM_TASKS_PER_NODE %q: %w", s, err)
		}
		m, err := parseCount("repeat count", rep)
		if err != nil {
			return nil, fmt.Errorf("SLURM_TASKS_PER_NODE %q: %w", s, err)
		}
		if len(out)+m > maxExpand {
			return nil, fmt.Errorf("SLURM_TASKS_PER_NODE %q: more than %d nodes", s, maxExpand)
		}
		for range m {
			out = append(out, n)
		}
	}
	return out, nil
}

// Slurm turns an allocation (SLURM_JOB_NODELIST, SLURM_TASKS_PER_NODE) into hosts whose
// slots are the tasks Slurm gives each node. An empty tasksPerNode gives one slot per node.
func Slurm(nodelist, tasksPerNode string) ([]Host, error) {
	names, err := Expand(nodelist)
	if err != nil {
		return nil, fmt.Errorf("SLURM_JOB_NODELIST: %w", err)
	}
	tasks := make([]int, len(names))
	for i := range tasks {
		tasks[i] = 1
	}
	if tasksPerNode != "" {
		if tasks, err = TasksPerNode(tasksPerNode); err != nil {
			return nil, err
		}
		if len(tasks) != len(names) {
			return nil, fmt.Errorf("SLURM_TASKS_PER_NODE %q names %d nodes, SLURM_JOB_NODELIST %q has %d",
				tasksPerNode, len(tasks), nodelist, len(names))
		}
	}
	entries := make([]Host, len(names))
	for i, n := range names {
		if err := checkName(n); err != nil {
			return nil, fmt.Errorf("SLURM_JOB_NODELIST: %w", err)
		}
		entries[i] = Host{Name: n, Slots: tasks[i]}
	}
	return Merge(nil, entries...), nil
}
