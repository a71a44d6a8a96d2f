//go:build !amd64 || purego

package reduce

// archKernels: no assembly on this architecture or under the purego build tag.
func archKernels() (s [numLevels]bool, k [numLevels][numDataTypes][numKinds]asmKernel) {
	s[levelPortable] = true
	return s, k
}
