package runner

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/autoui/autoui/aitw"
	"github.com/autoui/autoui/engine"
	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/predict"
)

// End to end with the real tiny bundle: batched runs write what Batch 1
// writes, from records (screens: batched vision, feature cache) and from
// Auto-UI pickles (features given), in both history modes.

func tinyPredictor(t *testing.T, opts engine.Options) *engine.Predictor {
	t.Helper()
	b, err := models.Load(filepath.Join("..", "..", "models", "testdata", "tiny"), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := engine.NewPredictor(b, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// tinyRun runs the tiny bundle on files into a fresh output directory,
// with the feature cache in cache.
func tinyRun(t *testing.T, p predict.Predictor, files []string, cache string, mode History, batch int) Summary {
	t.Helper()
	opts := Options{Files: files, OutDir: t.TempDir(), CacheDir: cache, CacheKey: "tiny", History: mode, Batch: batch}
	sum, err := Run(context.Background(), p, opts)
	if err != nil {
		t.Fatalf("%s batch %d: %v", mode, batch, err)
	}
	return sum
}

func readLines(t *testing.T, path string) [][]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.SplitAfter(b, []byte("\n"))
}

// sameLines compares two prediction files: byte for byte when the order
// must match, else as sorted lines.
func sameLines(t *testing.T, got, want string, ordered bool) {
	t.Helper()
	g, w := readLines(t, got), readLines(t, want)
	if !ordered {
		slices.SortFunc(g, bytes.Compare)
		slices.SortFunc(w, bytes.Compare)
	}
	if len(g) != len(w) {
		t.Fatalf("%d lines, want %d", len(g), len(w))
	}
	for i := range g {
		if !bytes.Equal(g[i], w[i]) {
			t.Fatalf("line %d differs:\n got %s\nwant %s", i, g[i], w[i])
		}
	}
}

// sameFeatures checks that every feature file in got is in want, byte
// for byte.
func sameFeatures(t *testing.T, got, want string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(got, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		rel, _ := filepath.Rel(got, path)
		g, _ := os.ReadFile(path)
		w, err := os.ReadFile(filepath.Join(want, rel))
		if err != nil || !bytes.Equal(g, w) {
			t.Errorf("feature cache %s differs from Batch 1's (%v)", rel, err)
		}
		return nil
	})
	if err != nil || n == 0 {
		t.Fatalf("feature cache %s: %d files, %v", got, n, err)
	}
}

func TestBatchSameAsOneTiny(t *testing.T) {
	p := tinyPredictor(t, engine.Options{})
	records, err := aitw.ExpandPaths([]string{"../testdata/records"})
	if err != nil {
		t.Fatal(err)
	}
	// Batch 1 fills the cache one screen at a time; batches of 4 compute
	// the same features in one vision call (shown on one subset, to keep
	// -race runs short), and the other runs read them from the cache.
	cache := filepath.Join(t.TempDir(), "features")
	ref := map[History]Summary{HistoryGold: tinyRun(t, p, records, cache, HistoryGold, 1)}
	if s := ref[HistoryGold]; s.Predicted != 55 || s.CacheMisses != 55 {
		t.Fatalf("batch 1: %+v", s)
	}
	general, _ := aitw.ExpandPaths([]string{"../testdata/records/general"})
	batched := filepath.Join(t.TempDir(), "features")
	if s := tinyRun(t, p, general, batched, HistoryGold, 4); s.CacheMisses != s.Predicted {
		t.Fatalf("batched vision: %+v", s)
	}
	sameFeatures(t, batched, cache)
	ref[HistoryPredicted] = tinyRun(t, p, records, cache, HistoryPredicted, 1)

	for _, mode := range []History{HistoryGold, HistoryPredicted} {
		t.Run(string(mode), func(t *testing.T) {
			one := ref[mode]
			// 4 does not divide 55 steps; gold calls span episodes.
			four := tinyRun(t, p, records, cache, mode, 4)
			sameLines(t, four.Path, one.Path, mode == HistoryGold)
			if four.Predicted != one.Predicted || four.ParseErrors != one.ParseErrors || four.Decode.Tokens != one.Decode.Tokens ||
				four.Episodes != one.Episodes || four.CacheHits != 55 {
				t.Errorf("summaries differ:\nbatch 4 %+v\nbatch 1 %+v", four, one)
			}
			if four.Decode.Calls >= one.Decode.Calls || four.Decode.Calls == 0 {
				t.Errorf("decoder calls: batch 4 %d, batch 1 %d (batched calls count once)", four.Decode.Calls, one.Decode.Calls)
			}
			testLimitCancelResume(t, p, records, cache, mode, one.Path)
		})
	}
}

// cancelOn cancels the run's context as its n-th engine call starts, so
// the engine sees a cancelled context mid-run.
type cancelOn struct {
	predict.Predictor
	n, calls int
	cancel   context.CancelFunc
}

func (c *cancelOn) PredictBatch(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
	if c.calls++; c.calls == c.n {
		c.cancel()
	}
	return c.Predictor.PredictBatch(ctx, reqs)
}

// A batched run stopped at --limit, then cancelled, then resumed at another
// batch size ends with Batch 1's predictions; every line on the way is whole.
func testLimitCancelResume(t *testing.T, p predict.Predictor, files []string, cache string, mode History, want string) {
	t.Helper()
	opts := Options{Files: files, OutDir: t.TempDir(), CacheDir: cache, CacheKey: "tiny", History: mode, Batch: 4, Limit: 10}
	sum, err := Run(context.Background(), p, opts)
	if err != nil || sum.Predicted != 10 || !sum.LimitHit {
		t.Fatalf("limit 10: %+v %v", sum, err)
	}
	checkLines(t, sum.Path, 10)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	opts.Limit = 0
	sum, err = Run(ctx, &cancelOn{Predictor: p, n: 3, cancel: cancel}, opts)
	if err != nil || !sum.Interrupted || sum.AlreadyDone != 10 || sum.Predicted != 2*4 {
		t.Fatalf("cancelled on the third call: %+v %v", sum, err)
	}
	checkLines(t, sum.Path, 18)

	opts.Batch = 5
	sum, err = Run(context.Background(), p, opts)
	if err != nil || sum.AlreadyDone != 18 || sum.Predicted != 55-18 {
		t.Fatalf("resume: %+v %v", sum, err)
	}
	sameLines(t, sum.Path, want, false)
}

// Auto-UI pickles give features: nothing goes through vision or the cache.
// A 12-token limit cuts every output short of a whole action, so parse
// errors (and predicted history skipping them) are compared too.
func TestBatchSameAsOneTinyPickle(t *testing.T) {
	files := []string{"../testdata/autoui/general_blip_test.obj"} // 64-dim features, as the tiny bundle wants
	for _, maxNew := range []int{0, 12} {
		p := tinyPredictor(t, engine.Options{MaxNewTokens: maxNew})
		for _, mode := range []History{HistoryGold, HistoryPredicted} {
			one := tinyRun(t, p, files, "", mode, 1)
			three := tinyRun(t, p, files, "", mode, 3) // 13 steps
			if one.Predicted != 13 || three.CacheMisses+three.CacheHits != 0 || (maxNew > 0) != (one.ParseErrors == 13) {
				t.Fatalf("%s, limit %d: batch 1 %+v, batch 3 %+v", mode, maxNew, one, three)
			}
			sameLines(t, three.Path, one.Path, mode == HistoryGold)
			if three.ParseErrors != one.ParseErrors {
				t.Errorf("%s: parse errors %d, batch 1 %d", mode, three.ParseErrors, one.ParseErrors)
			}
		}
	}
}

func ExampleDefaultBatch() {
	fmt.Println(DefaultBatch("cpu") >= 1, DefaultBatch("cuda") >= DefaultBatch("cpu"))
	// Output: true true
}

// screensSeen records the size of every screen the engine is given.
type screensSeen struct {
	predict.Predictor
	sizes map[image.Point]int
}

func (s *screensSeen) PredictBatch(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
	for _, r := range reqs {
		if r.Screen != nil {
			s.sizes[r.Screen.Bounds().Size()]++
		}
	}
	return s.Predictor.PredictBatch(ctx, reqs)
}

// Screens shrunk ahead (Options.Shrink: the read-ahead resizes them) give
// the predictions and cached features of whole screens, in both history
// modes, and the engine sees only shrunk screens.
func TestShrinkAheadTiny(t *testing.T) {
	p := tinyPredictor(t, engine.Options{})
	records, err := aitw.ExpandPaths([]string{"../testdata/records/general"})
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []History{HistoryGold, HistoryPredicted} {
		whole := filepath.Join(t.TempDir(), "features")
		want := tinyRun(t, p, records, whole, mode, 4)
		seen := &screensSeen{Predictor: p, sizes: map[image.Point]int{}}
		shrunk := filepath.Join(t.TempDir(), "features")
		opts := Options{Files: records, OutDir: t.TempDir(), CacheDir: shrunk, CacheKey: "tiny", History: mode, Batch: 4, Shrink: p.Shrink}
		got, err := Run(context.Background(), seen, opts)
		if err != nil {
			t.Fatal(err)
		}
		sameLines(t, got.Path, want.Path, true)
		sameFeatures(t, shrunk, whole)
		small := p.Shrink(image.NewRGBA(image.Rect(0, 0, 1080, 2400))).Bounds().Size()
		if len(seen.sizes) != 1 || seen.sizes[small] != got.CacheMisses || got.CacheMisses == 0 {
			t.Errorf("%s: the engine saw screens %v, want %d of %v", mode, seen.sizes, got.CacheMisses, small)
		}
	}
}
