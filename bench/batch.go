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
	Start   time.Time
	Decode  time.Duration // the batch's screens decoded, spread over the cores
	Resize  time.Duration // inside PredictBatch: the screens resized to the vision input
	Wall    time.Duration // Decode + PredictBatch
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
// time (the warm-up ones one at a time). It returns one Action per screen
// of the measured batches (the stages of the batched calls are the calls'
// wall times, as engine.PredictBatch reports them) and the batches, in run
// order.
func RunBatch(ctx context.Context, p predict.Predictor, cases []Case, opts Options) ([]Action, []Batch, error) {
	if err := check(cases, opts); err != nil {
		return nil, nil, err
	}
	if opts.Batch < 1 {
		return nil, nil, fmt.Errorf("batch = %d: need at least 1", opts.Batch)
	}
	for r := -opts.Warmup; r < 0; r++ {
		if _, _, err := runBatch(ctx, p, cases, opts, r); err != nil {
			return nil, nil, err
		}
	}
	type result struct {
		actions []Action
		batch   Batch
		err     error
	}
	results := make([]result, opts.Runs)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(max(opts.Concurrent, 1), max(opts.Runs, 1)) {
		wg.Go(func() {
			for r := range next {
				a, b, err := runBatch(ctx, p, cases, opts, r)
				results[r] = result{a, b, err}
			}
		})
	}
	for r := range opts.Runs {
		next <- r
	}
	close(next)
	wg.Wait()
	var actions []Action
	var batches []Batch
	for _, res := range results {
		if res.err != nil {
			return nil, nil, res.err
		}
		actions = append(actions, res.actions...)
		batches = append(batches, res.batch)
	}
	return actions, batches, nil
}

// runBatch runs RunBatch's batch r (negative: a warm-up one).
func runBatch(ctx context.Context, p predict.Predictor, cases []Case, opts Options, r int) ([]Action, Batch, error) {
	items := make([]Case, opts.Batch)
	for i := range items {
		items[i] = cases[i%len(cases)]
	}
	t := time.Now()
	imgs := make([]image.Image, len(items))
	if err := preprocess.Parallel(len(items), func(i int) (err error) {
		imgs[i], err = decodeScreen(items[i])
		return err
	}); err != nil {
		return nil, Batch{}, err
	}
	decode := time.Since(t)
	reqs := make([]predict.Request, len(items))
	for i, c := range items {
		reqs[i] = request(c, imgs[i], opts)
	}
	res, err := p.PredictBatch(ctx, reqs)
	if err != nil {
		return nil, Batch{}, fmt.Errorf("batch of %d, run %d: %w", len(reqs), r, err)
	}
	wall := time.Since(t)
	if len(res) != len(items) {
		return nil, Batch{}, fmt.Errorf("batch of %d, run %d: %d results", len(items), r, len(res))
	}
	actions := make([]Action, 0, len(items))
	for i, c := range items {
		a, err := screenAction(c, res[i], decode, opts)
		if err != nil {
			return nil, Batch{}, fmt.Errorf("batch run %d, screen %d (case %s): %w", r, i, c.ID, err)
		}
		a.Run = r
		actions = append(actions, a)
	}
	// every screen carries the batch's resize (engine.PredictBatch's convention)
	return actions, Batch{Run: r, Screens: len(items), Start: t, Decode: decode, Resize: res[0].Timings.Preprocess, Wall: wall}, nil
}
