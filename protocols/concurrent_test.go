package protocols

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// fifo is a minimal in-process connection over one protocol's lines: the
// sender waits for the receiver's head, encodes a step, the receiver polls
// the lines and frees the slot. Run under -race it also checks the memory
// order of LL128: were the flag stored before the data, or the data read
// before the flag, the race detector would report the data words.
type fifo struct {
	words     []uint64
	stepWords int
	head      atomic.Uint64
}

// pollLimit bounds every poll loop of the test (each poll yields).
const pollLimit = 50_000_000

func (f *fifo) slot(step uint64) []uint64 {
	return f.words[int(step%NSteps)*f.stepWords:][:f.stepWords]
}

func stepPayloadBytes(step uint64, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(step*31) ^ byte(i*7) ^ byte(i>>8)
	}
	return b
}

func runFIFO(t *testing.T, p Proto, stepLines, steps int) {
	lw := p.LineBytes() / 8
	f := &fifo{words: make([]uint64, NSteps*stepLines*lw), stepWords: stepLines * lw}
	maxBytes := stepLines * p.LinePayload()
	size := func(step uint64) int { return 1 + int(step*2654435761%uint64(maxBytes)) }
	var wg sync.WaitGroup
	errc := make(chan error, 2)
	wg.Add(2)
	go func() { // sender
		defer wg.Done()
		for s := uint64(0); s < uint64(steps); s++ {
			for i := 0; f.head.Load()+NSteps <= s; i++ {
				if i == pollLimit {
					errc <- fmt.Errorf("sender: step %d never freed", s)
					return
				}
				runtime.Gosched()
			}
			src := stepPayloadBytes(s, size(s))
			switch p {
			case LL:
				LLEncode(f.slot(s), src, LLFlag(s))
			case LL128:
				LL128Encode(f.slot(s), src, LL128Flag(s))
			}
		}
	}()
	go func() { // receiver
		defer wg.Done()
		for s := uint64(0); s < uint64(steps); s++ {
			n := size(s)
			dst := make([]byte, n)
			done := 0
			for i := 0; done < n; i++ {
				if i == pollLimit {
					errc <- fmt.Errorf("receiver: step %d never arrived", s)
					return
				}
				switch p {
				case LL:
					done += LLDecode(dst[done:], f.slot(s)[done/LLLinePayload*LLLineWords:], LLFlag(s))
				case LL128:
					done += LL128Decode(dst[done:], f.slot(s)[done/LL128LinePayload*LL128LineWords:], LL128Flag(s))
				}
				if done < n {
					runtime.Gosched()
				}
			}
			if want := stepPayloadBytes(s, n); string(dst) != string(want) {
				errc <- fmt.Errorf("step %d: got %x, want %x", s, dst, want)
				return
			}
			f.head.Store(s + 1)
		}
	}()
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Errorf("%v: %v", p, err)
	}
}

func TestConcurrentFIFO(t *testing.T) {
	steps := 20000
	if testing.Short() {
		steps = 2000
	}
	for _, p := range []Proto{LL, LL128} {
		for _, lines := range []int{1, 3, 64} {
			t.Run(fmt.Sprintf("%v/%dlines", p, lines), func(t *testing.T) { runFIFO(t, p, lines, steps) })
		}
	}
}
