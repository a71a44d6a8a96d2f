//go:build !purego

package reduce

import "golang.org/x/sys/cpu"

//go:generate go run ./internal/asmgen -dir .

// generatedKernel is one row of generatedKernels (kernels_gen_amd64.go).
type generatedKernel struct {
	level   level
	t       DataType
	k       kind
	fn      kernelFn
	block   int
	nt      kernelFn
	ntBlock int
}

// archKernels enables AVX2 when the CPU has it (half needs F16C too, else it stays
// portable at that level) and AVX-512 when it has AVX512F, BW and VL (BW and VL for the
// masked 16-bit tails). x/sys/cpu reports AVX and AVX-512 only when the OS saves their state.
func archKernels() (s [numLevels]bool, k [numLevels][numDataTypes][numKinds]asmKernel) {
	x := &cpu.X86
	s[levelPortable] = true
	s[levelAVX2] = x.HasAVX2
	s[levelAVX512] = x.HasAVX512F && x.HasAVX512BW && x.HasAVX512VL && x.HasAVX2
	for _, g := range generatedKernels {
		if !s[g.level] || (g.level == levelAVX2 && g.t == Float16 && !x.HasF16C) {
			continue
		}
		k[g.level][g.t][g.k] = asmKernel{fn: g.fn, block: g.block, nt: g.nt, ntBlock: g.ntBlock}
	}
	return s, k
}
