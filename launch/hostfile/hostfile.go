// Package hostfile parses the ways users name the hosts of a job: Open MPI and MPICH
// hostfiles, Open MPI's -H list, Slurm hostlist expressions and SLURM_TASKS_PER_NODE.
//
// A hostfile line is one host followed by optional settings, in either dialect:
//
//	# Open MPI                        # MPICH (Hydra)
//	node01 slots=4 max_slots=8        node01:4
//	node02 slots=4                    node02:4 user=alice
//	node03                            node03
//
// A host without a slot count has one slot. A host named on several lines adds up its slots,
// as with Open MPI. The host field itself may be a Slurm hostlist (node[01-04] slots=2 names
// four hosts of two slots each). Every error names the file and line:
//
//	hosts:3: unknown setting "slot" (allowed: slots, max_slots, max-slots, user)
//
// The package is pure: it reads what it is given and touches neither the network nor the
// file system beyond the reader it receives.
package hostfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Host is one machine of a job and how many ranks it may run.
type Host struct {
	// Name is the host as written: a name or an address, resolved later by ssh.
	Name string
	// Slots is how many ranks the host runs before it counts as oversubscribed (>= 1).
	Slots int
	// MaxSlots is the hard limit even with --oversubscribe; 0 means no limit.
	MaxSlots int
	// User is the login name from an MPICH `user=` setting; empty means the default.
	User string
}

// maxSlots bounds one slot count, so that sums of slots cannot overflow an int.
const maxSlots = 1 << 20

// Parse reads a hostfile in Open MPI or MPICH form (the dialect may differ per line) and
// returns its hosts in order of first appearance, duplicates merged. name is used only in
// error messages, which read "name:line: ...".
func Parse(name string, r io.Reader) ([]Host, error) {
	var hosts []Host
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		if strings.TrimSpace(text) == "" {
			continue
		}
		got, err := parseLine(text)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		hosts = Merge(hosts, got...)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("%s: no hosts (every line is blank or a comment)", name)
	}
	return hosts, nil
}

// parseLine parses one non-blank hostfile line without its comment.
func parseLine(text string) ([]Host, error) {
	fields := strings.Fields(text)
	if len(fields) == 0 {
		return nil, fmt.Errorf("empty host name in %q", text)
	}
	spec := fields[0]
	if strings.Contains(spec, "=") {
		return nil, fmt.Errorf("line starts with setting %q: want a host name first", spec)
	}
	name, slots, hasSlots, err := splitHostSlots(spec)
	if err != nil {
		return nil, err
	}
	h := Host{Slots: 1}
	if hasSlots {
		h.Slots = slots
	}
	for _, f := range fields[1:] {
		key, val, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("unexpected %q after host %q: want key=value (slots, max_slots, user)", f, spec)
		}
		switch key {
		case "slots":
			if hasSlots {
				return nil, fmt.Errorf("host %q: slots given twice", spec)
			}
			if h.Slots, err = parseCount("slots", val); err != nil {
				return nil, err
			}
			hasSlots = true
		case "max_slots", "max-slots":
			if h.MaxSlots, err = parseCount(key, val); err != nil {
				return nil, err
			}
		case "user":
			if val == "" {
				return nil, fmt.Errorf("empty user= for host %q", spec)
			}
			h.User = val
		default:
			return nil, fmt.Errorf("unknown setting %q (allowed: slots, max_slots, max-slots, user)", key)
		}
	}
	if h.MaxSlots > 0 && h.Slots > h.MaxSlots {
		if hasSlots {
			return nil, fmt.Errorf("host %q: slots=%d exceeds max_slots=%d", spec, h.Slots, h.MaxSlots)
		}
		h.Slots = h.MaxSlots
	}
	names, err := Expand(name)
	if err != nil {
		return nil, err
	}
	out := make([]Host, len(names))
	for i, n := range names {
		out[i] = h
		out[i].Name = n
	}
	return out, nil
}

// splitHostSlots splits "host:N" (MPICH) into host and N. An IPv6 address is written
// "[fe80::1]:N", "[fe80::1]" or bare "fe80::1" (no slot count).
func splitHostSlots(spec string) (name string, slots int, hasSlots bool, err error) {
	rest := ""
	switch {
	case strings.HasPrefix(spec, "[") && strings.Contains(spec[:max(strings.IndexByte(spec, ']'), 0)], ":"):
		end := strings.IndexByte(spec, ']')
		name, rest = spec[1:end], spec[end+1:]
		if rest != "" && !strings.HasPrefix(rest, ":") {
			return "", 0, false, fmt.Errorf("unexpected %q after IPv6 address in %q", rest, spec)
		}
		rest = strings.TrimPrefix(rest, ":")
		if rest == "" {
			return name, 0, false, checkName(name)
		}
	case strings.Count(spec, ":") > 1:
		return spec, 0, false, checkName(spec) // bare IPv6 address
	default:
		var ok bool
		name, rest, ok = strings.Cut(spec, ":")
		if !ok {
			return spec, 0, false, checkName(spec)
		}
	}
	if name == "" {
		return "", 0, false, fmt.Errorf("empty host name in %q", spec)
	}
	slots, err = parseCount("slot count", rest)
	if err != nil {
		return "", 0, false, fmt.Errorf("host %q: %w", spec, err)
	}
	return name, slots, true, checkName(name)
}

// checkName rejects host names that cannot be right.
func checkName(name string) error {
	if name == "" {
		return errors.New("empty host name")
	}
	for _, c := range name {
		if c < ' ' || c == 0x7f || c == '\'' || c == '"' || c == '\\' || c == '`' || c == '$' {
			return fmt.Errorf("host name %q contains %q", name, c)
		}
	}
	return nil
}

// parseCount parses a positive slot count.
func parseCount(what, s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxSlots {
		return 0, fmt.Errorf("bad %s %q: want an integer from 1 to %d", what, s, maxSlots)
	}
	return n, nil
}

// Merge appends hosts to list; a host already in list gains the slots of the new entry
// (Open MPI: a repeated name is extra slots) and keeps the tighter max_slots.
func Merge(list []Host, hosts ...Host) []Host {
	for _, h := range hosts {
		i := index(list, h.Name)
		if i < 0 {
			list = append(list, h)
			continue
		}
		old := &list[i]
		old.Slots = min(old.Slots+h.Slots, maxSlots)
		if old.MaxSlots == 0 || h.MaxSlots == 0 {
			old.MaxSlots = 0 // either entry without a limit: no limit
		} else {
			old.MaxSlots = min(old.MaxSlots+h.MaxSlots, maxSlots)
		}
		if old.User == "" {
			old.User = h.User
		}
	}
	return list
}

func index(list []Host, name string) int {
	for i, h := range list {
		if h.Name == name {
			return i
		}
	}
	return -1
}

// ParseList parses Open MPI's -H/--host value: comma-separated hosts, each optionally
// followed by ":N" slots, each allowed to be a Slurm hostlist ("node[01-04]:2,login").
// A host listed without a count has one slot; a repeated name adds slots.
func ParseList(s string) ([]Host, error) {
	items, err := splitTop(s)
	if err != nil {
		return nil, err
	}
	var hosts []Host
	for _, it := range items {
		got, err := parseLine(it)
		if err != nil {
			return nil, fmt.Errorf("host list %q: %w", s, err)
		}
		hosts = Merge(hosts, got...)
	}
	if len(hosts) == 0 {
		return nil, fmt.Errorf("host list %q: no hosts", s)
	}
	return hosts, nil
}
