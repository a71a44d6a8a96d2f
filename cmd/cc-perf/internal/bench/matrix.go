package bench

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// maxMatrixBytes bounds one scaled value of a traffic matrix: far beyond
// any buffer, and far from overflowing a sum over ranks.
const maxMatrixBytes = 1 << 50

// ParseMatrix reads a traffic matrix file as nccl-tests' alltoallv does
// (AlltoAllvReadTrafficMatrix): whitespace-separated numbers of bytes, one
// row per line, row i holding what rank i sends ranks 0, 1, ...; blank lines
// are skipped; the matrix must be square. Each value is multiplied by scale,
// then truncated and aligned down to 16 bytes:
//
//	100  200  150        96  192  144
//	50   100  75    ->   48   96   64
//	300  150  200       288  144  192
//
// name names the file in errors, which carry its line: "m.txt:3: ...".
// Unlike nccl-tests, values must be finite (C's strtod also reads "nan"
// and "inf"), and a value is a Go float literal (no C hex integers such as
// 0x10).
func ParseMatrix(name string, data []byte, scale float64) (*Matrix, error) {
	if scale < 0 || math.IsNaN(scale) || math.IsInf(scale, 0) {
		return nil, fmt.Errorf("%s: scale %v: want a finite number >= 0", name, scale)
	}
	m := &Matrix{Name: name, Scale: scale}
	firstLine := 0 // the line of the first row, whose length every row must have
	for i, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		at := fmt.Sprintf("%s:%d", name, i+1)
		if len(m.Bytes) > 0 && len(fields) != len(m.Bytes[0]) {
			return nil, fmt.Errorf("%s: a row of %d, want %d values as on line %d (a square matrix, one row per line)", at, len(fields), len(m.Bytes[0]), firstLine)
		}
		if len(m.Bytes) == 0 {
			firstLine = i + 1
		}
		row := make([]int64, len(fields))
		for j, f := range fields {
			v, err := matrixValue(f, scale)
			if err != nil {
				return nil, fmt.Errorf("%s: column %d: %w", at, j+1, err)
			}
			row[j] = v
		}
		m.Bytes = append(m.Bytes, row)
	}
	switch rows := len(m.Bytes); {
	case rows == 0:
		return nil, fmt.Errorf("%s: no values: want a square matrix of bytes, one row per line", name)
	case rows != len(m.Bytes[0]):
		return nil, fmt.Errorf("%s: %d rows of %d values: want a square matrix, one row per line", name, rows, len(m.Bytes[0]))
	}
	return m, nil
}

// matrixValue reads one value of a traffic matrix: bytes >= 0, times scale,
// truncated and aligned down to 16.
func matrixValue(s string, scale float64) (int64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("%q is not a number of bytes (want a number >= 0)", s)
	}
	scaled := v * scale
	if scaled > maxMatrixBytes {
		return 0, fmt.Errorf("%s bytes x scale %g = %g bytes: want at most %d", s, scale, scaled, int64(maxMatrixBytes))
	}
	return int64(scaled) &^ 15, nil
}
