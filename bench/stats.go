package bench

import (
	"sort"
	"time"
)

// Summary is the distribution of one stage over all measured actions.
type Summary struct {
	N      int
	Min    time.Duration
	Median time.Duration
	P90    time.Duration
}

// Summarize computes min, median and p90. The median of an even count is the
// mean of the middle two; p90 is the nearest-rank percentile (the smallest
// sample with at least 90% of samples at or below it).
func Summarize(samples []time.Duration) Summary {
	if len(samples) == 0 {
		return Summary{}
	}
	s := append([]time.Duration(nil), samples...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	n := len(s)
	med := s[n/2]
	if n%2 == 0 {
		med = (s[n/2-1] + s[n/2]) / 2
	}
	rank := (9*n + 9) / 10 // ceil(0.9 n)
	return Summary{N: n, Min: s[0], Median: med, P90: s[rank-1]}
}

// medianFloat is the median of float samples (mean of the middle two for an
// even count).
func medianFloat(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[n/2]
}
