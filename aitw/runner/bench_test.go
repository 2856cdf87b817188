package runner

import (
	"context"
	"fmt"
	"image"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/autoui/autoui/aitw"
	"github.com/autoui/autoui/aitw/aitwtest"
	"github.com/autoui/autoui/bench"
	"github.com/autoui/autoui/engine"
	"github.com/autoui/autoui/engine/preprocess"
	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/predict"
	"github.com/autoui/autoui/predict/predicttest"
)

// BenchmarkRunBatch measures `eval run` throughput (steps/s) by batch size
// on a random-weight T5-base bundle (`make bench-models`; skipped when
// absent), 2 threads (CPU unless AUTOUI_BENCH_PROVIDER says cuda), over the
// 55 fixture steps. Features come from a pre-filled feature cache, so no
// step runs vision: the text path alone, as from Auto-UI's pickles. Random
// weights never stop by themselves, so every step replays
// bench.TypicalAction (predict.Request.Replay: real decoder calls, a trained
// model's output and speculative acceptance) with the limit at its length +
// </s>. Each iteration runs every batch size in turn, so on a shared machine
// the sizes see the same load; the metrics are steps/s and decoder calls
// per step at each size, and each round is logged.
//
//	go test ./aitw/runner/ -run '^$' -bench RunBatch -benchtime=2x -v
func BenchmarkRunBatch(b *testing.B) {
	dir := filepath.Join("..", "..", "bench-models", "base-vtiny")
	if _, err := os.Stat(filepath.Join(dir, models.ManifestFile)); err != nil {
		b.Skipf("no base bundle (make bench-models): %v", err)
	}
	bundle, err := models.Load(dir, models.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	// AUTOUI_BENCH_PROVIDER=cuda measures the GPU default (ORT's CUDA build
	// set up as in docs/cuda.md).
	prov, err := engine.ParseProvider(os.Getenv("AUTOUI_BENCH_PROVIDER"))
	if err != nil {
		b.Fatal(err)
	}
	p, err := engine.NewPredictor(bundle, engine.Options{Session: engine.SessionOptions{IntraOpThreads: 2, Provider: prov}})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("provider %s, 2 threads", prov)
	defer p.Close()
	replay, err := p.Tokenizer().EncodeNoEOS(bench.TypicalAction)
	if err != nil {
		b.Fatal(err)
	}
	files, err := aitw.ExpandPaths([]string{"../testdata/records"})
	if err != nil {
		b.Fatal(err)
	}
	cache := b.TempDir()
	steps := fillCache(b, files, cache, bundle.Manifest.Model.ImageDim)
	rp := replayPredictor{p: p, replay: replay}
	sizes := []int{1, 4, 8, 16}
	for _, mode := range []History{HistoryGold, HistoryPredicted} {
		b.Run(string(mode), func(b *testing.B) {
			b.Logf("load average before: %s", loadAverage())
			elapsed := make([]time.Duration, len(sizes))
			calls := make([]int, len(sizes))
			for i := 0; i < b.N; i++ {
				round := make([]string, len(sizes)) // per-round figures show the noise
				for k, batch := range sizes {
					opts := Options{Files: files, OutDir: b.TempDir(), CacheDir: cache, CacheKey: "bench", History: mode, Batch: batch}
					t := time.Now()
					sum, err := Run(context.Background(), rp, opts)
					dt := time.Since(t)
					if err != nil || sum.Predicted != steps || sum.CacheMisses != 0 || sum.Decode.Tokens != steps*(len(replay)+1) {
						b.Fatalf("batch %d: %+v %v", batch, sum, err)
					}
					elapsed[k] += dt
					calls[k] += sum.Decode.Calls
					round[k] = fmt.Sprintf("B=%d %.3f", batch, float64(steps)/dt.Seconds())
				}
				b.Logf("round %d steps/s: %s (load %s)", i, strings.Join(round, ", "), loadAverage())
			}
			n := float64(b.N * steps)
			for k, batch := range sizes {
				b.ReportMetric(n/elapsed[k].Seconds(), fmt.Sprintf("steps/s@B%d", batch))
				b.ReportMetric(float64(calls[k])/n, fmt.Sprintf("calls/step@B%d", batch))
			}
			b.ReportMetric(0, "ns/op") // an op is every size's run: the per-size figures are the result
			b.Logf("load average after: %s; %d tokens per step", loadAverage(), len(replay)+1)
		})
	}
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

// replayPredictor makes every request decode the given tokens (see
// predict.Request.Replay), then </s>.
type replayPredictor struct {
	p      *engine.Predictor
	replay []int64
}

func (r replayPredictor) Predict(ctx context.Context, req predict.Request) (*predict.Result, error) {
	return predicttest.One(ctx, r, req)
}

func (r replayPredictor) PredictBatch(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
	for i := range reqs {
		reqs[i].Replay, reqs[i].MaxNewTokens = r.replay, len(r.replay)+1
	}
	return r.p.PredictBatch(ctx, reqs)
}

// fillCache writes made-up features for every step of files into the
// feature cache, as a previous run would, and returns the step count.
func fillCache(b *testing.B, files []string, dir string, dim int) int {
	steps := 0
	_, err := aitw.StreamEpisodes(files, aitw.ReadOptions{KeepPixels: true}, func(ep aitw.Episode) error {
		for _, s := range ep.Steps {
			f := make([]float32, dim)
			for i := range f {
				f[i] = float32((i+steps)%11) / 11
			}
			steps++
			if err := writeFeatures(cachePath(dir, "bench", s), f); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	return steps
}

// BenchmarkRunHost measures what `eval run` can feed an engine on this
// host: full-size AITW steps (1080x2400 RGB; a third of each screen noise,
// so that the records compress like screenshots with photos: ~2.7 MB per
// step) in 4 files, read, hashed for the feature cache, and resized as the
// engine's host side does, by a predictor that does only that: in its calls
// (engine-resizes), or, as eval run does, in the read-ahead (shrink-ahead,
// Options.Shrink; the predictor's resize is then a copy); the files one
// after another, or 4 at once (read4: eval run --read-files 4, its cuda
// default). steps/s is the most eval run can reach on a GPU fast enough to
// wait for the host.
//
//	go test ./aitw/runner/ -run '^$' -bench RunHost -benchtime=3x -v
func BenchmarkRunHost(b *testing.B) {
	dir := b.TempDir()
	var files []string
	steps := 0
	for i := range 4 {
		files = append(files, filepath.Join(dir, "general", fmt.Sprintf("general-%d.tfrecord.gz", i)))
		n, err := aitwtest.WriteFullSize(files[i], 2*i, 2, 6)
		if err != nil {
			b.Fatal(err)
		}
		steps += n
	}
	hp := hostPredictor{cfg: preprocess.DefaultConfig()}
	shrink := func(img image.Image) image.Image { return preprocess.ResizeBicubic(img, hp.cfg.Width, hp.cfg.Height) }
	for _, c := range []struct {
		name      string
		ahead     bool
		readFiles int
	}{{"engine-resizes", false, 1}, {"shrink-ahead", true, 1}, {"shrink-ahead-read4", true, 4}} {
		b.Run(c.name, func(b *testing.B) {
			var elapsed time.Duration
			for range b.N {
				opts := Options{Files: files, OutDir: b.TempDir(), History: HistoryGold, Batch: 16}
				opts.Read.Interleave = c.readFiles
				opts.CacheDir, opts.CacheKey = filepath.Join(opts.OutDir, "features"), "bench"
				if c.ahead {
					opts.Shrink = shrink
				}
				t := time.Now()
				sum, err := Run(context.Background(), hp, opts)
				if err != nil || sum.Predicted != steps {
					b.Fatalf("%+v %v", sum, err)
				}
				elapsed += time.Since(t)
			}
			b.ReportMetric(float64(b.N*steps)/elapsed.Seconds(), "steps/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// hostPredictor does an engine's host work only: every screen resized to
// the vision input, spread over the cores; the features are made up.
type hostPredictor struct{ cfg preprocess.Config }

func (h hostPredictor) Predict(ctx context.Context, req predict.Request) (*predict.Result, error) {
	return predicttest.One(ctx, h, req)
}

func (h hostPredictor) PredictBatch(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
	pix := make([]float32, len(reqs)*h.cfg.Len())
	err := preprocess.Parallel(len(reqs), func(i int) error {
		if reqs[i].Features != nil {
			return nil
		}
		reqs[i].Features = []float32{float32(i)}
		return h.cfg.PixelsInto(pix[i*h.cfg.Len():(i+1)*h.cfg.Len()], reqs[i].Screen)
	})
	if err != nil {
		return nil, err
	}
	out := make([]*predict.Result, len(reqs))
	for i, req := range reqs {
		out[i] = fakeResult(req)
	}
	return out, nil
}
