package bench

import (
	"context"
	"errors"
	"image"
	"sync"
	"testing"

	"github.com/autoui/autoui/predict"
	"github.com/autoui/autoui/predict/predicttest"
)

// cancelling answers as fakePredictor does and cancels the context once it
// has answered `after` requests (Ctrl-C): later requests fail.
type cancelling struct {
	mu     sync.Mutex
	f      fakePredictor
	n      int
	after  int
	cancel context.CancelFunc
}

func (c *cancelling) PredictBatch(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]*predict.Result, len(reqs))
	for i, r := range reqs {
		out[i], _ = c.f.Predict(ctx, r)
	}
	if c.n++; c.n == c.after {
		c.cancel()
	}
	return out, nil
}

func (c *cancelling) Predict(ctx context.Context, req predict.Request) (*predict.Result, error) {
	return predicttest.One(ctx, c, req)
}

func shrinkNothing(img image.Image) image.Image { return img }

// What was measured before a Ctrl-C is returned with the error, so that the
// command reports it (it was lost).
func TestInterruptedRunsKeepWhatWasMeasured(t *testing.T) {
	cases := smallCases(t) // 3
	for _, c := range []struct {
		name  string
		opts  Options
		after int // calls answered before the cancel: 1 warm-up call, then measured ones
		want  int // actions returned (at most, for batches at once: in run order up to the first that failed)
	}{
		{"one by one", Options{Runs: 5, Warmup: 1, Tokens: 5}, 3 + 4, 4},
		{"batches", Options{Runs: 5, Warmup: 1, Tokens: 5, Batch: 2}, 1 + 2, 4},
		{"batches at once", Options{Runs: 5, Warmup: 1, Tokens: 5, Batch: 2, Concurrent: 2}, 1 + 2, 4},
		{"pipelined", Options{Runs: 5, Warmup: 1, Tokens: 5, Batch: 2, Pipeline: true, Shrink: shrinkNothing}, 1 + 2, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p := &cancelling{after: c.after, cancel: cancel}
			var actions []Action
			var err error
			if c.opts.Batch > 0 {
				actions, _, err = RunBatch(ctx, p, cases, c.opts)
			} else {
				actions, err = Run(ctx, p, cases, c.opts)
			}
			n := len(actions)
			if c.opts.Concurrent > 1 && n < c.want && n%c.opts.Batch == 0 {
				n = c.want // which two of the batches got in first is up to the scheduler
			}
			if !errors.Is(err, context.Canceled) || n != c.want {
				t.Fatalf("%d actions, %v; want %d and the cancellation", len(actions), err, c.want)
			}
			for i, a := range actions {
				if c.opts.Batch == 0 && a.Run != i/len(cases) {
					t.Errorf("action %d is of run %d", i, a.Run)
				}
			}
		})
	}
}
