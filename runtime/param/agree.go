package param

import (
	"fmt"
	"strconv"
	"strings"
)

// Agreed returns, in a canonical form, the settings every rank of a job
// must share: those that decide which algorithm, protocol, FIFO geometry,
// channel count, transport or socket count a collective uses. Two ranks
// that differ in one of them would run different schedules and wait for
// each other forever, so the runtime compares them at Init (Disagreement).
// Debug output, retry counts and the like may differ.
func (p *Params) Agreed() []Setting {
	itoa := strconv.Itoa
	return []Setting{
		{"NCCL_ALGO", p.Algo.String()},
		{"NCCL_PROTO", p.Proto.String()},
		{"NCCL_BUFFSIZE", itoa(p.BuffSize)},
		{"NCCL_LL_BUFFSIZE", itoa(p.LLBuffSize)},
		{"NCCL_LL128_BUFFSIZE", itoa(p.LL128BuffSize)},
		{channelKnobs, fmt.Sprintf("min %d max %d", p.MinChannels, p.MaxChannels)},
		{"NCCL_SHM_DISABLE", strconv.FormatBool(p.SHMDisable)},
		{"NCCL_PAT_ENABLE", itoa(p.PatEnable)},
		{"NCCL_NVLS_ENABLE", itoa(p.NVLSEnable)},
		{"NCCL_NVLS_CHUNKSIZE", itoa(p.NVLSChunkSize)},
		{"CC_ONESHOT_BYTES", itoa(p.OneShotBytes)},
		{"NCCL_SOCKET_NTHREADS", itoa(p.SocketNThreads)},
		{"NCCL_NSOCKS_PERTHREAD", itoa(p.NSocksPerThread)},
		{ctringKnobNames, fmt.Sprintf("%+v", p.CTRing)},
		{"NCCL_COLLNET_ENABLE", strconv.FormatBool(p.CollNetEnable)},
		{"CC_COLLNET_SERVER", p.CollNetServer},
		{"CC_COLLNET_NHEADS", itoa(p.CollNetNHeads)},
	}
}

// channelKnobs names the channel settings as one: they resolve together.
const channelKnobs = "NCCL_NCHANNELS/NCCL_MIN_NCHANNELS/NCCL_MAX_NCHANNELS"

// ctringKnobNames names the CTRING knobs as one: together they shape a
// CTRING schedule.
const ctringKnobNames = "NCCL_CTRAN_ALLREDUCE_RING_*/CC_CTRING_ARCH"

// groupOf says which compound setting of Agreed a variable belongs to.
func groupOf(name string) string {
	switch {
	case strings.Contains(name, "CHANNELS") || strings.Contains(name, "NRINGS"):
		return channelKnobs
	case strings.HasPrefix(name, "NCCL_CTRAN_ALLREDUCE_RING_") || name == "CC_CTRING_ARCH":
		return ctringKnobNames
	}
	return name
}

// AgreedText is Agreed as text for the bootstrap's all-gather: one line
// per setting, "NAME=canonical<TAB>as given", so that ranks compare
// meanings ("Ring" and "ring" agree) and errors show what the user wrote.
func (p *Params) AgreedText() []byte {
	var b strings.Builder
	for _, x := range p.Agreed() {
		raw, _ := p.lookupRaw(x.Name)
		fmt.Fprintf(&b, "%s=%s\t%s\n", x.Name, x.Value, raw)
	}
	return []byte(b.String())
}

// lookupRaw returns what the environment gave name (for a compound
// setting, every variable of it that was set, as NAME=value), if anything.
func (p *Params) lookupRaw(name string) (string, bool) {
	var parts []string
	for _, s := range p.set {
		switch {
		case s.Name == name:
			return s.Value, true
		case groupOf(s.Name) == name:
			parts = append(parts, s.Name+"="+s.Value)
		}
	}
	return strings.Join(parts, " "), len(parts) > 0
}

// Disagreement compares every rank's AgreedText (index = rank) and returns
// an error naming the first variable on which a rank differs from rank 0,
// with both values, or nil. Every rank compares the same texts, so every
// rank returns the same error. where(r) describes rank r (e.g. its host).
func Disagreement(texts [][]byte, where func(rank int) string) error {
	type entry struct{ canon, raw string }
	parse := func(b []byte) (map[string]entry, []string) {
		m := map[string]entry{}
		var names []string
		for _, line := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
			k, v, _ := strings.Cut(line, "=")
			canon, raw, _ := strings.Cut(v, "\t")
			m[k] = entry{canon, raw}
			names = append(names, k)
		}
		return m, names
	}
	if len(texts) == 0 {
		return nil
	}
	base, names := parse(texts[0])
	for r := 1; r < len(texts); r++ {
		other, _ := parse(texts[r])
		for _, name := range names {
			a, b := base[name], other[name]
			if a.canon != b.canon {
				return fmt.Errorf("%s differs between ranks: %s on rank 0 (%s), %s on rank %d (%s): every rank of a job must use the same value",
					name, show(a), where(0), show(b), r, where(r))
			}
		}
	}
	return nil
}

// show names a value as the user gave it, or its effective value when the
// variable was not set.
func show(e struct{ canon, raw string }) string {
	switch {
	case e.raw != "":
		return strconv.Quote(e.raw)
	case e.canon == "" || e.canon == "0" || e.canon == "min 0 max 0" || strings.HasPrefix(e.canon, "{"):
		return "unset"
	}
	return fmt.Sprintf("unset (%s)", e.canon)
}
