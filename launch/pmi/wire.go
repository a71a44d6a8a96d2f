package pmi

import (
	"errors"
	"fmt"
	"strings"
)

// Msg is one PMI-1 message: the command and its key=value arguments, in order.
//
//	cmd=put kvsname=kvs_1f2e_0 key=bc-0 value=2F6465...
//	-> Msg{Cmd: "put", Args: [{kvsname kvs_1f2e_0} {key bc-0} {value 2F6465...}]}
type Msg struct {
	// Cmd is the command name (the value of cmd=, or of mcmd= for a multi-line command).
	Cmd string
	// Multi is set for mcmd= (the multi-line spawn command).
	Multi bool
	Args  []KV
}

// KV is one key=value argument.
type KV struct{ Key, Value string }

// Get returns the value of key, and whether it was given.
func (m Msg) Get(key string) (string, bool) {
	for _, a := range m.Args {
		if a.Key == key {
			return a.Value, true
		}
	}
	return "", false
}

// ErrEmpty is the error of an empty line.
var ErrEmpty = errors.New("empty PMI message")

// Parse reads one PMI-1 line (with or without its newline): blank-separated KEY=VALUE
// tokens, the first of them cmd=NAME (or mcmd=NAME). A value runs to the next blank and
// may contain '=' (MPICH hex-encodes anything else).
func Parse(line string) (Msg, error) {
	line = strings.TrimRight(line, "\r\n")
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return Msg{}, ErrEmpty
	}
	var m Msg
	for i, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return Msg{}, fmt.Errorf("malformed PMI message %.80q: token %.40q is not KEY=VALUE", line, f)
		}
		if i == 0 {
			switch {
			case (k == "cmd" || k == "mcmd") && v != "":
				m.Cmd, m.Multi = v, k == "mcmd"
				continue
			default:
				return Msg{}, fmt.Errorf("malformed PMI message %.80q: want cmd=NAME first", line)
			}
		}
		m.Args = append(m.Args, KV{k, v})
	}
	return m, nil
}

// Format renders a reply line: "cmd=NAME k1=v1 k2=v2\n"; kv alternates keys and values.
func Format(cmd string, kv ...string) string {
	var b strings.Builder
	b.WriteString("cmd=")
	b.WriteString(cmd)
	for i := 0; i+1 < len(kv); i += 2 {
		b.WriteByte(' ')
		b.WriteString(kv[i])
		b.WriteByte('=')
		b.WriteString(kv[i+1])
	}
	b.WriteByte('\n')
	return b.String()
}

// isPMI2 reports whether the first bytes of a connection are a PMI-2 length header: PMI-2
// messages are "%-6d" lengths followed by "cmd=fullinit;...", with no newline, where every
// PMI-1 message starts with "cmd=" or "mcmd=".
func isPMI2(head []byte) bool {
	digits := 0
	for _, c := range head {
		switch {
		case '0' <= c && c <= '9':
			digits++
		case c == ' ':
		default:
			return false
		}
	}
	return digits > 0
}
