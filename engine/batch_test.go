package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/engine/preprocess"
	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/predict"
)

// sameResult reports how a batched result differs from the single one ("" if not).
func sameResult(got, want *predict.Result) string {
	switch {
	case !slices.Equal(got.TokenIDs, want.TokenIDs):
		return "token ids"
	case got.Raw != want.Raw:
		return "raw text"
	case got.SourceText != want.SourceText || got.SourceTokens != want.SourceTokens:
		return "prompt"
	case (got.ParseErr == nil) != (want.ParseErr == nil):
		return "parse error"
	case got.Action != want.Action || len(got.Plan) != len(want.Plan):
		return "action"
	case len(got.Features) != len(want.Features):
		return "features"
	}
	for i := range got.Plan {
		if got.Plan[i] != want.Plan[i] {
			return "plan"
		}
	}
	return ""
}

// featureRequest is c as a request whose screen enters as its golden
// vision features.
func (c goldenCase) featureRequest(t *testing.T) predict.Request {
	return predict.Request{Features: loadNpy(t, c.Tensors["image_features"]), Goal: c.Goal, History: c.history(t), MaxNewTokens: c.MaxNewTokens}
}

// goldenBatches predicts cases size at a time on p (featureRequest) and
// reports, under label, every output whose ids differ from the golden ones.
// The results come back in case order.
func goldenBatches(t *testing.T, p *Predictor, cases []goldenCase, size int, label string) []*predict.Result {
	t.Helper()
	var out []*predict.Result
	for lo := 0; lo < len(cases); lo += size {
		var reqs []predict.Request
		for _, c := range cases[lo:min(lo+size, len(cases))] {
			reqs = append(reqs, c.featureRequest(t))
		}
		got, err := p.PredictBatch(context.Background(), reqs)
		if err != nil {
			t.Fatalf("%s, items %d..: %v", label, lo, err)
		}
		for j, res := range got {
			if c := cases[lo+j]; !slices.Equal(res.TokenIDs, c.GeneratedIDs) {
				t.Errorf("%s %s: ids differ from golden\n got %v\nwant %v", label, c.ID, res.TokenIDs, c.GeneratedIDs)
			}
		}
		out = append(out, got...)
	}
	return out
}

// Every golden case, in batches of 1, 2, 3 and 8 (mixed screens and prompt
// lengths from 11 to 512 tokens, one case with a 16-token limit), gives the
// golden ids and exactly the single-request result (a batch of one is
// Predict, so size 1 gives the single results). The screens enter as their
// golden vision features: preprocessing a full-size screenshot costs most of
// a second under -race; TestPredictBatchMixedFeatures covers the batched
// vision call.
func TestPredictBatchGolden(t *testing.T) {
	p := tiny(t)
	ctx := context.Background()
	cases := loadGolden(t)
	reqs := make([]predict.Request, len(cases))
	for i, c := range cases {
		reqs[i] = c.featureRequest(t)
	}
	singles := make([]*predict.Result, len(cases))
	for _, size := range []int{1, 2, 3, 8} {
		for lo := 0; lo < len(cases); lo += size {
			hi := min(lo+size, len(cases))
			got, err := p.PredictBatch(ctx, reqs[lo:hi])
			if err != nil {
				t.Fatalf("size %d, items %d..%d: %v", size, lo, hi-1, err)
			}
			if len(got) != hi-lo {
				t.Fatalf("size %d: %d results for %d requests", size, len(got), hi-lo)
			}
			for j, res := range got {
				c := cases[lo+j]
				if size == 1 {
					singles[lo+j] = res
				}
				if !slices.Equal(res.TokenIDs, c.GeneratedIDs) {
					t.Errorf("size %d %s: ids differ from golden\n got %v\nwant %v", size, c.ID, res.TokenIDs, c.GeneratedIDs)
				}
				if res.Raw != c.Text {
					t.Errorf("size %d %s: text %q, golden %q", size, c.ID, res.Raw, c.Text)
				}
				if what := sameResult(res, singles[lo+j]); what != "" {
					t.Errorf("size %d %s: %s differs from single Predict", size, c.ID, what)
				}
				if hi-lo > 1 && (res.Timings.DecoderCalls == 0 || res.Timings.DecoderCalls > len(res.TokenIDs) || res.Timings.Encoder == 0 || res.Timings.Total == 0) {
					t.Errorf("size %d %s: timings %+v", size, c.ID, res.Timings)
				}
			}
		}
	}
}

// Per-request limits: MaxNewTokens cuts each item at its own length,
// MinNewTokens keeps one going past </s>, all as single Predict does.
func TestPredictBatchTokenLimits(t *testing.T) {
	p := tiny(t)
	ctx := context.Background()
	cases := loadGolden(t)
	var reqs []predict.Request
	for i, lim := range []struct{ max, min int }{{5, 0}, {0, 0}, {1, 0}, {40, 40}, {12, 0}} {
		c := cases[i*4]
		reqs = append(reqs, predict.Request{Features: loadNpy(t, c.Tensors["image_features"]), Goal: c.Goal, History: c.history(t),
			MaxNewTokens: lim.max, MinNewTokens: lim.min})
	}
	got, err := p.PredictBatch(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, req := range reqs {
		want, err := p.Predict(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if what := sameResult(got[i], want); what != "" {
			t.Errorf("item %d: %s differs from single Predict\n got %v\nwant %v", i, what, got[i].TokenIDs, want.TokenIDs)
		}
		if req.MaxNewTokens > 0 && len(got[i].TokenIDs) > req.MaxNewTokens {
			t.Errorf("item %d: %d tokens, limit %d", i, len(got[i].TokenIDs), req.MaxNewTokens)
		}
	}
	if n := len(got[0].TokenIDs); n != 5 {
		t.Errorf("MaxNewTokens 5 gave %d tokens", n)
	}
	if n := len(got[3].TokenIDs); n != 40 {
		t.Errorf("MinNewTokens 40 gave %d tokens", n)
	}
}

// Requests with precomputed features skip the vision tower; screens in the
// same batch still go through it. With the prompts encoded while the screens
// are (overlapPrefill, cuda's way) the results are the same.
func TestPredictBatchMixedFeatures(t *testing.T) {
	overlapped := tinyWith(t, Options{Truncation: TruncateRight})
	overlapped.overlapPrefill = true
	for _, p := range []*Predictor{tiny(t), overlapped} {
		mixedFeatures(t, p)
	}
}

func mixedFeatures(t *testing.T, p *Predictor) {
	cases := loadGolden(t)
	// odd items are screenshots (small ones, to keep -race runs short)
	picks := []int{2, 1, 11, 3, 21}
	var reqs []predict.Request
	for k, i := range picks {
		c := cases[i]
		req := predict.Request{Features: loadNpy(t, c.Tensors["image_features"]), Goal: c.Goal, History: c.history(t), MaxNewTokens: c.MaxNewTokens}
		if k%2 == 1 {
			req.Screen, req.Features = screen(t, c.Screen), nil
		}
		reqs = append(reqs, req)
	}
	got, err := p.PredictBatch(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	for k, i := range picks {
		if !slices.Equal(got[k].TokenIDs, cases[i].GeneratedIDs) {
			t.Errorf("overlap %v, item %d (%s): ids differ from golden", p.overlapPrefill, k, cases[i].ID)
		}
		if got[k].SourceTokens != len(cases[i].InputIDs) || got[k].Timings.Encoder == 0 {
			t.Errorf("overlap %v, item %d: %d source tokens, golden %d; encoder time %v", p.overlapPrefill, k,
				got[k].SourceTokens, len(cases[i].InputIDs), got[k].Timings.Encoder)
		}
		if fromFeatures := k%2 == 0; fromFeatures != (got[k].Timings.Vision == 0) {
			t.Errorf("item %d: features given %v, vision time %v", k, fromFeatures, got[k].Timings.Vision)
		}
		if d := maxAbsDiff(t, "features", got[k].Features, loadNpy(t, cases[i].Tensors["image_features"])); d > tolerance(t, "image_features") {
			t.Errorf("item %d: features off golden by %g", k, d)
		}
	}
}

// Batches and single requests share one predictor from several goroutines.
func TestPredictBatchConcurrent(t *testing.T) {
	p := tiny(t)
	ctx := context.Background()
	cases := loadGolden(t)
	var reqs []predict.Request
	for _, c := range cases[:6] {
		reqs = append(reqs, predict.Request{Features: loadNpy(t, c.Tensors["image_features"]), Goal: c.Goal, History: c.history(t), MaxNewTokens: 16})
	}
	want := make([]*predict.Result, len(reqs))
	for i, req := range reqs {
		res, err := p.Predict(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = res
	}
	var wg sync.WaitGroup
	errs := make(chan string, 16)
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			lo := g * 2
			idxs := []int{5 - g, lo, lo + 1}
			if g == 3 { // single requests beside the batches
				idxs = []int{g}
			}
			var batch []predict.Request
			for _, i := range idxs {
				batch = append(batch, reqs[i])
			}
			got, err := p.PredictBatch(ctx, batch)
			if err != nil {
				errs <- err.Error()
				return
			}
			for j, idx := range idxs {
				if what := sameResult(got[j], want[idx]); what != "" {
					errs <- fmt.Sprintf("goroutine %d item %d: %s differs", g, j, what)
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestPredictBatchErrors(t *testing.T) {
	p := tiny(t)
	ctx := context.Background()
	feat := make([]float32, p.cfg.ImageDim)
	if _, err := p.PredictBatch(ctx, nil); err == nil || !strings.Contains(err.Error(), "empty batch") {
		t.Errorf("empty batch: %v", err)
	}
	_, err := p.PredictBatch(ctx, []predict.Request{{Features: feat, Goal: "a"}, {Features: feat, Goal: "b"}, {Features: []float32{1, 2}, Goal: "c"}})
	if err == nil || !strings.Contains(err.Error(), "item 2") || !strings.Contains(err.Error(), "image_dim") {
		t.Errorf("bad features length: %v", err)
	}
	_, err = p.PredictBatch(ctx, []predict.Request{{Features: feat, Goal: "a"}, {Goal: "no screen"}})
	if err == nil || !strings.Contains(err.Error(), "item 1") {
		t.Errorf("no screen: %v", err)
	}
	_, err = p.PredictBatch(ctx, []predict.Request{{Goal: "no screen"}})
	if err == nil || strings.Contains(err.Error(), "item") || !strings.Contains(err.Error(), "no screen") {
		t.Errorf("no screen, batch of one (Predict's message, no index): %v", err)
	}
}

// countdownCtx is cancelled once Err has been asked n times, so a test can
// cancel in the middle of decoding without depending on timing.
type countdownCtx struct {
	context.Context
	mu sync.Mutex
	n  int
}

func (c *countdownCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n <= 0 {
		return context.Canceled
	}
	c.n--
	return nil
}

func TestPredictBatchCancel(t *testing.T) {
	overlapped := tinyWith(t, Options{Truncation: TruncateRight})
	overlapped.overlapPrefill = true
	for _, p := range []*Predictor{tiny(t), overlapped} {
		predictBatchCancel(t, p)
	}
}

func predictBatchCancel(t *testing.T, p *Predictor) {
	feat := make([]float32, p.cfg.ImageDim)
	reqs := []predict.Request{{Features: feat, Goal: "open settings", MinNewTokens: 30, MaxNewTokens: 30}, {Features: feat, Goal: "go home"}}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, batch := range [][]predict.Request{reqs, reqs[:1]} {
		if _, err := p.PredictBatch(ctx, batch); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled before the call, batch of %d: got %v", len(batch), err)
		}
	}
	// cancelled during decoding (a handful of checks precede the decoder loop)
	for _, n := range []int{0, 1, 3, 10} {
		ctx := &countdownCtx{Context: context.Background(), n: n}
		if _, err := p.PredictBatch(ctx, reqs); !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled after %d checks: got %v", n, err)
		}
	}
}

// The trained default bundle: batched and single predictions agree token for
// token on its sample screen. Its outputs are not pinned: the bundle may be
// retrained.
func TestPredictBatchDefaultModel(t *testing.T) {
	dir := filepath.Join("..", "models", "default")
	if _, err := os.Stat(filepath.Join(dir, models.ManifestFile)); err != nil {
		t.Skipf("no default bundle: %v", err)
	}
	b, err := models.Load(dir, models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPredictor(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	img, err := preprocess.DecodeFile(filepath.Join(dir, "sample_screen.png"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// One item goes through the batched vision call; the rest reuse the
	// screen's features (a full-size screenshot costs most of a second to
	// preprocess under -race; TestPredictBatchMixedFeatures batches screens).
	feat, err := p.ImageFeatures(ctx, img)
	if err != nil {
		t.Fatal(err)
	}
	first, err := p.Predict(ctx, predict.Request{Features: feat, Goal: "Open Settings"})
	if err != nil {
		t.Fatal(err)
	}
	reqs := []predict.Request{
		{Screen: img, Goal: "Open Settings"},
		{Features: feat, Goal: "Turn on wi-fi"},
		{Features: feat, Goal: "Search for hotels in Paris"},
		{Features: feat, Goal: "Go back to the home screen"},
	}
	if first.ParseErr == nil { // a later step: history makes a longer prompt
		reqs = append(reqs, predict.Request{Features: feat, Goal: "Open Settings", History: []action.Action{first.Action, first.Action}})
	}
	got, err := p.PredictBatch(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, req := range reqs {
		req.Screen, req.Features = nil, feat
		want, err := p.Predict(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if what := sameResult(got[i], want); what != "" {
			t.Errorf("%q (item %d): %s differs from single Predict\n got %q\nwant %q", req.Goal, i, what, got[i].Raw, want.Raw)
		}
		if d := maxAbsDiff(t, "features", got[i].Features, feat); d > tolerance(t, "image_features") {
			t.Errorf("item %d: batched vision features differ from single by %g", i, d)
		}
	}
	t.Logf("default bundle, %d items: e.g. %q", len(reqs), got[0].Raw)
}

// screenBatchesAtOnce predicts n batches of size requests from screens
// (the cases in turn) from n goroutines at once; each result is golden.
func screenBatchesAtOnce(t *testing.T, p *Predictor, cases []goldenCase, size, n int, label string) {
	t.Helper()
	batches := make([][]predict.Request, n)
	want := make([][]goldenCase, n)
	for w := range batches {
		for i := range size {
			c := cases[(w*size+i)%len(cases)]
			batches[w] = append(batches[w], predict.Request{Screen: screen(t, c.Screen), Goal: c.Goal, History: c.history(t), MaxNewTokens: c.MaxNewTokens})
			want[w] = append(want[w], c)
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for w := range batches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := p.PredictBatch(context.Background(), batches[w])
			if err != nil {
				errs[w] = err
				return
			}
			for j, res := range got {
				if c := want[w][j]; !slices.Equal(res.TokenIDs, c.GeneratedIDs) {
					errs[w] = fmt.Errorf("%s: ids differ from golden\n got %v\nwant %v", c.ID, res.TokenIDs, c.GeneratedIDs)
				}
			}
		}()
	}
	wg.Wait()
	for w, err := range errs {
		if err != nil {
			t.Errorf("%s, batch %d of %d at once: %v", label, w, n, err)
		}
	}
}
