package report

import (
	"math"
	"strconv"
	"strings"
)

// The helpers below print numbers exactly as glibc printf does for the
// conversions nccl-tests uses, where Go's fmt differs: %g (Go prints the
// shortest representation, C six significant digits) and nan/inf spelling.

// cSpecial spells NaN and infinities as C does ("nan", "-nan", "inf", "-inf");
// ok is false for finite values.
func cSpecial(v float64) (s string, ok bool) {
	switch {
	case math.IsNaN(v):
		if math.Signbit(v) {
			return "-nan", true
		}
		return "nan", true
	case math.IsInf(v, 1):
		return "inf", true
	case math.IsInf(v, -1):
		return "-inf", true
	}
	return "", false
}

// pad right-aligns s in width columns (C's %*s); a longer s is kept whole.
func pad(s string, width int) string {
	if len(s) >= width {
		return s
	}
	return strings.Repeat(" ", width-len(s)) + s
}

// cf is C's "%*.*f".
func cf(v float64, width, prec int) string {
	if s, ok := cSpecial(v); ok {
		return pad(s, width)
	}
	return pad(strconv.FormatFloat(v, 'f', prec, 64), width)
}

// ce is C's "%*.*e" (at least two exponent digits, like glibc).
func ce(v float64, width, prec int) string {
	if s, ok := cSpecial(v); ok {
		return pad(s, width)
	}
	return pad(strconv.FormatFloat(v, 'e', prec, 64), width)
}

// cg is C's "%*g": six significant digits, trailing zeros dropped, exponent
// form when the exponent is below -4 or at least 6.
func cg(v float64, width int) string {
	if s, ok := cSpecial(v); ok {
		return pad(s, width)
	}
	return pad(strconv.FormatFloat(v, 'g', 6, 64), width)
}

// Float is nccl-tests' getFloatStr (floatStr), for other tables that print
// nccl-tests' columns (cc-perf predict).
func Float(v float64, width int) string { return floatStr(v, width) }

// floatStr is nccl-tests' getFloatStr: the first of %.2f, %.1f, %.0f that
// fits in width characters, else %.1e (width >= 7) or %.0e, right-aligned.
// For example, with width 7: 12.3456 -> "  12.35", 12345.6 -> "12345.6",
// 1234567.8 -> "1234568", 12345678.9 -> "1.2e+07".
func floatStr(v float64, width int) string {
	for prec := 2; prec >= 0; prec-- {
		if s := cf(v, width, prec); len(s) <= width {
			return s
		}
	}
	if width >= 7 {
		return ce(v, width, 1)
	}
	return ce(v, width, 0)
}

// legacyTimeStr is the pre-2.17 time column: %7.0f from 10000 us, %7.1f from
// 100 us, %7.2f below.
func legacyTimeStr(us float64) string {
	switch {
	case us >= 10000:
		return cf(us, 7, 0)
	case us >= 100:
		return cf(us, 7, 1)
	}
	return cf(us, 7, 2)
}

// cDouble is C's "%lf" (six decimals), as nccl-tests writes doubles to JSON
// and rccl-tests' std::to_string writes them to CSV: NaN and infinities
// print as glibc spells them ("nan", "inf", "-inf").
func cDouble(v float64) string { return cf(v, 0, 6) }
