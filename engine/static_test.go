package engine

import (
	"context"
	"fmt"
	"image"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/autoui/autoui/engine/kv"
	"github.com/autoui/autoui/models"
	"github.com/autoui/autoui/predict"
)

// The fixed-buffer decode over the static decoder graph (Options.CUDAGraph,
// here on the cpu provider, without capture) gives the golden tokens on
// every case, greedy and speculative, in batches of 1, 3 and 8 (finished
// rows kept in place and fed padding), twice over, the second time on the
// buffers the first left for reuse.
func TestStaticDecodeGolden(t *testing.T) {
	cases := loadGolden(t)
	for _, dec := range []Decoding{DecodeSpeculative, DecodeGreedy} {
		p := placed(t, placeStatic, Options{Decoding: dec})
		for pass := range 2 {
			for _, B := range []int{1, 3, 8} {
				goldenBatches(t, p, cases, B, fmt.Sprintf("static, %s B=%d pass %d", dec, B, pass))
			}
		}
		p.statics.mu.Lock()
		kept := 0
		for _, free := range p.statics.free {
			kept += len(free)
		}
		p.statics.mu.Unlock()
		if kept == 0 {
			t.Errorf("%s: no buffers kept for reuse", dec)
		}
	}
}

// Logits cross only for the calls whose chooser reads them.
func TestStaticFetchesLogitsOnlyWhereNeeded(t *testing.T) {
	c := loadGolden(t)[0]
	for _, constrained := range []bool{false, true} {
		p := placed(t, placeStatic, Options{Constrained: constrained})
		n, fetched := decodeCountingLogits(t, p, c)
		if want := map[bool]int{false: 0, true: n}[constrained]; fetched != want {
			t.Errorf("constrained=%v: logits fetched in %d of %d calls, want %d", constrained, fetched, n, want)
		}
	}
}

// A bundle without the static graph is refused by name, with the command
// that adds it.
func TestCUDAGraphNeedsStaticGraph(t *testing.T) {
	b, err := models.Load(filepath.Join(testdata, "tiny"), models.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !b.Has(models.RoleDecoderStatic) {
		t.Fatal("the tiny bundle has no static decoder graph: python -m scripts.upgrade_bundle models/testdata/tiny")
	}
	delete(b.Manifest.Files, models.RoleDecoderStatic)
	_, err = NewPredictor(b, Options{CUDAGraph: true})
	if err == nil || !strings.Contains(err.Error(), "scripts.upgrade_bundle") {
		t.Fatalf("got %v, want a refusal naming scripts.upgrade_bundle", err)
	}
}

// Prompts padded to a multiple of 64 (as under capture, so that prompt
// lengths share CUDA graphs) give the golden tokens.
func TestStaticPaddedPrompts(t *testing.T) {
	p := placed(t, placeStatic, Options{})
	p.promptBucket = capturePromptBucket
	for _, B := range []int{1, 3} {
		goldenBatches(t, p, loadGolden(t), B, fmt.Sprintf("static, prompts padded, B=%d", B))
	}
	p.statics.mu.Lock()
	defer p.statics.mu.Unlock()
	for key := range p.statics.free {
		if key.enc%capturePromptBucket != 0 && key.enc != p.bundle.Manifest.Prompt.MaxSourceTokens {
			t.Errorf("a decode of encoder length %d", key.enc)
		}
	}
}

// Concurrent requests on one predictor each get buffers of their own (or
// reuse ones another has finished with) and the golden tokens; under the
// capture bookkeeping (on the cpu: the graph ids are ignored) they take
// turns.
func TestStaticConcurrent(t *testing.T) {
	for _, capture := range []bool{false, true} {
		p := placed(t, placeStatic, Options{})
		p.statics.capture = capture
		staticConcurrent(t, p)
	}
}

func staticConcurrent(t *testing.T, p *Predictor) {
	cases := loadGolden(t)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(cases); i += 4 {
				c := cases[i]
				res, err := p.Predict(context.Background(), c.featureRequest(t))
				if err != nil {
					t.Error(err)
					return
				}
				if !slices.Equal(res.TokenIDs, c.GeneratedIDs) {
					t.Errorf("%s: ids differ from golden\n got %v\nwant %v", c.ID, res.TokenIDs, c.GeneratedIDs)
				}
			}
		}()
	}
	wg.Wait()
}

// Batches bucketed to a few row counts (as under capture) decode on padded
// buffers (rows of zero states, mask 0, fed padding) and give the golden
// tokens.
func TestStaticBucketedRows(t *testing.T) {
	for b, want := range map[int]int{1: 1, 2: 2, 3: 4, 5: 8, 33: 64, 64: 64, 65: 128, 130: 192} {
		if got := staticRows(b); got != want {
			t.Errorf("staticRows(%d) = %d, want %d", b, got, want)
		}
	}
	p := placed(t, placeStatic, Options{})
	p.bucketRows = true
	for _, B := range []int{3, 5} {
		goldenBatches(t, p, loadGolden(t), B, fmt.Sprintf("static, rows bucketed, B=%d", B))
	}
	for key := range p.statics.free {
		if key.rows != staticRows(key.rows) {
			t.Errorf("buffers of %d rows", key.rows)
		}
	}
}

// What the kept buffer sets hold stays within statics.keep: captured sets
// (here the capture bookkeeping on the cpu, which ignores the graph ids) are
// kept for good while they fit, and past the budget a set runs uncaptured
// and is dropped after its decode.
func TestStaticsKeepBudget(t *testing.T) {
	cases := loadGolden(t)[:3]
	for _, tc := range []struct {
		name     string
		keep     int64
		capture  bool
		captured bool
	}{
		{"captured", staticKeepCPU, true, true},
		{"over budget, captured", 1, true, false},
		{"over budget", 1, false, false},
	} {
		p := placed(t, placeStatic, Options{})
		p.statics.keep, p.statics.capture = tc.keep, tc.capture
		goldenBatches(t, p, cases, 1, tc.name)
		var sets []staticSet
		for _, free := range p.statics.free {
			sets = append(sets, free...)
		}
		var bytes int64
		for _, s := range sets {
			bytes += s.bytes
			if s.captured != tc.captured {
				t.Errorf("%s: a set with captured %v", tc.name, s.captured)
			}
		}
		if bytes != p.statics.kept || bytes > tc.keep || (tc.keep == 1) != (len(sets) == 0) {
			t.Errorf("%s: %d sets of %d bytes kept, counted %d, budget %d", tc.name, len(sets), bytes, p.statics.kept, tc.keep)
		}
		if tc.captured && p.statics.graphs != len(sets) { // one graph a set
			t.Errorf("%s: %d graph ids for %d sets", tc.name, p.statics.graphs, len(sets))
		}
	}
}

// Under Options.CUDAGraph the vision tower runs on fixed buffers per batch
// size (fixedGraph; bucketed rows as under capture, the extra rows dropped)
// and gives the features and tokens of the plain run, on its second use of
// the buffers too.
func TestStaticVision(t *testing.T) {
	reqs, want := screenRequests(t)
	for _, bucket := range []bool{false, true} {
		p := placed(t, placeStatic, Options{})
		p.bucketRows = bucket
		for pass := range 2 {
			samePlain(t, p, reqs, want, fmt.Sprintf("bucket %v, pass %d", bucket, pass))
		}
		if p.visionFixed == nil || len(p.visionFixed.sets) != 2 {
			t.Errorf("bucket %v: vision buffers %v", bucket, p.visionFixed)
		}
	}
}

// A screen that cannot be resized fails its batch with the resize's error,
// on the fixed vision buffers as on the plain path, with the prompts
// encoded alongside (overlapPrefill) or after, and the buffers are free for
// the next batch.
func TestVisionFillError(t *testing.T) {
	c := loadGolden(t)[1]
	good := predict.Request{Screen: screen(t, c.Screen), Goal: c.Goal, History: c.history(t), MaxNewTokens: c.MaxNewTokens}
	bad := good
	bad.Screen = image.NewNRGBA(image.Rect(0, 0, 0, 0))
	for _, place := range []placement{placeHost, placeStatic, placeDevice} {
		p := placed(t, place, Options{})
		p.overlapPrefill = place == placeDevice // as under cuda
		if _, err := p.PredictBatch(context.Background(), []predict.Request{good, bad}); err == nil || !strings.Contains(err.Error(), "empty image") {
			t.Fatalf("%s: error %v, want the resize's", placeNames[place], err)
		}
		if _, err := p.PredictBatch(context.Background(), []predict.Request{good, good}); err != nil {
			t.Fatalf("%s: the next batch: %v", placeNames[place], err)
		}
	}
}

// A predictor that decodes on fixed buffers (Options.CUDAGraph) runs a
// batch of more than graphRows rows (captureRows under capture) on the
// device-resident path and its vision tower plainly: golden tokens and the
// plain run's features either side of the limit, fixed buffers for the
// small batches only, and the with-past decoder's session opened only once
// a large batch needs it.
func TestGraphRowsSplit(t *testing.T) {
	cases := loadGolden(t)
	p := placed(t, placeStatic, Options{})
	p.graphRows = 2
	if p.decoder.sess != nil {
		t.Fatal("the with-past decoder's session is open before a batch needs it")
	}
	goldenBatches(t, p, cases, 2, "graph rows 2, B=2")
	if p.decoder.sess != nil {
		t.Fatal("batches of 2 opened the with-past decoder's session")
	}
	for _, B := range []int{3, 8} {
		goldenBatches(t, p, cases, B, fmt.Sprintf("graph rows 2, B=%d", B))
	}
	if p.decoder.sess == nil {
		t.Fatal("batches of 3 and 8 did not open the with-past decoder's session")
	}
	p.statics.mu.Lock()
	for key, free := range p.statics.free {
		if key.rows > 2 && len(free) > 0 {
			t.Errorf("fixed buffers of %d rows kept", key.rows)
		}
	}
	p.statics.mu.Unlock()

	reqs, want := screenRequests(t)
	samePlain(t, p, reqs, want, "graph rows 2")
	if len(p.visionFixed.sets) != 1 || p.visionFixed.sets[1] == nil {
		t.Errorf("vision buffers %v: want the 1-row set only", p.visionFixed.sets)
	}
}

// Options.CaptureRows sets the split on the cpu provider too (every batch
// on fixed buffers without it), and opens the with-past decoder with the
// predictor, not inside the first large batch.
func TestCaptureRowsOption(t *testing.T) {
	if p := placed(t, placeStatic, Options{}); p.graphRows != 0 || p.decoder.sess != nil {
		t.Fatalf("no CaptureRows on the cpu provider: graph rows %d, with-past session open %v; want 0, false", p.graphRows, p.decoder.sess != nil)
	}
	p := placed(t, placeStatic, Options{CaptureRows: 2})
	if p.graphRows != 2 || p.decoder.sess == nil {
		t.Fatalf("CaptureRows 2: graph rows %d, with-past session open %v; want 2, true", p.graphRows, p.decoder.sess != nil)
	}
	if got := p.CaptureRows(); got != 2 {
		t.Errorf("CaptureRows() %d, want 2", got)
	}
	cases := loadGolden(t)
	for _, B := range []int{2, 3} {
		goldenBatches(t, p, cases, B, fmt.Sprintf("capture rows 2, B=%d", B))
	}
	p.statics.mu.Lock()
	for key, free := range p.statics.free {
		if key.rows > 2 && len(free) > 0 {
			t.Errorf("fixed buffers of %d rows kept: a batch of 3 ran on them", key.rows)
		}
	}
	p.statics.mu.Unlock()
	// the vision tower on fixed buffers: as a batch decodes, at most
	// captureRows screens once there is a limit
	if _, err := p.visionGraph(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ limit, b int }{{0, 64}, {2, 2}, {64, captureRows}} {
		p.graphRows = c.limit
		if !p.fixedVision(c.b) || p.fixedVision(max(c.b, captureRows)+1) && c.limit > 0 {
			t.Errorf("graph rows %d: the tower's fixed buffers for %d screens %v, for %d %v", c.limit, c.b, p.fixedVision(c.b),
				max(c.b, captureRows)+1, p.fixedVision(max(c.b, captureRows)+1))
		}
	}
	p.graphRows = 2
	for _, o := range []Options{{CUDAGraph: true, CaptureRows: CaptureRowsLimit + 1}, {CaptureRows: 2}} {
		if _, err := NewPredictor(tiny(t).bundle, o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

// screenRequests are three golden cases as requests with their screens, and
// the plain predictor's results for them.
func screenRequests(t *testing.T) ([]predict.Request, []*predict.Result) {
	cases := loadGolden(t)
	var reqs []predict.Request
	for _, i := range []int{1, 3, 21} {
		c := cases[i]
		reqs = append(reqs, predict.Request{Screen: screen(t, c.Screen), Goal: c.Goal, History: c.history(t), MaxNewTokens: c.MaxNewTokens})
	}
	want, err := tiny(t).PredictBatch(context.Background(), reqs)
	if err != nil {
		t.Fatal(err)
	}
	return reqs, want
}

// samePlain requires p's features and tokens for reqs, as one batch and the
// first alone, to be want's.
func samePlain(t *testing.T, p *Predictor, reqs []predict.Request, want []*predict.Result, label string) {
	t.Helper()
	for _, batch := range [][]predict.Request{reqs, reqs[:1]} {
		got, err := p.PredictBatch(context.Background(), batch)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range got {
			if !slices.Equal(r.Features, want[i].Features) || !slices.Equal(r.TokenIDs, want[i].TokenIDs) {
				t.Errorf("%s, batch of %d, item %d: features or tokens differ from the plain run", label, len(batch), i)
			}
		}
	}
}

// kv.Static.Adopt, continuous batching's move of rows onto other buffers:
// rows 3 and 1 of a 4-row decode, adopted by 2-row buffers of a longer
// encoder length (the gather path), and every row in order by 4-row
// buffers of another width (the identity path), go on as the 4-row decode
// goes on for them: the same logits at the next calls.
func TestStaticAdopt(t *testing.T) {
	p := placed(t, placeStatic, Options{})
	const W, C, E = 3, 32, 5
	dm, vocab := p.cfg.DModel, p.cfg.VocabSize
	set := func(key staticKey) *kv.Static {
		t.Helper()
		s, err := p.staticSet(key)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.st.Close() })
		return s.st
	}
	a := set(staticKey{rows: 4, width: W, enc: E, capacity: C})
	rng := rand.New(rand.NewPCG(1, 2))
	states := make([]float32, 4*E*dm)
	for i := range states {
		states[i] = float32(rng.NormFloat64() * 0.5)
	}
	sv, err := ort.NewTensor(ort.NewShape(4, E, int64(dm)), states)
	if err != nil {
		t.Fatal(err)
	}
	defer sv.Destroy()
	mask := []int64{1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 0, 1, 1, 0, 0, 0}
	if tm, err := a.Join([]int{0, 1, 2, 3}, sv, mask); err != nil || tm.Cross <= 0 || tm.Scatter <= 0 || tm.Mask <= 0 {
		t.Fatal(tm, err)
	}
	// step feeds row r of s the ids of A's row from[r] at position pos
	ids := make([]int64, 4*W*3)
	for i := range ids {
		ids[i] = 3 + rng.Int64N(int64(vocab)-3)
	}
	step := func(s *kv.Static, from []int, call int) []float32 {
		t.Helper()
		for r, f := range from {
			copy(s.IDs[r*W:(r+1)*W], ids[(call*4+f)*W:(call*4+f+1)*W])
			s.Pos[r] = int64(call * W)
		}
		if err := s.Step(true); err != nil {
			t.Fatal(err)
		}
		return s.Logits
	}
	for call := range 2 {
		step(a, []int{0, 1, 2, 3}, call)
	}
	b := set(staticKey{rows: 2, width: W, enc: E + 3, capacity: C})
	if err := b.Adopt(a, []int{3, 1}); err != nil {
		t.Fatal(err)
	}
	c := set(staticKey{rows: 4, width: W + 1, enc: E, capacity: C})
	if err := c.Adopt(a, []int{0, 1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(step(a, []int{0, 1, 2, 3}, 2))
	row := func(l []float32, r, width int) []float32 { return l[r*width*vocab : r*width*vocab+W*vocab] }
	near := func(what string, got, want []float32) {
		t.Helper()
		for i := range got {
			if d := got[i] - want[i]; d > 1e-4 || d < -1e-4 {
				t.Fatalf("%s: logit %d: %g, the 4-row decode's %g", what, i, got[i], want[i])
			}
		}
	}
	got := step(b, []int{3, 1}, 2)
	near("adopted row 3 as 0", row(got, 0, W), row(want, 3, W))
	near("adopted row 1 as 1", row(got, 1, W), row(want, 1, W))
	for r := range 4 {
		copy(c.IDs[r*(W+1):], ids[(2*4+r)*W:(2*4+r+1)*W])
		c.IDs[r*(W+1)+W] = 0 // a padding position after the row's three
		c.Pos[r] = 2 * W
	}
	if err := c.Step(true); err != nil {
		t.Fatal(err)
	}
	for r := range 4 {
		near(fmt.Sprintf("row %d kept in place", r), row(c.Logits, r, W+1), row(want, r, W))
	}
}
