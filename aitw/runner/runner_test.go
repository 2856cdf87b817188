package runner

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/autoui/autoui/action"
	"github.com/autoui/autoui/aitw"
	"github.com/autoui/autoui/aitw/runinfo"
	"github.com/autoui/autoui/predict"
	"github.com/autoui/autoui/predict/predicttest"
)

// fakePredictor answers deterministically from the request: a tap whose y
// encodes the history length, so tests can check what history was given.
// Like the engine, it computes features for requests that carry a screen.
type fakePredictor struct {
	mu          sync.Mutex
	predicts    int
	vision      int
	cancelAt    int // cancel on this item (1-based, counted over batches); 0: never
	cancel      context.CancelFunc
	batches     []int // size of each PredictBatch call
	lastFeature []float32
	firstDelay  time.Duration // the first call's sleep: an engine's warm-up
	delay       time.Duration // every later call's sleep: an engine's work
}

func (f *fakePredictor) Predict(ctx context.Context, req predict.Request) (*predict.Result, error) {
	return predicttest.One(ctx, f, req)
}

func (f *fakePredictor) PredictBatch(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches = append(f.batches, len(reqs))
	if len(f.batches) == 1 {
		time.Sleep(f.firstDelay)
	} else {
		time.Sleep(f.delay)
	}
	out := make([]*predict.Result, len(reqs))
	for i, req := range reqs {
		f.predicts++
		if f.cancelAt > 0 && f.predicts == f.cancelAt {
			f.cancel()
			return nil, ctx.Err()
		}
		if req.Features == nil {
			if req.Screen == nil {
				return nil, fmt.Errorf("no features and no screen")
			}
			f.vision++
			req.Features = fakeFeatures(req.Screen)
		}
		f.lastFeature = req.Features
		out[i] = fakeResult(req)
	}
	return out, nil
}

func fakeFeatures(img image.Image) []float32 {
	b := img.Bounds()
	r, g, bl, _ := img.At(b.Min.X, b.Min.Y).RGBA()
	return []float32{float32(r >> 8), float32(g >> 8), float32(bl >> 8), float32(b.Dx()), float32(b.Dy())}
}

// fakeResults answers reqs as fakePredictor does, with features computed
// from the screen where none were given.
func fakeResults(reqs []predict.Request) []*predict.Result {
	out := make([]*predict.Result, len(reqs))
	for i, req := range reqs {
		if req.Features == nil {
			req.Features = fakeFeatures(req.Screen)
		}
		out[i] = fakeResult(req)
	}
	return out
}

func fakeResult(req predict.Request) *predict.Result {
	y := 0.01 + 0.1*float64(len(req.History))
	a := action.Action{Type: action.DualPoint, Touch: action.Point{Y: y, X: 0.5}, Lift: action.Point{Y: y, X: 0.5}}
	res := &predict.Result{Action: a, Raw: "raw", TokenIDs: []int64{5, 6, 7, 1}, Features: req.Features,
		Timings: predict.Timings{DecoderCalls: 2, Encoder: 3 * time.Millisecond, FirstStep: time.Millisecond, LaterSteps: time.Millisecond}}
	if len(req.History) == 2 {
		res.Action = action.Action{}
		res.ParseErr = fmt.Errorf("bad text")
	}
	return res
}

func testOptions(t *testing.T, out string) Options {
	files, err := aitw.ExpandPaths([]string{"../testdata/records"})
	if err != nil {
		t.Fatal(err)
	}
	return Options{Files: files, OutDir: out, CacheDir: filepath.Join(out, "features"), CacheKey: "fake", History: HistoryGold}
}

// An interrupt drops the call in flight: with batches of B, the lines
// written are the whole batches before it. A resume completes the file.
func TestRunResumeAfterInterrupt(t *testing.T) {
	for _, c := range []struct{ batch, concurrent int }{{1, 1}, {4, 1}, {4, 2}} {
		t.Run(fmt.Sprintf("batch=%d,concurrent=%d", c.batch, c.concurrent), func(t *testing.T) { testResumeAfterInterrupt(t, c.batch, c.concurrent) })
	}
}

func testResumeAfterInterrupt(t *testing.T, batch, concurrent int) {
	out := t.TempDir()
	opts := testOptions(t, out)
	opts.Batch, opts.Concurrent = batch, concurrent
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	fp := &fakePredictor{cancelAt: 8, cancel: cancel}
	sum, err := Run(ctx, fp, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := 7 / batch * batch
	if !sum.Interrupted || sum.Predicted != want {
		t.Fatalf("first run: %+v, want %d predicted", sum, want)
	}
	ps, err := aitw.ReadPredictions(sum.Path)
	if err != nil || ps.Lines != want {
		t.Fatalf("after interrupt: %v lines, %v", ps, err)
	}
	// Simulate a kill mid-write: a torn last line.
	f, _ := os.OpenFile(sum.Path, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"episode_id": "123", "step_id": 4, "action_ty`)
	f.Close()

	fp2 := &fakePredictor{}
	sum2, err := Run(context.Background(), fp2, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !sum2.TornTail || sum2.AlreadyDone != want || sum2.Predicted != 55-want || sum2.Interrupted {
		t.Fatalf("resume: %+v", sum2)
	}
	ps, err = aitw.ReadPredictions(sum.Path)
	if err != nil || ps.Lines != 55 || ps.Duplicates != 0 || len(ps.ByStep) != 55 || ps.TornTail {
		t.Fatalf("final file: %+v %v", ps, err)
	}
	// Third run: nothing to do, and the vision cache was complete.
	fp3 := &fakePredictor{}
	sum3, err := Run(context.Background(), fp3, opts)
	if err != nil || sum3.Predicted != 0 || sum3.AlreadyDone != 55 || fp3.predicts != 0 {
		t.Fatalf("third run: %+v %v", sum3, err)
	}
}

func TestFeatureCache(t *testing.T) {
	out := t.TempDir()
	opts := testOptions(t, out)
	opts.Limit = 5
	opts.Batch = 3
	fp := &fakePredictor{}
	sum, err := Run(context.Background(), fp, opts)
	if err != nil || sum.Predicted != 5 || !sum.LimitHit || fp.vision != 5 || sum.CacheMisses != 5 {
		t.Fatalf("%+v %v vision=%d", sum, err, fp.vision)
	}
	if fmt.Sprint(fp.batches) != "[3 2]" {
		t.Errorf("batches %v, want [3 2] (limit 5)", fp.batches)
	}
	// Same screens in a fresh output dir sharing the cache: no vision calls.
	opts2 := opts
	opts2.OutDir = t.TempDir()
	opts2.Batch = 1
	fp2 := &fakePredictor{}
	sum2, err := Run(context.Background(), fp2, opts2)
	if err != nil || fp2.vision != 0 || sum2.CacheHits != 5 {
		t.Fatalf("%+v %v vision=%d", sum2, err, fp2.vision)
	}
	if fmt.Sprint(fp.lastFeature) != fmt.Sprint(fp2.lastFeature) {
		t.Errorf("cached features %v != %v", fp2.lastFeature, fp.lastFeature)
	}
	// A different cache key misses.
	opts3 := opts2
	opts3.OutDir = t.TempDir()
	opts3.CacheKey = "other"
	fp3 := &fakePredictor{}
	if _, err := Run(context.Background(), fp3, opts3); err != nil || fp3.vision != 5 {
		t.Fatalf("other key: vision=%d %v", fp3.vision, err)
	}
}

// Each step sees the right history in both modes at every batch size;
// gold batches are full until the last, predicted batches hold distinct
// episodes (at most Batch of them).
func TestHistoryModes(t *testing.T) {
	for _, mode := range []History{HistoryGold, HistoryPredicted} {
		for _, c := range []struct{ batch, concurrent int }{{0, 1}, {3, 1}, {4, 1}, {3, 2}, {2, 3}} {
			t.Run(fmt.Sprintf("%s/batch=%d,concurrent=%d", mode, c.batch, c.concurrent), func(t *testing.T) {
				testHistoryMode(t, mode, c.batch, c.concurrent)
			})
		}
	}
}

func testHistoryMode(t *testing.T, mode History, batch, concurrent int) {
	out := t.TempDir()
	opts := testOptions(t, out)
	opts.History = mode
	opts.Batch, opts.Concurrent = batch, concurrent
	sp, err := aitw.ReadSplits("../testdata/splits/standard.json")
	if err != nil {
		t.Fatal(err)
	}
	opts.Split, _ = sp.IDs("test")
	rec := &recordingPredictor{goals: goalIndex}
	sum, err := Run(context.Background(), rec, opts)
	if err != nil {
		t.Fatal(err)
	}
	gold, _, _ := aitw.LoadEpisodes(opts.Files, aitw.ReadOptions{Keep: func(id string) bool { return opts.Split[id] }})
	steps := 0
	for _, ep := range gold {
		steps += len(ep.Steps)
	}
	if sum.Predicted != steps || sum.Episodes != 5 {
		t.Fatalf("%+v, want %d steps", sum, steps)
	}
	for _, ep := range gold {
		for i, s := range ep.Steps {
			h := rec.seen[ep.ID+"/"+fmt.Sprint(s.StepID)]
			if len(h) != i {
				t.Fatalf("%s step %d history %d", ep.ID, i, len(h))
			}
			for j := range h {
				want := ep.Steps[j].Action
				if mode == HistoryPredicted {
					want = rec.answer(ep.ID, j)
				}
				if h[j] != want {
					t.Errorf("%s step %d history[%d] = %+v, want %+v", ep.ID, i, j, h[j], want)
				}
			}
		}
	}
	checkBatches(t, rec.batches, mode, max(batch, 1), steps)
	checkLines(t, sum.Path, steps)
}

func checkBatches(t *testing.T, batches [][]string, mode History, batch, steps int) {
	t.Helper()
	n, short := 0, 0
	for i, b := range batches {
		n += len(b)
		if len(b) == 0 || len(b) > batch {
			t.Errorf("call %d has %d items, batch %d", i, len(b), batch)
		}
		if mode == HistoryGold && len(b) != batch {
			short++ // the last call's (with calls at once, not always the last to run)
		}
		if mode == HistoryPredicted && len(slices.Compact(slices.Sorted(slices.Values(b)))) != len(b) {
			t.Errorf("predicted call %d repeats an episode: %v", i, b)
		}
	}
	if n != steps {
		t.Errorf("%d items over all calls, want %d", n, steps)
	}
	if short > 1 {
		t.Errorf("gold: %d calls short of a full batch of %d, want at most the last", short, batch)
	}
	if batch > 1 && len(batches) == steps {
		t.Errorf("batch %d: every call had one item", batch)
	}
}

// --limit stops at exactly the limit, whatever the batch; a limit equal to
// the steps left is not "hit".
func TestLimitExact(t *testing.T) {
	for _, mode := range []History{HistoryGold, HistoryPredicted} {
		for _, batch := range []int{1, 4, 7} {
			for _, limit := range []int{10, 55} {
				opts := testOptions(t, t.TempDir())
				opts.History, opts.Batch, opts.Limit, opts.Concurrent = mode, batch, limit, 1+batch%3
				fp := &fakePredictor{}
				sum, err := Run(context.Background(), fp, opts)
				if err != nil {
					t.Fatal(err)
				}
				ps, err := aitw.ReadPredictions(sum.Path)
				if err != nil || ps.Lines != limit || sum.Predicted != limit || sum.LimitHit != (limit < 55) || fp.predicts != limit {
					t.Errorf("%s batch %d limit %d: %+v, %d lines, %d predicted by the engine, %v", mode, batch, limit, sum, ps.Lines, fp.predicts, err)
				}
			}
		}
	}
}

// Summary.AfterFirst starts after the first engine call: a slow first call
// (an engine's warm-up) is in neither its steps nor its time. Of its time,
// the later calls' is the engine's.
func TestAfterFirstLeavesOutTheFirstCall(t *testing.T) {
	for _, mode := range []History{HistoryGold, HistoryPredicted} {
		opts := testOptions(t, t.TempDir())
		opts.History, opts.Batch = mode, 4
		fp := &fakePredictor{firstDelay: 100 * time.Millisecond, delay: 2 * time.Millisecond}
		t0 := time.Now()
		sum, err := Run(context.Background(), fp, opts)
		total := time.Since(t0)
		a := sum.AfterFirst
		if err != nil || len(fp.batches) < 2 || a.First != fp.batches[0] || a.Steps != sum.Predicted-a.First || a.Time <= 0 || a.Time > total-fp.firstDelay {
			t.Errorf("%s: %+v after a first call of %v in a run of %v (%v)", mode, a, fp.batches, total, err)
		}
		if later := time.Duration(len(fp.batches)-1) * fp.delay; a.Engine < later || a.Reading < 0 || a.Engine+a.Reading > a.Time {
			t.Errorf("%s: engine %v (its %d later calls slept %v), reading %v, of %v", mode, a.Engine, len(fp.batches)-1, later, a.Reading, a.Time)
		}
	}
}

// DecodeStats take a batched call's shared stages once: encoder and fusion
// once per group of prompts, decoding from the item that took part in every
// call.
func TestDecodeStatsBatch(t *testing.T) {
	ms := time.Millisecond
	res := []*predict.Result{
		{TokenIDs: make([]int64, 10), Timings: predict.Timings{Tokenize: ms, Encoder: 4 * ms, Fusion: ms, FirstStep: 2 * ms, LaterSteps: 8 * ms, DecoderCalls: 9}},
		{TokenIDs: make([]int64, 20), Timings: predict.Timings{Tokenize: 2 * ms, Encoder: 4 * ms, Fusion: ms, FirstStep: 2 * ms, LaterSteps: 18 * ms, DecoderCalls: 19}},
		{TokenIDs: make([]int64, 5), Timings: predict.Timings{Tokenize: ms, Encoder: 4 * ms, Fusion: ms, FirstStep: 2 * ms, LaterSteps: 3 * ms, DecoderCalls: 4}},
	}
	res[1].Timings.Preprocess, res[1].Timings.Vision = ms, 3*ms // the call's screens, in the items that had one
	var d DecodeStats
	d.addBatch(res)
	want := DecodeStats{Calls: 19, Tokens: 35, Decode: 20 * ms, TextPath: 4*ms + 4*ms + ms + 20*ms, Batches: 1, Screens: 4 * ms, Prompts: 5 * ms}
	if d != want {
		t.Errorf("got %+v, want %+v", d, want)
	}
	// A batch of one is Predict's own timings.
	var one DecodeStats
	one.addBatch(res[:1])
	if want := (DecodeStats{Calls: 9, Tokens: 10, Decode: 10 * ms, TextPath: 16 * ms, Batches: 1, Prompts: 5 * ms}); one != want {
		t.Errorf("one item: got %+v, want %+v", one, want)
	}
	// Prompts encoded in groups: each group's encoder and fusion once.
	res[0].Timings.EncoderRows, res[1].Timings.EncoderRows, res[2].Timings.EncoderRows = 2, 1, 2
	res[1].Timings.Encoder, res[1].Timings.Fusion = 7*ms, 2*ms
	var grouped DecodeStats
	grouped.addBatch(res)
	want.TextPath = 4*ms + (4*ms + ms) + (7*ms + 2*ms) + 20*ms
	want.Prompts = (4*ms + ms) + (7*ms + 2*ms)
	if grouped != want {
		t.Errorf("grouped: got %+v, want %+v", grouped, want)
	}
}

// recordingPredictor remembers each request's history, keyed by the step it
// must be for (goal carries the episode; history length is the step).
type recordingPredictor struct {
	mu      sync.Mutex
	seen    map[string][]action.Action
	goals   map[string]string
	batches [][]string // episode of each item, per call
}

func (r *recordingPredictor) answer(ep string, step int) action.Action {
	y := 0.5 + 0.01*float64(step)
	return action.Action{Type: action.DualPoint, Touch: action.Point{Y: y, X: 0.1}, Lift: action.Point{Y: y, X: 0.1}}
}

func (r *recordingPredictor) Predict(ctx context.Context, req predict.Request) (*predict.Result, error) {
	return predicttest.One(ctx, r, req)
}

func (r *recordingPredictor) PredictBatch(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string][]action.Action{}
	}
	r.batches = append(r.batches, nil)
	out := make([]*predict.Result, len(reqs))
	for i, req := range reqs {
		// The goal identifies the episode (the fixtures' goals are unique);
		// the history length is the step.
		id := r.goals[req.Goal]
		r.batches[len(r.batches)-1] = append(r.batches[len(r.batches)-1], id)
		r.seen[id+"/"+fmt.Sprint(len(req.History))] = append([]action.Action(nil), req.History...)
		out[i] = &predict.Result{Action: r.answer(id, len(req.History)), Features: []float32{1}}
	}
	return out, nil
}

func init() {
	// Goal -> episode id for recordingPredictor; the fixtures' goals are unique.
	files, err := aitw.ExpandPaths([]string{"../testdata/records"})
	if err != nil {
		return
	}
	eps, _, _ := aitw.LoadEpisodes(files, aitw.ReadOptions{})
	goals := map[string]string{}
	for _, ep := range eps {
		goals[ep.Goal] = ep.ID
	}
	goalIndex = goals
}

var goalIndex map[string]string

func TestShardsCoverEverythingOnce(t *testing.T) {
	all := map[aitw.StepKey]int{}
	for i := 0; i < 3; i++ {
		out := t.TempDir()
		opts := testOptions(t, out)
		opts.Shard = aitw.Shard{I: i, N: 3}
		if _, err := Run(context.Background(), &fakePredictor{}, opts); err != nil {
			t.Fatal(err)
		}
		ps, err := aitw.ReadPredictions(filepath.Join(out, runinfo.PredictionsFile))
		if err != nil {
			t.Fatal(err)
		}
		for k := range ps.ByStep {
			all[k]++
		}
	}
	if len(all) != 55 {
		t.Fatalf("%d steps over 3 shards", len(all))
	}
	for k, n := range all {
		if n != 1 {
			t.Errorf("%v predicted %d times", k, n)
		}
	}
}

func TestParseErrorsRecorded(t *testing.T) {
	out := t.TempDir()
	opts := testOptions(t, out)
	sum, err := Run(context.Background(), &fakePredictor{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(sum.Path)
	// Decoding totals add up over the new predictions.
	if d := sum.Decode; d.Calls != 2*sum.Predicted || d.Tokens != 4*sum.Predicted ||
		d.Decode != time.Duration(sum.Predicted)*2*time.Millisecond || d.TextPath != time.Duration(sum.Predicted)*5*time.Millisecond {
		t.Errorf("decode stats %+v for %d predictions", d, sum.Predicted)
	}
	if sum.ParseErrors == 0 || !bytes.Contains(b, []byte(`"parse_error":"bad text"`)) || !bytes.Contains(b, []byte(`"action_type":0`)) {
		t.Errorf("parse errors %d", sum.ParseErrors)
	}
	// Non-TTY progress prints plain lines.
	var buf bytes.Buffer
	opts.OutDir = t.TempDir()
	opts.Progress = &buf
	opts.Limit = 2
	if _, err := Run(context.Background(), &fakePredictor{}, opts); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), "steps/s") || strings.Contains(buf.String(), "\r") {
		t.Errorf("progress %q", buf.String())
	}
}

// failingPredictor fails every call that holds its n-th item (1-based).
type failingPredictor struct {
	fakePredictor
	n int
}

func (f *failingPredictor) Predict(ctx context.Context, req predict.Request) (*predict.Result, error) {
	return predicttest.One(ctx, f, req)
}

func (f *failingPredictor) PredictBatch(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
	f.mu.Lock()
	seen := f.predicts
	f.mu.Unlock()
	if seen < f.n && seen+len(reqs) >= f.n {
		f.mu.Lock()
		f.predicts += len(reqs)
		f.mu.Unlock()
		return nil, fmt.Errorf("engine broke")
	}
	return f.fakePredictor.PredictBatch(ctx, reqs)
}

// A failed call stops the run with an error naming its steps; the calls
// before it are written and it is not retried. With two calls at once, the
// one started after it is waited for and not written.
func TestEngineErrorStops(t *testing.T) {
	for _, tc := range []struct {
		mode       History
		concurrent int
		sent       int
	}{{HistoryGold, 1, 12}, {HistoryPredicted, 1, 12}, {HistoryGold, 2, 16}, {HistoryPredicted, 2, 16}} {
		opts := testOptions(t, t.TempDir())
		opts.History, opts.Batch, opts.Concurrent = tc.mode, 4, tc.concurrent
		fp := &failingPredictor{n: 10}
		sum, err := Run(context.Background(), fp, opts)
		if err == nil || !strings.Contains(err.Error(), "engine broke") || !strings.Contains(err.Error(), "batch of 4 steps, episode ") {
			t.Fatalf("%s, %d at once: error %v", tc.mode, tc.concurrent, err)
		}
		if sum.Predicted != 8 || fp.predicts != tc.sent {
			t.Errorf("%s, %d at once: %d written, %d items sent, want 8 and %d: %+v", tc.mode, tc.concurrent, sum.Predicted, fp.predicts, tc.sent, sum)
		}
		checkLines(t, sum.Path, 8)
	}
}

// A corrupt file stops reading with its error, but the steps read before
// it are predicted first, as with Batch 1.
func TestReadErrorPredictsWhatWasRead(t *testing.T) {
	good, err := aitw.ExpandPaths([]string{"../testdata/records/general"})
	if err != nil {
		t.Fatal(err)
	}
	var want int
	for _, batch := range []int{1, 4} {
		for _, mode := range []History{HistoryGold, HistoryPredicted} {
			opts := testOptions(t, t.TempDir())
			opts.Files = append(good, "../testdata/corrupt/truncated.tfrecord.gz")
			opts.History, opts.Batch = mode, batch
			sum, err := Run(context.Background(), &fakePredictor{}, opts)
			if err == nil {
				t.Fatalf("%s batch %d: no error for a corrupt file", mode, batch)
			}
			if want == 0 {
				want = sum.Predicted
			}
			if sum.Predicted == 0 || sum.Predicted != want {
				t.Errorf("%s batch %d: %d predicted, batch 1 %d", mode, batch, sum.Predicted, want)
			}
			checkLines(t, sum.Path, sum.Predicted)
		}
	}
}

func checkLines(t *testing.T, path string, n int) {
	t.Helper()
	ps, err := aitw.ReadPredictions(path)
	if err != nil || ps.TornTail || ps.Lines != n || len(ps.ByStep) != n {
		t.Fatalf("%s: %+v %v, want %d whole lines", path, ps, err, n)
	}
}

// A predicted point off the screen joins the predicted history as a device
// would have performed it (the engine refuses history points outside
// [0, 1]); predictions.jsonl keeps what the model said, which is scored.
func TestPredictedHistoryClamped(t *testing.T) {
	gold := action.Action{Type: action.PressBack, Touch: action.NoPoint, Lift: action.NoPoint}
	off := action.Action{Type: action.DualPoint, Touch: action.Point{Y: 1.25, X: 0.5}, Lift: action.Point{Y: 1.25, X: 0.5}}
	h := appendHistory(nil, HistoryPredicted, gold, off)
	if len(h) != 1 || h[0] != off.Clamped() || h[0].Validate() != nil {
		t.Errorf("predicted history %+v", h)
	}
	if h := appendHistory(nil, HistoryGold, gold, off); len(h) != 1 || h[0] != gold {
		t.Errorf("gold history %+v", h)
	}
}

// overlapPredictor answers as fakePredictor does, its calls running at
// once (odd calls slower, so that calls end out of order), and counts the
// calls in flight at once.
type overlapPredictor struct {
	mu                    sync.Mutex
	calls, inflight, most int
}

func (o *overlapPredictor) Predict(ctx context.Context, req predict.Request) (*predict.Result, error) {
	return predicttest.One(ctx, o, req)
}

func (o *overlapPredictor) PredictBatch(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
	o.mu.Lock()
	o.calls++
	n := o.calls
	o.inflight++
	o.most = max(o.most, o.inflight)
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		o.inflight--
		o.mu.Unlock()
	}()
	time.Sleep(time.Duration(1+20*(n%2)) * time.Millisecond)
	return fakeResults(reqs), nil
}

// With calls in flight at once (Options.Concurrent), gold history writes
// the same lines in the same order as one call at a time, fills the same
// feature cache, and stops at a limit exactly (predicted history:
// TestHistoryModes, TestLimitExact).
func TestConcurrentCalls(t *testing.T) {
	read := func(path string) []byte {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	opts := testOptions(t, t.TempDir())
	opts.Batch = 3
	sum, err := Run(context.Background(), &fakePredictor{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	want := read(sum.Path)
	for _, n := range []int{2, 3} {
		opts := testOptions(t, t.TempDir())
		opts.Batch, opts.Concurrent = 3, n
		op := &overlapPredictor{}
		sum, err := Run(context.Background(), op, opts)
		if err != nil || sum.Predicted != 55 || sum.CacheMisses != 55 {
			t.Fatalf("%d at once: %+v, %v", n, sum, err)
		}
		if got := read(sum.Path); !bytes.Equal(got, want) {
			t.Errorf("%d at once: predictions differ from one call at a time\n got %s\nwant %s", n, got, want)
		}
		if op.most != n {
			t.Errorf("%d at once: at most %d calls in flight", n, op.most)
		}
		again, err := Run(context.Background(), &overlapPredictor{}, opts) // resumes: nothing left
		if err != nil || again.Predicted != 0 || again.AlreadyDone != 55 {
			t.Errorf("%d at once, again: %+v, %v", n, again, err)
		}
		opts = testOptions(t, t.TempDir())
		opts.Batch, opts.Concurrent, opts.Limit = 3, n, 10
		op = &overlapPredictor{}
		if sum, err = Run(context.Background(), op, opts); err != nil || sum.Predicted != 10 || !sum.LimitHit {
			t.Errorf("%d at once, --limit 10: %+v, %v", n, sum, err)
		}
		checkLines(t, sum.Path, 10)
	}
	// predicted history: other lines' order, the same predictions, calls
	// at once on episodes none of the others holds (testHistoryMode checks
	// the histories)
	opts = testOptions(t, t.TempDir())
	opts.Batch, opts.History = 3, HistoryPredicted
	seq, err := Run(context.Background(), &fakePredictor{}, opts)
	if err != nil {
		t.Fatal(err)
	}
	wantSet, err := aitw.ReadPredictions(seq.Path)
	if err != nil {
		t.Fatal(err)
	}
	opts.OutDir, opts.Concurrent = t.TempDir(), 2
	op := &overlapPredictor{}
	sum, err = Run(context.Background(), op, opts)
	if err != nil || sum.Predicted != 55 {
		t.Fatalf("predicted history, 2 at once: %+v, %v", sum, err)
	}
	got, err := aitw.ReadPredictions(sum.Path)
	if err != nil || got.Lines != 55 || len(got.ByStep) != 55 || op.most != 2 {
		t.Fatalf("predicted history, 2 at once: %+v, %v; at most %d calls in flight", got, err, op.most)
	}
	for k, p := range wantSet.ByStep {
		if g := got.ByStep[k]; g.Action != p.Action || g.Raw != p.Raw {
			t.Errorf("predicted history, 2 at once, %v: %+v, one at a time %+v", k, g, p)
		}
	}
	opts.Continuous, opts.Concurrent = true, 3
	if _, err := Run(context.Background(), &fakePredictor{}, opts); err == nil || !strings.Contains(err.Error(), "concurrent calls are for batches") {
		t.Errorf("continuous, 3 at once: %v", err)
	}
}

// cancellingPredictor answers its first two calls, the second cancelling
// the run as it does (Ctrl-C while it finishes) and the first waiting for
// the second to end, and fails every later one with the cancellation.
type cancellingPredictor struct {
	mu         sync.Mutex
	calls      int
	cancel     context.CancelFunc
	secondDone chan struct{}
}

func (c *cancellingPredictor) Predict(ctx context.Context, req predict.Request) (*predict.Result, error) {
	return predicttest.One(ctx, c, req)
}

func (c *cancellingPredictor) PredictBatch(ctx context.Context, reqs []predict.Request) ([]*predict.Result, error) {
	c.mu.Lock()
	c.calls++
	n := c.calls
	c.mu.Unlock()
	switch n {
	case 1:
		<-c.secondDone
	case 2:
		c.cancel()
		defer close(c.secondDone)
	default:
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return fakeResults(reqs), nil
}

// Stopped (Ctrl-C) with calls in flight that finished, a run writes them:
// here the stop is seen starting the third call, while the second, done,
// is still in flight.
func TestConcurrentInterruptWritesWhatFinished(t *testing.T) {
	opts := testOptions(t, t.TempDir())
	opts.Batch, opts.Concurrent = 4, 2
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sum, err := Run(ctx, &cancellingPredictor{cancel: cancel, secondDone: make(chan struct{})}, opts)
	if err != nil || !sum.Interrupted || sum.Predicted != 8 {
		t.Fatalf("%+v, %v: want both finished calls' 8 written, interrupted", sum, err)
	}
	checkLines(t, sum.Path, 8)
}
