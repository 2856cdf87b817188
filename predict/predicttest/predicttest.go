// Package predicttest completes test fakes of predict.Predictor that
// implement one of its two methods with the other.
package predicttest

import (
	"context"
	"fmt"

	"github.com/autoui/autoui/predict"
)

// Each is PredictBatch for a fake with Predict: the requests one after
// another, in order; the first error fails the batch.
func Each(ctx context.Context, p interface {
	Predict(context.Context, predict.Request) (*predict.Result, error)
}, reqs []predict.Request) ([]*predict.Result, error) {
	out := make([]*predict.Result, len(reqs))
	for i, r := range reqs {
		res, err := p.Predict(ctx, r)
		if err != nil {
			if len(reqs) > 1 {
				err = fmt.Errorf("request %d: %w", i, err)
			}
			return nil, err
		}
		out[i] = res
	}
	return out, nil
}

// One is Predict for a fake with PredictBatch: a batch of one.
func One(ctx context.Context, p interface {
	PredictBatch(context.Context, []predict.Request) ([]*predict.Result, error)
}, req predict.Request) (*predict.Result, error) {
	res, err := p.PredictBatch(ctx, []predict.Request{req})
	if err != nil {
		return nil, err
	}
	return res[0], nil
}
