package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/predict"
)

// BenchmarkPredictBatch measures throughput by batch size on the tiny
// bundle's 23 golden cases, from precomputed vision features (the batched
// encoder, fusion and decoder). Each iteration predicts all cases, in
// batches of size items; items/s is the figure to compare.
//
//	go test ./engine/ -run '^$' -bench PredictBatch -benchtime=20x -count=6 | benchstat -
func BenchmarkPredictBatch(b *testing.B) {
	p := tiny(b)
	cases := loadGolden(b)
	reqs := make([]predict.Request, len(cases))
	for i, c := range cases {
		reqs[i] = predict.Request{Features: loadNpy(b, c.Tensors["image_features"]), Goal: c.Goal, History: benchHistory(b, c), MaxNewTokens: c.MaxNewTokens}
	}
	benchBatches(b, p, reqs)
}

// BenchmarkPredictBatchScreens is BenchmarkPredictBatch from decoded
// screenshots: preprocessing and the batched vision call included.
func BenchmarkPredictBatchScreens(b *testing.B) {
	p := tiny(b)
	cases := loadGolden(b)
	reqs := make([]predict.Request, len(cases))
	for i, c := range cases {
		reqs[i] = predict.Request{Screen: screen(b, c.Screen), Goal: c.Goal, History: benchHistory(b, c), MaxNewTokens: c.MaxNewTokens}
	}
	benchBatches(b, p, reqs)
}

// BenchmarkPredictBatchBase runs the same on a random-weight T5-base bundle
// (`make bench-models`; skipped when absent), where a decoder call is bound
// by reading the weights and batching pays off as it would for a real
// model. Random weights emit no Auto-UI text, so every item generates a
// fixed 64 tokens; prompts are the golden cases' short ones (<= 100 tokens).
//
//	go test ./engine/ -run '^$' -bench PredictBatchBase -benchtime=3x
func BenchmarkPredictBatchBase(b *testing.B) {
	bundle := baseBundle(b)
	p, err := NewPredictor(bundle, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	benchBatches(b, p, baseRequests(b, p, func(int) int { return 64 }))
}

// baseBundle is the random-weight T5-base bundle with a tiny vision tower
// (`make bench-models`); the benchmark skips without it.
func baseBundle(b *testing.B) *models.Bundle {
	dir := filepath.Join("..", "bench-models", "base-vtiny")
	if _, err := os.Stat(filepath.Join(dir, models.ManifestFile)); err != nil {
		b.Skipf("no base bundle (make bench-models): %v", err)
	}
	bundle, err := models.Load(dir, models.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return bundle
}

// baseRequests are the golden cases of prompts up to 100 tokens, with
// fixed features, each generating exactly length(i) tokens (random weights
// emit no Auto-UI text).
func baseRequests(b *testing.B, p *Predictor, length func(i int) int) []predict.Request {
	var reqs []predict.Request
	for i, c := range loadGolden(b) {
		if len(c.InputIDs) > 100 {
			continue
		}
		feat := make([]float32, p.cfg.ImageDim)
		for j := range feat {
			feat[j] = float32(j%7) / 7
		}
		n := length(i)
		reqs = append(reqs, predict.Request{Features: feat, Goal: c.Goal, History: benchHistory(b, c), MaxNewTokens: n, MinNewTokens: n})
	}
	return reqs
}

// benchBatches runs every request once per iteration, in batches of each
// size, so sizes are compared on the same work (prompts of mixed lengths:
// a batch is padded to its longest).
func benchBatches(b *testing.B, p *Predictor, reqs []predict.Request) {
	ctx := context.Background()
	for _, size := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				for lo := 0; lo < len(reqs); lo += size {
					if _, err := p.PredictBatch(ctx, reqs[lo:min(lo+size, len(reqs))]); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N*len(reqs))/b.Elapsed().Seconds(), "items/s")
		})
	}
}

// benchHistory is goldenCase.history for a benchmark.
func benchHistory(b *testing.B, c goldenCase) []action.Action {
	out := make([]action.Action, len(c.History))
	for i, h := range c.History {
		typ, err := action.ParseType(h.ActionType)
		if err != nil {
			b.Fatal(err)
		}
		out[i] = action.Action{Type: typ, Touch: action.Point{Y: h.Touch[0], X: h.Touch[1]}, Lift: action.Point{Y: h.Lift[0], X: h.Lift[1]}, Text: h.Text}
	}
	return out
}
