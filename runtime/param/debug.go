package param

import (
	"fmt"
	"strings"
)

// DebugLevel is NCCL_DEBUG. Levels are inclusive: a level prints everything
// the less verbose levels print. Values are NCCL's (ncclDebugLogLevel).
type DebugLevel int

// The NCCL_DEBUG levels.
const (
	DebugNone    DebugLevel = iota // unset: print nothing
	DebugVersion                   // the version line only
	DebugWarn                      // fatal errors
	DebugInfo                      // progress and decisions, filtered by NCCL_DEBUG_SUBSYS
	DebugAbort                     // as INFO (NCCL keeps it for abort handling)
	DebugTrace                     // replayable traces of every call
)

var levelNames = []string{"NONE", "VERSION", "WARN", "INFO", "ABORT", "TRACE"}

// String returns NCCL's name for the level, e.g. "INFO".
func (l DebugLevel) String() string {
	if l < 0 || int(l) >= len(levelNames) {
		return fmt.Sprintf("DebugLevel(%d)", int(l))
	}
	return levelNames[l]
}

// parseDebugLevel accepts the NCCL_DEBUG names, any case. NONE is not one of
// them: unset the variable instead.
func parseDebugLevel(s string) (DebugLevel, error) {
	for l := DebugVersion; l <= DebugTrace; l++ {
		if strings.EqualFold(s, levelNames[l]) {
			return l, nil
		}
	}
	return 0, fmt.Errorf("unknown level (allowed: %s)", strings.Join(levelNames[DebugVersion:], ", "))
}

// Subsys is a set of NCCL_DEBUG_SUBSYS subsystems, with NCCL's bit values
// (ncclDebugLogSubSys). A log line is printed when its subsystem intersects
// the configured set.
type Subsys uint64

// The subsystems, with NCCL's bits.
const (
	SubsysInit      Subsys = 0x1
	SubsysColl      Subsys = 0x2
	SubsysP2P       Subsys = 0x4
	SubsysSHM       Subsys = 0x8
	SubsysNet       Subsys = 0x10
	SubsysGraph     Subsys = 0x20
	SubsysTuning    Subsys = 0x40
	SubsysEnv       Subsys = 0x80
	SubsysAlloc     Subsys = 0x100
	SubsysCall      Subsys = 0x200
	SubsysProxy     Subsys = 0x400
	SubsysNVLS      Subsys = 0x800
	SubsysBootstrap Subsys = 0x1000
	SubsysReg       Subsys = 0x2000
	SubsysProfile   Subsys = 0x4000
	SubsysRAS       Subsys = 0x8000
	SubsysDestroy   Subsys = 0x10000
	SubsysAllocHost Subsys = 0x20000
	// SubsysAll is every subsystem, NCCL's ALL (~0).
	SubsysAll Subsys = ^Subsys(0)

	// DefaultSubsys is NCCL's default NCCL_DEBUG_SUBSYS: INIT,BOOTSTRAP,ENV.
	DefaultSubsys = SubsysInit | SubsysBootstrap | SubsysEnv
)

// subsysNames lists the named subsystems in bit order (ALL is separate).
var subsysNames = []struct {
	name string
	bit  Subsys
}{
	{"INIT", SubsysInit}, {"COLL", SubsysColl}, {"P2P", SubsysP2P}, {"SHM", SubsysSHM},
	{"NET", SubsysNet}, {"GRAPH", SubsysGraph}, {"TUNING", SubsysTuning}, {"ENV", SubsysEnv},
	{"ALLOC", SubsysAlloc}, {"CALL", SubsysCall}, {"PROXY", SubsysProxy}, {"NVLS", SubsysNVLS},
	{"BOOTSTRAP", SubsysBootstrap}, {"REG", SubsysReg}, {"PROFILE", SubsysProfile}, {"RAS", SubsysRAS},
	{"DESTROY", SubsysDestroy}, {"ALLOC_HOST", SubsysAllocHost},
}

// knownSubsys is the union of the named bits.
const knownSubsys = Subsys(1<<18 - 1)

func subsysAllowed() string {
	names := make([]string, 0, len(subsysNames)+1)
	for _, s := range subsysNames {
		names = append(names, s.name)
	}
	return strings.Join(append(names, "ALL"), ", ")
}

// ParseSubsys parses an NCCL_DEBUG_SUBSYS value: a comma list of subsystem
// names (any case, spaces around names ignored), or "^" followed by such a
// list meaning every subsystem except those. Unknown and empty names are
// errors, unlike NCCL before its bitset parser.
//
// Every set ParseSubsys returns either holds only named bits or holds every
// bit above them (a "^" list, or one naming ALL), so String round-trips.
func ParseSubsys(s string) (Subsys, error) {
	body, invert := strings.CutPrefix(strings.TrimSpace(s), "^")
	if strings.TrimSpace(body) == "" {
		return 0, fmt.Errorf("no subsystem named (allowed: %s, optionally after a leading ^)", subsysAllowed())
	}
	var named Subsys
	for _, tok := range strings.Split(body, ",") {
		bit, err := lookupSubsys(tok)
		if err != nil {
			return 0, err
		}
		named |= bit
	}
	if invert {
		return SubsysAll &^ named, nil
	}
	return named, nil
}

func lookupSubsys(tok string) (Subsys, error) {
	tok = strings.TrimSpace(tok)
	if tok == "" {
		return 0, fmt.Errorf("empty subsystem name (allowed: %s)", subsysAllowed())
	}
	if strings.EqualFold(tok, "ALL") {
		return SubsysAll, nil
	}
	for _, s := range subsysNames {
		if strings.EqualFold(tok, s.name) {
			return s.bit, nil
		}
	}
	return 0, fmt.Errorf("unknown subsystem %q (allowed: %s)", tok, subsysAllowed())
}

// String returns an NCCL_DEBUG_SUBSYS value for the set: "ALL", a list of
// names such as "INIT,ENV", "^" and the names left out when the set holds
// the bits above the named ones, and "^ALL" for the empty set.
func (s Subsys) String() string {
	switch {
	case s == SubsysAll:
		return "ALL"
	case s == 0:
		return "^ALL"
	case s&^knownSubsys != 0:
		return "^" + subsysList(knownSubsys&^s)
	}
	return subsysList(s)
}

func subsysList(s Subsys) string {
	var names []string
	for _, n := range subsysNames {
		if s&n.bit != 0 {
			names = append(names, n.name)
		}
	}
	return strings.Join(names, ",")
}
