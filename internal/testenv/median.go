package testenv

import (
	"slices"
	"testing"
)

// Median returns the median of v (the mean of the middle two for an even
// count), as the benchmarks report their rounds; v is not changed.
func Median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// Alternate runs b.N rounds of two arms, a and c, each returning a rate,
// taking turns to go first (so that neither always runs on a machine the
// other just warmed or loaded), and returns their rates, round by round.
func Alternate(b *testing.B, a, c func() float64) (as, cs []float64) {
	for round := 0; b.Loop(); round++ {
		var x, y float64
		if round%2 == 0 {
			x = a()
			y = c()
		} else {
			y = c()
			x = a()
		}
		as, cs = append(as, x), append(cs, y)
	}
	return as, cs
}

// Ratios returns num[i]/den[i], round by round.
func Ratios(num, den []float64) []float64 {
	out := make([]float64, len(num))
	for i := range num {
		out[i] = num[i] / den[i]
	}
	return out
}
