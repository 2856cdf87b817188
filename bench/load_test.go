package bench

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestRunLoad(t *testing.T) {
	var n atomic.Int64
	res := RunLoad(context.Background(), LoadOptions{Concurrency: 4, Warmup: 20 * time.Millisecond, Duration: 100 * time.Millisecond,
		Do: func(ctx context.Context) (int, error) {
			time.Sleep(5 * time.Millisecond)
			if n.Add(1)%10 == 0 {
				return 0, errors.New("every tenth fails")
			}
			return 2, nil
		}})
	if res.Requests == 0 || res.Errors == 0 || res.FirstError == "" || res.MeanBatch != 2 {
		t.Fatalf("%+v", res)
	}
	if res.Latency.Median < 5*time.Millisecond || res.Latency.P99 < res.Latency.Median || res.Latency.Max < res.Latency.P99 {
		t.Fatalf("latencies %+v", res.Latency)
	}
}

func TestNearestRank(t *testing.T) {
	var s []time.Duration
	for i := 1; i <= 100; i++ {
		s = append(s, time.Duration(i))
	}
	if got := Summarize(s); got.P90 != 90 || got.P99 != 99 || got.Max != 100 || got.Min != 1 {
		t.Fatalf("%+v", got)
	}
	if got := Summarize([]time.Duration{7}); got.P99 != 7 || got.P90 != 7 {
		t.Fatalf("one sample: %+v", got)
	}
}

// TestRunLoadBacksOffAfterErrors: a client whose requests fail waits before
// the next one (doubling) instead of spinning on a server that is down, and
// still stops at the end of the run.
func TestRunLoadBacksOffAfterErrors(t *testing.T) {
	var n atomic.Int64
	start := time.Now()
	res := RunLoad(context.Background(), LoadOptions{Concurrency: 2, Duration: 300 * time.Millisecond,
		Do: func(ctx context.Context) (int, error) {
			n.Add(1)
			return 0, errors.New("connection refused")
		}})
	// 50, 100, 200 ms: at most 4 requests per client in 300 ms.
	if res.Requests != 0 || res.Errors == 0 || n.Load() > 10 {
		t.Fatalf("%d requests sent, %+v", n.Load(), res)
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("the run took %v", d)
	}
}
