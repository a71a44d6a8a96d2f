//go:build armbe || arm64be || m68k || mips || mips64 || mips64p32 || ppc || ppc64 || s390 || s390x || shbe || sparc || sparc64

package reduce

// Element bytes are little-endian (NCCL's layout, which peers exchange as is) and the
// kernels read them as native integers and floats, so a big-endian port needs byte-swapping
// kernels first. This undefined name stops the build and says why.
var _ = reduceRequiresLittleEndianHost
