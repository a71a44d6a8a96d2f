package param

import (
	"strings"
	"testing"
)

// FuzzParseAlgoList: no panics; whatever parses has no empty forced row, and
// its canonical String parses back to the same matrix.
func FuzzParseAlgoList(f *testing.F) {
	for _, s := range []string{"ring", "^tree", "ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring",
		"allreduce:^tree", "ring;", "^", "a:b:c", "allreduce:ctring;reducescatter:ring,pat", " Ring , TREE "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseAlgoList(s)
		if err != nil {
			if m.Set {
				t.Errorf("ParseAlgoList(%q) failed but returned a set matrix", s)
			}
			return
		}
		checkRoundTrip(t, s, m.String(), func(f Func) (uint32, bool) { return uint32(m.For(f)), m.Forced(f) },
			func(c string) (func(Func) (uint32, bool), error) {
				m2, err := ParseAlgoList(c)
				return func(f Func) (uint32, bool) { return uint32(m2.For(f)), m2.Forced(f) }, err
			})
	})
}

// FuzzParseProtoList: as FuzzParseAlgoList, for NCCL_PROTO.
func FuzzParseProtoList(f *testing.F) {
	for _, s := range []string{"LL,Simple;allreduce:^LL", "^LL128;allreduce:LL128", "^", "LL;simple",
		"broadcast:^Simple;reduce:Simple,LL", "ll128"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseProtoList(s)
		if err != nil {
			return
		}
		checkRoundTrip(t, s, m.String(), func(f Func) (uint32, bool) { return uint32(m.For(f)), m.Forced(f) },
			func(c string) (func(Func) (uint32, bool), error) {
				m2, err := ParseProtoList(c)
				return func(f Func) (uint32, bool) { return uint32(m2.For(f)), m2.Forced(f) }, err
			})
	})
}

func checkRoundTrip(t *testing.T, in, canon string, got func(Func) (uint32, bool), reparse func(string) (func(Func) (uint32, bool), error)) {
	t.Helper()
	if strings.TrimSpace(in) != "" && canon == "" {
		t.Fatalf("%q parsed but its canonical form is empty", in)
	}
	again, err := reparse(canon)
	if err != nil {
		t.Fatalf("%q parsed, but its canonical form %q does not: %v", in, canon, err)
	}
	for f := range Func(NumFuncs) {
		row, forced := got(f)
		if row == 0 {
			t.Errorf("%q: row %v is empty", in, f)
		}
		row2, forced2 := again(f)
		if row != row2 || forced != forced2 {
			t.Errorf("%q -> %q: row %v = %#x forced %v, reparsed %#x forced %v", in, canon, f, row, forced, row2, forced2)
		}
	}
}

// FuzzParseIfFilter: no panics; whatever parses has non-empty names free of
// the syntax characters, Match of an unset filter is always true, and the
// canonical String parses back to the same filter whenever it is longer than
// one character (shorter values are ignored by design, as in NCCL).
func FuzzParseIfFilter(f *testing.F) {
	for _, s := range []string{"eth0", "^docker,lo,virbr", "^=docker0", "ib0:1,enp", "=", "^,", "e:1", "x"} {
		f.Add(s, "eth0")
	}
	f.Fuzz(func(t *testing.T, s, name string) {
		filt, err := ParseIfFilter(s)
		if err != nil {
			return
		}
		for _, n := range filt.Names {
			if n == "" || strings.ContainsAny(n, ",:^= ") || len(n) > maxIfName {
				t.Errorf("ParseIfFilter(%q): bad name %q", s, n)
			}
		}
		if !filt.IsSet() && !filt.Match(name) {
			t.Errorf("ParseIfFilter(%q) is unset but rejects %q", s, name)
		}
		canon := filt.String()
		if len(canon) <= 1 {
			return
		}
		again, err := ParseIfFilter(canon)
		if err != nil {
			t.Fatalf("ParseIfFilter(%q) -> %q does not parse: %v", s, canon, err)
		}
		if again.Exclude != filt.Exclude || again.Exact != filt.Exact || strings.Join(again.Names, ",") != strings.Join(filt.Names, ",") {
			t.Errorf("ParseIfFilter(%q) = %+v, reparsed %q = %+v", s, filt, canon, again)
		}
		if again.Match(name) != filt.Match(name) {
			t.Errorf("ParseIfFilter(%q).Match(%q) differs after round trip", s, name)
		}
	})
}

// FuzzParseSubsys: no panics; whatever parses round-trips through String.
func FuzzParseSubsys(f *testing.F) {
	for _, s := range []string{"INIT,BOOTSTRAP,ENV", "^INIT", "ALL", "^ALL", "init,,env", "^", "alloc_host"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseSubsys(s)
		if err != nil {
			return
		}
		again, err := ParseSubsys(m.String())
		if err != nil || again != m {
			t.Errorf("ParseSubsys(%q) = %#x (%s), reparsed %#x, %v", s, uint64(m), m, uint64(again), err)
		}
	})
}

// FuzzParseCommID: no panics; whatever parses re-parses from String to the
// same address.
func FuzzParseCommID(f *testing.F) {
	for _, s := range []string{"10.0.0.1:29500", "[::1]:1", "host:1", "host", "[x]:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCommID(s)
		if err != nil {
			return
		}
		again, err := ParseCommID(c.String())
		if err != nil || again != c {
			t.Errorf("ParseCommID(%q) = %+v, reparsed %q = %+v, %v", s, c, c.String(), again, err)
		}
	})
}

// FuzzLoad: no panics for any value of any knob; a failure is an *Error
// naming a table variable.
func FuzzLoad(f *testing.F) {
	f.Add(0, "abc")
	f.Add(1, "^")
	f.Add(5, "0")
	f.Fuzz(func(t *testing.T, i int, v string) {
		ks := Knobs()
		k := ks[uint(i)%uint(len(ks))]
		_, err := Load(env(k.Name + "=" + v))
		if err != nil && !strings.Contains(err.Error(), k.Name) {
			t.Errorf("Load(%s=%q): error %q does not name the variable", k.Name, v, err)
		}
	})
}

// FuzzLoadPair: as FuzzLoad, with two knobs set at once, so that the
// cross-knob checks (channels, sockets, the CTRING knobs) are fuzzed too: a
// failure names one of the two variables.
func FuzzLoadPair(f *testing.F) {
	index := func(name string) int {
		for i, k := range Knobs() {
			if k.Name == name {
				return i
			}
		}
		f.Fatalf("no knob %s", name)
		return 0
	}
	const cr = "NCCL_CTRAN_ALLREDUCE_RING_"
	f.Add(index(cr+"NUM_THREAD_BLOCKS"), "8", index(cr+"MAX_NUM_THREAD_BLOCKS"), "4")
	f.Add(index(cr+"TMPBUF_CHUNK_SIZE"), "4194304", index(cr+"TMPBUF_NUM_CHUNKS"), "9")
	f.Add(index(cr+"QP_SCALING_TH_MIN"), "-1", index(cr+"QP_SCALING_TH_MAX"), "0")
	f.Add(index("CC_CTRING_ARCH"), "default", index(cr+"BIDIR_AG_MAX_SIZE"), "-2")
	f.Add(index("NCCL_MIN_NCHANNELS"), "8", index("NCCL_MAX_NCHANNELS"), "4")
	f.Add(index("NCCL_SOCKET_NTHREADS"), "16", index("NCCL_NSOCKS_PERTHREAD"), "8")
	f.Fuzz(func(t *testing.T, i int, v string, j int, w string) {
		ks := Knobs()
		a, b := ks[uint(i)%uint(len(ks))], ks[uint(j)%uint(len(ks))]
		_, err := Load(env(a.Name+"="+v, b.Name+"="+w))
		if err != nil && !strings.Contains(err.Error(), a.Name) && !strings.Contains(err.Error(), b.Name) {
			t.Errorf("Load(%s=%q, %s=%q): error %q names neither variable", a.Name, v, b.Name, w, err)
		}
	})
}
