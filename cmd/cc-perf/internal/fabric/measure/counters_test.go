package measure

import (
	"strings"
	"testing"
)

// A /proc/net/snmp of Linux 6.x, cut to the IP and TCP sections.
const snmpText = `Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams OutRequests
Ip: 1 64 250337 0 0 0 242176
Icmp: InMsgs InErrors
Icmp: 3 0
Tcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors
Tcp: 1 200 120000 -1 2130 2052 12 25 17 245201 250123 52 0 71 0
Udp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors SndbufErrors InCsumErrors IgnoredMulti MemErrors
Udp: 4818 3 0 4823 0 0 0 0 0
`

func TestParseRetransSegs(t *testing.T) {
	tests := []struct {
		name, text string
		want       uint64
		err        string
	}{
		{"linux", snmpText, 52, ""},
		{"no tcp", "Ip: Forwarding\nIp: 1\n", 0, "no Tcp lines"},
		{"no column", "Tcp: RtoAlgorithm InSegs\nTcp: 1 2\n", 0, "no RetransSegs"},
		{"short values", "Tcp: RtoAlgorithm RetransSegs\nTcp: 1\n", 0, "have no RetransSegs"},
		{"not a count", "Tcp: RetransSegs\nTcp: -4\n", 0, `"-4"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseRetransSegs(tc.text)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestParseCounter(t *testing.T) {
	for _, tc := range []struct {
		text string
		want uint64
		ok   bool
	}{{"0\n", 0, true}, {"18446744073709551615\n", 1<<64 - 1, true}, {"12", 12, true}, {"", 0, false}, {"x\n", 0, false}, {"-1\n", 0, false}} {
		got, err := parseCounter(tc.text)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseCounter(%q) = %d, %v; want %d, ok %v", tc.text, got, err, tc.want, tc.ok)
		}
	}
}

func TestCounterDelta(t *testing.T) {
	before := counterSample{retrans: 10, rxErrors: 1, txErrors: 2, rxDropped: 3, txDropped: 4}
	after := counterSample{retrans: 15, rxErrors: 1, txErrors: 5, rxDropped: 1, txDropped: 4}
	got := after.since(before)
	// rx_dropped went down (a reset): counted from 0.
	want := counterSample{retrans: 5, rxErrors: 0, txErrors: 3, rxDropped: 1, txDropped: 0}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func FuzzParseRetransSegs(f *testing.F) {
	f.Add(snmpText)
	f.Add("Tcp: RetransSegs\nTcp: 7\n")
	f.Fuzz(func(t *testing.T, s string) {
		parseRetransSegs(s) // must not panic
	})
}
