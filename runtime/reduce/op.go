package reduce

import (
	"fmt"
	"strings"
)

// Op is NCCL's ncclRedOp_t for the built-in reduction operations, with the same numeric
// values. PreMulSum is the operation ncclRedOpCreatePreMulSum creates (NCCL hands out
// handles >= ncclNumOps for it; here it has a fixed value).
type Op uint8

// The reduction operations.
const (
	Sum       Op = iota // ncclSum
	Prod                // ncclProd
	Max                 // ncclMax
	Min                 // ncclMin
	Avg                 // ncclAvg: sum divided by nranks (see Func for how)
	PreMulSum           // each rank multiplies its input by its own scalar, then sum

	numOps = iota
)

var opInfo = [numOps]struct {
	name    string
	aliases []string
}{
	Sum:       {"sum", []string{"ncclSum"}},
	Prod:      {"prod", []string{"product", "ncclProd"}},
	Max:       {"max", []string{"ncclMax"}},
	Min:       {"min", []string{"ncclMin"}},
	Avg:       {"avg", []string{"average", "ncclAvg"}},
	PreMulSum: {"premulsum", []string{"mulsum", "premul_sum", "ncclPreMulSum"}},
}

// Valid reports whether o is one of the operations above.
func (o Op) Valid() bool { return o < numOps }

// String returns the op's name (sum prod max min avg premulsum), or "Op(N)" if invalid.
// nccl-tests prints "mulsum" for PreMulSum in its redop column; that is the printer's
// business.
func (o Op) String() string {
	if !o.Valid() {
		return fmt.Sprintf("Op(%d)", uint8(o))
	}
	return opInfo[o].name
}

// Ops returns every op in enum order.
func Ops() []Op {
	ops := make([]Op, numOps)
	for i := range ops {
		ops[i] = Op(i)
	}
	return ops
}

// ParseOp parses an op name case-insensitively: sum prod max min avg premulsum, or an alias
// (mulsum as nccl-tests spells premulsum, ncclSum, ...). The error names the value and lists
// the allowed names.
func ParseOp(s string) (Op, error) {
	for o := range opInfo {
		if strings.EqualFold(s, opInfo[o].name) {
			return Op(o), nil
		}
		for _, a := range opInfo[o].aliases {
			if strings.EqualFold(s, a) {
				return Op(o), nil
			}
		}
	}
	names := make([]string, 0, numOps)
	for _, info := range opInfo {
		names = append(names, info.name)
	}
	return 0, fmt.Errorf("unknown reduction op %q: allowed %s (aliases: mulsum, ncclSum ... ncclAvg)",
		s, strings.Join(names, " "))
}
