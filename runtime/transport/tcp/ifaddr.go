package tcp

import (
	"fmt"
	"net"
	"sort"
	"strings"
)

// Family restricts address families (NCCL_SOCKET_FAMILY).
type Family int

// Address families.
const (
	AnyFamily Family = iota
	IPv4
	IPv6
)

func (f Family) ok(ip net.IP) bool {
	switch f {
	case IPv4:
		return ip.To4() != nil
	case IPv6:
		return ip.To4() == nil
	}
	return true
}

// ListenIP picks the IP address a rank listens on for data connections.
//
// With an interface filter (NCCL_SOCKET_IFNAME, match != nil) it is the
// first IPv4 (then IPv6) address of the first matching interface that is up,
// in the system's interface order; no match is an error naming the filter
// and the interfaces that exist. Without one, it is the source address the
// kernel uses to reach the bootstrap root (NCCL's "same subnet as
// NCCL_COMM_ID" rule), or loopback when there is no root. family limits the
// candidates; a route to the root in another family is an error.
func ListenIP(filter string, match func(name string) bool, family Family, rootAddr string) (string, error) {
	if match != nil {
		ifs, err := net.Interfaces()
		if err != nil {
			return "", fmt.Errorf("list network interfaces: %w", err)
		}
		var names []string
		for _, ifc := range ifs {
			names = append(names, ifc.Name)
			if ifc.Flags&net.FlagUp == 0 || !match(ifc.Name) {
				continue
			}
			addrs, err := ifc.Addrs()
			if err != nil {
				continue
			}
			var v4, v6 []string
			for _, a := range addrs {
				ipn, ok := a.(*net.IPNet)
				if !ok {
					continue
				}
				if !family.ok(ipn.IP) {
					continue
				}
				if ipn.IP.To4() != nil {
					v4 = append(v4, ipn.IP.String())
				} else if !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
					v6 = append(v6, ipn.IP.String())
				}
			}
			if len(v4) > 0 {
				return v4[0], nil
			}
			if len(v6) > 0 {
				return v6[0], nil
			}
		}
		sort.Strings(names)
		return "", fmt.Errorf("NCCL_SOCKET_IFNAME=%q matches no interface that is up with an address (interfaces: %s)", filter, strings.Join(names, ", "))
	}
	if rootAddr == "" {
		if family == IPv6 {
			return "::1", nil
		}
		return "127.0.0.1", nil
	}
	host, port, err := net.SplitHostPort(rootAddr)
	if err != nil {
		return "", fmt.Errorf("bootstrap root address %q: %w", rootAddr, err)
	}
	// A UDP "connect" sends nothing; it asks the kernel for the route.
	c, err := net.Dial("udp", net.JoinHostPort(host, port))
	if err != nil {
		return "", fmt.Errorf("find a route to the bootstrap root %s: %w", rootAddr, err)
	}
	defer c.Close()
	ip := c.LocalAddr().(*net.UDPAddr).IP
	if !family.ok(ip) {
		return "", fmt.Errorf("NCCL_SOCKET_FAMILY asks for %s but the route to the bootstrap root %s leaves from %s; set NCCL_SOCKET_IFNAME to an interface with such an address", map[Family]string{IPv4: "AF_INET", IPv6: "AF_INET6"}[family], rootAddr, ip)
	}
	return ip.String(), nil
}
