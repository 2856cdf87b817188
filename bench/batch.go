package bench

import (
	"context"
	"fmt"
	"image"
	"time"

	"github.com/autoui/autoui/engine/preprocess"
	"github.com/autoui/autoui/predict"
)

// Batch is one measured PredictBatch call and the decoding of its screens.
type Batch struct {
	Run     int
	Screens int
	Decode  time.Duration // the batch's screens decoded, spread over the cores
	Wall    time.Duration // Decode + PredictBatch
}

// ScreensPerSecond is the batch's throughput, decoding included.
func (b Batch) ScreensPerSecond() float64 { return float64(b.Screens) / b.Wall.Seconds() }

// EngineScreensPerSecond is the batch's throughput without decoding the
// screens: PredictBatch's alone, what `eval run` (AITW's raw pixels) and
// `serve` (each handler decodes its own request while the engine works) get.
func (b Batch) EngineScreensPerSecond() float64 {
	return float64(b.Screens) / (b.Wall - b.Decode).Seconds()
}

// RunBatch predicts opts.Batch screens per PredictBatch call — the cases
// round-robin, each screen decoded from its PNG/JPEG bytes on its own —
// opts.Warmup + opts.Runs times. It returns one Action per screen of the
// measured batches (the stages of the batched calls are the calls' wall
// times, as engine.PredictBatch reports them) and the batches.
func RunBatch(ctx context.Context, p predict.Predictor, cases []Case, opts Options) ([]Action, []Batch, error) {
	if err := check(cases, opts); err != nil {
		return nil, nil, err
	}
	if opts.Batch < 1 {
		return nil, nil, fmt.Errorf("batch = %d: need at least 1", opts.Batch)
	}
	var actions []Action
	var batches []Batch
	for r := -opts.Warmup; r < opts.Runs; r++ {
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
			return nil, nil, err
		}
		decode := time.Since(t)
		reqs := make([]predict.Request, len(items))
		for i, c := range items {
			reqs[i] = request(c, imgs[i], opts)
		}
		res, err := p.PredictBatch(ctx, reqs)
		if err != nil {
			return nil, nil, fmt.Errorf("batch of %d, run %d: %w", len(reqs), r, err)
		}
		wall := time.Since(t)
		if len(res) != len(items) {
			return nil, nil, fmt.Errorf("batch of %d, run %d: %d results", len(items), r, len(res))
		}
		if r < 0 {
			continue
		}
		for i, c := range items {
			a, err := screenAction(c, res[i], decode, opts)
			if err != nil {
				return nil, nil, fmt.Errorf("batch run %d, screen %d (case %s): %w", r, i, c.ID, err)
			}
			a.Run = r
			actions = append(actions, a)
		}
		batches = append(batches, Batch{Run: r, Screens: len(items), Decode: decode, Wall: wall})
	}
	return actions, batches, nil
}
