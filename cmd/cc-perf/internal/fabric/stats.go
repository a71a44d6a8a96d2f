package fabric

import (
	"math"
	"slices"
)

// median is the median of xs (the mean of the middle two for an even
// count), NaN for none. xs is not changed.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	h := len(s) / 2
	if len(s)%2 == 1 {
		return s[h]
	}
	return (s[h-1] + s[h]) / 2
}

// mad is the median absolute deviation of xs from their median m.
func mad(xs []float64, m float64) float64 {
	d := make([]float64, len(xs))
	for i, x := range xs {
		d[i] = math.Abs(x - m)
	}
	return median(d)
}

// modZ is Iglewicz and Hoaglin's modified z-score of x in a set with
// median med and median absolute deviation dev, the deviation floored at
// floor: 0.6745 (x - med) / max(dev, floor). 0.6745 is the 0.75 quantile
// of the standard normal, so that for normal data the score reads like a
// z-score; 3.5 is their cut-off for outliers (1993, ch. 3.3).
func modZ(x, med, dev, floor float64) float64 {
	return 0.6745 * (x - med) / math.Max(dev, floor)
}
