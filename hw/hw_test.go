package hw

import (
	"errors"
	"io/fs"
	"runtime"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

const bootID = "5a3c8f0e-1b2d-4c6e-9f70-8a1b2c3d4e5f"

func file(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }

func TestHostIdentity(t *testing.T) {
	tests := []struct {
		name    string
		fsys    fstest.MapFS
		want    HostID
		wantErr []string // substrings of the error; nil means success
	}{
		{"ok", fstest.MapFS{HostnameFile: file("node1.cluster\n"), BootIDFile: file(bootID + "\n")},
			HostID{"node1.cluster", bootID}, nil},
		{"no newline", fstest.MapFS{HostnameFile: file("n"), BootIDFile: file(strings.ToUpper(bootID))},
			HostID{"n", strings.ToUpper(bootID)}, nil},
		{"empty hostname", fstest.MapFS{HostnameFile: file("\n"), BootIDFile: file(bootID)},
			HostID{}, []string{HostnameFile, `""`, "want a host name"}},
		{"space in hostname", fstest.MapFS{HostnameFile: file("my host\n"), BootIDFile: file(bootID)},
			HostID{}, []string{HostnameFile, `"my host"`}},
		{"two lines", fstest.MapFS{HostnameFile: file("a\nb\n"), BootIDFile: file(bootID)},
			HostID{}, []string{HostnameFile, `"a\nb"`}},
		{"long hostname", fstest.MapFS{HostnameFile: file(strings.Repeat("h", 65)), BootIDFile: file(bootID)},
			HostID{}, []string{HostnameFile, "1..64 characters"}},
		{"bad boot id", fstest.MapFS{HostnameFile: file("n\n"), BootIDFile: file("not-a-uuid\n")},
			HostID{}, []string{BootIDFile, `"not-a-uuid"`, "want a UUID"}},
		{"boot id misplaced dash", fstest.MapFS{HostnameFile: file("n"), BootIDFile: file("5a3c8f0e1-b2d-4c6e-9f70-8a1b2c3d4e5f")},
			HostID{}, []string{BootIDFile}},
		{"boot id non-hex", fstest.MapFS{HostnameFile: file("n"), BootIDFile: file("5a3c8f0e-1b2d-4c6e-9f70-8a1b2c3d4e5g")},
			HostID{}, []string{BootIDFile}},
		{"missing boot id", fstest.MapFS{HostnameFile: file("n")},
			HostID{}, []string{"read " + BootIDFile}},
		{"missing hostname", fstest.MapFS{BootIDFile: file(bootID)},
			HostID{}, []string{"read " + HostnameFile}},
	}
	for _, tt := range tests {
		got, err := HostIdentity(tt.fsys)
		if tt.wantErr == nil {
			if err != nil || got != tt.want {
				t.Errorf("%s: HostIdentity = %+v, %v; want %+v", tt.name, got, err, tt.want)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: HostIdentity = %+v, want an error", tt.name, got)
			continue
		}
		for _, w := range tt.wantErr {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", tt.name, err, w)
			}
		}
	}
}

func TestHostIDHash(t *testing.T) {
	a := HostID{"node1", bootID}
	if a.Hash() != (HostID{"node1", bootID}).Hash() {
		t.Error("equal HostIDs hash differently")
	}
	// The separator keeps ("ab","c") and ("a","bc") apart.
	if (HostID{"ab", "c"}).Hash() == (HostID{"a", "bc"}).Hash() {
		t.Error("HostID hash ignores the hostname/boot id boundary")
	}
	if (HostID{"node1", bootID}).Hash() == (HostID{"node2", bootID}).Hash() {
		t.Error("different hostnames hash equal")
	}
	if got, want := a.String(), "node1/"+bootID; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestParseCPUList(t *testing.T) {
	tests := []struct {
		in   string
		want CPUList
		str  string
	}{
		{"0-3,8-11\n", CPUList{0, 1, 2, 3, 8, 9, 10, 11}, "0-3,8-11"},
		{"0", CPUList{0}, "0"},
		{"5,7", CPUList{5, 7}, "5,7"},
		{"0-1,2-3", CPUList{0, 1, 2, 3}, "0-3"},
		{"8-9,0,0-1", CPUList{0, 1, 8, 9}, "0-1,8-9"},
		{" 4-4 ", CPUList{4}, "4"},
		{"65535", CPUList{65535}, "65535"},
	}
	for _, tt := range tests {
		got, err := ParseCPUList(tt.in)
		if err != nil {
			t.Errorf("ParseCPUList(%q): %v", tt.in, err)
			continue
		}
		if !slices.Equal(got, tt.want) || got.String() != tt.str {
			t.Errorf("ParseCPUList(%q) = %v (%s), want %v (%s)", tt.in, []int(got), got, []int(tt.want), tt.str)
		}
	}
	for _, bad := range []string{"", "\n", "a", "0-", "-3", "3-1", "1,,2", "0-3:2", "+1", "1-+2", "65536", "0-99999999999999999999", "1 ,2", "1.5"} {
		if got, err := ParseCPUList(bad); err == nil {
			t.Errorf("ParseCPUList(%q) = %v, want an error", bad, got)
		} else if bad != "" && bad != "\n" && !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseCPUList(%q): error %q does not quote the text", bad, err)
		}
	}
}

func TestCores(t *testing.T) {
	cpuinfo := "processor\t: 0\nvendor_id\t: GenuineIntel\n\nprocessor\t: 1\nmodel name\t: x processor y\n\nprocessor\t: 2\n"
	tests := []struct {
		name    string
		fsys    fstest.MapFS
		want    int
		wantErr []string
	}{
		{"online", fstest.MapFS{OnlineFile: file("0-3,8-11\n"), CPUInfoFile: file(cpuinfo)}, 8, nil},
		{"fallback to cpuinfo", fstest.MapFS{CPUInfoFile: file(cpuinfo)}, 3, nil},
		{"malformed online does not fall back", fstest.MapFS{OnlineFile: file("0-x\n"), CPUInfoFile: file(cpuinfo)},
			0, []string{OnlineFile, `"x" is not a CPU number`}},
		{"empty online", fstest.MapFS{OnlineFile: file("\n")}, 0, []string{OnlineFile, "empty CPU list"}},
		{"cpuinfo without processors", fstest.MapFS{CPUInfoFile: file("vendor_id : x\n")},
			0, []string{OnlineFile, CPUInfoFile, `no "processor" lines`}},
		{"neither file", fstest.MapFS{}, 0, []string{OnlineFile, CPUInfoFile}},
	}
	for _, tt := range tests {
		got, err := Cores(tt.fsys)
		if tt.wantErr == nil {
			if err != nil || got != tt.want {
				t.Errorf("%s: Cores = %d, %v; want %d", tt.name, got, err, tt.want)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: Cores = %d, want an error", tt.name, got)
			continue
		}
		for _, w := range tt.wantErr {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", tt.name, err, w)
			}
		}
	}
}

func TestAllowedCPUs(t *testing.T) {
	status := "Name:\tcc-perf\nCpus_allowed:\tff\nCpus_allowed_list:\t0-3,8-11\nMems_allowed_list:\t0\n"
	got, err := AllowedCPUs(fstest.MapFS{StatusFile: file(status)})
	if err != nil || got.String() != "0-3,8-11" {
		t.Errorf("AllowedCPUs = %v, %v; want 0-3,8-11", got, err)
	}
	tests := []struct{ status, want string }{
		{"Name:\tx\n", "no Cpus_allowed_list line"},
		{"Cpus_allowed_list:\t3-1\n", `Cpus_allowed_list: CPU list "\t3-1\n": range "3-1" runs backwards`},
		{"Cpus_allowed_list:\n", "empty CPU list"},
	}
	for _, tt := range tests {
		_, err := AllowedCPUs(fstest.MapFS{StatusFile: file(tt.status)})
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), StatusFile) {
			t.Errorf("AllowedCPUs(%q): got %v, want an error naming %s and containing %q", tt.status, err, StatusFile, tt.want)
		}
	}
	if _, err := AllowedCPUs(fstest.MapFS{}); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("AllowedCPUs(empty fs): got %v, want fs.ErrNotExist", err)
	}
}

// TestRealHost reads this machine through Root; it checks only what must
// hold on any Linux host.
func TestRealHost(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc and /sys: Linux only")
	}
	id, err := HostIdentity(Root())
	if err != nil {
		t.Fatalf("HostIdentity: %v", err)
	}
	if id.Hostname == "" || len(id.BootID) != 36 {
		t.Errorf("HostIdentity = %+v", id)
	}
	n, err := Cores(Root())
	if err != nil || n < 1 {
		t.Errorf("Cores = %d, %v; want >= 1", n, err)
	}
	cpus, err := AllowedCPUs(Root())
	if err != nil {
		t.Fatalf("AllowedCPUs: %v", err)
	}
	// Go's NumCPU counts the affinity mask at start-up: the same set.
	if len(cpus) != runtime.NumCPU() {
		t.Errorf("AllowedCPUs has %d CPUs (%s), runtime.NumCPU() = %d", len(cpus), cpus, runtime.NumCPU())
	}
}

// FuzzParseCPUList: no panics; whatever parses is ascending, unique, in
// range, and round-trips through String.
func FuzzParseCPUList(f *testing.F) {
	for _, s := range []string{"0-3,8-11\n", "0", "3-1", "1,,2", "0-65535", "7,5-6"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseCPUList(s)
		if err != nil {
			return
		}
		if len(l) == 0 {
			t.Fatalf("ParseCPUList(%q) parsed to an empty list", s)
		}
		for i, c := range l {
			if c < 0 || c > maxCPU || i > 0 && c <= l[i-1] {
				t.Fatalf("ParseCPUList(%q) = %v: not ascending and unique in 0..%d", s, []int(l), maxCPU)
			}
		}
		again, err := ParseCPUList(l.String())
		if err != nil || !slices.Equal(again, l) {
			t.Fatalf("ParseCPUList(%q) = %v, reparsed from %q = %v, %v", s, []int(l), l.String(), []int(again), err)
		}
	})
}

// TestParseHostID: what another host printed (ccrun asks each host it reaches) is checked
// as HostIdentity checks the files.
func TestParseHostID(t *testing.T) {
	tests := []struct {
		name, boot string
		wantErr    string // "" means success
	}{
		{"tb1", bootID, ""},
		{"tb1.cluster", strings.ToUpper(bootID), ""},
		{"", bootID, HostnameFile},
		{"tb 1", bootID, `"tb 1"`},
		{"tb1", "", BootIDFile},
		{"tb1", bootID + "\n", BootIDFile},
	}
	for _, tt := range tests {
		got, err := ParseHostID(tt.name, tt.boot)
		switch {
		case tt.wantErr == "" && (err != nil || got != HostID{tt.name, tt.boot}):
			t.Errorf("ParseHostID(%q, %q) = %+v, %v; want it back", tt.name, tt.boot, got, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("ParseHostID(%q, %q) = %v; want an error naming %s", tt.name, tt.boot, err, tt.wantErr)
		}
	}
}

func FuzzParseHostID(f *testing.F) {
	f.Add("tb1", bootID)
	f.Add("a b", "x")
	f.Fuzz(func(t *testing.T, name, boot string) {
		id, err := ParseHostID(name, boot)
		if err == nil && (id.Hostname != name || id.BootID != boot || strings.ContainsAny(id.String()[len(name)+1:], "/\n ")) {
			t.Errorf("ParseHostID(%q, %q) = %+v", name, boot, id)
		}
	})
}
