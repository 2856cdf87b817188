package serve

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/autoui/autoui/engine"
	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/predict"
)

// staticTiny is a predictor on the tiny bundle that decodes on its static
// decoder (--cuda-graph; on the cpu without capture), so it can stream.
func staticTiny(t *testing.T) *engine.Predictor {
	t.Helper()
	b, err := models.Load(filepath.Join(testdata, "tiny"), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := engine.NewPredictor(b, engine.Options{CUDAGraph: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// countingStreamer counts the continuous decodes its engine runs.
type countingStreamer struct {
	*engine.Predictor
	streams atomic.Int32
}

func (c *countingStreamer) Stream(ctx context.Context, rows int, next func(int, bool) ([]predict.Job, bool)) error {
	c.streams.Add(1)
	return c.Predictor.Stream(ctx, rows, next)
}

// Under Continuous, 12 requests sent at once to 4 rows join a running
// decode as rows free up: every answer is the one-by-one prediction, no
// join is larger than the rows, every request joined once, and the
// engine ran one continuous decode, not batches.
func TestContinuousEquivalence(t *testing.T) {
	p := staticTiny(t)
	e := &countingStreamer{Predictor: p}
	m := ModelOf(p, "")
	m.Engine = e
	var sizes []int
	var mu sync.Mutex
	s, ts := start(t, Config{MaxBatch: 4, Continuous: true, BatchWait: 20 * time.Millisecond}, &m, func(s *Server) {
		s.beforeBatch = func(n int) { mu.Lock(); sizes = append(sizes, n); mu.Unlock() }
	})
	reqs, want := goldenRequests(t, 12)
	got := postAll(t, ts.URL, reqs)
	for i := range reqs {
		sameResult(t, fmt.Sprintf("case %d", i), got[i], want[i])
		if got[i].Serve != nil && got[i].Serve.BatchSize > 4 {
			t.Errorf("case %d joined with %d, over 4 rows", i, got[i].Serve.BatchSize)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if total := sum(sizes); total != len(reqs) {
		t.Errorf("joins %v hold %d requests, want %d", sizes, total, len(reqs))
	}
	if n := e.streams.Load(); n != 1 {
		t.Errorf("%d continuous decodes, want 1", n)
	}
	if n := countMetric(t, s, "autoui_batches_total"); n != float64(len(sizes)) {
		t.Errorf("autoui_batches_total %v, want %d", n, len(sizes))
	}
	if n := countMetric(t, s, "autoui_rows_busy"); n != 0 {
		t.Errorf("autoui_rows_busy %v with every request answered", n)
	}
}

// Shutdown answers the requests decoding and queued, then the decode ends.
func TestContinuousShutdown(t *testing.T) {
	p := staticTiny(t)
	m := ModelOf(p, "")
	entered, release := make(chan int, 1), make(chan struct{})
	first := true
	s, ts := start(t, Config{MaxBatch: 2, Continuous: true}, &m, func(s *Server) {
		s.beforeBatch = func(n int) {
			if first {
				first = false
				entered <- n
				<-release
			}
		}
	})
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			r, b := post(t, context.Background(), ts.URL, featureRequest(t, fmt.Sprintf("goal %d", i)))
			wantPrediction(t, code(r), b)
		})
	}
	n := <-entered
	waitFor(t, "the other requests to be queued", func() bool { return len(s.queue) == 5-n })
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	waitFor(t, "/readyz to turn 503", func() bool { c, _ := get(t, ts.URL+"/readyz"); return c == 503 })
	close(release)
	wg.Wait()
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
}

// An engine that cannot stream (no static decoder) answers every request
// with its error instead of leaving it waiting.
func TestContinuousWithoutStaticDecoder(t *testing.T) {
	m := tinyModel(t)
	_, ts := start(t, Config{MaxBatch: 2, Continuous: true}, &m)
	for range 2 {
		r, b := post(t, context.Background(), ts.URL, featureRequest(t, "no stream"))
		wantError(t, r, b, 500, KindInternal, "--cuda-graph")
	}
}

// failingOnce is a streamer whose first decode takes its jobs and fails
// them, as a failed decoder call does; later decodes are the engine's.
type failingOnce struct {
	*engine.Predictor
	failed atomic.Bool
}

func (f *failingOnce) Stream(ctx context.Context, rows int, next func(int, bool) ([]predict.Job, bool)) error {
	if f.failed.Swap(true) {
		return f.Predictor.Stream(ctx, rows, next)
	}
	jobs, _ := next(rows, true)
	err := errors.New("decoder call 0: the device fell over")
	for _, j := range jobs {
		j.Done(nil, err)
	}
	return err
}

// A continuous decode that fails answers its requests with the error and
// the server starts another, which answers the next requests.
func TestContinuousRestart(t *testing.T) {
	p := staticTiny(t)
	m := ModelOf(p, "")
	m.Engine = &failingOnce{Predictor: p}
	_, ts := start(t, Config{MaxBatch: 2, Continuous: true}, &m)
	r, b := post(t, context.Background(), ts.URL, featureRequest(t, "first"))
	wantError(t, r, b, 500, KindInternal, "fell over")
	r, b = post(t, context.Background(), ts.URL, featureRequest(t, "second"))
	wantPrediction(t, code(r), b)
}

// While rows are busy, fewer than JoinMin waiting requests join only once
// they have been seen waiting for JoinWait; JoinMin of them join at once,
// and no more than the free rows.
func TestContinuousJoinMin(t *testing.T) {
	s := New(Config{Continuous: true, MaxBatch: 8, JoinMin: 3, JoinWait: 40 * time.Millisecond})
	push := func(n int) {
		for range n {
			s.slots <- struct{}{}
			s.queue <- &job{ctx: context.Background(), arrived: time.Now(), done: make(chan answer, 1)}
		}
	}
	var waiting time.Time
	push(2)
	if jobs, more := s.join(8, false, &waiting); len(jobs) != 0 || !more {
		t.Fatalf("2 waiting, join-min 3: %d joined", len(jobs))
	}
	time.Sleep(50 * time.Millisecond)
	if jobs, _ := s.join(8, false, &waiting); len(jobs) != 2 {
		t.Fatalf("2 waiting past join-wait: %d joined", len(jobs))
	}
	push(4)
	if jobs, _ := s.join(8, false, &waiting); len(jobs) != 4 {
		t.Fatalf("4 waiting, join-min 3: %d joined", len(jobs))
	}
	push(3)
	if jobs, _ := s.join(2, false, &waiting); len(jobs) != 2 {
		t.Fatalf("3 waiting, 2 rows free: %d joined", len(jobs))
	}
	if jobs, _ := s.join(8, false, &waiting); len(jobs) != 0 {
		t.Fatalf("1 waiting, just seen: %d joined", len(jobs))
	}
}
