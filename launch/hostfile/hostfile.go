// Package hostfile parses the ways users name the hosts of a job: Open MPI and MPICH
// hostfiles, Open MPI's -H list, Slurm hostlist expressions and SLURM_TASKS_PER_NODE.
//
// A hostfile line is one host followed by optional settings, in either dialect:
//
//	# Open MPI                          # MPICH (Hydra)
//	node01 slots=4 max_slots=8          node01:4
//	alice@node02 slots = 4 port=2222    node02:4 user=alice
//	node03                              node03
//
// Open MPI's spellings are all taken: slots, count and cpu (the slot count), max_slots,
// max-slots and slots_max (the hard limit), user, username, user-name and user_name (the
// login name, also written user@host) and port (the SSH port); spaces around '=' are
// allowed. A line may not exclude a host (Open MPI's ^host): that is an error.
//
// Slot counts follow Open MPI: max_slots alone sets the slots too; a host without a count
// is marked NoCount, with one slot per line that names it (the caller gives a host whose
// cores it knows that many slots, as Open MPI does); a host whose count is given with
// slots= (count=, cpu=) on two lines is an error, as with Open MPI, while MPICH's host:N on
// several lines adds up, as with Hydra. The host field itself may be a Slurm hostlist
// (node[01-04] slots=2 names four hosts of two slots each). Every error names the file and
// line:
//
//	hosts:3: unknown setting "slot" (allowed: slots, count, cpu, max_slots, slots_max, user, username, port)
//
// The package is pure: it reads what it is given and touches neither the network nor the
// file system beyond the reader it receives.
package hostfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"slices"
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
	// User is the login name (user=, username=, user@host); empty means the default.
	User string
	// Port is the SSH port (port=); 0 means the default.
	Port int
	// NoCount is set when no line gave the host a slot count (nor max_slots): Slots is then
	// the number of lines naming it, and a caller that knows the host's cores may use them.
	NoCount bool
}

// maxSlots bounds one slot count, so that sums of slots cannot overflow an int.
const maxSlots = 1 << 20

// allowedSettings is the list printed with an unknown setting.
const allowedSettings = "slots, count, cpu, max_slots, slots_max, user, username, port"

// Parse reads a hostfile in Open MPI or MPICH form (the dialect may differ per line) and
// returns its hosts in order of first appearance, duplicates merged. name is used only in
// error messages, which read "name:line: ...".
func Parse(name string, r io.Reader) ([]Host, error) {
	var entries []Host
	counted := map[string]int{} // host -> line that gave its slot count
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
		got, form, err := parseLine(text)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %w", name, line, err)
		}
		for _, h := range got {
			if h.NoCount {
				continue
			}
			if first, ok := counted[h.Name]; ok && form == openMPICount {
				return nil, fmt.Errorf("%s:%d: host %q: slot count given again (first on line %d): give it on one line (Open MPI refuses multiple definitions of the slot count)",
					name, line, h.Name, first)
			}
			if _, ok := counted[h.Name]; !ok {
				counted[h.Name] = line
			}
		}
		entries = append(entries, got...)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	hosts := Merge(nil, entries...)
	if len(hosts) == 0 {
		return nil, fmt.Errorf("%s: no hosts (every line is blank or a comment)", name)
	}
	return hosts, nil
}

// countForm is how a line gave its slot count.
type countForm int

const (
	noCount      countForm = iota
	mpichCount             // host:N
	openMPICount           // slots=, count=, cpu=, max_slots= alone
)

// spacedEquals matches '=' with blanks around it: "slots = 2" is "slots=2".
var spacedEquals = regexp.MustCompile(`[ \t]*=[ \t]*`)

// parseLine parses one non-blank hostfile line without its comment.
func parseLine(text string) ([]Host, countForm, error) {
	fields := strings.Fields(spacedEquals.ReplaceAllString(text, "="))
	if len(fields) == 0 {
		return nil, noCount, fmt.Errorf("empty host name in %q", text)
	}
	spec := fields[0]
	if strings.Contains(spec, "=") {
		return nil, noCount, fmt.Errorf("line starts with setting %q: want a host name first", spec)
	}
	if strings.HasPrefix(spec, "^") {
		return nil, noCount, fmt.Errorf("%q: excluding a host (Open MPI's ^host) is not supported: delete the lines that name it", spec)
	}
	var h Host
	hostPart := spec
	if u, rest, ok := strings.Cut(spec, "@"); ok {
		if u == "" || rest == "" {
			return nil, noCount, fmt.Errorf("%q: want user@host", spec)
		}
		h.User, hostPart = u, rest
	}
	name, slots, hasSlots, err := splitHostSlots(hostPart)
	if err != nil {
		return nil, noCount, err
	}
	form := noCount
	if hasSlots {
		h.Slots, form = slots, mpichCount
	}
	for _, f := range fields[1:] {
		key, val, ok := strings.Cut(f, "=")
		if !ok {
			return nil, noCount, fmt.Errorf("unexpected %q after host %q: want key=value (%s)", f, spec, allowedSettings)
		}
		switch key {
		case "slots", "count", "cpu":
			if form != noCount {
				return nil, noCount, fmt.Errorf("host %q: slots given twice", spec)
			}
			if h.Slots, err = parseCount(key, val); err != nil {
				return nil, noCount, err
			}
			form = openMPICount
		case "max_slots", "max-slots", "slots_max", "slots-max":
			if h.MaxSlots, err = parseCount(key, val); err != nil {
				return nil, noCount, err
			}
		case "user", "username", "user-name", "user_name":
			if val == "" {
				return nil, noCount, fmt.Errorf("empty %s= for host %q", key, spec)
			}
			if h.User != "" && h.User != val {
				return nil, noCount, fmt.Errorf("host %q: login name given twice (%s and %s=%s)", spec, h.User, key, val)
			}
			h.User = val
		case "port":
			p, err := strconv.Atoi(val)
			if err != nil || p < 1 || p > 65535 {
				return nil, noCount, fmt.Errorf("bad port %q for host %q: want 1-65535", val, spec)
			}
			h.Port = p
		default:
			return nil, noCount, fmt.Errorf("unknown setting %q (allowed: %s)", key, allowedSettings)
		}
	}
	switch {
	case h.MaxSlots > 0 && form == noCount:
		h.Slots, form = h.MaxSlots, openMPICount // Open MPI: max_slots alone sets the slots
	case h.MaxSlots > 0 && h.Slots > h.MaxSlots:
		return nil, noCount, fmt.Errorf("host %q: slots=%d exceeds max_slots=%d", spec, h.Slots, h.MaxSlots)
	case form == noCount:
		h.Slots, h.NoCount = 1, true
	}
	names, err := Expand(name)
	if err != nil {
		return nil, noCount, err
	}
	out := make([]Host, len(names))
	for i, n := range names {
		out[i] = h
		out[i].Name = n
	}
	return out, form, nil
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
		if net.ParseIP(spec) == nil {
			return "", 0, false, fmt.Errorf("host %q: want host, host:N or an IPv6 address ([fe80::1]:N with a count)", spec)
		}
		return spec, 0, false, nil // bare IPv6 address
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
// (a repeated bare name is one more slot, as with Open MPI; MPICH's host:N lines add up, as
// with Hydra) and keeps the looser max_slots; it has no count only if neither entry had one.
// It takes time linear in len(list)+len(hosts): merge many entries in one call, not one
// call per entry (a hostfile line "node[00-50007]" took 9 s when each name scanned the list).
func Merge(list []Host, hosts ...Host) []Host {
	at := make(map[string]int, len(list)+len(hosts))
	for i := len(list) - 1; i >= 0; i-- {
		at[list[i].Name] = i // the first of a repeated name, as a scan would find
	}
	for _, h := range hosts {
		i, ok := at[h.Name]
		if !ok {
			at[h.Name] = len(list)
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
		if old.Port == 0 {
			old.Port = h.Port
		}
		old.NoCount = old.NoCount && h.NoCount
	}
	return list
}

// ParseList parses Open MPI's -H/--host value: comma-separated hosts, each optionally
// followed by ":N" slots, each allowed to be a Slurm hostlist ("node[01-04]:2,login").
// A host listed without a count has one slot and NoCount set; a repeated name adds slots.
func ParseList(s string) ([]Host, error) {
	items, err := splitTop(s)
	if err != nil {
		return nil, err
	}
	var entries []Host
	for _, it := range items {
		got, _, err := parseLine(it)
		if err != nil {
			return nil, fmt.Errorf("host list %q: %w", s, err)
		}
		entries = append(entries, got...)
	}
	hosts := Merge(nil, entries...)
	if len(hosts) == 0 {
		return nil, fmt.Errorf("host list %q: no hosts", s)
	}
	return hosts, nil
}

// Select picks the hosts of sel (Open MPI's -H) within list (a hostfile), in sel's order,
// as mpirun does with --hostfile and --host together. A selected host keeps the hostfile's
// settings; a count given in sel (-H node:2) replaces its slots, within its max_slots. same
// tells whether two names mean one machine (nil: equal names). A host of sel not in list is
// an error naming it.
func Select(list, sel []Host, same func(a, b string) bool) ([]Host, error) {
	if same == nil {
		same = func(a, b string) bool { return a == b }
	}
	var out []Host
	chosen := map[int]bool{}
	for _, s := range sel {
		i := slices.IndexFunc(list, func(h Host) bool { return same(h.Name, s.Name) })
		if i < 0 {
			return nil, fmt.Errorf("host %q is not in the hostfile: -H selects among the hostfile's hosts", s.Name)
		}
		if chosen[i] {
			continue // another name of a host already selected
		}
		chosen[i] = true
		h := list[i]
		if !s.NoCount {
			if h.MaxSlots > 0 && s.Slots > h.MaxSlots {
				return nil, fmt.Errorf("host %q: -H asks for %d slots, more than its max_slots=%d", s.Name, s.Slots, h.MaxSlots)
			}
			h.Slots, h.NoCount = s.Slots, false
		}
		if s.User != "" {
			h.User = s.User
		}
		out = append(out, h)
	}
	return out, nil
}
