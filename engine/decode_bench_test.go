package engine

import (
	"context"
	"os"
	"testing"

	"github.com/autoui/autoui/models"
)

// decodeInputs encodes and fuses a fixed prompt: the first golden case's on
// the tiny bundle, or a synthetic one on the bundle AUTOUI_BENCH_MODEL names
// (allocations per step grow with the layer count).
func decodeInputs(b *testing.B) (*Predictor, []float32, []int64) {
	b.Helper()
	var p *Predictor
	var ids []int64
	var feat []float32
	if dir := os.Getenv("AUTOUI_BENCH_MODEL"); dir != "" {
		bundle, err := models.Load(dir, models.LoadOptions{Verify: models.VerifySizes})
		if err != nil {
			b.Fatal(err)
		}
		if p, err = NewPredictor(bundle, Options{}); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Close() })
		ids = make([]int64, 128)
		for i := range ids {
			ids[i] = int64(3 + i*7%500)
		}
		feat = make([]float32, p.cfg.ImageDim)
	} else {
		p = tiny(b)
		c := loadGolden(b)[0]
		ids, feat = c.InputIDs, loadNpy(b, c.Tensors["image_features"])
	}
	mask := make([]int64, len(ids))
	for i := range mask {
		mask[i] = 1
	}
	enc, err := p.encode(ids, mask)
	if err != nil {
		b.Fatal(err)
	}
	fused, err := p.fuse(enc, feat, mask)
	if err != nil {
		b.Fatal(err)
	}
	return p, fused, mask
}

// BenchmarkDecoderStep measures one decoder call (op = one step) and the Go
// allocations it makes, on the tiny bundle so that the loop's own overhead,
// not the model, dominates:
//
//	go test -run '^$' -bench DecoderStep -benchmem ./engine
//
// k=1 is a greedy step; k=4 a speculative verify of 4 tokens after which 2
// are rejected (truncate), so the cache's length changes as in speculative
// decoding; greedy-32 and speculative-32 are whole decodes of 32 tokens
// including the run's setup (op = one decode).
func BenchmarkDecoderStep(b *testing.B) {
	p, fused, mask := decodeInputs(b)
	const maxLen = 128
	for _, bc := range []struct {
		name   string
		tokens []int64
		keep   int64 // tokens kept of each call's input (truncate the rest)
	}{
		{"k=1", []int64{5}, 1},
		{"k=4", []int64{5, 6, 7, 8}, 2},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var r *decodeRun
			defer func() {
				if r != nil {
					r.close()
				}
			}()
			for b.Loop() {
				if r == nil || r.pastLen+int64(len(bc.tokens)) > r.maxLen {
					if r != nil {
						r.close()
					}
					var err error
					if r, err = p.newDecodeRun(fused, mask, maxLen, &Timings{}); err != nil {
						b.Fatal(err)
					}
				}
				past := r.pastLen
				if _, err := r.step(bc.tokens); err != nil {
					b.Fatal(err)
				}
				r.truncate(past + bc.keep)
			}
		})
	}
	// whole decodes of a fixed 32 tokens (op = one decode, setup included)
	for _, dec := range []struct {
		name string
		fn   func(context.Context, []float32, []int64, genLimits, *Timings) ([]int64, error)
	}{{"greedy-32", p.greedy}, {"speculative-32", p.speculative}} {
		b.Run(dec.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				ids, err := dec.fn(context.Background(), fused, mask, genLimits{minNew: 32, maxNew: 32}, &Timings{})
				if err != nil {
					b.Fatal(err)
				}
				if len(ids) != 32 {
					b.Fatalf("%d tokens", len(ids))
				}
			}
		})
	}
}
