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
	P99    time.Duration
	Max    time.Duration
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
	return Summary{N: n, Min: s[0], Median: med, P90: nearestRank(s, 90), P99: nearestRank(s, 99), Max: s[n-1]}
}

// nearestRank is the smallest of sorted samples with at least pct percent
// of them at or below it.
func nearestRank(sorted []time.Duration, pct int) time.Duration {
	rank := (pct*len(sorted) + 99) / 100 // ceil(pct/100 n)
	return sorted[max(rank, 1)-1]
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
