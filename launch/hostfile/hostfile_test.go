package hostfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/seed-760dd1f1/cc/runtime/fuzzcheck"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name, in string
		want     []Host
	}{
		{"openmpi", "# cluster\naa slots=2\n\nbb max_slots=4\ncc slots=4 max_slots=4  # full\n",
			[]Host{{Name: "aa", Slots: 2}, {Name: "bb", Slots: 4, MaxSlots: 4}, {Name: "cc", Slots: 4, MaxSlots: 4}}},
		{"openmpi spellings", "aa slots=2 max-slots=3\nbb count=2 slots_max=2\ncc cpu=3\n",
			[]Host{{Name: "aa", Slots: 2, MaxSlots: 3}, {Name: "bb", Slots: 2, MaxSlots: 2}, {Name: "cc", Slots: 3}}},
		{"spaces around =", "aa slots = 2\tmax_slots =4 port= 2222\n", []Host{{Name: "aa", Slots: 2, MaxSlots: 4, Port: 2222}}},
		{"login names", "alice@aa slots=2\nbb username=bob\ncc user_name=carol port=22\ndd:2 user=dan\n", []Host{
			{Name: "aa", Slots: 2, User: "alice"}, {Name: "bb", Slots: 1, User: "bob", NoCount: true},
			{Name: "cc", Slots: 1, User: "carol", Port: 22, NoCount: true}, {Name: "dd", Slots: 2, User: "dan"}}},
		{"mpich", "aa:4\nbb\ncc:2 user=alice\n",
			[]Host{{Name: "aa", Slots: 4}, {Name: "bb", Slots: 1, NoCount: true}, {Name: "cc", Slots: 2, User: "alice"}}},
		{"mixed dialects", "aa:2\nbb slots=3\n", []Host{{Name: "aa", Slots: 2}, {Name: "bb", Slots: 3}}},
		{"bare repeats add one slot each", "aa\nbb slots=2\naa\naa\n", []Host{{Name: "aa", Slots: 3, NoCount: true}, {Name: "bb", Slots: 2}}},
		{"a bare line adds to a count", "aa slots=2\naa\n", []Host{{Name: "aa", Slots: 3}}},
		{"mpich counts add up (Hydra)", "aa:2\nbb:1\naa:3\n", []Host{{Name: "aa", Slots: 5}, {Name: "bb", Slots: 1}}},
		{"max_slots alone sets slots", "aa max_slots=1\nbb max-slots=3\n", []Host{{Name: "aa", Slots: 1, MaxSlots: 1}, {Name: "bb", Slots: 3, MaxSlots: 3}}},
		{"hostlist in host field", "node[01-03] slots=2\n",
			[]Host{{Name: "node01", Slots: 2}, {Name: "node02", Slots: 2}, {Name: "node03", Slots: 2}}},
		{"addresses", "10.251.0.1 slots=2\n10.251.0.2:2\n", []Host{{Name: "10.251.0.1", Slots: 2}, {Name: "10.251.0.2", Slots: 2}}},
		{"ipv6", "fe80::1\n[fe80::2]:3\n[::1]\nroot@[::2]:2\n", []Host{{Name: "fe80::1", Slots: 1, NoCount: true},
			{Name: "fe80::2", Slots: 3}, {Name: "::1", Slots: 1, NoCount: true}, {Name: "::2", Slots: 2, User: "root"}}},
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
		{"typo slot=", "aa slots=2\nbb slot=2\n", `hosts:2: unknown setting "slot" (allowed: slots, count, cpu, max_slots, slots_max, user, username, port)`},
		{"host:x", "# c\n\nhost:x\n", `hosts:3: host "host:x": bad slot count "x": want an integer from 1 to 1048576`},
		{"empty host before colon", ":4\n", `hosts:1: empty host name in ":4"`},
		{"setting without host", "  slots=2\n", `hosts:1: line starts with setting "slots=2": want a host name first`},
		{"zero slots", "aa slots=0\n", `hosts:1: bad slots "0": want an integer from 1 to 1048576`},
		{"negative slots", "aa:-1\n", `hosts:1: host "aa:-1": bad slot count "-1": want an integer from 1 to 1048576`},
		{"slots twice", "aa:2 slots=3\n", `hosts:1: host "aa:2": slots given twice`},
		{"count and cpu", "aa count=2 cpu=3\n", `hosts:1: host "aa": slots given twice`},
		{"slots over max", "aa slots=4 max_slots=2\n", `hosts:1: host "aa": slots=4 exceeds max_slots=2`},
		{"bare word", "aa slots 2\n", `hosts:1: unexpected "slots" after host "aa": want key=value (slots, count, cpu, max_slots, slots_max, user, username, port)`},
		{"bad hostlist", "node[04-01]\n", `hosts:1: hostlist "node[04-01]": range "04-01" runs backwards`},
		{"quote in name", "a'b\n", `hosts:1: host name "a'b" contains '\''`},
		{"empty file", "# nothing\n\n", `hosts: no hosts (every line is blank or a comment)`},
		{"slots twice for a host", "aa slots=2\nbb\naa slots=1\n",
			`hosts:3: host "aa": slot count given again (first on line 1): give it on one line (Open MPI refuses multiple definitions of the slot count)`},
		{"mpich then openmpi count", "aa:2\naa slots=1\n",
			`hosts:2: host "aa": slot count given again (first on line 1): give it on one line (Open MPI refuses multiple definitions of the slot count)`},
		{"exclusion", "aa\n^bb\n", `hosts:2: "^bb": excluding a host (Open MPI's ^host) is not supported: delete the lines that name it`},
		{"two colons", "localhost:2:3\n", `hosts:1: host "localhost:2:3": want host, host:N or an IPv6 address ([fe80::1]:N with a count)`},
		{"empty user", "@aa\n", `hosts:1: "@aa": want user@host`},
		{"empty host after user", "bob@ slots=2\n", `hosts:1: "bob@": want user@host`},
		{"two users", "bob@aa user=al\n", `hosts:1: host "bob@aa": login name given twice (bob and user=al)`},
		{"bad port", "aa port=0\n", `hosts:1: bad port "0" for host "aa": want 1-65535`},
		{"port text", "aa port=ssh\n", `hosts:1: bad port "ssh" for host "aa": want 1-65535`},
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
		{"aa,bb", []Host{{Name: "aa", Slots: 1, NoCount: true}, {Name: "bb", Slots: 1, NoCount: true}}},
		{"aa:4,bb:4", []Host{{Name: "aa", Slots: 4}, {Name: "bb", Slots: 4}}},
		{"aa,aa,bb", []Host{{Name: "aa", Slots: 2, NoCount: true}, {Name: "bb", Slots: 1, NoCount: true}}},
		{"node[01-02]:2,login", []Host{{Name: "node01", Slots: 2}, {Name: "node02", Slots: 2}, {Name: "login", Slots: 1, NoCount: true}}},
		{"n[1,3]", []Host{{Name: "n1", Slots: 1, NoCount: true}, {Name: "n3", Slots: 1, NoCount: true}}},
		{"al@aa:2", []Host{{Name: "aa", Slots: 2, User: "al"}}},
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
	for _, in := range []string{"", "aa,,bb", "aa,", "aa:x", "aa:0", "node[1-", ":2", "^aa", "a:1:2"} {
		if got, err := ParseList(in); err == nil {
			t.Errorf("ParseList(%q) = %v, want an error", in, got)
		}
	}
}

// TestSelect: -H picks hosts within a hostfile, in -H's order, with -H's counts.
func TestSelect(t *testing.T) {
	file := []Host{{Name: "aa", Slots: 4, MaxSlots: 6, User: "u"}, {Name: "bb", Slots: 2}, {Name: "cc", Slots: 1, NoCount: true}}
	tests := []struct {
		sel  string
		want []Host
		err  string
	}{
		{"bb,aa", []Host{{Name: "bb", Slots: 2}, {Name: "aa", Slots: 4, MaxSlots: 6, User: "u"}}, ""},
		{"aa:1", []Host{{Name: "aa", Slots: 1, MaxSlots: 6, User: "u"}}, ""},
		{"cc:3", []Host{{Name: "cc", Slots: 3}}, ""},
		{"aa:7", nil, `host "aa": -H asks for 7 slots, more than its max_slots=6`},
		{"dd", nil, `host "dd" is not in the hostfile: -H selects among the hostfile's hosts`},
	}
	for _, tt := range tests {
		sel, err := ParseList(tt.sel)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Select(file, sel, nil)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("Select(-H %s) error %v, want %s", tt.sel, err, tt.err)
			}
			continue
		}
		if d := cmp.Diff(tt.want, got); err != nil || d != "" {
			t.Errorf("Select(-H %s): %v (-want +got):\n%s", tt.sel, err, d)
		}
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"aa slots=2\nbb max_slots=4\n", "aa:4 user=x\n# c\n", "node[01-04,07] slots=2", "[::1]:2", "aa slot=2",
		"u@aa slots = 2 port=22\naa\n^bb\n", "aa count=1 cpu=2 username=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		hosts, err := Parse("f", strings.NewReader(in))
		if err != nil {
			fuzzcheck.OneLine(t, err)
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
			fuzzcheck.OneLine(t, err)
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
