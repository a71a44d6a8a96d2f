package param

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seed-760dd1f1/cc/algos"
	"github.com/seed-760dd1f1/cc/protocols"
)

// env makes a lookup from name=value pairs.
func env(pairs ...string) func(string) (string, bool) {
	m := map[string]string{}
	for _, kv := range pairs {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func TestLoadDefaults(t *testing.T) {
	p, err := Load(env())
	if err != nil {
		t.Fatalf("Load(empty): %v", err)
	}
	if d := Defaults(); d.BuffSize != p.BuffSize || d.DebugSubsys != p.DebugSubsys {
		t.Errorf("Defaults() = %+v, want Load of an empty environment %+v", d, p)
	}
	tests := []struct {
		name      string
		got, want any
	}{
		{"BuffSize", p.BuffSize, 4194304},
		{"LLBuffSize", p.LLBuffSize, 524288},
		{"LL128BuffSize", p.LL128BuffSize, 4915200},
		{"BuffSizeFor(LL128)", p.BuffSizeFor(protocols.LL128), 4915200},
		{"BuffSizeFor(Simple)", p.BuffSizeFor(protocols.Simple), 4194304},
		{"MinChannels", p.MinChannels, 0},
		{"MaxChannels", p.MaxChannels, 0},
		{"SocketNThreads", p.SocketNThreads, 1},
		{"NSocksPerThread", p.NSocksPerThread, 1},
		{"SocketRetryCnt", p.SocketRetryCnt, 34},
		{"SocketRetrySleep", p.SocketRetrySleep, 100 * time.Millisecond},
		{"SocketFamily", p.SocketFamily, FamilyAny},
		{"SocketIfname.IsSet", p.SocketIfname.IsSet(), false},
		{"CommID.IsZero", p.CommID.IsZero(), true},
		{"Debug", p.Debug, DebugNone},
		{"DebugSubsys", p.DebugSubsys, DefaultSubsys},
		{"DebugFile", p.DebugFile, ""},
		{"Algo.Set", p.Algo.Set, false},
		{"Proto.Set", p.Proto.Set, false},
		{"AlgosFor(AllReduce)", p.AlgosFor(algos.AllReduce), AllAlgos},
		{"ProtosFor(Broadcast)", p.ProtosFor(algos.Broadcast), AllProtos},
		{"len(Overrides)", len(p.Overrides()), 0},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

func TestLoadGood(t *testing.T) {
	tests := []struct {
		env  []string
		get  func(p *Params) any
		want any
	}{
		{[]string{"NCCL_ALGO=allreduce:tree"}, func(p *Params) any { return p.AlgosFor(algos.AllReduce) }, algoSet(algos.Tree)},
		{[]string{"NCCL_ALGO=allreduce:tree"}, func(p *Params) any { return p.AlgosFor(algos.Broadcast) }, AllAlgos},
		{[]string{"NCCL_ALGO=Tree"}, func(p *Params) any { return p.Algo.Raw }, "Tree"},
		{[]string{"NCCL_PROTO=^LL128"}, func(p *Params) any { return p.ProtosFor(algos.AllGather) }, protoSet(protocols.LL, protocols.Simple)},
		{[]string{"NCCL_PROTO=^LL128"}, func(p *Params) any { return p.Proto.Set }, true},
		{[]string{"NCCL_BUFFSIZE=1024"}, func(p *Params) any { return p.BuffSize }, 1024},
		{[]string{"NCCL_BUFFSIZE=1073741824"}, func(p *Params) any { return p.BuffSize }, 1 << 30},
		{[]string{"NCCL_LL_BUFFSIZE=65536"}, func(p *Params) any { return p.BuffSizeFor(protocols.LL) }, 65536},
		{[]string{"NCCL_LL128_BUFFSIZE=9830400"}, func(p *Params) any { return p.LL128BuffSize }, 9830400},
		{[]string{"NCCL_NCHANNELS=4"}, func(p *Params) any { return [2]int{p.MinChannels, p.MaxChannels} }, [2]int{4, 4}},
		{[]string{"NCCL_MIN_NCHANNELS=2"}, func(p *Params) any { return [2]int{p.MinChannels, p.MaxChannels} }, [2]int{2, 0}},
		{[]string{"NCCL_MAX_NCHANNELS=64"}, func(p *Params) any { return [2]int{p.MinChannels, p.MaxChannels} }, [2]int{0, 64}},
		{[]string{"NCCL_MIN_NCHANNELS=4", "NCCL_MAX_NCHANNELS=4"}, func(p *Params) any { return [2]int{p.MinChannels, p.MaxChannels} }, [2]int{4, 4}},
		{[]string{"NCCL_MIN_NRINGS=3", "NCCL_MAX_NRINGS=5"}, func(p *Params) any { return [2]int{p.MinChannels, p.MaxChannels} }, [2]int{3, 5}},
		// *_NCHANNELS wins over its *_NRINGS alias; the aliases' values
		// (min 8 > max 1) are not even compared.
		{[]string{"NCCL_MIN_NRINGS=8", "NCCL_MIN_NCHANNELS=2", "NCCL_MAX_NRINGS=1", "NCCL_MAX_NCHANNELS=6"},
			func(p *Params) any { return [2]int{p.MinChannels, p.MaxChannels} }, [2]int{2, 6}},
		{[]string{"NCCL_SOCKET_IFNAME=^docker,lo"}, func(p *Params) any { return p.SocketIfname.Match("eth0") }, true},
		{[]string{"NCCL_SOCKET_IFNAME=^docker,lo"}, func(p *Params) any { return p.SocketIfname.Match("lo") }, false},
		{[]string{"NCCL_SOCKET_IFNAME=e"}, func(p *Params) any { return p.SocketIfname.IsSet() }, false},
		{[]string{"NCCL_SOCKET_FAMILY=AF_INET6"}, func(p *Params) any { return p.SocketFamily }, FamilyInet6},
		{[]string{"NCCL_SOCKET_FAMILY=af_inet"}, func(p *Params) any { return p.SocketFamily }, FamilyInet},
		{[]string{"NCCL_SOCKET_NTHREADS=4", "NCCL_NSOCKS_PERTHREAD=16"}, func(p *Params) any { return p.SocketNThreads * p.NSocksPerThread }, 64},
		{[]string{"NCCL_NSOCKS_PERTHREAD=64"}, func(p *Params) any { return p.NSocksPerThread }, 64},
		{[]string{"NCCL_SOCKET_RETRY_CNT=0"}, func(p *Params) any { return p.SocketRetryCnt }, 0},
		{[]string{"NCCL_SOCKET_RETRY_SLEEP_MSEC=5"}, func(p *Params) any { return p.SocketRetrySleep }, 5 * time.Millisecond},
		{[]string{"NCCL_COMM_ID=10.0.0.1:29500"}, func(p *Params) any { return p.CommID }, CommID{"10.0.0.1", 29500}},
		{[]string{"NCCL_COMM_ID=[fe80::1]:1"}, func(p *Params) any { return p.CommID.String() }, "[fe80::1]:1"},
		{[]string{"NCCL_COMM_ID=node-01.cluster:65535"}, func(p *Params) any { return p.CommID }, CommID{"node-01.cluster", 65535}},
		{[]string{"NCCL_DEBUG=info"}, func(p *Params) any { return p.Debug }, DebugInfo},
		{[]string{"NCCL_DEBUG=TRACE"}, func(p *Params) any { return p.Debug }, DebugTrace},
		{[]string{"NCCL_DEBUG=Version"}, func(p *Params) any { return p.Debug }, DebugVersion},
		{[]string{"NCCL_DEBUG_SUBSYS=^init"}, func(p *Params) any { return p.DebugSubsys }, SubsysAll &^ SubsysInit},
		{[]string{"NCCL_DEBUG_SUBSYS=TUNING,coll"}, func(p *Params) any { return p.DebugSubsys }, SubsysTuning | SubsysColl},
		{[]string{"NCCL_DEBUG_FILE=/tmp/nccl.%h.%p"}, func(p *Params) any { return p.DebugFile }, "/tmp/nccl.%h.%p"},
		{[]string{"NCCL_SHM_DISABLE=1"}, func(p *Params) any { return p.SHMDisable }, true},
		{[]string{"NCCL_SHM_DISABLE=0"}, func(p *Params) any { return p.SHMDisable }, false},
		{[]string{"CC_SHM_SPIN_US=0"}, func(p *Params) any { return p.SHMSpin }, time.Duration(0)},
		{[]string{"CC_SHM_SPIN_US=100000"}, func(p *Params) any { return p.SHMSpin }, 100 * time.Millisecond},
		{[]string{"CC_HOST_ID=rack3-node7"}, func(p *Params) any { return p.HostID }, "rack3-node7"},
		// The empty string counts as unset, as in NCCL.
		{[]string{"NCCL_BUFFSIZE="}, func(p *Params) any { return p.BuffSize }, 4194304},
		{[]string{"NCCL_ALGO="}, func(p *Params) any { return p.Algo.Set }, false},
		{[]string{"NCCL_BUFFSIZE="}, func(p *Params) any { return p.IsSet("NCCL_BUFFSIZE") }, false},
		{[]string{"NCCL_PROTO=LL", "NCCL_DEBUG=WARN"}, func(p *Params) any { return fmt.Sprint(p.Overrides()) }, "[{NCCL_PROTO LL} {NCCL_DEBUG WARN}]"},
		{[]string{"NCCL_PROTO=LL"}, func(p *Params) any { return p.IsSet("NCCL_PROTO") }, true},
	}
	for _, tt := range tests {
		p, err := Load(env(tt.env...))
		if err != nil {
			t.Errorf("Load(%q): %v", tt.env, err)
			continue
		}
		if got := tt.get(p); got != tt.want {
			t.Errorf("Load(%q): got %v, want %v", tt.env, got, tt.want)
		}
	}
}

func TestLoadBad(t *testing.T) {
	tests := []struct {
		env  string // NAME=value, the value is what the error must quote
		want string // also in the message: what is allowed
	}{
		{"NCCL_ALGO=FOO", "allowed: tree, ring"},
		{"NCCL_PROTO=^", "names no protocol"},
		{"NCCL_PROTO=LL;simple", "all entries except the first must have one"},
		{"NCCL_BUFFSIZE=abc", "want a positive integer number of bytes"},
		{"NCCL_BUFFSIZE=-1", "want a positive integer number of bytes"},
		{"NCCL_BUFFSIZE=0", "want a positive integer number of bytes"},
		{"NCCL_BUFFSIZE=4M", "want a positive integer number of bytes"},
		{"NCCL_BUFFSIZE=0x400000", "want a positive integer number of bytes"},
		{"NCCL_BUFFSIZE=1000", "multiple of 1024 bytes: each of the 8 FIFO slots (size/8) must hold whole 128-byte LL128 lines (nearest: 1024)"},
		{"NCCL_BUFFSIZE=4194305", "nearest: 4194304 or 4195328"},
		{"NCCL_BUFFSIZE=2147483648", "at most 1073741824"},
		{"NCCL_LL_BUFFSIZE=16", "multiple of 1024"},
		{"NCCL_LL128_BUFFSIZE= 4915200", "positive integer"},
		{"NCCL_NCHANNELS=0", "want an integer in 1..64"},
		{"NCCL_NCHANNELS=1000", "want an integer in 1..64"},
		{"NCCL_MIN_NCHANNELS=65", "1..64"},
		{"NCCL_MAX_NCHANNELS=-2", "1..64"},
		{"NCCL_MIN_NRINGS=x", "1..64"},
		{"NCCL_SOCKET_IFNAME=eth0,,eth1", "empty interface name"},
		{"NCCL_SOCKET_IFNAME=eth0:port", "not a number"},
		{"NCCL_SOCKET_FAMILY=inet", "allowed: AF_INET, AF_INET6"},
		{"NCCL_SOCKET_NTHREADS=0", "1..16"},
		{"NCCL_SOCKET_NTHREADS=17", "1..16"},
		{"NCCL_NSOCKS_PERTHREAD=65", "1..64"},
		{"NCCL_SOCKET_RETRY_CNT=-1", "0..10000"},
		{"NCCL_SOCKET_RETRY_SLEEP_MSEC=1.5", "0..60000"},
		{"NCCL_COMM_ID=10.0.0.1", "want <ipv4>:<port>"},
		{"NCCL_COMM_ID=10.0.0.1:0", "port \"0\" out of range"},
		{"NCCL_COMM_ID=10.0.0.1:70000", "out of range"},
		{"NCCL_COMM_ID=fe80::1:29500", "not an address"},
		{"NCCL_COMM_ID=[10.0.0.1]:29500", "not an IPv6 address"},
		{"NCCL_COMM_ID=10.0.0.256:29500", "neither an IPv4 address nor a host name"},
		{"NCCL_COMM_ID=bad host:1", "neither an IPv4 address nor a host name"},
		{"NCCL_COMM_ID=:29500", "empty host"},
		{"NCCL_DEBUG=VERBOSE", "allowed: VERSION, WARN, INFO, ABORT, TRACE"},
		{"NCCL_DEBUG=NONE", "allowed: VERSION"},
		{"NCCL_DEBUG_SUBSYS=INIT,FOO", `unknown subsystem "FOO"`},
		{"NCCL_DEBUG_SUBSYS=^", "no subsystem named"},
		{"NCCL_SHM_DISABLE=true", "want 0 or 1"},
		{"NCCL_SHM_DISABLE=2", "want 0 or 1"},
		{"CC_SHM_SPIN_US=100001", "0..100000"},
		{"CC_HOST_ID=two words", "without spaces"},
	}
	for _, tt := range tests {
		name, value, _ := strings.Cut(tt.env, "=")
		_, err := Load(env(tt.env))
		if err == nil {
			t.Errorf("Load(%s): got no error, want one", tt.env)
			continue
		}
		prefix := fmt.Sprintf("%s=%q: ", name, value)
		if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Load(%s):\n got error %q\n want it to start with %q and contain %q", tt.env, err, prefix, tt.want)
		}
		var pe *Error
		if !errors.As(err, &pe) || pe.Name != name || pe.Value != value {
			t.Errorf("Load(%s): error %v is not an *Error for %s=%q", tt.env, err, name, value)
		}
	}
}

func TestLoadCrossKnobErrors(t *testing.T) {
	tests := []struct {
		env  []string
		want string
	}{
		{[]string{"NCCL_MIN_NCHANNELS=8", "NCCL_MAX_NCHANNELS=4"},
			`NCCL_MIN_NCHANNELS="8": greater than NCCL_MAX_NCHANNELS=4 (want minimum <= maximum)`},
		{[]string{"NCCL_MIN_NRINGS=8", "NCCL_MAX_NCHANNELS=4"},
			`NCCL_MIN_NRINGS="8": greater than NCCL_MAX_NCHANNELS=4 (want minimum <= maximum)`},
		{[]string{"NCCL_NCHANNELS=4", "NCCL_MAX_NCHANNELS=8"},
			`NCCL_NCHANNELS="4": cannot be combined with NCCL_MAX_NCHANNELS=8: NCCL_NCHANNELS sets both the minimum and the maximum`},
		{[]string{"NCCL_NCHANNELS=4", "NCCL_MIN_NRINGS=4"},
			`NCCL_NCHANNELS="4": cannot be combined with NCCL_MIN_NRINGS=4: NCCL_NCHANNELS sets both the minimum and the maximum`},
		{[]string{"NCCL_SOCKET_NTHREADS=16", "NCCL_NSOCKS_PERTHREAD=8"},
			`NCCL_NSOCKS_PERTHREAD="8": times NCCL_SOCKET_NTHREADS=16 is 128 sockets per connection (want at most 64)`},
	}
	for _, tt := range tests {
		_, err := Load(env(tt.env...))
		if err == nil || err.Error() != tt.want {
			t.Errorf("Load(%q):\n got  %v\n want %s", tt.env, err, tt.want)
		}
	}
}

func TestLoadJoinsErrors(t *testing.T) {
	_, err := Load(env("NCCL_BUFFSIZE=abc", "NCCL_ALGO=FOO", "NCCL_NCHANNELS=0"))
	if err == nil {
		t.Fatal("Load: got no error, want three")
	}
	for _, w := range []string{`NCCL_BUFFSIZE="abc"`, `NCCL_ALGO="FOO"`, `NCCL_NCHANNELS="0"`} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Load: error %q does not mention %s", err, w)
		}
	}
	if n := strings.Count(err.Error(), "\n") + 1; n != 3 {
		t.Errorf("Load: got %d error lines, want 3:\n%v", n, err)
	}
}

func TestKnobTable(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range Knobs() {
		if seen[k.Name] {
			t.Errorf("knob %s declared twice", k.Name)
		}
		seen[k.Name] = true
		if !strings.HasPrefix(k.Name, "NCCL_") && !strings.HasPrefix(k.Name, "CC_") {
			t.Errorf("knob %s: want an NCCL_ or CC_ name", k.Name)
		}
		if k.Doc == "" || k.Allowed == "" {
			t.Errorf("knob %s: doc %q, allowed %q; want both", k.Name, k.Doc, k.Allowed)
		}
		if k.Default != "" {
			// A default must be a value the knob accepts from a user too.
			if _, err := Load(env(k.Name + "=" + k.Default)); err != nil {
				t.Errorf("knob %s: default %q rejected: %v", k.Name, k.Default, err)
			}
		}
		if !strings.Contains(k.String(), k.Name) {
			t.Errorf("Knob.String() = %q, want the name in it", k.String())
		}
	}
	for _, name := range []string{"NCCL_ALGO", "NCCL_PROTO", "NCCL_BUFFSIZE", "NCCL_LL_BUFFSIZE", "NCCL_LL128_BUFFSIZE",
		"NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS", "NCCL_MIN_NRINGS", "NCCL_MAX_NRINGS", "NCCL_NCHANNELS",
		"NCCL_SOCKET_IFNAME", "NCCL_SOCKET_FAMILY", "NCCL_SOCKET_NTHREADS", "NCCL_NSOCKS_PERTHREAD",
		"NCCL_SOCKET_RETRY_CNT", "NCCL_SOCKET_RETRY_SLEEP_MSEC", "NCCL_COMM_ID", "NCCL_DEBUG",
		"NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"} {
		if !seen[name] {
			t.Errorf("knob %s missing from the table", name)
		}
	}
}

// TestLoadReadsOnlyTheTable checks that Load asks for table names only, so
// the table really is the one place a knob is declared.
func TestLoadReadsOnlyTheTable(t *testing.T) {
	names := map[string]bool{}
	for _, k := range Knobs() {
		names[k.Name] = true
	}
	_, err := Load(func(name string) (string, bool) {
		if !names[name] {
			t.Errorf("Load looked up %s, which is not in the table", name)
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
}
