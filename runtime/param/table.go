package param

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/seed-760dd1f1/cc/protocols"
)

// knob is one row of the table: everything about one variable.
type knob struct {
	name    string
	kind    Kind
	def     string // parsed by parse like a user value; "" means unset
	allowed string
	doc     string
	parse   func(p *Params, v string) error // sets p's field from v
}

// Limits used by the table.
const (
	// MaxChannelCount is NCCL's MAXCHANNELS, the ceiling of every channel
	// knob.
	MaxChannelCount = 64
	// buffSizeQuantum is NCCL_STEPS (8) x 128: each FIFO slot (buffSize/8)
	// must hold whole 128-byte LL128 lines, which also makes it a multiple of
	// the 16-byte LL line and the 8-byte flag word. NCCL's defaults satisfy it:
	// 4194304 = 4096 x 1024, 524288 = 512 x 1024, 4915200 = 4800 x 1024.
	buffSizeQuantum = protocols.NSteps * protocols.LL128LineBytes
	// maxBuffSize caps a FIFO at 1 GiB: one is allocated per connection,
	// channel and protocol, so larger values only exhaust memory.
	maxBuffSize = 1 << 30
	// maxNVLSChunk caps NCCL_NVLS_CHUNKSIZE: every local rank has 8 slots
	// of it per channel in /dev/shm.
	maxNVLSChunk = 64 << 20
	// maxOneShotBytes caps CC_ONESHOT_BYTES: every local rank has two
	// slots of it in /dev/shm, and the one-shot rows win only on small
	// calls.
	maxOneShotBytes = 16 << 20
	// maxSocketThreads and maxSockets are NCCL's MAX_THREADS and MAX_SOCKETS
	// (transport/net_socket.cc).
	maxSocketThreads = 16
	maxSockets       = 64
)

// knobs is the table: every NCCL_* and CC_* variable the runtime reads,
// declared once. The README test walks Knobs().
var knobs = append([]knob{
	{
		name: "NCCL_ALGO", kind: KindList,
		allowed: "[func:][^]algo[,algo...] entries separated by ';', only the first without func:; algo: " +
			joinAllowed(algoSpec.tokens) + "; func: " + joinAllowed(funcTokens),
		doc: "algorithms allowed per collective (NCCL parseList grammar); unset allows all",
		parse: func(p *Params, v string) (err error) {
			p.Algo, err = ParseAlgoList(v)
			return err
		},
	},
	{
		name: "NCCL_PROTO", kind: KindList,
		allowed: "[func:][^]proto[,proto...] entries separated by ';', only the first without func:; proto: " +
			joinAllowed(protoSpec.tokens) + "; func: " + joinAllowed(funcTokens),
		doc: "protocols allowed per collective (NCCL parseList grammar); unset allows all",
		parse: func(p *Params, v string) (err error) {
			p.Proto, err = ParseProtoList(v)
			return err
		},
	},
	buffSizeKnob("NCCL_BUFFSIZE", protocols.Simple, func(p *Params) *int { return &p.BuffSize }),
	buffSizeKnob("NCCL_LL_BUFFSIZE", protocols.LL, func(p *Params) *int { return &p.LLBuffSize }),
	buffSizeKnob("NCCL_LL128_BUFFSIZE", protocols.LL128, func(p *Params) *int { return &p.LL128BuffSize }),
	channelKnob("NCCL_MIN_NCHANNELS", "minimum number of channels", func(p *Params) *int { return &p.minNChannels }),
	channelKnob("NCCL_MAX_NCHANNELS", "maximum number of channels", func(p *Params) *int { return &p.maxNChannels }),
	channelKnob("NCCL_MIN_NRINGS", "old name of NCCL_MIN_NCHANNELS, which wins when both are set", func(p *Params) *int { return &p.minNRings }),
	channelKnob("NCCL_MAX_NRINGS", "old name of NCCL_MAX_NCHANNELS, which wins when both are set", func(p *Params) *int { return &p.maxNRings }),
	channelKnob("NCCL_NCHANNELS", "exact number of channels (min = max = N; our extension, as RCCL users expect); not combinable with the min/max knobs", func(p *Params) *int { return &p.nChannels }),
	{
		name: "NCCL_SOCKET_IFNAME", kind: KindList,
		allowed: "[^][=]name[:port][,name[:port]...]: ^ excludes, = matches whole names instead of prefixes; values of 1 character are ignored",
		doc:     "network interfaces the TCP transport may use; unset lets the transport choose",
		parse: func(p *Params, v string) (err error) {
			p.SocketIfname, err = ParseIfFilter(v)
			return err
		},
	},
	{
		name: "NCCL_SOCKET_FAMILY", kind: KindEnum, allowed: "AF_INET, AF_INET6",
		doc: "address family of TCP connections; unset allows both",
		parse: func(p *Params, v string) (err error) {
			p.SocketFamily, err = parseFamily(v)
			return err
		},
	},
	intKnob("NCCL_SOCKET_NTHREADS", "1", 1, maxSocketThreads, "helper goroutines per TCP connection (NCCL's auto picks 1 here); threads x sockets <= 64",
		func(p *Params, n int) { p.SocketNThreads = n }),
	intKnob("NCCL_NSOCKS_PERTHREAD", "1", 1, maxSockets, "TCP sockets per helper goroutine (NCCL's auto picks 1 here); threads x sockets <= 64",
		func(p *Params, n int) { p.NSocksPerThread = n }),
	intKnob("NCCL_SOCKET_RETRY_CNT", "34", 0, 10000, "connect retries before giving up",
		func(p *Params, n int) { p.SocketRetryCnt = n }),
	intKnob("NCCL_SOCKET_RETRY_SLEEP_MSEC", "100", 0, 60000, "base of the linear back-off between connect retries, in milliseconds",
		func(p *Params, n int) { p.SocketRetrySleep = time.Duration(n) * time.Millisecond }),
	{
		name: "NCCL_COMM_ID", kind: KindString, allowed: commIDShapes,
		doc: "bootstrap root address hosted by rank 0 when no launcher provides one",
		parse: func(p *Params, v string) (err error) {
			p.CommID, err = ParseCommID(v)
			return err
		},
	},
	{
		name: "NCCL_DEBUG", kind: KindEnum, allowed: joinAllowed(levelNames[DebugVersion:]) + " (any case)",
		doc: "debug output level, inclusive of the less verbose ones; unset prints nothing",
		parse: func(p *Params, v string) (err error) {
			p.Debug, err = parseDebugLevel(v)
			return err
		},
	},
	{
		name: "NCCL_DEBUG_SUBSYS", kind: KindList, def: "INIT,BOOTSTRAP,ENV",
		allowed: "[^]name[,name...] of " + subsysAllowed() + " (any case)",
		doc:     "subsystems whose INFO lines are printed; ^ prints all but those",
		parse: func(p *Params, v string) (err error) {
			p.DebugSubsys, err = ParseSubsys(v)
			return err
		},
	},
	{
		name: "NCCL_DEBUG_FILE", kind: KindString, allowed: "a file path; %h = host name, %p = pid, %% = %",
		doc: "file for debug output (created and truncated when NCCL_DEBUG is above VERSION); unset means stderr",
		parse: func(p *Params, v string) error {
			p.DebugFile = v
			return nil
		},
	},
	boolKnob("NCCL_SHM_DISABLE", "0", "1 disables the shared-memory transport: ranks of one host use TCP",
		func(p *Params, b bool) { p.SHMDisable = b }),
	intKnob("NCCL_PAT_ENABLE", "2", 0, 2, "PAT reduce-scatter and all-gather: 0 disables PAT, 1 enables it, 2 (auto) enables it when every rank is alone on its host, as NCCL does",
		func(p *Params, n int) { p.PatEnable = n }),
	intKnob("NCCL_NVLS_ENABLE", "2", 0, 2, "NVLS (one host) and NVLS_TREE (across hosts) over shared memory: 0 disables them, 1 enables them wherever they can run, 2 (auto) enables them only for the collectives NCCL_ALGO names them for",
		func(p *Params, n int) { p.NVLSEnable = n }),
	{
		name: "NCCL_NVLS_CHUNKSIZE", kind: KindInt, def: "131072",
		allowed: fmt.Sprintf("a positive multiple of 16 bytes, at most %d", maxNVLSChunk),
		doc:     "bytes of one NVLS chunk: a slot of the multicast regions (8 slots per local rank and channel) and the most an NVLS step moves",
		parse: func(p *Params, v string) error {
			n, err := strconv.Atoi(v)
			switch {
			case err != nil || n <= 0 || n%16 != 0:
				return errors.New("want a positive multiple of 16 bytes")
			case n > maxNVLSChunk:
				return fmt.Errorf("want at most %d bytes (8 such slots per local rank and channel live in /dev/shm)", maxNVLSChunk)
			}
			p.NVLSChunkSize = n
			return nil
		},
	},
	{
		name: "CC_ONESHOT_BYTES", kind: KindInt, def: "262144",
		allowed: fmt.Sprintf("0, or a multiple of 128 bytes up to %d", maxOneShotBytes),
		doc:     "bytes of one slot of the OneShot rows' staging area (two per local rank, allocated in /dev/shm at Init when every rank is on one host, or on a host of several ranks when staged HierRecDbl may run); a call larger than a slot runs in slot-sized pieces; 0 turns the OneShot rows and staged HierRecDbl off",
		parse: func(p *Params, v string) error {
			n, err := strconv.Atoi(v)
			switch {
			case err != nil || n < 0 || n%128 != 0:
				return errors.New("want 0 or a multiple of 128 bytes")
			case n > maxOneShotBytes:
				return fmt.Errorf("want at most %d bytes (two such slots per local rank live in /dev/shm)", maxOneShotBytes)
			}
			p.OneShotBytes = n
			return nil
		},
	},
	intKnob("CC_TCP_SPIN_US", "50", 0, 100000, "microseconds an LL/LL128 receive over TCP polls its socket before it blocks (connections of one socket); none when the machine's ranks outnumber its cores",
		func(p *Params, n int) { p.TCPSpin = time.Duration(n) * time.Microsecond }),
	intKnob("CC_SHM_SPIN_US", "1000", 0, 100000, "microseconds a shared-memory wait polls before sleeping on a futex; with more ranks on the host than cores it yields the core between polls instead, for 2 ms",
		func(p *Params, n int) { p.SHMSpin = time.Duration(n) * time.Microsecond }),
	{
		name: "NCCL_TUNER_CONFIG_FILE", kind: KindString, allowed: "a file path (CSV rows as NCCL's example tuner plugin reads them)",
		doc: "rows that override the tuner for the calls they cover (collective, size range, algorithm, protocol, channels, nodes, ranks); read by rank 0 and sent to every rank at Init",
		parse: func(p *Params, v string) error {
			p.TunerConfigFile = v
			return nil
		},
	},
	{
		name: "CC_TUNE_FILE", kind: KindString, allowed: "a file path (JSON with the tuner's tables, README: The tuner)",
		doc: "the tuner's constants, read by rank 0 and sent to every rank at Init; unset: the built-in ones",
		parse: func(p *Params, v string) error {
			p.TuneFile = v
			return nil
		},
	},
	{
		name: "CC_HOST_ID", kind: KindString, allowed: "any text without spaces, at most 128 bytes",
		doc: "host identity that decides which ranks share memory; unset: hostname + boot id. Ranks with different values use TCP even on one machine",
		parse: func(p *Params, v string) error {
			if len(v) > 128 || strings.ContainsAny(v, " \t\n") {
				return errors.New("want text without spaces, at most 128 bytes")
			}
			p.HostID = v
			return nil
		},
	},
}, append(ctringKnobs, collnetKnobs...)...)

func boolKnob(name, def, doc string, set func(*Params, bool)) knob {
	return knob{
		name: name, kind: KindBool, def: def, allowed: "0, 1", doc: doc,
		parse: func(p *Params, v string) error {
			switch v {
			case "0":
				set(p, false)
			case "1":
				set(p, true)
			default:
				return errors.New("want 0 or 1")
			}
			return nil
		},
	}
}

// checks run after every knob parsed cleanly: rules that involve several.
var checks = []func(p *Params) error{checkChannels, checkSockets, checkCTRing}

func intKnob(name, def string, lo, hi int, doc string, set func(*Params, int)) knob {
	return knob{
		name: name, kind: KindInt, def: def, allowed: fmt.Sprintf("%d..%d", lo, hi), doc: doc,
		parse: func(p *Params, v string) error {
			n, err := parseIntIn(v, lo, hi)
			if err != nil {
				return err
			}
			set(p, n)
			return nil
		},
	}
}

func channelKnob(name, doc string, field func(*Params) *int) knob {
	return intKnob(name, "", 1, MaxChannelCount, doc, func(p *Params, n int) { *field(p) = n })
}

// buffSizeKnob is the FIFO size of protocol pr; its default is NCCL's,
// pr.DefaultBuffSize().
func buffSizeKnob(name string, pr protocols.Proto, field func(*Params) *int) knob {
	return knob{
		name: name, kind: KindInt, def: strconv.Itoa(pr.DefaultBuffSize()),
		doc: fmt.Sprintf("bytes of one %s-protocol connection FIFO", pr),
		allowed: fmt.Sprintf("a positive multiple of %d bytes (so each of the %d FIFO slots holds whole 128-byte LL128 lines), at most %d",
			buffSizeQuantum, protocols.NSteps, maxBuffSize),
		parse: func(p *Params, v string) error {
			n, err := strconv.Atoi(v)
			switch {
			case err != nil || n <= 0:
				return errors.New("want a positive integer number of bytes")
			case n%buffSizeQuantum != 0:
				return fmt.Errorf("want a multiple of %d bytes: each of the %d FIFO slots (size/%d) must hold whole 128-byte LL128 lines (nearest: %s)",
					buffSizeQuantum, protocols.NSteps, protocols.NSteps, nearestMultiples(n, buffSizeQuantum))
			case n > maxBuffSize:
				return fmt.Errorf("want at most %d bytes (one FIFO per connection, channel and protocol)", maxBuffSize)
			}
			*field(p) = n
			return nil
		},
	}
}

// nearestMultiples names the positive multiples of q around n, e.g.
// "4096 or 5120".
func nearestMultiples(n, q int) string {
	below, above := n/q*q, (n/q+1)*q
	if below == 0 {
		return strconv.Itoa(above)
	}
	return fmt.Sprintf("%d or %d", below, above)
}

// parseIntIn parses a decimal integer in lo..hi.
func parseIntIn(v string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("want an integer in %d..%d", lo, hi)
	}
	return n, nil
}

// checkChannels resolves the channel knobs into MinChannels/MaxChannels:
// NCCL_NCHANNELS alone sets both; otherwise *_NCHANNELS wins over its
// *_NRINGS alias; min must not exceed max.
func checkChannels(p *Params) error {
	minName, minV := pick("NCCL_MIN_NCHANNELS", p.minNChannels, "NCCL_MIN_NRINGS", p.minNRings)
	maxName, maxV := pick("NCCL_MAX_NCHANNELS", p.maxNChannels, "NCCL_MAX_NRINGS", p.maxNRings)
	if p.nChannels != 0 {
		for _, other := range []struct {
			name string
			v    int
		}{{minName, minV}, {maxName, maxV}} {
			if other.v != 0 {
				return &Error{Name: "NCCL_NCHANNELS", Value: p.raw("NCCL_NCHANNELS"),
					Err: fmt.Errorf("cannot be combined with %s=%d: NCCL_NCHANNELS sets both the minimum and the maximum", other.name, other.v)}
			}
		}
		p.MinChannels, p.MaxChannels = p.nChannels, p.nChannels
		return nil
	}
	if minV != 0 && maxV != 0 && minV > maxV {
		return &Error{Name: minName, Value: p.raw(minName),
			Err: fmt.Errorf("greater than %s=%d (want minimum <= maximum)", maxName, maxV)}
	}
	p.MinChannels, p.MaxChannels = minV, maxV
	return nil
}

// pick returns the primary knob when set, else its alias.
func pick(name string, v int, alias string, aliasV int) (string, int) {
	if v != 0 || aliasV == 0 {
		return name, v
	}
	return alias, aliasV
}

// checkSockets enforces NCCL's MAX_SOCKETS on threads x sockets per thread.
// NCCL silently lowers NCCL_NSOCKS_PERTHREAD; we refuse.
func checkSockets(p *Params) error {
	if n := p.SocketNThreads * p.NSocksPerThread; n > maxSockets {
		return &Error{Name: "NCCL_NSOCKS_PERTHREAD", Value: p.raw("NCCL_NSOCKS_PERTHREAD"),
			Err: fmt.Errorf("times NCCL_SOCKET_NTHREADS=%d is %d sockets per connection (want at most %d)", p.SocketNThreads, n, maxSockets)}
	}
	return nil
}
