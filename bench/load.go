package bench

import (
	"context"
	"sync"
	"time"
)

// LoadOptions describe a closed-loop load: Concurrency clients, each
// sending its next request when the last one answered, for Duration after
// a Warmup whose requests are not counted.
type LoadOptions struct {
	Concurrency int
	Warmup      time.Duration
	Duration    time.Duration
	// Do sends one request; batch is the size of the server batch that
	// answered it (0 when unknown).
	Do func(ctx context.Context) (batch int, err error)
}

// A client pauses after a failed request, from minErrorPause doubling up to
// maxErrorPause while its requests keep failing, so that it does not spin
// on a server that is down or refusing; a success resets the pause.
const (
	minErrorPause = 50 * time.Millisecond
	maxErrorPause = time.Second
)

// LoadResult is what one load level measured.
type LoadResult struct {
	Concurrency int       `json:"concurrency"`
	Requests    int       `json:"requests"`
	Errors      int       `json:"errors"`
	FirstError  string    `json:"first_error,omitempty"`
	Seconds     float64   `json:"seconds"`
	PerSecond   float64   `json:"per_second"`
	Latency     Summary   `json:"-"`
	LatencyMS   latencyMS `json:"latency_ms"`
	MeanBatch   float64   `json:"mean_batch"`
}

type latencyMS struct {
	P50, P90, P99, Max float64
}

// RunLoad applies the load and measures the answered requests' latency.
func RunLoad(ctx context.Context, o LoadOptions) LoadResult {
	var mu sync.Mutex
	var lat []time.Duration
	res := LoadResult{Concurrency: o.Concurrency}
	batches := 0
	start := time.Now()
	measureFrom := start.Add(o.Warmup)
	end := measureFrom.Add(o.Duration)
	ctx, cancel := context.WithDeadline(ctx, end.Add(time.Minute)) // a stuck request does not hang the run
	defer cancel()
	var wg sync.WaitGroup
	for c := 0; c < o.Concurrency; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pause := minErrorPause
			for time.Now().Before(end) && ctx.Err() == nil {
				t0 := time.Now()
				b, err := o.Do(ctx)
				d := time.Since(t0)
				if !t0.Before(measureFrom) {
					mu.Lock()
					if err != nil {
						res.Errors++
						if res.FirstError == "" {
							res.FirstError = err.Error()
						}
					} else {
						lat = append(lat, d)
						batches += b
					}
					mu.Unlock()
				}
				if err == nil {
					pause = minErrorPause
					continue
				}
				sleepCtx(ctx, min(pause, time.Until(end)))
				pause = min(2*pause, maxErrorPause)
			}
		}()
	}
	wg.Wait()
	res.Seconds = time.Since(measureFrom).Seconds()
	res.Requests = len(lat)
	res.PerSecond = float64(len(lat)) / res.Seconds
	res.Latency = Summarize(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	res.LatencyMS = latencyMS{P50: ms(res.Latency.Median), P90: ms(res.Latency.P90), P99: ms(res.Latency.P99), Max: ms(res.Latency.Max)}
	if len(lat) > 0 {
		res.MeanBatch = float64(batches) / float64(len(lat))
	}
	return res
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
