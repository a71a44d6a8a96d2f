package cli

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MaxSize is the largest byte count [ParseSize] accepts (1 EiB): anything
// larger is a typo, and it keeps size arithmetic far from int64 overflow.
const MaxSize = int64(1) << 60

// sizeSyntax is the allowed form, quoted in every parse error.
const sizeSyntax = "a number of bytes with an optional K, M or G suffix (powers of 1024), e.g. 8, 1K, 0.5M, 1G"

// ParseSize reads a byte count the way nccl-tests' parsesize does: a decimal
// number, fractions allowed, optionally followed by K, M or G (either case,
// binary units: 1K = 1024). The product is truncated to whole bytes, so
// "0.5K" is 512 and "0.3K" is 307. Unlike nccl-tests, which ignores whatever
// follows the unit letter, only "B" or "iB" may follow it ("1GB", "1GiB"), and
// anything else is an error naming the value.
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	num, unit := splitUnit(t)
	mult, ok := unitMultiplier(unit)
	if !ok || num == "" || !isDecimal(num) {
		return 0, fmt.Errorf("invalid size %q: want %s", s, sizeSyntax)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, fmt.Errorf("invalid size %q: want %s", s, sizeSyntax)
	}
	b := math.Floor(v * float64(mult))
	if b > float64(MaxSize) {
		return 0, fmt.Errorf("invalid size %q: larger than the maximum %d bytes (1024G x 1024)", s, MaxSize)
	}
	return int64(b), nil
}

// splitUnit separates the numeric part from a trailing unit made of letters,
// dropping blanks between them ("1 K" is "1" and "K").
func splitUnit(t string) (num, unit string) {
	i := len(t)
	for i > 0 && isLetter(t[i-1]) {
		i--
	}
	return strings.TrimRight(t[:i], " \t"), t[i:]
}

func unitMultiplier(unit string) (int64, bool) {
	if unit == "" {
		return 1, true
	}
	var m int64
	switch unit[0] {
	case 'k', 'K':
		m = 1 << 10
	case 'm', 'M':
		m = 1 << 20
	case 'g', 'G':
		m = 1 << 30
	default:
		return 0, false
	}
	switch unit[1:] {
	case "", "b", "B", "ib", "iB", "IB", "Ib":
		return m, true
	}
	return 0, false
}

// isDecimal accepts digits with at most one '.', and an optional exponent
// ("1e3"), the forms strtod reads in decimal; it rejects signs, hex, inf and
// nan, which ParseFloat would otherwise take.
func isDecimal(s string) bool {
	mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	digits, dots := 0, 0
	for i := 0; i < len(mant); i++ {
		switch c := mant[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			dots++
		default:
			return false
		}
	}
	if digits == 0 || dots > 1 {
		return false
	}
	if !hasExp {
		return true
	}
	exp = strings.TrimPrefix(strings.TrimPrefix(exp, "+"), "-")
	if exp == "" {
		return false
	}
	for i := 0; i < len(exp); i++ {
		if exp[i] < '0' || exp[i] > '9' {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// Size is a byte count flag value (a pflag.Value) parsed by [ParseSize].
type Size int64

// Set parses s with [ParseSize].
func (z *Size) Set(s string) error {
	v, err := ParseSize(s)
	if err != nil {
		return err
	}
	*z = Size(v)
	return nil
}

// String prints the byte count in decimal.
func (z *Size) String() string { return strconv.FormatInt(int64(*z), 10) }

// Type names the value kind in help text.
func (z *Size) Type() string { return "size" }
