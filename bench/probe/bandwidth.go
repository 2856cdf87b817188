package probe

import (
	"sort"
	"sync"
	"time"
)

// BandwidthResult is the memory read bandwidth of streaming over a buffer
// much larger than the last-level cache.
type BandwidthResult struct {
	Bytes   int64 // buffer size
	Threads int
	Passes  int
	// Best and Median are in bytes/s. Bounds use Best.
	Best, Median float64
}

// MeasureBandwidth streams over a buffer of size bytes with the given number
// of goroutines, each reading its own contiguous slice, passes times. A
// decode step reads every weight once in the same way, split across threads.
func MeasureBandwidth(size int64, threads, passes int) BandwidthResult {
	if threads < 1 {
		threads = 1
	}
	if passes < 1 {
		passes = 1
	}
	words := size / 8
	buf := make([]uint64, words)
	for i := range buf { // touch every page so the passes do not measure page faults
		buf[i] = uint64(i)
	}
	res := BandwidthResult{Bytes: words * 8, Threads: threads, Passes: passes}
	rates := make([]float64, passes)
	sums := make([]uint64, threads)
	for p := 0; p < passes; p++ {
		var wg sync.WaitGroup
		chunk := (len(buf) + threads - 1) / threads
		start := time.Now()
		for t := 0; t < threads; t++ {
			lo, hi := t*chunk, min((t+1)*chunk, len(buf))
			wg.Add(1)
			go func() {
				defer wg.Done()
				sums[t] = sumWords(buf[lo:hi])
			}()
		}
		wg.Wait()
		rates[p] = float64(res.Bytes) / time.Since(start).Seconds()
	}
	sink = sums[0]
	sort.Float64s(rates)
	res.Best = rates[len(rates)-1]
	res.Median = rates[len(rates)/2]
	return res
}

// sink keeps the sums alive so the reads are not optimised away.
var sink uint64

// sumWords reads every word with eight independent accumulators, enough
// loads in flight that the loop is limited by memory, not by the adder chain.
func sumWords(b []uint64) uint64 {
	var s0, s1, s2, s3, s4, s5, s6, s7 uint64
	i := 0
	for ; i+8 <= len(b); i += 8 {
		w := b[i : i+8 : i+8]
		s0 += w[0]
		s1 += w[1]
		s2 += w[2]
		s3 += w[3]
		s4 += w[4]
		s5 += w[5]
		s6 += w[6]
		s7 += w[7]
	}
	for ; i < len(b); i++ {
		s0 += b[i]
	}
	return s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7
}
