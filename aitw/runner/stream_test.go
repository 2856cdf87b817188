package runner

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/autoui/autoui/aitw"
	"github.com/autoui/autoui/engine"
	"github.com/autoui/autoui/predict"
)

// streamRun is tinyRun decoding continuously on rows rows.
func streamRun(t *testing.T, p predict.Predictor, files []string, cache string, mode History, rows int) Summary {
	t.Helper()
	opts := Options{Files: files, OutDir: t.TempDir(), CacheDir: cache, CacheKey: "tiny", History: mode, Batch: rows, Continuous: true}
	sum, err := Run(context.Background(), p, opts)
	if err != nil {
		t.Fatalf("%s continuous on %d rows: %v", mode, rows, err)
	}
	return sum
}

// A continuous run (the engine's Stream, on the cpu provider the fixed
// buffers without capture) writes what Batch 1 writes: in its order with
// gold history, the same lines with predicted history; the features it
// computes are Batch 1's; and it stops at a limit, is cancelled and resumes
// like a batched run.
func TestContinuousSameAsOneTiny(t *testing.T) {
	p := tinyPredictor(t, engine.Options{CUDAGraph: true})
	records, err := aitw.ExpandPaths([]string{"../testdata/records"})
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(t.TempDir(), "features")
	ref := map[History]Summary{HistoryGold: tinyRun(t, p, records, cache, HistoryGold, 1)}
	ref[HistoryPredicted] = tinyRun(t, p, records, cache, HistoryPredicted, 1)
	general, _ := aitw.ExpandPaths([]string{"../testdata/records/general"})
	for _, mode := range []History{HistoryGold, HistoryPredicted} {
		computed := filepath.Join(t.TempDir(), "features")
		if s := streamRun(t, p, general, computed, mode, 4); s.CacheMisses != s.Predicted || s.Predicted == 0 {
			t.Fatalf("%s: vision in the stream: %+v", mode, s)
		}
		sameFeatures(t, computed, cache)
	}
	for _, mode := range []History{HistoryGold, HistoryPredicted} {
		t.Run(string(mode), func(t *testing.T) {
			one := ref[mode]
			for _, rows := range []int{1, 3, 8} {
				busy := &busyRows{Predictor: p}
				got := streamRun(t, busy, records, cache, mode, rows)
				if busy.most != int32(rows) || busy.joinedBusy == 0 && rows > 1 {
					t.Errorf("%d rows: at most %d busy, %d joins beside busy rows", rows, busy.most, busy.joinedBusy)
				}
				sameLines(t, got.Path, one.Path, mode == HistoryGold)
				if got.Predicted != one.Predicted || got.ParseErrors != one.ParseErrors || got.Decode.Tokens != one.Decode.Tokens ||
					got.Episodes != one.Episodes || got.CacheHits != 55 {
					t.Errorf("%d rows: summaries differ:\ncontinuous %+v\nbatch 1    %+v", rows, got, one)
				}
			}
			// --join-min 3 (take's policy: TestStreamTake)
			busy := &busyRows{Predictor: p}
			opts := Options{Files: records, OutDir: t.TempDir(), CacheDir: cache, CacheKey: "tiny", History: mode, Batch: 8, Continuous: true, JoinMin: 3}
			got, err := Run(context.Background(), busy, opts)
			if err != nil {
				t.Fatal(err)
			}
			sameLines(t, got.Path, one.Path, mode == HistoryGold)
			if len(busy.sizes) == 0 || busy.sizes[0] < 3 {
				t.Errorf("join-min 3: joins beside busy rows %v", busy.sizes)
			}
			testStreamLimitCancelResume(t, p, records, cache, mode, one.Path)
		})
	}
}

// busyRows counts the most steps decoding at once in a stream, and the
// joins made while other steps were decoding.
type busyRows struct {
	predict.Predictor
	busy, most, joinedBusy int32
	sizes                  []int // of the joins beside busy rows
}

func (b *busyRows) Stream(ctx context.Context, rows int, next func(int, bool) ([]predict.Job, bool)) error {
	return b.Predictor.(predict.Streamer).Stream(ctx, rows, func(free int, wait bool) ([]predict.Job, bool) {
		jobs, more := next(free, wait)
		if len(jobs) > 0 && atomic.LoadInt32(&b.busy) > 0 {
			b.joinedBusy++
			b.sizes = append(b.sizes, len(jobs))
		}
		for i := range jobs {
			n := atomic.AddInt32(&b.busy, 1)
			if n > b.most {
				b.most = n
			}
			done := jobs[i].Done
			jobs[i].Done = func(res *predict.Result, err error) {
				atomic.AddInt32(&b.busy, -1)
				done(res, err)
			}
		}
		return jobs, more
	})
}

// cancelAfter cancels the run's context once n answers of its stream are in.
type cancelAfter struct {
	predict.Predictor
	n      int32
	cancel context.CancelFunc
}

func (c *cancelAfter) Stream(ctx context.Context, rows int, next func(int, bool) ([]predict.Job, bool)) error {
	var answered atomic.Int32
	return c.Predictor.(predict.Streamer).Stream(ctx, rows, func(free int, wait bool) ([]predict.Job, bool) {
		jobs, more := next(free, wait)
		for i := range jobs {
			done := jobs[i].Done
			jobs[i].Done = func(res *predict.Result, err error) {
				done(res, err)
				if answered.Add(1) == c.n {
					c.cancel()
				}
			}
		}
		return jobs, more
	})
}

// A continuous run stopped at --limit, then cancelled mid-decode, then
// resumed ends with Batch 1's predictions, in its order with gold history
// (each stop writes an unbroken run from the start); every line on the way
// is whole and the cancelled run keeps what finished in that run.
func testStreamLimitCancelResume(t *testing.T, p predict.Predictor, files []string, cache string, mode History, want string) {
	t.Helper()
	gold := mode == HistoryGold
	for _, resume := range []bool{false, true} { // batches, continuous
		opts := Options{Files: files, OutDir: t.TempDir(), CacheDir: cache, CacheKey: "tiny", History: mode, Batch: 4, Limit: 10, Continuous: true}
		sum, err := Run(context.Background(), p, opts)
		if err != nil || sum.Predicted != 10 || !sum.LimitHit {
			t.Fatalf("limit 10: %+v %v", sum, err)
		}
		checkLines(t, sum.Path, 10)
		if gold {
			prefixLines(t, sum.Path, want)
		}

		ctx, cancel := context.WithCancel(context.Background())
		opts.Limit = 0
		sum, err = Run(ctx, &cancelAfter{Predictor: p, n: 9, cancel: cancel}, opts)
		cancel()
		if err != nil || !sum.Interrupted || sum.AlreadyDone != 10 || sum.Predicted >= 55-10 || !gold && sum.Predicted < 9 {
			t.Fatalf("cancelled after 9 answers: %+v %v", sum, err)
		}
		done := 10 + sum.Predicted
		checkLines(t, sum.Path, done)
		if gold {
			prefixLines(t, sum.Path, want)
		}

		opts.Batch, opts.Continuous = 5, resume
		sum, err = Run(context.Background(), p, opts)
		if err != nil || sum.AlreadyDone != done || sum.Predicted != 55-done {
			t.Fatalf("resume (continuous %v): %+v %v", resume, sum, err)
		}
		sameLines(t, sum.Path, want, gold)
	}
}

// prefixLines checks that the lines of got are the first lines of want.
func prefixLines(t *testing.T, got, want string) {
	t.Helper()
	g, w := readLines(t, got), readLines(t, want)
	for i := range g {
		if len(g[i]) == 0 {
			continue // after the last newline
		}
		if i >= len(w) || string(g[i]) != string(w[i]) {
			t.Fatalf("line %d is not Batch 1's:\n got %s", i, g[i])
		}
	}
}

// failOn fails the stream's request for one goal's step with a request
// error, as the engine does for a request it refuses.
type failOn struct {
	predict.Predictor
	step int
}

func (f *failOn) Stream(ctx context.Context, rows int, next func(int, bool) ([]predict.Job, bool)) error {
	return f.Predictor.(predict.Streamer).Stream(ctx, rows, func(free int, wait bool) ([]predict.Job, bool) {
		jobs, more := next(free, wait)
		for i := range jobs {
			if f.step--; f.step == 0 {
				jobs[i].Req.Goal = strings.Repeat("x", 100000)
			}
		}
		return jobs, more
	})
}

// A step the engine refuses ends a continuous run with its error, naming
// the step; the steps that finished are written, and a resumed run
// completes Batch 1's predictions. A predictor that does not stream is
// refused in one line.
func TestContinuousFailsTiny(t *testing.T) {
	p := tinyPredictor(t, engine.Options{CUDAGraph: true})
	files := []string{"../testdata/autoui/general_blip_test.obj"} // 13 steps, features given
	for _, mode := range []History{HistoryGold, HistoryPredicted} {
		one := tinyRun(t, p, files, "", mode, 1)
		opts := Options{Files: files, OutDir: t.TempDir(), History: mode, Batch: 4, Continuous: true}
		sum, err := Run(context.Background(), &failOn{Predictor: p, step: 6}, opts)
		var re *predict.RequestError
		if err == nil || !strings.Contains(err.Error(), "episode ") || !errors.As(err, &re) {
			t.Fatalf("%s: the refused step: %+v %v", mode, sum, err)
		}
		if sum.Predicted >= 13 || mode == HistoryPredicted && sum.Predicted < 1 {
			t.Errorf("%s: %d steps written, want those that finished (gold: before the refused one)", mode, sum.Predicted)
		}
		checkLines(t, sum.Path, sum.Predicted)
		if mode == HistoryGold {
			prefixLines(t, sum.Path, one.Path)
		}
		if sum, err = Run(context.Background(), p, opts); err != nil { // continuous again
			t.Fatalf("%s: resume: %v", mode, err)
		}
		sameLines(t, sum.Path, one.Path, mode == HistoryGold)
	}

	// a decode that fails on its own: before taking a step, and with every
	// busy step failed by a decoder call (named as the decode's, not a step's)
	for _, after := range []int{0, 3} {
		opts := Options{Files: files, OutDir: t.TempDir(), History: HistoryGold, Batch: 4, Continuous: true}
		_, err := Run(context.Background(), &brokenDecode{after: after}, opts)
		if err == nil || !strings.Contains(err.Error(), "continuous decode") || !strings.Contains(err.Error(), "decoder call 7 failed") {
			t.Errorf("a decode failing after %d steps taken: %v", after, err)
		}
	}

	plain := struct{ predict.Predictor }{p} // PredictBatch only
	_, err := Run(context.Background(), plain, Options{Files: files, OutDir: t.TempDir(), Batch: 4, Continuous: true})
	if err == nil || !strings.Contains(err.Error(), "needs a predictor that streams") {
		t.Fatalf("a predictor that does not stream: %v", err)
	}
}

// take hands the decode the steps waiting: as many as rows are free, once
// JoinMin of them can join a busy decode, any number to an idle one or once
// no more will come; it waits only when no row is busy.
func TestStreamTake(t *testing.T) {
	r := &run{ctx: context.Background(), batch: 8, opts: Options{JoinMin: 3}}
	q := newStreamQueue(r, nil, true)
	waiting := func(n int) {
		for range n {
			q.pending <- streamJob{job: predict.Job{Req: predict.Request{Goal: "g"}}}
		}
	}
	check := func(what string, free int, wait bool, wantN int, wantMore bool) {
		t.Helper()
		jobs, more := q.take(free, wait)
		if len(jobs) != wantN || more != wantMore {
			t.Errorf("%s: %d jobs, more %v; want %d, %v", what, len(jobs), more, wantN, wantMore)
		}
	}
	waiting(2)
	check("2 waiting, busy", 8, false, 0, true)
	waiting(1)
	check("3 waiting, busy", 8, false, 3, true)
	waiting(5)
	check("5 waiting, 4 rows free", 4, false, 4, true)
	check("1 waiting, idle", 8, true, 1, true)
	waiting(1)
	q.feed <- struct{}{}
	close(q.closed)
	check("1 waiting, busy, the last", 8, false, 1, true)
	check("none waiting, busy, closed", 8, false, 0, true)
	check("none waiting, idle, closed", 8, true, 0, false)

	q = newStreamQueue(r, nil, true)
	go func() { waiting(1); q.feed <- struct{}{} }() // as hand does
	check("idle, one handed over meanwhile", 8, true, 1, true)
	q.cancel()
	check("idle, cancelled", 8, true, 0, false)
}

// brokenDecode is a stream that takes after steps (at most the rows), fails
// them as a failed decoder call does, and returns that error.
type brokenDecode struct {
	predict.Predictor
	after int
}

func (b *brokenDecode) Stream(ctx context.Context, rows int, next func(int, bool) ([]predict.Job, bool)) error {
	err := errors.New("decoder call 7 failed")
	if b.after == 0 {
		return err
	}
	var jobs []predict.Job
	for len(jobs) < b.after {
		got, more := next(min(rows, b.after)-len(jobs), len(jobs) == 0)
		jobs = append(jobs, got...)
		if !more {
			break
		}
	}
	for _, j := range jobs {
		j.Done(nil, err)
	}
	return err
}
