package param

import (
	"strings"
	"testing"
)

func TestParseSubsys(t *testing.T) {
	tests := []struct {
		in   string
		want Subsys
		str  string
	}{
		{"INIT,BOOTSTRAP,ENV", DefaultSubsys, "INIT,ENV,BOOTSTRAP"},
		{"init", SubsysInit, "INIT"},
		{" coll , tuning ", SubsysColl | SubsysTuning, "COLL,TUNING"},
		{"ALL", SubsysAll, "ALL"},
		{"net,ALL", SubsysAll, "ALL"},
		{"^INIT", SubsysAll &^ SubsysInit, "^INIT"},
		{"^ALL", 0, "^ALL"},
		{"^alloc_host,ras", SubsysAll &^ (SubsysAllocHost | SubsysRAS), "^RAS,ALLOC_HOST"},
		{"ALLOC_HOST", 0x20000, "ALLOC_HOST"},
		{"DESTROY,PROFILE,REG,NVLS,PROXY,CALL,ALLOC,GRAPH,NET,SHM,P2P", 0x16f3c, "P2P,SHM,NET,GRAPH,ALLOC,CALL,PROXY,NVLS,REG,PROFILE,DESTROY"},
	}
	for _, tt := range tests {
		got, err := ParseSubsys(tt.in)
		if err != nil {
			t.Errorf("ParseSubsys(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want || got.String() != tt.str {
			t.Errorf("ParseSubsys(%q) = %#x (%s), want %#x (%s)", tt.in, uint64(got), got, uint64(tt.want), tt.str)
		}
	}
}

func TestParseSubsysErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "no subsystem named"},
		{"^", "no subsystem named"},
		{"INIT,", "empty subsystem name"},
		{"INIT,,ENV", "empty subsystem name"},
		{"TUNE", `unknown subsystem "TUNE" (allowed: INIT, COLL, P2P, SHM, NET, GRAPH, TUNING, ENV, ALLOC, CALL, PROXY, NVLS, BOOTSTRAP, REG, PROFILE, RAS, DESTROY, ALLOC_HOST, ALL)`},
		{"INIT,^ENV", `unknown subsystem "^ENV"`},
	}
	for _, tt := range tests {
		_, err := ParseSubsys(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseSubsys(%q): got error %v, want one containing %q", tt.in, err, tt.want)
		}
	}
}

func TestDebugLevel(t *testing.T) {
	for in, want := range map[string]DebugLevel{"VERSION": DebugVersion, "warn": DebugWarn, "Info": DebugInfo, "ABORT": DebugAbort, "trace": DebugTrace} {
		got, err := parseDebugLevel(in)
		if err != nil || got != want {
			t.Errorf("parseDebugLevel(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if DebugInfo.String() != "INFO" || DebugNone.String() != "NONE" || DebugLevel(9).String() != "DebugLevel(9)" {
		t.Errorf("DebugLevel.String: got %s %s %s", DebugInfo, DebugNone, DebugLevel(9))
	}
	if !(DebugNone < DebugVersion && DebugVersion < DebugWarn && DebugWarn < DebugInfo && DebugInfo < DebugAbort && DebugAbort < DebugTrace) {
		t.Error("debug levels are not ordered as NCCL's")
	}
}

func TestSubsysBitsAreNCCLs(t *testing.T) {
	// NCCL debug.h values; a silent renumbering would break NCCL_DEBUG_SUBSYS
	// masks users copy from NCCL logs.
	want := map[Subsys]uint64{SubsysInit: 0x1, SubsysColl: 0x2, SubsysP2P: 0x4, SubsysSHM: 0x8, SubsysNet: 0x10,
		SubsysGraph: 0x20, SubsysTuning: 0x40, SubsysEnv: 0x80, SubsysAlloc: 0x100, SubsysCall: 0x200,
		SubsysProxy: 0x400, SubsysNVLS: 0x800, SubsysBootstrap: 0x1000, SubsysReg: 0x2000, SubsysProfile: 0x4000,
		SubsysRAS: 0x8000, SubsysDestroy: 0x10000, SubsysAllocHost: 0x20000}
	var union Subsys
	for s, w := range want {
		if uint64(s) != w {
			t.Errorf("%s = %#x, want %#x", s, uint64(s), w)
		}
		union |= s
	}
	if union != knownSubsys {
		t.Errorf("knownSubsys = %#x, want %#x", uint64(knownSubsys), uint64(union))
	}
}
