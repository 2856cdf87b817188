package bench

import (
	"context"
	"fmt"
	"image"
	"sync"
	"time"

	"github.com/autoui/autoui/engine/preprocess"
	"github.com/autoui/autoui/predict"
)

// Batch is one measured PredictBatch call and the decoding of its screens.
type Batch struct {
	Run     int
	Screens int
	// Start is when its screens' decoding began, End when PredictBatch
	// returned; pipelined, a batch's decoding overlaps the batch before.
	Start, End time.Time
	Decode     time.Duration // the batch's screens decoded (pipelined: and resized), spread over the cores
	Resize     time.Duration // inside PredictBatch: the screens resized to the vision input
	Wall       time.Duration // Decode + PredictBatch
}

// ScreensPerSecond is the batch's throughput, decoding included.
func (b Batch) ScreensPerSecond() float64 { return float64(b.Screens) / b.Wall.Seconds() }

// EngineScreensPerSecond is the batch's throughput without decoding the
// screens: PredictBatch's alone, resizing included.
func (b Batch) EngineScreensPerSecond() float64 {
	return float64(b.Screens) / (b.Wall - b.Decode).Seconds()
}

// AheadScreensPerSecond is the batch's throughput with its screens decoded
// and resized beforehand, as `eval run` (its read-ahead) and `serve` (each
// request's handler, while the engine works) give them to the engine.
func (b Batch) AheadScreensPerSecond() float64 {
	return float64(b.Screens) / (b.Wall - b.Decode - b.Resize).Seconds()
}

// RunBatch predicts opts.Batch screens per PredictBatch call — the cases
// round-robin, each screen decoded from its PNG/JPEG bytes on its own —
// opts.Warmup + opts.Runs times, the measured ones opts.Concurrent at a
// time (the warm-up ones one at a time), or with opts.Pipeline one at a
// time with the next batch's screens decoded and resized (opts.Shrink) on
// the host's cores while the engine predicts this one. It returns one
// Action per screen of the measured batches (the stages of the batched
// calls are the calls' wall times, as engine.PredictBatch reports them) and
// the batches, in run order. On an error (Ctrl-C) it returns the batches
// measured before it too (the first ones in run order).
func RunBatch(ctx context.Context, p predict.Predictor, cases []Case, opts Options) ([]Action, []Batch, error) {
	if err := check(cases, opts); err != nil {
		return nil, nil, err
	}
	if opts.Batch < 1 {
		return nil, nil, fmt.Errorf("batch = %d: need at least 1", opts.Batch)
	}
	if opts.Pipeline && (opts.Shrink == nil || opts.Concurrent > 1) {
		return nil, nil, fmt.Errorf("a pipelined batch run needs Shrink and one batch at a time (programmer error)")
	}
	for r := -opts.Warmup; r < 0; r++ {
		if _, _, err := predictBatch(ctx, p, opts, r, prepareBatch(cases, opts)); err != nil {
			return nil, nil, err
		}
	}
	type result struct {
		actions []Action
		batch   Batch
		err     error
	}
	results := make([]result, opts.Runs)
	if opts.Pipeline {
		ready := make(chan prepared) // unbuffered: one batch ahead of the engine, not more
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for range opts.Runs {
				select {
				case ready <- prepareBatch(cases, opts):
				case <-stop:
					return
				}
			}
		}()
		for r := range opts.Runs {
			a, b, err := predictBatch(ctx, p, opts, r, <-ready)
			results[r] = result{a, b, err}
			if err != nil {
				break
			}
		}
	} else {
		next := make(chan int)
		var wg sync.WaitGroup
		for range min(max(opts.Concurrent, 1), max(opts.Runs, 1)) {
			wg.Go(func() {
				for r := range next {
					a, b, err := predictBatch(ctx, p, opts, r, prepareBatch(cases, opts))
					results[r] = result{a, b, err}
				}
			})
		}
		for r := range opts.Runs {
			next <- r
		}
		close(next)
		wg.Wait()
	}
	var actions []Action
	var batches []Batch
	for _, res := range results {
		if res.err != nil {
			return actions, batches, res.err
		}
		if res.actions == nil { // not run: an earlier batch failed
			break
		}
		actions = append(actions, res.actions...)
		batches = append(batches, res.batch)
	}
	return actions, batches, nil
}

// prepared is a batch's screens decoded (resized too when pipelined), ready
// for PredictBatch.
type prepared struct {
	items  []Case
	imgs   []image.Image
	start  time.Time
	decode time.Duration
	err    error
}

// prepareBatch decodes a batch's screens, spread over the cores, and with
// opts.Pipeline resizes them to the vision input (opts.Shrink), as eval
// run's read-ahead does.
func prepareBatch(cases []Case, opts Options) prepared {
	items := make([]Case, opts.Batch)
	for i := range items {
		items[i] = cases[i%len(cases)]
	}
	t := time.Now()
	imgs := make([]image.Image, len(items))
	err := preprocess.Parallel(len(items), func(i int) error {
		img, err := decodeScreen(items[i])
		if err == nil && opts.Pipeline {
			img = opts.Shrink(img)
		}
		imgs[i] = img
		return err
	})
	return prepared{items: items, imgs: imgs, start: t, decode: time.Since(t), err: err}
}

// predictBatch predicts RunBatch's batch r (negative: a warm-up one). Its
// Batch starts where its decoding did: where the pipeline decoded it during
// the previous batch, the run's rate counts that time once
// (Report.RunThroughput).
func predictBatch(ctx context.Context, p predict.Predictor, opts Options, r int, b prepared) ([]Action, Batch, error) {
	if b.err != nil {
		return nil, Batch{}, b.err
	}
	reqs := make([]predict.Request, len(b.items))
	for i, c := range b.items {
		reqs[i] = request(c, b.imgs[i], opts)
	}
	t := time.Now()
	res, err := p.PredictBatch(ctx, reqs)
	if err != nil {
		return nil, Batch{}, fmt.Errorf("batch of %d, run %d: %w", len(reqs), r, err)
	}
	end := time.Now()
	wall := b.decode + end.Sub(t)
	if len(res) != len(b.items) {
		return nil, Batch{}, fmt.Errorf("batch of %d, run %d: %d results", len(b.items), r, len(res))
	}
	actions := make([]Action, 0, len(b.items))
	for i, c := range b.items {
		a, err := screenAction(c, res[i], b.decode, opts)
		if err != nil {
			return nil, Batch{}, fmt.Errorf("batch run %d, screen %d (case %s): %w", r, i, c.ID, err)
		}
		a.Run = r
		actions = append(actions, a)
	}
	// every screen carries the batch's resize (engine.PredictBatch's convention)
	return actions, Batch{Run: r, Screens: len(b.items), Start: b.start, End: end, Decode: b.decode,
		Resize: res[0].Timings.Preprocess, Wall: wall}, nil
}
