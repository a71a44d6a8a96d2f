package reduce

import (
	"fmt"
	"strings"
	"sync/atomic"
)

// level is an implementation level of the kernels: which instruction set the kernels that
// have assembly use. Every level falls back to the portable kernel where it has none.
type level uint8

const (
	levelPortable level = iota // plain Go
	levelAVX2                  // AVX2 (+F16C for half): 256-bit vectors, tails in Go
	levelAVX512                // AVX-512 F/BW/VL: 512-bit vectors, masked tails

	numLevels = iota
)

var levelNames = [numLevels]string{"portable", "avx2", "avx512"}

func (l level) String() string { return levelNames[l] }

// asmKernel is an assembly kernel and its granularity: it handles a multiple of block
// elements (block is a power of two; 1 when the kernel does its own masked tail), and the
// portable kernel does the rest. nt, if set, is the same kernel with non-temporal stores for
// large calls: it handles multiples of ntBlock elements into a 64-byte aligned dst.
type asmKernel struct {
	fn      kernelFn
	block   int
	nt      kernelFn
	ntBlock int
}

// supported[level] says whether this build and CPU can run a level; asmKernels[level][type][kind]
// holds the assembly for the supported levels (a nil fn means "use the portable kernel").
// archKernels is in the architecture's file.
var supported, asmKernels = archKernels()

// activeLevel is the level NewFunc binds new Funcs to: the best supported one, unless
// SetImplementation chose another.
var activeLevel atomic.Uint32

func init() {
	for l := numLevels - 1; l >= 0; l-- {
		if supported[l] {
			activeLevel.Store(uint32(l))
			break
		}
	}
}

// Implementation returns the name of the kernel implementation new Funcs use: "avx512",
// "avx2" or "portable" (for NCCL_DEBUG=INFO style logging).
func Implementation() string { return level(activeLevel.Load()).String() }

// Implementations returns the implementations this build and CPU can run, best last.
func Implementations() []string {
	var names []string
	for l := range numLevels {
		if supported[l] {
			names = append(names, levelNames[l])
		}
	}
	return names
}

// SetImplementation makes Funcs created afterwards use the named implementation (one of
// Implementations()). It is process-wide and meant for a knob or a benchmark comparing
// implementations; Funcs already created keep theirs. Every implementation gives the same
// bits.
func SetImplementation(name string) error {
	for l := range numLevels {
		if name == levelNames[l] {
			if !supported[l] {
				return fmt.Errorf("kernel implementation %q not supported by this CPU or build: allowed %s",
					name, strings.Join(Implementations(), " "))
			}
			activeLevel.Store(uint32(l))
			return nil
		}
	}
	return fmt.Errorf("unknown kernel implementation %q: allowed %s", name, strings.Join(Implementations(), " "))
}
