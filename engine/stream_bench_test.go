package engine

import (
	"cmp"
	"context"
	"testing"

	"github.com/autoui/autoui/predict"
)

// BenchmarkStreamBase compares, on the static decoder of a random-weight
// T5-base bundle (`make bench-models`; skipped when absent), the same
// requests run as batches of 8 (PredictBatch: each batch decodes until its
// longest answer) and as a continuous decode on 8 rows (Stream: a row is
// taken by the next request as soon as its answer ends); and, beside them,
// batches on the provider's default decode (no static decoder). Answers
// are 8 to 64 tokens long (mixed, as actions are; a minimum length on a
// random model, so every call fetches logits, on every path alike),
// prompts the golden cases' short ones; items/s is the figure to compare.
//
//	go test ./engine/ -run '^$' -bench StreamBase -benchtime=2x
func BenchmarkStreamBase(b *testing.B) {
	bundle := baseBundle(b)
	p, err := NewPredictor(bundle, Options{CUDAGraph: true})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	reqs := baseRequests(b, p, func(i int) int { return 8 + (i*23)%57 }) // 8..64
	const rows = 8
	ctx := context.Background()
	batches := func(p *Predictor) func(b *testing.B) {
		return func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				for lo := 0; lo < len(reqs); lo += rows {
					if _, err := p.PredictBatch(ctx, reqs[lo:min(lo+rows, len(reqs))]); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N*len(reqs))/b.Elapsed().Seconds(), "items/s")
		}
	}
	plain, err := NewPredictor(bundle, Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	b.Run("batches-default", batches(plain))
	b.Run("batches", batches(p))
	b.Run("stream", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			next := 0
			var failed error
			err := p.Stream(ctx, rows, func(free int, _ bool) ([]predict.Job, bool) {
				var jobs []predict.Job
				for ; free > 0 && next < len(reqs); free-- {
					jobs = append(jobs, predict.Job{Ctx: ctx, Req: reqs[next], Done: func(_ *predict.Result, err error) {
						if err != nil {
							failed = err
						}
					}})
					next++
				}
				return jobs, next < len(reqs)
			})
			if err = cmp.Or(err, failed); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N*len(reqs))/b.Elapsed().Seconds(), "items/s")
	})
}
