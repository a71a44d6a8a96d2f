package protocols

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestLLWord(t *testing.T) {
	tests := []struct {
		data, flag uint32
		want       uint64
	}{
		{0, 0, 0},
		{1, 0, 1},
		{0, 1, 1 << 32},
		{0xdeadbeef, 0x01020304, 0x01020304_deadbeef},
		{0xffffffff, 0xffffffff, 0xffffffff_ffffffff},
	}
	for _, tt := range tests {
		got := LLWord(tt.data, tt.flag)
		if got != tt.want {
			t.Errorf("LLWord(%#x, %#x) = %#x, want %#x", tt.data, tt.flag, got, tt.want)
		}
		if d, f := LLSplit(got); d != tt.data || f != tt.flag {
			t.Errorf("LLSplit(%#x) = %#x, %#x; want %#x, %#x", got, d, f, tt.data, tt.flag)
		}
	}
}

func FuzzLLWord(f *testing.F) {
	f.Add(uint32(0), uint32(0))
	f.Add(uint32(0xffffffff), uint32(1))
	f.Fuzz(func(t *testing.T, data, flag uint32) {
		if d, fl := LLSplit(LLWord(data, flag)); d != data || fl != flag {
			t.Fatalf("LLSplit(LLWord(%#x, %#x)) = %#x, %#x", data, flag, d, fl)
		}
	})
}

func TestLLFlagAndClean(t *testing.T) {
	flags := []struct {
		step uint64
		want uint32
	}{
		{0, 1}, {7, 8}, {1<<32 - 2, 0xffffffff}, {1<<32 - 1, 0}, {1 << 32, 1}, {1<<40 + 5, 6},
	}
	for _, tt := range flags {
		if got := LLFlag(tt.step); got != tt.want {
			t.Errorf("LLFlag(%#x) = %#x, want %#x", tt.step, got, tt.want)
		}
	}
	cleans := []struct {
		step uint64
		want bool
	}{
		{0, false}, {0x7ffffff7, false}, {0x7ffffff8, true}, {0x7fffffff, true}, {0x80000000, false},
		{0xfffffff7, false}, {0xfffffff8, true}, {0xffffffff, true}, {0x1_7ffffff8, true}, {0x1_00000000, false},
	}
	for _, tt := range cleans {
		if got := LLClean(tt.step); got != tt.want {
			t.Errorf("LLClean(%#x) = %v, want %v", tt.step, got, tt.want)
		}
	}
	// With narrow flags, exactly eight consecutive steps in each half period clean.
	for bits := uint(5); bits <= 12; bits++ {
		half := uint64(1) << (bits - 1)
		for start := uint64(0); start < 4*half; start += half {
			var got []uint64
			for s := start; s < start+half; s++ {
				if llClean(s, bits) {
					got = append(got, s-start)
				}
			}
			want := []uint64{half - 8, half - 7, half - 6, half - 5, half - 4, half - 3, half - 2, half - 1}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("bits %d, steps [%d,%d): clean at offsets %v, want %v", bits, start, start+half, got, want)
			}
		}
	}
}

func TestLLRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n <= 41; n++ {
		src := make([]byte, n)
		for i := range src {
			src[i] = byte(r.Uint32())
		}
		lines := make([]uint64, LLLineWords*LLLines(n))
		LLEncode(lines, src, 77)
		dst := make([]byte, n)
		if got := LLDecode(dst, lines, 77); got != n || !bytes.Equal(dst, src) {
			t.Errorf("n=%d: decode = %d bytes %x, want %d bytes %x", n, got, dst, n, src)
		}
		if got := LLDecode(dst, lines, 78); n > 0 && got != 0 {
			t.Errorf("n=%d: decode with another flag = %d bytes, want 0", n, got)
		}
		for l := 0; l < LLLines(n); l++ {
			if !LLReady(lines[2*l:], 77) || LLReady(lines[2*l:], 76) {
				t.Errorf("n=%d line %d: LLReady(77) = %v, LLReady(76) = %v; want true, false", n, l, LLReady(lines[2*l:], 77), LLReady(lines[2*l:], 76))
			}
		}
	}
}

// llView is what a reader may observe of a slot in which the sender is
// overwriting old lines (written an earlier step) with new ones: each
// 8-byte word is either its old or its new value, as chosen by isNew. On
// any machine the sender's word stores are single-copy atomic, so these are
// all the states a reader can see, whatever the interleaving and whenever
// each of its loads happens.
func llView(oldMem, newMem []uint64, isNew func(int) bool) []uint64 {
	v := make([]uint64, len(oldMem))
	for i := range v {
		if isNew(i) {
			v[i] = newMem[i]
		} else {
			v[i] = oldMem[i]
		}
	}
	return v
}

// checkLLRead decodes the view as the receiver of the new step and checks
// safety (every accepted line is entirely new and its data is the new
// payload) and progress (decoding stops only at a line with an old word).
func checkLLRead(view []uint64, payload []byte, flag uint32, isNew func(int) bool) error {
	dst := make([]byte, len(payload))
	got := LLDecode(dst, view, flag)
	if got < 0 || got > len(payload) || (got != len(payload) && got%LLLinePayload != 0) {
		return fmt.Errorf("decoded %d bytes of %d", got, len(payload))
	}
	for l := 0; l < LLLines(got); l++ {
		if !isNew(2*l) || !isNew(2*l+1) {
			return fmt.Errorf("line %d accepted with a stale word (new: %v, %v)", l, isNew(2*l), isNew(2*l+1))
		}
	}
	if !bytes.Equal(dst[:got], payload[:got]) {
		return fmt.Errorf("torn data: got %x, want %x", dst[:got], payload[:got])
	}
	if got < len(payload) {
		if l := got / LLLinePayload; isNew(2*l) && isNew(2*l+1) {
			return fmt.Errorf("line %d is ready but was not accepted", l)
		}
	}
	return nil
}

// llPair returns the slot's old content (old, written at an earlier step
// with oldFlag) and the new one (payload with newFlag).
func llPair(old, payload []byte, oldFlag, newFlag uint32) (oldMem, newMem []uint64) {
	n := len(payload)
	oldMem = make([]uint64, LLLineWords*LLLines(n))
	newMem = make([]uint64, len(oldMem))
	LLEncode(oldMem, resize(old, n), oldFlag)
	LLEncode(newMem, payload, newFlag)
	return oldMem, newMem
}

// resize cycles b to n bytes.
func resize(b []byte, n int) []byte {
	out := make([]byte, n)
	if len(b) == 0 {
		return out
	}
	for i := range out {
		out[i] = b[i%len(b)]
	}
	return out
}

// TestLLInterleavingsExhaustive checks every reader view of slices of up to
// three lines, for a slot last written 8 steps earlier and one far older.
func TestLLInterleavingsExhaustive(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for n := 1; n <= 3*LLLinePayload; n++ {
		for _, age := range []uint64{8, 8 << 20} {
			step := uint64(1<<32 - 3) // the new step's flag wraps to 0
			payload, old := make([]byte, n), make([]byte, n)
			for i := range payload {
				payload[i], old[i] = byte(r.Uint32()), byte(r.Uint32())
			}
			newFlag, oldFlag := LLFlag(step), LLFlag(step-age)
			oldMem, newMem := llPair(old, payload, oldFlag, newFlag)
			for mask := 0; mask < 1<<len(oldMem); mask++ {
				isNew := func(i int) bool { return mask>>i&1 == 1 }
				if err := checkLLRead(llView(oldMem, newMem, isNew), payload, newFlag, isNew); err != nil {
					t.Fatalf("n=%d age %d view %b: %v", n, age, mask, err)
				}
			}
		}
	}
}

// FuzzLLInterleaving checks the reader against the sender's word stores in
// transport order (every prefix) and against arbitrary views, over
// payloads, steps (the flag wraps at 2^32) and the age of the old lines (up
// to 2^31 steps, the bound LLClean keeps).
func FuzzLLInterleaving(f *testing.F) {
	f.Add([]byte("old data"), []byte("new payload!"), uint64(0), uint32(1), []byte{0x5a})
	f.Add([]byte{}, []byte{1}, uint64(1<<32-1), uint32(7), []byte{})
	f.Add([]byte{9, 9}, bytes.Repeat([]byte{0xff}, 70), uint64(1<<32-9), uint32(1<<28), []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	f.Fuzz(func(t *testing.T, old, payload []byte, step uint64, age uint32, mask []byte) {
		if len(payload) == 0 || len(payload) > 512 {
			return
		}
		a := (uint64(age)%(1<<28) + 1) * NSteps // same slot, at most 2^31 steps old
		newFlag, oldFlag := LLFlag(step), LLFlag(step-a)
		oldMem, newMem := llPair(old, payload, oldFlag, newFlag)
		for k := 0; k <= len(oldMem); k++ { // the sender has stored words [0, k)
			isNew := func(i int) bool { return i < k }
			if err := checkLLRead(llView(oldMem, newMem, isNew), payload, newFlag, isNew); err != nil {
				t.Fatalf("after %d stores: %v", k, err)
			}
		}
		isNew := func(i int) bool { return len(mask) > 0 && mask[i/8%len(mask)]>>(i%8)&1 == 1 }
		if err := checkLLRead(llView(oldMem, newMem, isNew), payload, newFlag, isNew); err != nil {
			t.Fatalf("view %x: %v", mask, err)
		}
	})
}

// llSlice is one posted slice of a simulated LL connection.
type llSlice struct{ nsteps, nbytes int }

// simulateLL drives one LL connection's FIFO with flags of the given width
// through the slices, every step number in turn as the shm transport does.
// Before the sender writes a step, the receiver may already be polling the
// lines it needs; simulateLL reports the first such line that would look
// ready with stale data. clean selects LLClean's rewriting.
func simulateLL(bits uint, stepLines int, slices []llSlice, clean bool) error {
	fifo := make([]uint64, NSteps*stepLines*LLLineWords)
	stepPayload := stepLines * LLLinePayload
	src := make([]byte, NSteps*stepPayload)
	var step uint64
	for _, sl := range slices {
		for pass := 0; pass < 2; pass++ { // pass 0: the receiver polls; pass 1: the sender writes
			for k := 0; k < sl.nsteps; k++ {
				s := step + uint64(k)
				flag := uint32(llFlag(s, bits))
				slot := fifo[int(s%NSteps)*stepLines*LLLineWords:][:stepLines*LLLineWords]
				n := min(max(sl.nbytes-k*stepPayload, 0), stepPayload)
				lines := LLLines(n)
				if k == 0 && lines == 0 {
					lines = 1 // a slice always writes its first line
				}
				if pass == 0 {
					for l := 0; l < lines; l++ {
						if LLReady(slot[l*LLLineWords:], flag) {
							return fmt.Errorf("step %d (slot %d) line %d: stale line looks ready (flag %#x)", s, s%NSteps, l, flag)
						}
					}
					continue
				}
				for i := range src[:n] {
					src[i] = byte(s) ^ byte(i)
				}
				LLEncode(slot, src[:n], flag)
				if n == 0 && k == 0 {
					LLFill(slot[:LLLineWords], flag)
				}
				if clean && llClean(s, bits) {
					LLFill(slot[lines*LLLineWords:], flag)
				}
			}
		}
		step += uint64(sl.nsteps)
	}
	return nil
}

// randomSlices are mostly tiny, so that the upper lines of each slot are
// written rarely and their flags grow old.
func randomSlices(r *rand.Rand, count, stepLines int) []llSlice {
	out := make([]llSlice, count)
	for i := range out {
		ns := 1 + r.IntN(NSteps)
		limit := ns * stepLines * LLLinePayload
		var nb int
		switch x := r.IntN(100); {
		case x < 70:
			nb = r.IntN(LLLinePayload + 1)
		case x < 95:
			nb = r.IntN(limit/2 + 1)
		default:
			nb = limit
		}
		out[i] = llSlice{ns, nb}
	}
	return out
}

func TestLLWrapCleaning(t *testing.T) {
	for bits := uint(4); bits <= 12; bits++ {
		for _, stepLines := range []int{1, 2, 4, 9} {
			r := rand.New(rand.NewPCG(uint64(bits), uint64(stepLines)))
			slices := randomSlices(r, 20000, stepLines)
			if err := simulateLL(bits, stepLines, slices, true); err != nil {
				t.Errorf("%d-bit flags, %d lines per step: %v", bits, stepLines, err)
			}
		}
	}
}

// TestLLWrapNeedsCleaning is the control: without LLClean's rewriting the
// simulation does find a stale line that looks ready once the flags wrap.
func TestLLWrapNeedsCleaning(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	err := simulateLL(6, 4, randomSlices(r, 20000, 4), false)
	if err == nil {
		t.Fatal("without cleaning, no stale line looked ready: the simulation cannot detect flag aliasing")
	}
	t.Logf("without cleaning (expected): %v", err)
}

func FuzzLLWrap(f *testing.F) {
	f.Add(uint64(1), uint8(6), uint8(4), uint16(3000))
	f.Add(uint64(2), uint8(4), uint8(1), uint16(500))
	f.Fuzz(func(t *testing.T, seed uint64, bits, stepLines uint8, count uint16) {
		b := 4 + uint(bits)%9
		sl := 1 + int(stepLines)%16
		r := rand.New(rand.NewPCG(seed, uint64(b)))
		if err := simulateLL(b, sl, randomSlices(r, int(count)%5000, sl), true); err != nil {
			t.Fatalf("%d-bit flags, %d lines per step: %v", b, sl, err)
		}
	})
}
