//go:build linux

package reduce

import (
	"math/rand/v2"
	"syscall"
	"testing"
)

// guarded returns n bytes that end exactly where an inaccessible page begins, so a kernel
// reading or writing one byte past the end crashes the test. free unmaps it.
func guarded(t *testing.T, n int) (s []byte, free func()) {
	t.Helper()
	page := syscall.Getpagesize()
	size := (n+page-1)/page*page + page
	mem, err := syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Skipf("mmap: %v", err)
	}
	if err := syscall.Mprotect(mem[size-page:], syscall.PROT_NONE); err != nil {
		t.Fatalf("mprotect: %v", err)
	}
	end := size - page
	return mem[end-n : end : end], func() { _ = syscall.Munmap(mem) }
}

// TestNoAccessPastEnd runs every vector kernel on operands that each end at an
// inaccessible page, for every tail length, with cached and with non-temporal stores.
func TestNoAccessPastEnd(t *testing.T) {
	levels := vectorLevels()
	if len(levels) == 0 {
		t.Skip("no vector implementation on this machine or build")
	}
	r := rand.New(rand.NewPCG(15, 16))
	for _, nt := range []bool{false, true} {
		if nt {
			withNT(t, 0)
		}
		for _, dt := range []DataType{Float32, Float64, Float16, Bfloat16} {
			for _, n := range testLengths {
				nb := n * dt.Size()
				dst, f1 := guarded(t, nb)
				a, f2 := guarded(t, nb)
				b, f3 := guarded(t, nb)
				fill(r, dt, a, n)
				fill(r, dt, b, n)
				for _, c := range []funcConfig{{Sum, 2, 0}, {Prod, 2, 0}, {Max, 2, 0}, {Min, 2, 0}, {PreMulSum, 2, 0.5}} {
					for _, l := range levels {
						f := newFuncAt(t, l, dt, c.op, c.nranks, c.scalar)
						for _, m := range methods {
							m.run(f, dst, a, b)
						}
					}
				}
				f1()
				f2()
				f3()
			}
		}
	}
}
