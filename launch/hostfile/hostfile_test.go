package hostfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name, in string
		want     []Host
	}{
		{"openmpi", "# cluster\naa slots=2\n\nbb max_slots=4\ncc slots=4 max_slots=4  # full\n",
			[]Host{{Name: "aa", Slots: 2}, {Name: "bb", Slots: 1, MaxSlots: 4}, {Name: "cc", Slots: 4, MaxSlots: 4}}},
		{"openmpi v4 spelling", "aa slots=2 max-slots=3\n", []Host{{Name: "aa", Slots: 2, MaxSlots: 3}}},
		{"mpich", "aa:4\nbb\ncc:2 user=alice\n",
			[]Host{{Name: "aa", Slots: 4}, {Name: "bb", Slots: 1}, {Name: "cc", Slots: 2, User: "alice"}}},
		{"mixed dialects", "aa:2\nbb slots=3\n", []Host{{Name: "aa", Slots: 2}, {Name: "bb", Slots: 3}}},
		{"repeated host adds slots", "aa\nbb slots=2\naa slots=3\n", []Host{{Name: "aa", Slots: 4}, {Name: "bb", Slots: 2}}},
		{"max_slots lowers default slots", "aa max_slots=1\n", []Host{{Name: "aa", Slots: 1, MaxSlots: 1}}},
		{"hostlist in host field", "node[01-03] slots=2\n",
			[]Host{{Name: "node01", Slots: 2}, {Name: "node02", Slots: 2}, {Name: "node03", Slots: 2}}},
		{"addresses", "10.251.0.1 slots=2\n10.251.0.2:2\n", []Host{{Name: "10.251.0.1", Slots: 2}, {Name: "10.251.0.2", Slots: 2}}},
		{"ipv6", "fe80::1\n[fe80::2]:3\n[::1]\n", []Host{{Name: "fe80::1", Slots: 1}, {Name: "fe80::2", Slots: 3}, {Name: "::1", Slots: 1}}},
		{"tabs and crlf", "aa\tslots=2\r\n", []Host{{Name: "aa", Slots: 2}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("hosts", strings.NewReader(tt.in))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tt.in, d)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"typo slot=", "aa slots=2\nbb slot=2\n", `hosts:2: unknown setting "slot" (allowed: slots, max_slots, max-slots, user)`},
		{"host:x", "# c\n\nhost:x\n", `hosts:3: host "host:x": bad slot count "x": want an integer from 1 to 1048576`},
		{"empty host before colon", ":4\n", `hosts:1: empty host name in ":4"`},
		{"setting without host", "  slots=2\n", `hosts:1: line starts with setting "slots=2": want a host name first`},
		{"zero slots", "aa slots=0\n", `hosts:1: bad slots "0": want an integer from 1 to 1048576`},
		{"negative slots", "aa:-1\n", `hosts:1: host "aa:-1": bad slot count "-1": want an integer from 1 to 1048576`},
		{"slots twice", "aa:2 slots=3\n", `hosts:1: host "aa:2": slots given twice`},
		{"slots over max", "aa slots=4 max_slots=2\n", `hosts:1: host "aa": slots=4 exceeds max_slots=2`},
		{"bare word", "aa slots 2\n", `hosts:1: unexpected "slots" after host "aa": want key=value (slots, max_slots, user)`},
		{"bad hostlist", "node[04-01]\n", `hosts:1: hostlist "node[04-01]": range "04-01" runs backwards`},
		{"quote in name", "a'b\n", `hosts:1: host name "a'b" contains '\''`},
		{"empty file", "# nothing\n\n", `hosts: no hosts (every line is blank or a comment)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("hosts", strings.NewReader(tt.in))
			if err == nil || err.Error() != tt.want {
				t.Errorf("Parse(%q) error:\n got %v\nwant %s", tt.in, err, tt.want)
			}
		})
	}
}

func TestParseList(t *testing.T) {
	tests := []struct {
		in   string
		want []Host
	}{
		{"aa,bb", []Host{{Name: "aa", Slots: 1}, {Name: "bb", Slots: 1}}},
		{"aa:4,bb:4", []Host{{Name: "aa", Slots: 4}, {Name: "bb", Slots: 4}}},
		{"aa,aa,bb", []Host{{Name: "aa", Slots: 2}, {Name: "bb", Slots: 1}}},
		{"node[01-02]:2,login", []Host{{Name: "node01", Slots: 2}, {Name: "node02", Slots: 2}, {Name: "login", Slots: 1}}},
		{"n[1,3]", []Host{{Name: "n1", Slots: 1}, {Name: "n3", Slots: 1}}},
	}
	for _, tt := range tests {
		got, err := ParseList(tt.in)
		if err != nil {
			t.Errorf("ParseList(%q): %v", tt.in, err)
			continue
		}
		if d := cmp.Diff(tt.want, got); d != "" {
			t.Errorf("ParseList(%q) (-want +got):\n%s", tt.in, d)
		}
	}
	for _, in := range []string{"", "aa,,bb", "aa,", "aa:x", "aa:0", "node[1-", ":2"} {
		if got, err := ParseList(in); err == nil {
			t.Errorf("ParseList(%q) = %v, want an error", in, got)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"aa slots=2\nbb max_slots=4\n", "aa:4 user=x\n# c\n", "node[01-04,07] slots=2", "[::1]:2", "aa slot=2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		hosts, err := Parse("f", strings.NewReader(in))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f:") {
				t.Fatalf("error %q does not start with the file name", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, h := range hosts {
			if h.Name == "" || h.Slots < 1 || h.MaxSlots < 0 || seen[h.Name] {
				t.Fatalf("Parse(%q) gave bad host %+v (all: %v)", in, h, hosts)
			}
			seen[h.Name] = true
		}
	})
}

func FuzzParseList(f *testing.F) {
	for _, s := range []string{"aa,bb:2", "node[01-04]:2,login", "x[1-2]y[3-4]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		hosts, err := ParseList(in)
		if err != nil {
			return
		}
		for _, h := range hosts {
			if h.Name == "" || h.Slots < 1 || strings.ContainsAny(h.Name, ",[] \t") {
				t.Fatalf("ParseList(%q) gave bad host %+v", in, h)
			}
		}
	})
}

// TestExampleHostfiles parses the repository's example hostfiles.
func TestExampleHostfiles(t *testing.T) {
	want := map[string]int{"localhost": 4, "testbed4": 8, "testbed4.mpich": 8}
	for name, slots := range want {
		f, err := os.Open(filepath.Join("..", "..", "hostfiles", name))
		if err != nil {
			t.Fatal(err)
		}
		hosts, err := Parse(name, f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		total := 0
		for _, h := range hosts {
			total += h.Slots
		}
		if total != slots {
			t.Errorf("%s: %d slots, want %d", name, total, slots)
		}
	}
}
