package engine

import (
	"context"
	"os"
	"testing"

	"github.com/autoui/autoui/engine/kv"
	"github.com/autoui/autoui/engine/sample"
	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/predict"
)

// decodeInputs encodes and fuses a fixed prompt: the first golden case's on
// the tiny bundle, or a synthetic one on the bundle AUTOUI_BENCH_MODEL names
// (allocations per step grow with the layer count). AUTOUI_BENCH_PROVIDER
// (cpu, cuda) picks the execution provider; the process's ONNX Runtime
// library must have it. graph opens it with Options.CUDAGraph.
func decodeInputs(b *testing.B, graph bool) (*Predictor, []float32, []int64) {
	b.Helper()
	var p *Predictor
	var ids []int64
	var feat []float32
	provider, err := ParseProvider(os.Getenv("AUTOUI_BENCH_PROVIDER"))
	if err != nil {
		b.Fatal(err)
	}
	opts := Options{Session: SessionOptions{Provider: provider}, CUDAGraph: graph}
	if dir := os.Getenv("AUTOUI_BENCH_MODEL"); dir != "" {
		bundle, err := models.Load(dir, models.LoadOptions{Verify: models.VerifySizes})
		if err != nil {
			b.Fatal(err)
		}
		if p, err = NewPredictor(bundle, opts); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { p.Close() })
		ids = make([]int64, 128)
		for i := range ids {
			ids[i] = int64(3 + i*7%500)
		}
		feat = make([]float32, p.cfg.ImageDim)
	} else {
		opts.Truncation = TruncateRight
		p = tinyWith(b, opts)
		c := loadGolden(b)[0]
		ids, feat = c.InputIDs, loadNpy(b, c.Tensors["image_features"])
	}
	fused, mask := hostInputs(b, p, ids, feat)
	return p, fused.host, mask
}

// BenchmarkDecoderStep measures one decoder call (op = one call) and the Go
// allocations it makes, on the tiny bundle so that the loop's own overhead,
// not the model, dominates:
//
//	go test -run '^$' -bench DecoderStep -benchmem ./engine
//
// k=1 is a greedy step; k=4 a speculative verify of 4 tokens after which 2
// are rejected (truncate), so the cache's length changes as in speculative
// decoding. Each runs with the cache in Go memory (host: past in, present
// and logits out through Go buffers) and device-resident (device: ORT-owned
// values fed back, only the argmax ids fetched; on the cpu provider ORT's
// CPU memory stands in for the GPU's), and on fixed buffers through the
// static decoder (static: Options.CUDAGraph, captured and replayed under
// cuda; k positions per call, the cache's buffers reused from one decode to
// the next). greedy-32 and speculative-32 are whole decodes of 32 tokens
// including the cache's setup (op = one decode).
func BenchmarkDecoderStep(b *testing.B) {
	p, fused, mask := decodeInputs(b, false)
	const maxLen = 128
	for _, place := range []struct {
		name  string
		place placement
	}{{"host", placeHost}, {"device", placeDevice}, {"static", placeStatic}} {
		p := p
		if place.place == placeStatic {
			p, _, _ = decodeInputs(b, true)
		}
		for _, bc := range []struct {
			name   string
			tokens []int64
			keep   int // tokens kept of each call's input (truncate the rest)
		}{
			{"k=1", []int64{5}, 1},
			{"k=4", []int64{5, 6, 7, 8}, 2},
		} {
			b.Run(place.name+"/"+bc.name, func(b *testing.B) {
				if place.place == placeHost && p.cacheElem != kv.Float32 {
					b.Skipf("a %s cache has no host path", p.cacheElem)
				}
				if place.place != placeStatic {
					was := p.cachePlace
					p.cachePlace = place.place
					defer func() { p.cachePlace = was }()
				}
				b.ReportAllocs()
				k := len(bc.tokens)
				var c stepper
				defer func() {
					if c != nil {
						c.close()
					}
				}()
				for b.Loop() {
					if c == nil || c.cached()+k > maxLen {
						if c != nil {
							c.close()
						}
						var err error
						if c, err = p.newCall(1, encoded{host: fused}, mask, maxLen, k); err != nil {
							b.Fatal(err)
						}
					}
					past := c.cached()
					copy(c.input(k), bc.tokens)
					if _, err := c.step(k, false); err != nil {
						b.Fatal(err)
					}
					if err := c.truncate(past + bc.keep); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
	// whole decodes of a fixed 32 tokens (op = one decode, setup included)
	for _, dec := range []struct {
		name  string
		draft bool
	}{{"greedy-32", false}, {"speculative-32", true}} {
		b.Run(dec.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s := &sequence{tokens: []int64{p.bundle.Manifest.Tokens.DecoderStartID}, limit: 32, tm: &predict.Timings{},
					choose: sample.MinLength{N: 32, EOS: p.bundle.Manifest.Tokens.EOSID, Next: sample.Argmax{}}}
				if dec.draft {
					s.draft = p.drafts
				}
				if err := p.decode(context.Background(), []*sequence{s}, encoded{host: fused}, mask); err != nil {
					b.Fatal(err)
				}
				if len(s.out()) != 32 {
					b.Fatalf("%d tokens", len(s.out()))
				}
			}
		})
	}
}
