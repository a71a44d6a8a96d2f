// Command asmgen writes the amd64 reduction kernels of package reduce: kernels_amd64.s and
// their Go declarations, kernels_gen_amd64.go. Run it through go generate in runtime/reduce;
// a test checks that the committed files are what it writes.
//
// Every kernel has the Go signature
//
//	func name(dst, a, b unsafe.Pointer, n int, s uint64)
//
// and computes n elements. The element types are float (F32), double (F64), half (F16) and
// bfloat16 (BF16); half and bfloat16 are widened to float32 lanes, computed with one float32
// instruction and rounded back to nearest-even (VCVTPS2PH $0 for half; for bfloat16 the
// integer trick u + 0x7fff + lsb, because VCVTNEPS2BF16 flushes denormals). The kinds are
// sum, prod, max, min (dst = a op b), presum (dst = a + round(b*s)) and pre (dst = round(a*s)).
// Operand order matters for NaNs and signed zeros: the op is always "V<op>PS b, a, dst", so a
// is the instruction's first source (its NaN wins an add) and max/min return b when the
// comparison is unordered or equal, which the portable Go kernels reproduce.
//
// AVX2 kernels do multiples of one vector (the caller runs the rest in Go); AVX-512 kernels
// finish with a masked vector, so they take any n. Both unroll four vectors per iteration.
// Each kernel also has an ...NT variant for large calls (streamingISA says which level's a
// level uses): full unrolled iterations only (the caller does the rest), stores that bypass
// the cache (VMOVNTPS/PD/DQ: no read-for-ownership of dst, as the runtime's memmove does for
// big copies) into a 64-byte aligned dst, and an SFENCE before returning.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
)

type isa struct {
	name   string // suffix of the function names
	level  string // the Go level constant
	v, h   string // vector register prefix and the half-width prefix (Z/Y or Y/X)
	lanes  int    // float32 lanes per vector
	masked bool   // has a masked tail
	// Registers: a and b operands, the scalar, the bfloat16 constants 0x40, 1 and 0x7fff,
	// temporaries of the bfloat16 rounding, and a scratch for broadcasts before the loop.
	a, b              [4]int
	s, c40, c1, c7fff int
	t1, t2, t3, t4    int
	scratch           int
}

var isas = []isa{
	{name: "AVX2", level: "levelAVX2", v: "Y", h: "X", lanes: 8,
		a: [4]int{0, 1, 2, 3}, b: [4]int{4, 5, 6, 7}, s: 15, c40: 12, c1: 13, c7fff: 14,
		t1: 8, t2: 9, t3: 10, t4: 11, scratch: 11},
	{name: "AVX512", level: "levelAVX512", v: "Z", h: "Y", lanes: 16, masked: true,
		a: [4]int{0, 1, 2, 3}, b: [4]int{4, 5, 6, 7}, s: 31, c40: 28, c1: 29, c7fff: 30,
		t1: 16, t2: 17, scratch: 15},
}

type dtype struct {
	name   string // suffix of the function names
	goType string // the reduce.DataType constant
	size   int    // bytes per element
	wide   bool   // 64-bit lanes
}

var dtypes = []dtype{
	{"F32", "Float32", 4, false},
	{"F64", "Float64", 8, true},
	{"F16", "Float16", 2, false},
	{"BF16", "Bfloat16", 2, false},
}

type kindDef struct {
	name   string // prefix of the function names
	goKind string // the reduce kind constant
	insn   string // the vector operation, without the PS/PD suffix
}

var kinds = []kindDef{
	{"sum", "kSum", "VADD"},
	{"prod", "kProd", "VMUL"},
	{"max", "kMax", "VMAX"},
	{"min", "kMin", "VMIN"},
	{"presum", "kPreSum", ""},
	{"pre", "kPre", ""},
}

const unroll = 4

// gen accumulates one function body.
type gen struct {
	buf     bytes.Buffer
	isa     isa
	t       dtype
	k       kindDef
	tailReg bool // emitting the masked tail
	nt      bool // non-temporal variant: full unrolled iterations only, streaming stores
}

func (g *gen) ins(format string, args ...any) { fmt.Fprintf(&g.buf, "\t"+format+"\n", args...) }
func (g *gen) label(l string)                 { fmt.Fprintf(&g.buf, "%s:\n", l) }

func (g *gen) V(r int) string { return fmt.Sprintf("%s%d", g.isa.v, r) }
func (g *gen) H(r int) string { return fmt.Sprintf("%s%d", g.isa.h, r) }
func (g *gen) X(r int) string { return fmt.Sprintf("X%d", r) }

func (g *gen) ps() string {
	if g.t.wide {
		return "PD"
	}
	return "PS"
}

// lanes is the number of elements per vector.
func (g *gen) lanes() int {
	if g.t.wide {
		return g.isa.lanes / 2
	}
	return g.isa.lanes
}

// load widens the vector of elements at off(base) into register r as float32/float64 lanes.
func (g *gen) load(r int, base string, off int) {
	m := mem(base, off)
	switch g.t.name {
	case "F32", "F64":
		mov := "VMOVU" + g.ps()
		if g.tailReg {
			g.ins("%s.Z %s, K1, %s", mov, m, g.V(r))
		} else {
			g.ins("%s %s, %s", mov, m, g.V(r))
		}
	case "F16":
		if g.tailReg {
			g.ins("VMOVDQU16.Z %s, K1, %s", m, g.H(r))
			g.ins("VCVTPH2PS %s, %s", g.H(r), g.V(r))
		} else {
			g.ins("VCVTPH2PS %s, %s", m, g.V(r))
		}
	case "BF16":
		if g.tailReg {
			g.ins("VMOVDQU16.Z %s, K1, %s", m, g.H(r))
			g.ins("VPMOVZXWD %s, %s", g.H(r), g.V(r))
		} else {
			g.ins("VPMOVZXWD %s, %s", m, g.V(r))
		}
		g.ins("VPSLLD $16, %s, %s", g.V(r), g.V(r))
	}
}

// roundBF16 leaves in t2 the bfloat16 bits (in the low half of each 32-bit lane) of the
// float32 lanes of r, rounded to nearest-even; NaNs become (u>>16)|0x40.
//
// The NaN fix-up is needed only by max and min, which return an operand unchanged (a
// signalling NaN stays signalling). Everywhere else a NaN lane is an operand quieted by
// the hardware (bit 22 set) or the default NaN 0xFFC00000, and every operand is a widened
// bfloat16 (or the scalar, also one), so its low 16 bits are zero: u + 0x7fff + lsb cannot
// carry into the high half, and the plain rounding already gives (u>>16)|0x40.
func (g *gen) roundBF16(r int) {
	i := &g.isa
	g.ins("VPSRLD $16, %s, %s", g.V(r), g.V(i.t1)) // t1 = u >> 16
	if i.masked {
		g.ins("VPANDD %s, %s, %s", g.V(i.c1), g.V(i.t1), g.V(i.t2)) // t2 = lsb
	} else {
		g.ins("VPAND %s, %s, %s", g.V(i.c1), g.V(i.t1), g.V(i.t2))
	}
	g.ins("VPADDD %s, %s, %s", g.V(r), g.V(i.t2), g.V(i.t2))       // u + lsb
	g.ins("VPADDD %s, %s, %s", g.V(i.c7fff), g.V(i.t2), g.V(i.t2)) // + 0x7fff
	g.ins("VPSRLD $16, %s, %s", g.V(i.t2), g.V(i.t2))
	if g.k.goKind != "kMax" && g.k.goKind != "kMin" {
		return
	}
	if i.masked {
		g.ins("VCMPPS $3, %s, %s, K2", g.V(r), g.V(r))                  // K2 = NaN lanes (unordered)
		g.ins("VPORD %s, %s, K2, %s", g.V(i.c40), g.V(i.t1), g.V(i.t2)) // NaN: (u>>16) | 0x40
	} else {
		g.ins("VCMPPS $3, %s, %s, %s", g.V(r), g.V(r), g.V(i.t3))
		g.ins("VPOR %s, %s, %s", g.V(i.c40), g.V(i.t1), g.V(i.t1))
		g.ins("VPBLENDVB %s, %s, %s, %s", g.V(i.t3), g.V(i.t1), g.V(i.t2), g.V(i.t2))
	}
}

// round rounds the float32 lanes of r to the element type in place (pre-op results).
func (g *gen) round(r int) {
	switch g.t.name {
	case "F16":
		g.ins("VCVTPS2PH $0, %s, %s", g.V(r), g.H(r))
		g.ins("VCVTPH2PS %s, %s", g.H(r), g.V(r))
	case "BF16":
		g.roundBF16(r)
		g.ins("VPSLLD $16, %s, %s", g.V(g.isa.t2), g.V(r))
	}
}

// store narrows register r to the element type and stores it at off(DI).
func (g *gen) store(r int, off int) {
	m := mem("DI", off)
	switch g.t.name {
	case "F32", "F64":
		mov := "VMOVU" + g.ps()
		switch {
		case g.tailReg:
			g.ins("%s %s, K1, %s", mov, g.V(r), m)
		case g.nt:
			g.ins("VMOVNT%s %s, %s", g.ps(), g.V(r), m)
		default:
			g.ins("%s %s, %s", mov, g.V(r), m)
		}
	case "F16":
		// Convert into a register, then store: VCVTPS2PH with a memory destination is
		// several times slower on AMD Zen.
		g.ins("VCVTPS2PH $0, %s, %s", g.V(r), g.H(r))
		switch {
		case g.tailReg:
			g.ins("VMOVDQU16 %s, K1, %s", g.H(r), m)
		case g.nt:
			g.ins("VMOVNTDQ %s, %s", g.H(r), m)
		default:
			g.ins("VMOVDQU %s, %s", g.H(r), m)
		}
	case "BF16":
		g.roundBF16(r)
		t2 := g.isa.t2
		switch {
		case g.tailReg:
			g.ins("VPMOVDW %s, %s", g.V(t2), g.H(t2))
			g.ins("VMOVDQU16 %s, K1, %s", g.H(t2), m)
		case g.isa.masked && g.nt:
			g.ins("VPMOVDW %s, %s", g.V(t2), g.H(t2))
			g.ins("VMOVNTDQ %s, %s", g.H(t2), m)
		case g.isa.masked: // into a register, then store: the memory form is slow on AMD
			g.ins("VPMOVDW %s, %s", g.V(t2), g.H(t2))
			g.ins("VMOVDQU32 %s, %s", g.H(t2), m) // EVEX: Y16-Y31
		default: // AVX2: pack the 8 dwords into 8 words, in order
			t4 := g.isa.t4
			g.ins("VEXTRACTI128 $1, %s, %s", g.V(t2), g.X(t4))
			g.ins("VPACKUSDW %s, %s, %s", g.X(t4), g.X(t2), g.X(t2))
			if g.nt {
				g.ins("VMOVNTDQ %s, %s", g.X(t2), m)
			} else {
				g.ins("VMOVDQU %s, %s", g.X(t2), m)
			}
		}
	}
}

func mem(base string, off int) string {
	if off == 0 {
		return "(" + base + ")"
	}
	return fmt.Sprintf("%d(%s)", off, base)
}

// blocks emits the computation of nb vectors (at consecutive offsets): loads, operations,
// stores, each stage across all vectors so the loads are in flight together.
func (g *gen) blocks(nb int) {
	vbytes := g.lanes() * g.t.size
	a, b, s := g.isa.a, g.isa.b, g.isa.s
	direct := (g.t.name == "F32" || g.t.name == "F64") && !g.tailReg // b as a memory operand
	for u := range nb {
		g.load(a[u], "SI", u*vbytes)
	}
	switch g.k.goKind {
	case "kPre":
		for u := range nb {
			g.ins("VMUL%s %s, %s, %s", g.ps(), g.V(s), g.V(a[u]), g.V(a[u]))
		}
	case "kPreSum":
		for u := range nb {
			g.load(b[u], "DX", u*vbytes)
		}
		for u := range nb {
			g.ins("VMUL%s %s, %s, %s", g.ps(), g.V(s), g.V(b[u]), g.V(b[u]))
			g.round(b[u])
			g.ins("VADD%s %s, %s, %s", g.ps(), g.V(b[u]), g.V(a[u]), g.V(a[u]))
		}
	default:
		if direct {
			for u := range nb {
				g.ins("%s%s %s, %s, %s", g.k.insn, g.ps(), mem("DX", u*vbytes), g.V(a[u]), g.V(a[u]))
			}
		} else {
			for u := range nb {
				g.load(b[u], "DX", u*vbytes)
			}
			for u := range nb {
				g.ins("%s%s %s, %s, %s", g.k.insn, g.ps(), g.V(b[u]), g.V(a[u]), g.V(a[u]))
			}
		}
	}
	for u := range nb {
		g.store(a[u], u*vbytes)
	}
}

// broadcast fills vector register dst with the 32-bit (or 64-bit) value in AX, through
// the scratch register (free before the loop; never the scalar's register).
func (g *gen) broadcast(dst int, wide bool) {
	x := g.X(g.isa.scratch)
	g.ins("VMOVQ AX, %s", x)
	if wide {
		g.ins("VPBROADCASTQ %s, %s", x, g.V(dst))
	} else {
		g.ins("VPBROADCASTD %s, %s", x, g.V(dst))
	}
}

func (g *gen) advance(elems int, usesB bool) {
	nbytes := elems * g.t.size
	g.ins("ADDQ $%d, SI", nbytes)
	if usesB {
		g.ins("ADDQ $%d, DX", nbytes)
	}
	g.ins("ADDQ $%d, DI", nbytes)
	g.ins("SUBQ $%d, CX", elems)
}

func (g *gen) name() string {
	n := g.k.name + g.t.name + g.isa.name
	if g.nt {
		n += "NT"
	}
	return n
}

func (g *gen) function() string {
	name := g.name()
	usesB := g.k.goKind != "kPre"
	usesS := g.k.goKind == "kPre" || g.k.goKind == "kPreSum"
	fmt.Fprintf(&g.buf, "// func %s(dst, a, b unsafe.Pointer, n int, s uint64)\n", name)
	fmt.Fprintf(&g.buf, "TEXT ·%s(SB), NOSPLIT, $0-40\n", name)
	g.ins("MOVQ dst+0(FP), DI")
	g.ins("MOVQ a+8(FP), SI")
	if usesB {
		g.ins("MOVQ b+16(FP), DX")
	}
	g.ins("MOVQ n+24(FP), CX")
	if usesS {
		g.ins("MOVQ s+32(FP), AX")
		g.broadcast(g.isa.s, g.t.wide)
	}
	if g.t.name == "BF16" {
		for _, c := range []struct {
			reg int
			val string
		}{{g.isa.c40, "$0x40"}, {g.isa.c1, "$1"}, {g.isa.c7fff, "$0x7fff"}} {
			g.ins("MOVL %s, AX", c.val)
			g.broadcast(c.reg, false)
		}
	}
	w := g.lanes()
	g.label("loop")
	g.ins("CMPQ CX, $%d", unroll*w)
	g.ins("JLT single")
	g.blocks(unroll)
	g.advance(unroll*w, usesB)
	g.ins("JMP loop")
	if g.nt {
		// Streaming stores are weakly ordered: fence them before anything that publishes
		// the result (a FIFO tail, a flag in shared memory).
		g.label("single")
		g.ins("SFENCE")
		g.ins("VZEROUPPER")
		g.ins("RET")
		return g.buf.String()
	}
	g.label("single")
	g.ins("CMPQ CX, $%d", w)
	g.ins("JLT tail")
	g.blocks(1)
	g.advance(w, usesB)
	g.ins("JMP single")
	g.label("tail")
	if g.isa.masked {
		g.ins("TESTQ CX, CX")
		g.ins("JEQ done")
		g.ins("MOVQ $1, AX") // K1 = (1 << CX) - 1: the remaining lanes
		g.ins("SHLQ CX, AX")
		g.ins("DECQ AX")
		g.ins("KMOVW AX, K1")
		g.tailReg = true
		g.blocks(1)
		g.tailReg = false
	}
	g.label("done")
	g.ins("VZEROUPPER")
	g.ins("RET")
	return g.buf.String()
}

// streamingISA is the instruction set of the non-temporal kernel a level uses for type t.
// Measured on the Zen 5 this was written on (64 MiB buffers, interleaved medians of three
// runs): for float and double, which stream at memory speed with no other work, the AVX2
// kernel was ~10% faster than the AVX-512 one; for half and bfloat16, whose conversions are
// real work, AVX-512 was faster. So the AVX-512 level borrows AVX2's float/double ones.
func streamingISA(i isa, t dtype) isa {
	if i.masked && (t.name == "F32" || t.name == "F64") {
		return isas[0]
	}
	return i
}

const header = "// Code generated by internal/asmgen; DO NOT EDIT.\n\n//go:build !purego\n\n"

// generate returns the assembly file and the Go declarations file.
func generate() (asm, decl []byte) {
	var s, d bytes.Buffer
	s.WriteString(header)
	s.WriteString("#include \"textflag.h\"\n")
	d.WriteString(header)
	d.WriteString("package reduce\n\nimport \"unsafe\"\n\n")
	var table strings.Builder
	for _, i := range isas {
		for _, t := range dtypes {
			for _, k := range kinds {
				g := &gen{isa: i, t: t, k: k}
				s.WriteString("\n")
				s.WriteString(g.function())
				fmt.Fprintf(&d, "//go:noescape\nfunc %s(dst, a, b unsafe.Pointer, n int, s uint64)\n\n", g.name())
				block := g.lanes()
				if i.masked {
					block = 1
				}
				nt := &gen{isa: streamingISA(i, t), t: t, k: k, nt: true}
				if nt.isa.name == i.name {
					s.WriteString("\n")
					s.WriteString(nt.function())
					fmt.Fprintf(&d, "//go:noescape\nfunc %s(dst, a, b unsafe.Pointer, n int, s uint64)\n\n", nt.name())
				}
				fmt.Fprintf(&table, "\t{%s, %s, %s, %s, %d, %s, %d},\n",
					i.level, t.goType, k.goKind, g.name(), block, nt.name(), unroll*nt.lanes())
			}
		}
	}
	d.WriteString("// generatedKernels lists every assembly kernel: level, type, kind, function, the multiple\n")
	d.WriteString("// of elements it handles, and the same with non-temporal stores (dst 64-byte aligned).\n")
	d.WriteString("var generatedKernels = []generatedKernel{\n")
	d.WriteString(table.String())
	d.WriteString("}\n")
	return s.Bytes(), d.Bytes()
}

func main() {
	dir := flag.String("dir", ".", "directory of package reduce")
	flag.Parse()
	asm, decl := generate()
	if err := os.WriteFile(filepath.Join(*dir, "kernels_amd64.s"), asm, 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(*dir, "kernels_gen_amd64.go"), decl, 0o644); err != nil {
		log.Fatal(err)
	}
}
