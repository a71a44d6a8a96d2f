package reduce

import (
	"fmt"
	"strings"
)

// DataType is NCCL's ncclDataType_t: the element type of a collective's buffers.
// The numeric values are NCCL's, so a DataType can cross a wire or a C boundary as is.
type DataType uint8

// The data types, in NCCL's enum order. NCCL's aliases ncclChar, ncclInt, ncclHalf,
// ncclFloat and ncclDouble are Int8, Int32, Float16, Float32 and Float64.
const (
	Int8       DataType = iota // ncclInt8, ncclChar
	Uint8                      // ncclUint8
	Int32                      // ncclInt32, ncclInt
	Uint32                     // ncclUint32
	Int64                      // ncclInt64
	Uint64                     // ncclUint64
	Float16                    // ncclFloat16, ncclHalf: IEEE 754 binary16
	Float32                    // ncclFloat32, ncclFloat
	Float64                    // ncclFloat64, ncclDouble
	Bfloat16                   // ncclBfloat16: the top half of a float32
	Float8e4m3                 // ncclFloat8e4m3: OCP FP8 E4M3 "fn" (no inf, max 448)
	Float8e5m2                 // ncclFloat8e5m2: OCP FP8 E5M2 (IEEE-like, has inf)

	numDataTypes = iota
)

// dataTypeInfo is the one table every DataType method reads.
var dataTypeInfo = [numDataTypes]struct {
	name    string   // nccl-tests' name, printed in the "type" column
	size    int      // bytes per element
	float   bool     // floating point (Avg becomes PreMulSum)
	signed  bool     // signed integer (min/max and avg divide are signed)
	aliases []string // other names ParseDataType accepts (matched case-insensitively)
}{
	Int8:       {"int8", 1, false, true, []string{"char", "i8", "ncclInt8", "ncclChar"}},
	Uint8:      {"uint8", 1, false, false, []string{"uchar", "u8", "ncclUint8"}},
	Int32:      {"int32", 4, false, true, []string{"int", "i32", "ncclInt32", "ncclInt"}},
	Uint32:     {"uint32", 4, false, false, []string{"uint", "u32", "ncclUint32"}},
	Int64:      {"int64", 8, false, true, []string{"i64", "ncclInt64"}},
	Uint64:     {"uint64", 8, false, false, []string{"u64", "ncclUint64"}},
	Float16:    {"half", 2, true, false, []string{"float16", "fp16", "f16", "ncclFloat16", "ncclHalf"}},
	Float32:    {"float", 4, true, false, []string{"float32", "fp32", "f32", "ncclFloat32", "ncclFloat"}},
	Float64:    {"double", 8, true, false, []string{"float64", "fp64", "f64", "ncclFloat64", "ncclDouble"}},
	Bfloat16:   {"bfloat16", 2, true, false, []string{"bf16", "ncclBfloat16"}},
	Float8e4m3: {"f8e4m3", 1, true, false, []string{"fp8_e4m3", "fp8e4m3", "float8e4m3", "e4m3", "ncclFloat8e4m3"}},
	Float8e5m2: {"f8e5m2", 1, true, false, []string{"fp8_e5m2", "fp8e5m2", "float8e5m2", "e5m2", "ncclFloat8e5m2"}},
}

// Valid reports whether t is one of the data types above.
func (t DataType) Valid() bool { return t < numDataTypes }

// Size returns the bytes per element of t, or 0 for an invalid t.
func (t DataType) Size() int {
	if !t.Valid() {
		return 0
	}
	return dataTypeInfo[t].size
}

// String returns nccl-tests' name for t (int8 uint8 int32 uint32 int64 uint64 half float
// double bfloat16 f8e4m3 f8e5m2), or "DataType(N)" for an invalid t.
func (t DataType) String() string {
	if !t.Valid() {
		return fmt.Sprintf("DataType(%d)", uint8(t))
	}
	return dataTypeInfo[t].name
}

// IsFloat reports whether t is a floating-point type (half, float, double, bfloat16, fp8).
func (t DataType) IsFloat() bool { return t.Valid() && dataTypeInfo[t].float }

// isSigned reports whether t is a signed integer type.
func (t DataType) isSigned() bool { return t.Valid() && dataTypeInfo[t].signed }

// DataTypes returns every data type in enum order.
func DataTypes() []DataType {
	ts := make([]DataType, numDataTypes)
	for i := range ts {
		ts[i] = DataType(i)
	}
	return ts
}

// ParseDataType parses a data type name: nccl-tests' names (see String) or one of the
// NCCL / nccl-tests / rccl-tests aliases (char, uchar, int, uint, float16, fp16, float32,
// fp32, float64, fp64, bf16, fp8_e4m3, ncclFloat, ...), case-insensitively. The error names
// the value and lists the allowed names.
func ParseDataType(s string) (DataType, error) {
	for t := range dataTypeInfo {
		info := &dataTypeInfo[t]
		if strings.EqualFold(s, info.name) {
			return DataType(t), nil
		}
		for _, a := range info.aliases {
			if strings.EqualFold(s, a) {
				return DataType(t), nil
			}
		}
	}
	return 0, fmt.Errorf("unknown data type %q: allowed %s (aliases: %s)",
		s, strings.Join(dataTypeNames(), " "), strings.Join(dataTypeAliases(), " "))
}

func dataTypeNames() []string {
	names := make([]string, 0, numDataTypes)
	for _, info := range dataTypeInfo {
		names = append(names, info.name)
	}
	return names
}

func dataTypeAliases() []string {
	var names []string
	for _, info := range dataTypeInfo {
		for _, a := range info.aliases {
			if !strings.HasPrefix(a, "nccl") {
				names = append(names, a)
			}
		}
	}
	return append(names, "ncclInt8 ... ncclFloat8e5m2")
}
