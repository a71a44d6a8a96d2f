package measure

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/seed-760dd1f1/cc/runtime/comm"
)

// --counters: around each round every rank reads its host's TCP
// retransmits (RetransSegs in the Tcp lines of /proc/net/snmp) and the
// error and drop counters of the interface that carries its address
// (/sys/class/net/IF/statistics/{rx,tx}_{errors,dropped}); rank 0 gets
// the deltas.

// Files the counters come from.
const (
	snmpFile = "/proc/net/snmp"
	statsDir = "/sys/class/net" // IF/statistics/NAME
)

// counterSample is one reading of a host's counters.
type counterSample struct {
	retrans, rxErrors, txErrors, rxDropped, txDropped uint64
}

// since is s - before, counter by counter; a counter that went down (an
// interface reset) counts from 0.
func (s counterSample) since(before counterSample) counterSample {
	d := func(a, b uint64) uint64 {
		if a < b {
			return a
		}
		return a - b
	}
	return counterSample{d(s.retrans, before.retrans), d(s.rxErrors, before.rxErrors), d(s.txErrors, before.txErrors),
		d(s.rxDropped, before.rxDropped), d(s.txDropped, before.txDropped)}
}

// readCounters reads this host's counters, iface's for the interface.
func readCounters(iface string) (counterSample, error) {
	var s counterSample
	b, err := os.ReadFile(snmpFile)
	if err != nil {
		return s, err
	}
	if s.retrans, err = parseRetransSegs(string(b)); err != nil {
		return s, fmt.Errorf("%s: %w", snmpFile, err)
	}
	for _, f := range []struct {
		name string
		v    *uint64
	}{{"rx_errors", &s.rxErrors}, {"tx_errors", &s.txErrors}, {"rx_dropped", &s.rxDropped}, {"tx_dropped", &s.txDropped}} {
		path := filepath.Join(statsDir, iface, "statistics", f.name)
		b, err := os.ReadFile(path)
		if err != nil {
			return s, err
		}
		if *f.v, err = parseCounter(string(b)); err != nil {
			return s, fmt.Errorf("%s: %w", path, err)
		}
	}
	return s, nil
}

// parseRetransSegs reads RetransSegs from /proc/net/snmp, whose Tcp
// section is a line of names and a line of values:
//
//	Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens ... RetransSegs InErrs ...
//	Tcp: 1 200 120000 -1 2130 ... 52 0 ...
func parseRetransSegs(snmp string) (uint64, error) {
	var names []string
	sc := bufio.NewScanner(strings.NewReader(snmp))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "Tcp:" {
			continue
		}
		if names == nil {
			names = f
			continue
		}
		i := slices.Index(names, "RetransSegs")
		if i < 0 {
			return 0, fmt.Errorf("no RetransSegs in the Tcp line %q", strings.Join(names, " "))
		}
		if i >= len(f) {
			return 0, fmt.Errorf("the Tcp values %q have no RetransSegs (column %d)", sc.Text(), i)
		}
		v, err := strconv.ParseUint(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("RetransSegs %q: want a count", f[i])
		}
		return v, nil
	}
	return 0, fmt.Errorf("no Tcp lines")
}

// parseCounter reads one /sys/class/net/IF/statistics file: a count and a
// newline.
func parseCounter(s string) (uint64, error) {
	v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: want a count", strings.TrimSpace(s))
	}
	return v, nil
}

// ifaceOf names the interface that carries c's rank's address.
func ifaceOf(c *comm.Comm) (string, error) {
	addr := c.Peers()[c.Rank()].Addr
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	ip := net.ParseIP(host)
	ifs, err := net.Interfaces()
	if err != nil {
		return "", err
	}
	for _, it := range ifs {
		addrs, err := it.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				return it.Name, nil
			}
		}
	}
	return "", fmt.Errorf("no interface carries %s", host)
}
