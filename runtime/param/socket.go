package param

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// IfFilter is NCCL_SOCKET_IFNAME parsed: which network interfaces the TCP
// transport may use. Choosing among the matching interfaces (and the default
// order when the variable is unset) belongs to the transport.
//
// Grammar (NCCL's parseStringList/matchIfList):
//
//	value := ['^'] ['='] entry (',' entry)*
//	entry := name [':' port]...        port: decimal, accepted and ignored
//
// '^' excludes the listed interfaces instead of selecting them; '=' compares
// whole names instead of prefixes. "^=docker0" therefore means "every
// interface except exactly docker0". As in NCCL, a value of one character or
// less is ignored (the filter stays unset).
type IfFilter struct {
	// Raw is the text as given, "" when unset.
	Raw string
	// Exclude is the leading '^': Match is true for names NOT in the list.
	Exclude bool
	// Exact is the '=': names must match whole, not as prefixes.
	Exact bool
	// Names are the interface names or prefixes, in the order given.
	Names []string
}

// maxIfName is the longest Linux interface name (IFNAMSIZ-1).
const maxIfName = 15

// ParseIfFilter parses an NCCL_SOCKET_IFNAME value. Stricter than NCCL,
// which silently drops what it cannot use: empty entries, spaces, a '^' or
// '=' anywhere but the start, names longer than 15 characters and a
// non-numeric port are errors.
func ParseIfFilter(s string) (IfFilter, error) {
	if len(s) <= 1 {
		return IfFilter{Raw: s}, nil
	}
	f := IfFilter{Raw: s}
	body := s
	body, f.Exclude = strings.CutPrefix(body, "^")
	body, f.Exact = strings.CutPrefix(body, "=")
	for _, entry := range strings.Split(body, ",") {
		name, port, hasPort := strings.Cut(entry, ":")
		switch {
		case name == "":
			return IfFilter{}, fmt.Errorf("empty interface name in %q (want [^][=]name[,name...])", s)
		case strings.ContainsAny(name, " \t\n\r\v\f/"):
			return IfFilter{}, fmt.Errorf("interface name %q contains a space or '/' (want [^][=]name[,name...])", name)
		case strings.ContainsAny(name, "^="):
			return IfFilter{}, fmt.Errorf("interface name %q contains '^' or '=', allowed only once at the start of the list (e.g. ^=docker0,lo)", name)
		case len(name) > maxIfName:
			return IfFilter{}, fmt.Errorf("interface name %q is longer than %d characters", name, maxIfName)
		}
		if hasPort {
			for _, field := range strings.Split(port, ":") {
				if _, err := strconv.ParseUint(field, 10, 16); err != nil {
					return IfFilter{}, fmt.Errorf("port %q of %q is not a number in 0..65535 (want name[:port])", field, entry)
				}
			}
		}
		f.Names = append(f.Names, name)
	}
	return f, nil
}

// IsSet reports whether the filter restricts anything.
func (f IfFilter) IsSet() bool { return len(f.Names) > 0 }

// Match reports whether the interface called name passes the filter. An
// unset filter passes every name.
func (f IfFilter) Match(name string) bool {
	if !f.IsSet() {
		return true
	}
	listed := false
	for _, n := range f.Names {
		if name == n || !f.Exact && strings.HasPrefix(name, n) {
			listed = true
			break
		}
	}
	return listed != f.Exclude
}

// String returns the canonical value: flags, then the names joined by
// commas, ports dropped; "" for an unset filter.
func (f IfFilter) String() string {
	if !f.IsSet() {
		return ""
	}
	var b strings.Builder
	if f.Exclude {
		b.WriteByte('^')
	}
	if f.Exact {
		b.WriteByte('=')
	}
	b.WriteString(strings.Join(f.Names, ","))
	return b.String()
}

// SocketFamily is NCCL_SOCKET_FAMILY: which address family the TCP transport
// uses.
type SocketFamily int

// The NCCL_SOCKET_FAMILY values.
const (
	FamilyAny   SocketFamily = iota // unset: either
	FamilyInet                      // AF_INET (IPv4)
	FamilyInet6                     // AF_INET6 (IPv6)
)

// String returns the NCCL_SOCKET_FAMILY spelling, "" for FamilyAny.
func (f SocketFamily) String() string {
	switch f {
	case FamilyAny:
		return ""
	case FamilyInet:
		return "AF_INET"
	case FamilyInet6:
		return "AF_INET6"
	}
	return fmt.Sprintf("SocketFamily(%d)", int(f))
}

func parseFamily(s string) (SocketFamily, error) {
	switch {
	case strings.EqualFold(s, "AF_INET"):
		return FamilyInet, nil
	case strings.EqualFold(s, "AF_INET6"):
		return FamilyInet6, nil
	}
	return 0, fmt.Errorf("unknown address family (allowed: AF_INET, AF_INET6)")
}

// CommID is NCCL_COMM_ID: the address where rank 0 hosts the bootstrap
// root. The zero value means unset.
type CommID struct {
	// Host is an IPv4 address, an IPv6 address (without brackets) or a
	// host name.
	Host string
	// Port is 1..65535.
	Port int
}

// IsZero reports whether NCCL_COMM_ID was unset.
func (c CommID) IsZero() bool { return c == CommID{} }

// String returns the address in dialable form, "host:port" or
// "[v6]:port"; "" when unset.
func (c CommID) String() string {
	if c.IsZero() {
		return ""
	}
	return net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
}

const commIDShapes = "<ipv4>:<port>, [<ipv6>]:<port> or <hostname>:<port>, port 1..65535"

// ParseCommID parses an NCCL_COMM_ID value and checks its shape; it does not
// resolve names.
func ParseCommID(s string) (CommID, error) {
	host, portText, err := net.SplitHostPort(s)
	if err != nil {
		return CommID{}, fmt.Errorf("not an address (want %s)", commIDShapes)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 {
		return CommID{}, fmt.Errorf("port %q out of range (want %s)", portText, commIDShapes)
	}
	bracketed := strings.HasPrefix(s, "[")
	addr, ipErr := netip.ParseAddr(host)
	switch {
	case host == "":
		return CommID{}, fmt.Errorf("empty host (want %s)", commIDShapes)
	case bracketed && (ipErr != nil || !addr.Is6()):
		return CommID{}, fmt.Errorf("%q in brackets is not an IPv6 address (want %s)", host, commIDShapes)
	case !bracketed && ipErr != nil && !validHostname(host):
		return CommID{}, fmt.Errorf("host %q is neither an IPv4 address nor a host name (want %s)", host, commIDShapes)
	}
	return CommID{Host: host, Port: port}, nil
}

// validHostname accepts RFC 1123 names (letters, digits, '-', '.' between
// labels, '_' tolerated as resolvers do) that are not all digits and dots,
// so a mistyped IPv4 address like 10.0.0.256 is rejected.
func validHostname(h string) bool {
	if len(h) > 253 {
		return false
	}
	digitsAndDots := true
	for _, label := range strings.Split(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range []byte(label) {
			switch {
			case c >= '0' && c <= '9':
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-', c == '_':
				digitsAndDots = false
			default:
				return false
			}
		}
	}
	return !digitsAndDots
}
