//go:build linux

package shm

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/seed-760dd1f1/cc/protocols"
)

func TestGeometryNoOverlap(t *testing.T) {
	for _, tc := range []struct {
		nranks, channels int
		buff             [protocols.NumProtos]int
	}{
		{2, 1, ncclBuff},
		{3, 2, smallBuff},
		{8, 3, ncclBuff},
		{5, 4, sizes(1000, 130, 1030)}, // sizes that are not whole lines
	} {
		g, err := newGeometry(tc.nranks, tc.channels, tc.buff, 0)
		if err != nil {
			t.Fatalf("%+v: %v", tc, err)
		}
		type span struct{ lo, hi int64 }
		var ctls, fifos []span
		for ch := 0; ch < tc.channels; ch++ {
			for from := 0; from < tc.nranks; from++ {
				for to := 0; to < tc.nranks; to++ {
					if from == to {
						continue
					}
					for p := protocols.Proto(0); int(p) < protocols.NumProtos; p++ {
						if err := g.check(ch, from, to, p); err != nil {
							t.Fatal(err)
						}
						c := int64(g.ctl(ch, from, to, p))
						ctls = append(ctls, span{c, c + ctlBytes})
						f := g.fifo(ch, from, to, p)
						if f%pageSize != 0 {
							t.Errorf("%+v: FIFO (%d,%d->%d,%v) at %d, not page aligned", tc, ch, from, to, p, f)
						}
						if g.stepBytes[p]%p.LineBytes() != 0 || p.Payload(g.stepBytes[p]) != p.Payload(tc.buff[p]/protocols.NSteps) {
							t.Errorf("%+v: %v step %d bytes (payload %d), want whole lines carrying Payload(%d) = %d",
								tc, p, g.stepBytes[p], p.Payload(g.stepBytes[p]), tc.buff[p]/protocols.NSteps, p.Payload(tc.buff[p]/protocols.NSteps))
						}
						fifos = append(fifos, span{f, f + int64(protocols.NSteps*g.stepBytes[p])})
					}
				}
			}
		}
		if got, want := len(ctls), g.nconns(); got != want {
			t.Errorf("%+v: %d connections, want %d", tc, got, want)
		}
		for _, set := range []struct {
			name     string
			spans    []span
			min, max int64
		}{{"control block", ctls, int64(g.ctlOff), int64(g.fifoOff)}, {"FIFO", fifos, int64(g.fifoOff), g.size}} {
			for i, a := range set.spans {
				if a.lo < set.min || a.hi > set.max {
					t.Errorf("%+v: %s %d = [%d,%d) outside [%d,%d)", tc, set.name, i, a.lo, a.hi, set.min, set.max)
				}
				for j, b := range set.spans[:i] {
					if a.lo < b.hi && b.lo < a.hi {
						t.Errorf("%+v: %s %d [%d,%d) overlaps %d [%d,%d)", tc, set.name, i, a.lo, a.hi, j, b.lo, b.hi)
					}
				}
			}
		}
	}
}

func TestGeometryErrors(t *testing.T) {
	for _, tc := range []struct {
		nranks, channels int
		buff             [protocols.NumProtos]int
		want             string
	}{
		{0, 1, ncclBuff, "local rank count 0: want 1..1024"},
		{2, 0, ncclBuff, "channel count 0: want 1..65536"},
		{2, 1, sizes(7, 1<<19, 4915200), "Simple buffer size 7 (NCCL_BUFFSIZE): want at least 8 bytes"},
		{2, 1, sizes(1<<22, 100, 4915200), "LL buffer size 100 (NCCL_LL_BUFFSIZE): want at least 128 bytes (8 steps of one 16-byte line)"},
		{2, 1, sizes(1<<22, 1<<19, 1000), "LL128 buffer size 1000 (NCCL_LL128_BUFFSIZE): want at least 1024 bytes"},
		{2, 1, sizes(1<<22, -1, 4915200), "LL buffer size -1"},
		{1024, 64, sizes(1<<34, 1<<19, 4915200), "want at most"},
	} {
		_, err := newGeometry(tc.nranks, tc.channels, tc.buff, 0)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("newGeometry(%d, %d, %v) = %v, want an error containing %q", tc.nranks, tc.channels, tc.buff, err, tc.want)
		}
	}
}

func TestGeometryChecks(t *testing.T) {
	g, err := newGeometry(3, 2, smallBuff, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ch, from, to int
		p            protocols.Proto
		want         string
	}{
		{2, 0, 1, protocols.LL, "channel 2: want 0..1"},
		{-1, 0, 1, protocols.LL, "channel -1"},
		{0, 3, 1, protocols.LL, "local ranks 3 -> 1: want 0..2"},
		{0, 1, 1, protocols.LL, "local rank 1 cannot connect to itself"},
		{0, 0, 1, protocols.Proto(7), "protocol Proto(7): want Simple, LL or LL128"},
	} {
		err := g.check(tc.ch, tc.from, tc.to, tc.p)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("check(%d, %d, %d, %v) = %v, want %q", tc.ch, tc.from, tc.to, tc.p, err, tc.want)
		}
	}
}

// TestGeometryLayoutOrder pins the segment format: in each directed pair,
// the control blocks and FIFOs of Simple, LL and LL128 follow each other in
// that order, as segVersion 1 lays them out.
func TestGeometryLayoutOrder(t *testing.T) {
	g, err := newGeometry(3, 2, smallBuff, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctl := g.ctl(1, 2, 0, protocols.Simple)
	fifo := g.fifo(1, 2, 0, protocols.Simple)
	for i, p := range []protocols.Proto{protocols.Simple, protocols.LL, protocols.LL128} {
		if got, want := g.ctl(1, 2, 0, p), ctl+i*ctlBytes; got != want {
			t.Errorf("ctl(%v) = %d, want %d", p, got, want)
		}
		if got := g.fifo(1, 2, 0, p); got != fifo {
			t.Errorf("fifo(%v) = %d, want %d", p, got, fifo)
		}
		fifo += int64(g.fifoBytes[p])
	}
}

func TestSegmentName(t *testing.T) {
	names := map[string]string{}
	for _, jh := range [][2]string{
		{"local-0123456789abcdef", "node1"},
		{"a-b", "c"}, {"a", "b-c"}, // alike once joined
		{"job/../x", "host"}, {"job_.._x", "host"}, // alike once made readable
		{strings.Repeat("j", 300), strings.Repeat("h", 300)},
		{"", ""},
	} {
		n := segmentName(jh[0], jh[1])
		if n != segmentName(jh[0], jh[1]) {
			t.Errorf("segmentName(%q, %q) is not stable", jh[0], jh[1])
		}
		if !strings.HasPrefix(n, namePrefix) || len(n) > 200 || strings.ContainsAny(n, "/\x00 ") {
			t.Errorf("segmentName(%q, %q) = %q: want a short file name starting %q", jh[0], jh[1], n, namePrefix)
		}
		if prev, ok := names[n]; ok {
			t.Errorf("segmentName(%q, %q) = %q, the same as for %s", jh[0], jh[1], n, prev)
		}
		names[n] = jh[0] + "|" + jh[1]
	}
}

func TestParseProcStat(t *testing.T) {
	rest := " 1 100 100 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 %s 1000 100"
	for _, tc := range []struct {
		in    string
		state byte
		start uint64
		err   string
	}{
		{"1234 (cc-perf) S" + strings.Replace(rest, "%s", "987654", 1), 'S', 987654, ""},
		{"1234 (a (b) c) Z" + strings.Replace(rest, "%s", "5", 1), 'Z', 5, ""},
		{"1234 (x) ) R" + strings.Replace(rest, "%s", "6", 1), 'R', 6, ""},
		{"1234 (x S 1 2", 0, 0, "no ')'"},
		{"1234 (x) S 1 2 3", 0, 0, "4 fields after the command name, want at least 20"},
		{"1234 (x) SS" + strings.Replace(rest, "%s", "6", 1), 0, 0, `state "SS"`},
		{"1234 (x) S" + strings.Replace(rest, "%s", "-6", 1), 0, 0, `start time "-6"`},
		{"1234 (x) S" + strings.Replace(rest, "%s", "18446744073709551616", 1), 0, 0, `start time "18446744073709551616"`},
		{"1234 (x) S" + strings.Replace(rest, "%s", "18446744073709551615", 1), 'S', 18446744073709551615, ""},
		{"1234 (x)\tS\n" + strings.Replace(rest, " ", "\t", -1), 0, 0, `start time "%s"`},
	} {
		got, err := parseProcStat([]byte(tc.in))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseProcStat(%q) = %+v, %v; want error %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got.state != tc.state || got.start != tc.start {
			t.Errorf("parseProcStat(%q) = %+v, %v; want state %c start %d", tc.in, got, err, tc.state, tc.start)
		}
	}
	if st, err := readProcStat(os.Getpid()); err != nil || st.state != 'R' && st.state != 'S' {
		t.Errorf("readProcStat(self) = %+v, %v; want a running process", st, err)
	}
	if _, err := readProcStat(1 << 30); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("readProcStat(no such pid) = %v, want a not-exist error", err)
	}
}

// TestLivenessAllocatesNothing: a waiter whose peer is slow checks the
// peer's liveness in the middle of a call (every futexTimeout), and a
// repeated call must allocate nothing, however slow the machine.
func TestLivenessAllocatesNothing(t *testing.T) {
	self, err := readSelf()
	if err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(100, func() {
		if ownerLiveness(self.pid, self.start, self.pidNS, self.pidNS) != alive {
			t.Fatal("this process is not alive")
		}
	}); allocs != 0 {
		t.Errorf("ownerLiveness allocates %v times per call, want 0", allocs)
	}
}

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("1 (init) S 0 1 1 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 12 1000 100"))
	f.Add([]byte("5 ((() R 1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseProcStat(b)
		if err != nil {
			return
		}
		// What it returns are fields 3 and 22 counted after the last ')'.
		f := bytes.FieldsFunc(b[bytes.LastIndexByte(b, ')')+1:], func(r rune) bool { return r < 0x80 && unicode.IsSpace(r) })
		if len(f) < 20 {
			t.Fatalf("parseProcStat(%q) = %+v with %d fields", b, st, len(f))
		}
		start, perr := strconv.ParseUint(string(f[19]), 10, 64)
		if len(f) < 20 || !bytes.Equal(f[0], []byte{st.state}) || perr != nil || start != st.start {
			t.Fatalf("parseProcStat(%q) = %+v: not fields 3 and 22", b, st)
		}
	})
}
