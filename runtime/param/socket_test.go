package param

import (
	"slices"
	"strings"
	"testing"
)

func TestIfFilterMatch(t *testing.T) {
	names := []string{"eth0", "eth10", "ib0", "lo", "docker0", "docker01", "virbr0", "enp3s0"}
	tests := []struct {
		in   string
		want []string // the names that pass
	}{
		{"", names},
		{"e", names}, // one character: ignored, as in NCCL
		{"^", names},
		{"eth", []string{"eth0", "eth10"}},
		{"eth0", []string{"eth0"}},
		{"eth1", []string{"eth10"}},
		{"=eth1", nil},
		{"=eth0,ib0", []string{"eth0", "ib0"}},
		{"^docker,lo,virbr", []string{"eth0", "eth10", "ib0", "enp3s0"}},
		{"^=docker0", []string{"eth0", "eth10", "ib0", "lo", "docker01", "virbr0", "enp3s0"}},
		{"ib0:1,enp", []string{"ib0", "enp3s0"}},
		{"ib:1:2:3", []string{"ib0"}},
	}
	for _, tt := range tests {
		f, err := ParseIfFilter(tt.in)
		if err != nil {
			t.Errorf("ParseIfFilter(%q): %v", tt.in, err)
			continue
		}
		var got []string
		for _, n := range names {
			if f.Match(n) {
				got = append(got, n)
			}
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("ParseIfFilter(%q) passes %q, want %q", tt.in, got, tt.want)
		}
		if f.Raw != tt.in {
			t.Errorf("ParseIfFilter(%q).Raw = %q", tt.in, f.Raw)
		}
	}
}

func TestIfFilterString(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"x", ""},
		{"^=docker0:9,lo", "^=docker0,lo"},
		{"eth0:1", "eth0"},
		{"=ib", "=ib"},
	}
	for _, tt := range tests {
		f, err := ParseIfFilter(tt.in)
		if err != nil {
			t.Fatalf("ParseIfFilter(%q): %v", tt.in, err)
		}
		if got := f.String(); got != tt.want {
			t.Errorf("ParseIfFilter(%q).String() = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestIfFilterErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{",eth0", "empty interface name"},
		{"eth0,", "empty interface name"},
		{"^,", "empty interface name"},
		{"^=", "empty interface name"},
		{"eth0, ib0", `" ib0" contains a space`},
		{"eth0,^lo", `"^lo" contains '^' or '='`},
		{"eth0,=lo", `"=lo" contains '^' or '='`},
		{"^^lo", `"^lo" contains '^' or '='`},
		{"averyveryverylongname", "longer than 15 characters"},
		{"eth0:", `port "" of "eth0:"`},
		{"eth0:x", `port "x"`},
		{"eth0:1:", `port ""`},
		{"eth0:70000", "0..65535"},
		{"a/b", "contains a space or '/'"},
	}
	for _, tt := range tests {
		_, err := ParseIfFilter(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseIfFilter(%q): got error %v, want one containing %q", tt.in, err, tt.want)
		}
	}
}

func TestCommID(t *testing.T) {
	tests := []struct {
		in   string
		want CommID
		str  string
	}{
		{"127.0.0.1:29500", CommID{"127.0.0.1", 29500}, "127.0.0.1:29500"},
		{"[::1]:1", CommID{"::1", 1}, "[::1]:1"},
		{"[fe80::1%eth0]:80", CommID{"fe80::1%eth0", 80}, "[fe80::1%eth0]:80"},
		{"localhost:65535", CommID{"localhost", 65535}, "localhost:65535"},
		{"n_1.example.com:2", CommID{"n_1.example.com", 2}, "n_1.example.com:2"},
		{"1node:2", CommID{"1node", 2}, "1node:2"},
	}
	for _, tt := range tests {
		got, err := ParseCommID(tt.in)
		if err != nil {
			t.Errorf("ParseCommID(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want || got.String() != tt.str {
			t.Errorf("ParseCommID(%q) = %+v (%s), want %+v (%s)", tt.in, got, got, tt.want, tt.str)
		}
	}
	for _, bad := range []string{"", "host", "host:", "host:x", "host:-1", "-host:1", "host-:1", "a..b:1",
		"1.2.3:1", "[host]:1", "[::1]", "::1:5", "h/x:1", "01.2.3.4:1"} {
		if c, err := ParseCommID(bad); err == nil {
			t.Errorf("ParseCommID(%q) = %+v, want an error", bad, c)
		}
	}
	if s := (CommID{}).String(); s != "" {
		t.Errorf("zero CommID.String() = %q, want empty", s)
	}
}

func TestSocketFamilyString(t *testing.T) {
	for f, want := range map[SocketFamily]string{FamilyAny: "", FamilyInet: "AF_INET", FamilyInet6: "AF_INET6", 7: "SocketFamily(7)"} {
		if got := f.String(); got != want {
			t.Errorf("SocketFamily(%d).String() = %q, want %q", int(f), got, want)
		}
	}
}
